//! Normalizations: `BatchNormalization` (inference and training),
//! `LayerNormalization`, `RMSNormalization`, `InstanceNormalization`,
//! `GroupNormalization`, `LRN`, `LpNormalization`,
//! `MeanVarianceNormalization`.
use crate::error::KernelError;
use crate::ops::gemm::check_f32;
use crate::simd::Simd;
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

/// [`moments`] over the SIMD layer: the same 32 partial sums as vectors
/// (the compiler kept the portable loop's sums in 2-lane pieces and on the
/// stack), combined in the same order, so the same results on every
/// backend.
#[inline(always)]
fn moments_lanes<S: Simd>(s: S, x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = lane_sum_lanes(s, x, None) / n;
    let var = lane_sum_lanes(s, x, Some(mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// [`lane_sum`] of `v` (`centre` `None`) or of `(v - c)²` (`Some(c)`) in
/// `32 / LANES` vector accumulators: sum `i` of the portable loop is lane
/// `i % LANES` of vector `i / LANES`. No closure for the function: see
/// `simd::vector`.
#[inline(always)]
fn lane_sum_lanes<S: Simd>(s: S, x: &[f32], centre: Option<f32>) -> f32 {
    let w = S::LANES;
    let count = 32 / w;
    let mut acc = [s.splat(0.0); 8];
    let chunks = x.chunks_exact(32);
    let tail = chunks.remainder();
    let c = s.splat(centre.unwrap_or(0.0));
    for chunk in chunks {
        for (k, a) in acc.iter_mut().enumerate().take(count) {
            // SAFETY: the chunk holds 32 floats, `k·w + w <= 32`.
            let v = unsafe { s.load(chunk.as_ptr().add(k * w)) };
            let v = if centre.is_some() {
                let d = s.sub(v, c);
                s.mul(d, d)
            } else {
                v
            };
            *a = s.add(*a, v);
        }
    }
    // Sum i takes sum i + 16's, then i + 8's, …: whole vectors while the
    // width spans vectors, then within the vector (`reduce_add` folds
    // halves in the same order).
    let mut vectors = count;
    while vectors > 1 {
        vectors /= 2;
        for k in 0..vectors {
            acc[k] = s.add(acc[k], acc[k + vectors]);
        }
    }
    let mut sum = s.reduce_add(acc[0]);
    for &v in tail {
        sum += match centre {
            Some(m) => (v - m) * (v - m),
            None => v,
        };
    }
    sum
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
