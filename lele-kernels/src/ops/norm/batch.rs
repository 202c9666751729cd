//! `BatchNormalization`.
use super::{check_vec, moments_f64};
use crate::error::KernelError;
use crate::kernel::{Kernel, input};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "BatchNormalization";

/// ONNX `BatchNormalization`, per channel (dim 1):
/// `Y = (X - mean) / sqrt(var + epsilon) * scale + B`.
///
/// Inputs: `X` `[N, C, …]`, `scale`, `B`, `input_mean`, `input_var` (each
/// `[C]`). In inference mode `mean`/`var` are the inputs and the only
/// output is `Y`. In training mode they are the batch statistics of `X`
/// over every dim but 1 (biased variance), and the optional outputs
/// `running_mean`/`running_var` are
/// `input * momentum + batch * (1 - momentum)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormalization {
    /// Added to the variance.
    pub epsilon: f32,
    /// Weight of the input statistics in the running ones (training mode).
    pub momentum: f32,
    /// Normalize with the batch statistics (ONNX `training_mode`).
    pub training: bool,
}
crate::to_rust_struct!(ops::norm::BatchNormalization {
    epsilon,
    momentum,
    training
});

impl BatchNormalization {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize, usize), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        let c = x.shape.dim(1);
        for i in 1..5 {
            check_vec(input(inputs, i, OP)?, c, OP)?;
        }
        let inner = x.shape.dims()[2..].iter().product();
        Ok((x.shape, x.shape.dim(0), c, inner))
    }

    fn check_outputs(&self, n: usize) -> Result<(), KernelError> {
        let max = if self.training { 3 } else { 1 };
        if n == 0 || n > max {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "expected 1 output (3 in training mode)",
            });
        }
        Ok(())
    }
}

impl Kernel for BatchNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        self.check_outputs(outputs.len())?;
        outputs[0] = Self::dims(inputs)?.0;
        for (o, i) in outputs[1..].iter_mut().zip(3..) {
            *o = input(inputs, i, OP)?.shape;
        }
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        self.check_outputs(outputs.len())?;
        let (_, n, c, inner) = Self::dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let mean = f32_in(input(inputs, 3, OP)?, OP)?;
        let var = f32_in(input(inputs, 4, OP)?, OP)?;
        let (first, running) = outputs.split_at_mut(1);
        let y = f32_out(&mut first[0], OP)?;
        if x.len() != n * c * inner || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        if !self.training {
            if inner == 0 {
                return Ok(());
            }
            for (i, (xp, yp)) in x
                .chunks_exact(inner)
                .zip(y.chunks_exact_mut(inner))
                .enumerate()
            {
                let ch = i % c;
                let a = scale[ch] / (var[ch] + self.epsilon).sqrt();
                let b = bias[ch] - mean[ch] * a;
                for (o, &v) in yp.iter_mut().zip(xp) {
                    *o = v * a + b;
                }
            }
            return Ok(());
        }
        for ch in 0..c {
            let at = |b: usize| (b * c + ch) * inner;
            let (bm, bv) = moments_f64((0..n).map(|b| &x[at(b)..at(b) + inner]));
            let (bm, bv) = (bm as f32, bv as f32);
            let a = scale[ch] / (bv + self.epsilon).sqrt();
            for b in 0..n {
                let (xs, ys) = (&x[at(b)..at(b) + inner], &mut y[at(b)..at(b) + inner]);
                for (o, &v) in ys.iter_mut().zip(xs) {
                    *o = (v - bm) * a + bias[ch];
                }
            }
            let stats = [(mean[ch], bm), (var[ch], bv)];
            for (t, (input_stat, batch_stat)) in running.iter_mut().zip(stats) {
                let r = f32_out(t, OP)?;
                *r.get_mut(ch).ok_or(KernelError::Buffer { op: OP })? =
                    input_stat * self.momentum + batch_stat * (1.0 - self.momentum);
            }
        }
        Ok(())
    }
}
