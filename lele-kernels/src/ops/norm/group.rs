//! `InstanceNormalization` and `GroupNormalization`: statistics per
//! instance over (groups of) channels and all spatial dims.
use super::{check_vec, moments, moments_f64, only_first_output};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `InstanceNormalization`: per `(n, c)` normalization over the
/// spatial dims, then per-channel `scale` and `B`.
///
/// Inputs: `input` `[N, C, …]`, `scale` `[C]`, `B` `[C]`. Output: `output`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceNormalization {
    /// Added to the variance.
    pub epsilon: f32,
}
crate::to_rust_struct!(ops::norm::InstanceNormalization { epsilon });

impl InstanceNormalization {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize), KernelError> {
        const OP: &str = "InstanceNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        let c = x.shape.dim(1);
        check_vec(input(inputs, 1, OP)?, c, OP)?;
        check_vec(input(inputs, 2, OP)?, c, OP)?;
        Ok((x.shape, c, x.shape.dims()[2..].iter().product()))
    }
}

impl Kernel for InstanceNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "InstanceNormalization")?;
        outputs[0] = Self::dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "InstanceNormalization";
        let (s, c, inner) = Self::dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        if inner == 0 {
            return Ok(());
        }
        for (i, (xp, yp)) in x
            .chunks_exact(inner)
            .zip(y.chunks_exact_mut(inner))
            .enumerate()
        {
            let ch = i % c;
            let (mean, inv) = moments(xp, self.epsilon);
            let a = inv * scale[ch];
            let b = bias[ch] - mean * a;
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * a + b;
            }
        }
        Ok(())
    }
}

/// ONNX `GroupNormalization`: the channels of each instance are split into
/// `num_groups` groups; each group is normalized over its channels and all
/// spatial dims (statistics in f64), then scaled and shifted:
/// `Y = (X - mean) / sqrt(var + epsilon) * scale + bias`.
///
/// Inputs: `X` `[N, C, …]`, `scale`, `bias`: `[C]` (opset 21) or
/// `[num_groups]` (opset 18, one value per group). Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupNormalization {
    /// Number of groups; divides `C`.
    pub num_groups: usize,
    /// Added to the variance.
    pub epsilon: f32,
    /// `scale`/`bias` have one value per channel (else per group).
    pub per_channel: bool,
}
crate::to_rust_struct!(ops::norm::GroupNormalization {
    num_groups,
    epsilon,
    per_channel
});

impl GroupNormalization {
    /// `(shape, channels per group, spatial size)`.
    fn dims(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize), KernelError> {
        const OP: &str = "GroupNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        let c = x.shape.dim(1);
        let g = self.num_groups;
        if g == 0 || c % g != 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "num_groups must divide the number of channels",
            });
        }
        let params = if self.per_channel { c } else { g };
        check_vec(input(inputs, 1, OP)?, params, OP)?;
        check_vec(input(inputs, 2, OP)?, params, OP)?;
        Ok((x.shape, c / g, x.shape.dims()[2..].iter().product()))
    }
}

impl Kernel for GroupNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "GroupNormalization")?;
        outputs[0] = self.dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "GroupNormalization";
        let (s, cpg, inner) = self.dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        let block = cpg * inner;
        if block == 0 {
            return Ok(());
        }
        for (gi, (xg, yg)) in x
            .chunks_exact(block)
            .zip(y.chunks_exact_mut(block))
            .enumerate()
        {
            let group = gi % self.num_groups;
            let (mean, var) = moments_f64(core::iter::once(xg));
            let inv = (1.0 / (var + self.epsilon as f64).sqrt()) as f32;
            let mean = mean as f32;
            for (k, (xc, yc)) in xg
                .chunks_exact(inner)
                .zip(yg.chunks_exact_mut(inner))
                .enumerate()
            {
                let p = if self.per_channel {
                    group * cpg + k
                } else {
                    group
                };
                let (a, b) = (inv * scale[p], bias[p]);
                for (o, &v) in yc.iter_mut().zip(xc) {
                    *o = (v - mean) * a + b;
                }
            }
        }
        Ok(())
    }
}
