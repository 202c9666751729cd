//! RMS normalization with a per-channel weight, summing squares in f64.
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "RmsNorm";

/// `Y = X · (1 / √(mean(X²) + eps)) · W` over the last dim of `X` (f32),
/// `W` of that dim's length. Each square is an f32 product added in f64,
/// and the scale is applied before the weight, as llama.cpp does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNorm {
    /// Added to the mean square.
    pub eps: f32,
}
crate::to_rust_struct!(ops::decoder::RmsNorm { eps });

impl Kernel for RmsNorm {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (x, w) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let d = x.shape.dims().last().copied().unwrap_or(1);
        if w.shape.numel() != d || x.dtype != DType::F32 || w.dtype != DType::F32 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "the weight must be f32 with one value per channel of X (f32)",
            });
        }
        set_out(outputs, x.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (x, w) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let mut shape = [Shape::SCALAR];
        self.infer(inputs, &mut shape)?;
        let d = w.shape.numel();
        let (xs, ws) = (x.typed::<f32>(OP)?, w.typed::<f32>(OP)?);
        let y = output(outputs, 0, OP)?;
        check_out(y, DType::F32, &shape[0], OP)?;
        if d == 0 {
            return Ok(());
        }
        for (x, y) in xs
            .chunks_exact(d)
            .zip(y.typed::<f32>(OP)?.chunks_exact_mut(d))
        {
            let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
            let mean = (sum / d as f64) as f32;
            let scale = 1.0 / (mean + self.eps).sqrt();
            for ((y, &x), &w) in y.iter_mut().zip(x).zip(ws) {
                *y = x * scale * w;
            }
        }
        Ok(())
    }
}
