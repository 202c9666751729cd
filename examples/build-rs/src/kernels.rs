//! This crate's own kernels. `build.rs` compiles this file too (through
//! `#[path]`), so the compiler runs the very code the generated model calls.
use lele_kernels::kernel::{input, output};
use lele_kernels::{Kernel, KernelError, Shape, TensorMut, TensorRef};

/// Applies `f` to every f32 element of input 0.
fn map_f32(
    op: &'static str,
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
    f: impl Fn(f32) -> f32,
) -> Result<(), KernelError> {
    let x = input(inputs, 0, op)?.typed::<f32>(op)?;
    let y = output(outputs, 0, op)?.typed::<f32>(op)?;
    for (o, &v) in y.iter_mut().zip(x) {
        *o = f(v);
    }
    Ok(())
}

fn same_shape(
    op: &'static str,
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [Shape],
) -> Result<(), KernelError> {
    let shape = input(inputs, 0, op)?.shape;
    let out = outputs
        .first_mut()
        .ok_or(KernelError::MissingInput { op, index: 0 })?;
    *out = shape;
    Ok(())
}

/// `clamp(alpha * x + beta, 0, 1)`, replacing ONNX `HardSigmoid`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HardSigmoid {
    /// Slope.
    pub alpha: f32,
    /// Offset.
    pub beta: f32,
}

impl Kernel for HardSigmoid {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape("HardSigmoid", inputs, outputs)
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (a, b) = (self.alpha, self.beta);
        map_f32("HardSigmoid", inputs, outputs, |v| {
            (a * v + b).clamp(0.0, 1.0)
        })
    }
}

/// `x * clamp(x + 3, 0, 6) / 6` in one pass, replacing the four nodes
/// (Add, Clip, Mul, Div) PaddlePaddle exports for hard-swish.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HardSwish;

impl Kernel for HardSwish {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape("HardSwish", inputs, outputs)
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        map_f32("HardSwish", inputs, outputs, |v| {
            v * (v + 3.0).clamp(0.0, 6.0) / 6.0
        })
    }
}
