//! Typed access to a kernel's tensors and scratch, shared by the GEMM-based
//! kernels (MatMul, Gemm, Conv, attention): f32 inputs and outputs, the
//! fused residual's check, the scratch as floats.
use crate::DType;
use crate::error::KernelError;
use crate::tensor::{TensorMut, TensorRef};

/// The `f32` elements of an input (other dtypes are unsupported).
pub(crate) fn f32_in<'a>(t: &TensorRef<'a>, op: &'static str) -> Result<&'a [f32], KernelError> {
    if t.dtype != DType::F32 {
        return Err(KernelError::UnsupportedDType { op, dtype: t.dtype });
    }
    t.typed::<f32>(op)
}

/// Checks that an input is `f32` (shape inference).
pub(crate) fn check_f32(t: &TensorRef<'_>, op: &'static str) -> Result<(), KernelError> {
    if t.dtype != DType::F32 {
        return Err(KernelError::UnsupportedDType { op, dtype: t.dtype });
    }
    Ok(())
}

/// Checks the optional fused residual at input `index` (see `Conv` and
/// `MatMulBias`): f32 and exactly the output's shape `y`.
pub(crate) fn check_residual(
    inputs: &[Option<TensorRef<'_>>],
    index: usize,
    y: &crate::shape::Shape,
    op: &'static str,
) -> Result<(), KernelError> {
    if let Some(r) = crate::kernel::opt_input(inputs, index) {
        check_f32(r, op)?;
        if r.shape != *y {
            return Err(KernelError::Shape {
                op,
                msg: "the fused residual's shape differs from the output's",
            });
        }
    }
    Ok(())
}

/// The `f32` elements of an output.
pub(crate) fn f32_out<'a, 'b>(
    t: &'b mut TensorMut<'a>,
    op: &'static str,
) -> Result<&'b mut [f32], KernelError> {
    t.typed::<f32>(op)
}

/// The first `n` floats of the scratch buffer.
pub(crate) fn scratch_f32<'a>(
    scratch: &'a mut [u8],
    n: usize,
    op: &'static str,
) -> Result<&'a mut [f32], KernelError> {
    if n == 0 {
        // A node without scratch may get an empty slice at any address
        // (not aligned for f32).
        return Ok(&mut []);
    }
    let bytes = n
        .checked_mul(4)
        .and_then(|b| scratch.get_mut(..b))
        .ok_or(KernelError::Buffer { op })?;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::Buffer { op })
}
