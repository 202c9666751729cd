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
/// sums each, see [`crate::simd::pairwise_sum`]), portable.
#[inline(always)]
fn moments(x: &[f32], eps: f32) -> (f32, f32) {
    use crate::simd::sums_portable as sum;
    let n = x.len() as f32;
    let mean = sum::<32>(x, None) / n;
    let var = sum::<32>(x, Some(mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// [`moments`] on backend `s`: the same partial sums as vectors, combined
/// in the same order, so the same results.
#[inline(always)]
fn moments_lanes<S: Simd>(s: S, x: &[f32], eps: f32) -> (f32, f32) {
    use crate::simd::pairwise_sum_lanes as sum;
    let n = x.len() as f32;
    let mean = sum::<S, 32>(s, x, None) / n;
    let var = sum::<S, 32>(s, x, Some(mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
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
