//! Normalizations without learned parameters: `LRN` (across channels),
//! `LpNormalization` (along one axis), `MeanVarianceNormalization` (over a
//! set of axes).
use super::only_first_output;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::{IntList, MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `LRN` (local response normalization across channels):
/// `Y = X / (bias + alpha / size * square_sum)^beta`, where `square_sum` at
/// channel `c` sums `X²` over channels
/// `c - floor((size - 1) / 2) ..= c + ceil((size - 1) / 2)` (clipped).
///
/// Input: `X` `[N, C, …]` (float32). Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lrn {
    /// Number of channels summed (at least 1).
    pub size: usize,
    /// Scale of the square sum (divided by `size`).
    pub alpha: f32,
    /// Exponent.
    pub beta: f32,
    /// Added before the power.
    pub bias: f32,
}
crate::to_rust_struct!(ops::norm::Lrn {
    size,
    alpha,
    beta,
    bias
});

impl Lrn {
    fn dims(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize), KernelError> {
        const OP: &str = "LRN";
        if self.size == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "size must be positive",
            });
        }
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        Ok((
            x.shape,
            x.shape.dim(1),
            x.shape.dims()[2..].iter().product(),
        ))
    }
}

impl Kernel for Lrn {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "LRN")?;
        outputs[0] = self.dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "LRN";
        let (s, c, inner) = self.dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        let block = c * inner;
        if block == 0 {
            return Ok(());
        }
        let (before, after) = ((self.size - 1) / 2, self.size / 2);
        let k = self.alpha / self.size as f32;
        for (xb, yb) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
            for ch in 0..c {
                // Square sum of the channel window into Y, then Y from it.
                let yc = &mut yb[ch * inner..(ch + 1) * inner];
                yc.fill(0.0);
                for i in ch.saturating_sub(before)..(ch + after + 1).min(c) {
                    for (o, &v) in yc.iter_mut().zip(&xb[i * inner..(i + 1) * inner]) {
                        *o += v * v;
                    }
                }
                for (o, &v) in yc.iter_mut().zip(&xb[ch * inner..(ch + 1) * inner]) {
                    *o = v / (self.bias + k * *o).powf(self.beta);
                }
            }
        }
        Ok(())
    }
}

/// ONNX `LpNormalization`: `Y = X / ‖X‖_p` along `axis` (`p` is 1 or 2);
/// slices whose norm is 0 give 0.
///
/// Input: `X` (float32). Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LpNormalization {
    /// The normalized axis (negative counts from the end).
    pub axis: i64,
    /// The norm: 1 or 2.
    pub p: u32,
}
crate::to_rust_struct!(ops::norm::LpNormalization { axis, p });

impl LpNormalization {
    /// `(shape, outer, axis size, inner)`.
    fn dims(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Shape, usize, usize, usize), KernelError> {
        const OP: &str = "LpNormalization";
        if self.p != 1 && self.p != 2 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "p must be 1 or 2",
            });
        }
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        let a = x.shape.axis(self.axis, OP)?;
        let d = x.shape.dims();
        Ok((
            x.shape,
            d[..a].iter().product(),
            d[a],
            d[a + 1..].iter().product(),
        ))
    }
}

impl Kernel for LpNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "LpNormalization")?;
        outputs[0] = self.dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "LpNormalization";
        let (s, _, n, inner) = self.dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        let block = n * inner;
        if block == 0 {
            return Ok(());
        }
        for (xb, yb) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
            for i in 0..inner {
                let lane = (0..n).map(|j| xb[j * inner + i]);
                let norm = if self.p == 1 {
                    lane.map(f32::abs).sum::<f32>()
                } else {
                    lane.map(|v| v * v).sum::<f32>().sqrt()
                };
                for j in 0..n {
                    let v = xb[j * inner + i];
                    yb[j * inner + i] = if norm == 0.0 { 0.0 } else { v / norm };
                }
            }
        }
        Ok(())
    }
}

/// ONNX `MeanVarianceNormalization`:
/// `Y = (X - mean) / (sqrt(var) + 1e-9)` with the mean and (biased)
/// variance over `axes` (statistics in f64; an empty list means all axes).
///
/// Input: `X` (float32). Output: `Y`. Scratch: two f64 per statistics group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanVarianceNormalization {
    /// The reduced axes (negative count from the end).
    pub axes: IntList,
}
crate::to_rust_struct!(ops::norm::MeanVarianceNormalization { axes });

/// The epsilon of ONNX's function body.
const MVN_EPSILON: f64 = 1e-9;

impl MeanVarianceNormalization {
    /// The shape, the stride of each dim in the statistics groups (0 for
    /// reduced dims) and the number of groups.
    fn groups(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Shape, [usize; MAX_RANK], usize), KernelError> {
        const OP: &str = "MeanVarianceNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        let rank = x.shape.rank();
        let mut reduced = [self.axes.as_slice().is_empty(); MAX_RANK];
        for &a in self.axes.as_slice() {
            reduced[normalize_axis(a, rank, OP)?] = true;
        }
        let mut strides = [0usize; MAX_RANK];
        let mut g = 1;
        for a in (0..rank).rev() {
            if !reduced[a] {
                strides[a] = g;
                g *= x.shape.dim(a);
            }
        }
        Ok((x.shape, strides, g))
    }
}

/// Calls `f(flat index, group)` for every element of a tensor of `dims`, in
/// order, where the group index advances by `strides[a]` along dim `a`.
fn for_each_grouped(dims: &[usize], strides: &[usize], mut f: impl FnMut(usize, usize)) {
    let n: usize = dims.iter().product();
    let mut idx = [0usize; MAX_RANK];
    let mut g = 0usize;
    for i in 0..n {
        f(i, g);
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            g += strides[a];
            if idx[a] < dims[a] {
                break;
            }
            g -= strides[a] * dims[a];
            idx[a] = 0;
        }
    }
}

impl Kernel for MeanVarianceNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "MeanVarianceNormalization")?;
        outputs[0] = self.groups(inputs)?.0;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        self.groups(inputs).map_or(0, |(.., g)| g * 2 * 8)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "MeanVarianceNormalization";
        let (s, strides, g) = self.groups(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        if x.is_empty() {
            return Ok(());
        }
        let bytes = scratch
            .get_mut(..g * 16)
            .ok_or(KernelError::Buffer { op: OP })?;
        let acc: &mut [f64] =
            bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::Buffer { op: OP })?;
        let (mean, var) = acc.split_at_mut(g);
        let count = (x.len() / g) as f64;
        let (dims, strides) = (s.dims(), &strides[..s.rank()]);
        mean.fill(0.0);
        var.fill(0.0);
        for_each_grouped(dims, strides, |i, k| mean[k] += x[i] as f64);
        for m in mean.iter_mut() {
            *m /= count;
        }
        for_each_grouped(dims, strides, |i, k| {
            let d = x[i] as f64 - mean[k];
            var[k] += d * d;
        });
        for v in var.iter_mut() {
            // 1 / (std + epsilon), reusing the variance slot.
            *v = 1.0 / ((*v / count).sqrt() + MVN_EPSILON);
        }
        for_each_grouped(dims, strides, |i, k| {
            y[i] = ((x[i] as f64 - mean[k]) * var[k]) as f32;
        });
        Ok(())
    }
}
