//! Rotary position embedding over the two halves of each head.
use super::position;
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "RopeHalves";

/// Rotates value `i` of each head with value `i + dims/2` (`i < dims/2`)
/// by the angle `p · base^(−2i/dims)` of the token's position `p`; values
/// from `dims` on are copied. Inputs: `X` f32 `[tokens, heads, head]` and
/// the first token's position (i64); token `t` is at that position plus
/// `t`. The angles are built as llama.cpp builds them: the position times
/// a running product of `base^(−2/dims)` in f32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeHalves {
    /// The frequency base.
    pub base: f32,
    /// Rotated values per head (even, at most the head size).
    pub dims: usize,
}
crate::to_rust_struct!(ops::decoder::RopeHalves { base, dims });

impl Kernel for RopeHalves {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        match *x.shape.dims() {
            [_, _, head]
                if x.dtype == DType::F32 && self.dims <= head && self.dims.is_multiple_of(2) =>
            {
                set_out(outputs, x.shape, OP)
            }
            _ => Err(KernelError::Shape {
                op: OP,
                msg: "X must be f32 [tokens, heads, head] with an even rotated width ≤ head",
            }),
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let mut shape = [Shape::SCALAR];
        self.infer(inputs, &mut shape)?;
        let p0 = position(inputs, 1, OP)?;
        let (heads, head) = (x.shape.dim(1), x.shape.dim(2));
        let xs = x.typed::<f32>(OP)?;
        let y = output(outputs, 0, OP)?;
        check_out(y, DType::F32, &shape[0], OP)?;
        let ys = y.typed::<f32>(OP)?;
        let half = self.dims / 2;
        let theta_scale = self.base.powf(-2.0 / self.dims as f32);
        let token = heads * head;
        if token == 0 {
            return Ok(());
        }
        for (t, (x, y)) in xs
            .chunks_exact(token)
            .zip(ys.chunks_exact_mut(token))
            .enumerate()
        {
            let p = p0.checked_add(t).ok_or(KernelError::Invalid {
                op: OP,
                msg: "the position overflows",
            })?;
            y.copy_from_slice(x);
            let mut theta = p as f32;
            for i in 0..half {
                let (sin, cos) = (theta.sin(), theta.cos());
                for (x, y) in x.chunks_exact(head).zip(y.chunks_exact_mut(head)) {
                    let (a, b) = (x[i], x[i + half]);
                    y[i] = a * cos - b * sin;
                    y[i + half] = a * sin + b * cos;
                }
                theta *= theta_scale;
            }
        }
        Ok(())
    }
}
