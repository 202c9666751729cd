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

/// Mean and `1 / sqrt(var + eps)` of `x` (two passes in f32, eight
/// partial sums each, so the loops vectorize).
#[inline]
fn moments(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = lane_sum(x, |v| v) / n;
    let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `Σ f(v)` over `x` with eight interleaved partial sums.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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
