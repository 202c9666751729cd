//! The GELU-gated feed-forward's middle: `gelu(gate) · up`.
use half::f16;

use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "GeluGate";

/// `Y = gelu(G) · U` for same-shaped f32 `G` and `U`, with llama.cpp's
/// GELU: the tanh form evaluated at `G` rounded to f16 and rounded to f16
/// again (its 64K-entry table), 0 below −10 and the identity above 10.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GeluGate;
crate::to_rust_struct!(ops::decoder::GeluGate {});

/// The tanh-form GELU, in llama.cpp's order of operations.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

/// llama.cpp's tabled GELU of one value.
pub(super) fn gelu_f16(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        let x = f16::from_f32(x).to_f32();
        f16::from_f32(gelu_tanh(x)).to_f32()
    }
}

impl Kernel for GeluGate {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (g, u) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        if g.shape != u.shape || g.dtype != DType::F32 || u.dtype != DType::F32 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "the gate and the values must be f32 of one shape",
            });
        }
        set_out(outputs, g.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let mut shape = [Shape::SCALAR];
        self.infer(inputs, &mut shape)?;
        let (g, u) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let (gs, us) = (g.typed::<f32>(OP)?, u.typed::<f32>(OP)?);
        let y = output(outputs, 0, OP)?;
        check_out(y, DType::F32, &shape[0], OP)?;
        for ((y, &g), &u) in y.typed::<f32>(OP)?.iter_mut().zip(gs).zip(us) {
            *y = gelu_f16(g) * u;
        }
        Ok(())
    }
}
