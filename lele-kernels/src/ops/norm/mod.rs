//! Normalizations: `BatchNormalization` (inference and training),
//! `LayerNormalization`, `RMSNormalization`, `InstanceNormalization`,
//! `GroupNormalization`, `LRN`, `LpNormalization`,
//! `MeanVarianceNormalization`.
use crate::error::KernelError;
use crate::ops::gemm::check_f32;
use crate::tensor::TensorRef;

mod batch;
mod group;
mod layer;
mod local;

pub use batch::BatchNormalization;
pub use group::{GroupNormalization, InstanceNormalization};
pub use layer::{LayerNormalization, RmsNormalization};
pub use local::{LpNormalization, Lrn, MeanVarianceNormalization};

#[cfg(test)]
mod tests;

/// Checks that `t` is an f32 vector of `n` elements.
fn check_vec(t: &TensorRef<'_>, n: usize, op: &'static str) -> Result<(), KernelError> {
    check_f32(t, op)?;
    if t.numel() != n {
        return Err(KernelError::Shape {
            op,
            msg: "per-channel parameter has the wrong length",
        });
    }
    Ok(())
}

fn only_first_output(n: usize, op: &'static str) -> Result<(), KernelError> {
    if n != 1 {
        return Err(KernelError::Invalid {
            op,
            msg: "expected 1 output",
        });
    }
    Ok(())
}

/// Mean and `1 / sqrt(var + eps)` of `x` (two passes in f32, 32 partial
/// sums each, see [`lane_sum`]).
#[inline(always)]
fn moments(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = lane_sum(x, |v| v) / n;
    let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `Σ f(v)` over `x` with 32 interleaved partial sums (four vectors of
/// eight lanes, so the additions are not one dependent chain), combined
/// pairwise, then the tail in order.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 32];
    let chunks = x.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    let mut width = 16;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    let mut s = acc[0];
    for &v in tail {
        s += f(v);
    }
    s
}

/// [`moments`] with AVX2: the same partial sums as four 8-lane vectors
/// (the compiler kept the portable loop's 32 sums in 2-lane pieces and on
/// the stack), combined in the same order, so the same results. A safe
/// function callable only where AVX2 is enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn moments_avx2(x: &[f32], eps: f32) -> (f32, f32) {
    use core::arch::x86_64::*;
    let n = x.len() as f32;
    let mean = lane_sum_avx2(x, |v| v, |v| v) / n;
    let vm = _mm256_set1_ps(mean);
    let var = lane_sum_avx2(
        x,
        |v| {
            let d = _mm256_sub_ps(v, vm);
            _mm256_mul_ps(d, d)
        },
        |v| (v - mean) * (v - mean),
    ) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// [`lane_sum`] in four AVX2 accumulators: `fv` maps eight values, `f` one
/// (the tail).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn lane_sum_avx2(
    x: &[f32],
    fv: impl Fn(core::arch::x86_64::__m256) -> core::arch::x86_64::__m256,
    f: impl Fn(f32) -> f32,
) -> f32 {
    use core::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); 4];
    let chunks = x.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: the chunk holds 32 floats.
            *a = _mm256_add_ps(*a, fv(unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * k)) }));
        }
    }
    // Partial sum i takes sum i + 16's, then i + 8's: vectors 0 += 2 and
    // 1 += 3, then 0 += 1.
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    // Then i + 4's, i + 2's and i + 1's within the vector.
    let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
    let mut s = _mm_cvtss_f32(h);
    for &v in tail {
        s += f(v);
    }
    s
}

/// Mean and (biased) variance of the values of several slices together,
/// accumulated in f64 (two passes); `(NaN, NaN)` when there are none.
fn moments_f64<'a>(parts: impl Iterator<Item = &'a [f32]> + Clone) -> (f64, f64) {
    let (mut n, mut sum) = (0usize, 0f64);
    for p in parts.clone() {
        n += p.len();
        sum += p.iter().map(|&v| v as f64).sum::<f64>();
    }
    let mean = sum / n as f64;
    let mut sq = 0f64;
    for p in parts {
        sq += p
            .iter()
            .map(|&v| {
                let d = v as f64 - mean;
                d * d
            })
            .sum::<f64>();
    }
    (mean, sq / n as f64)
}
