//! Checked access to tensors' elements and to shape-like list inputs.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

/// Elements of `t` reinterpreted as `T` without a dtype check (data
/// movement kernels only care about the element size).
pub fn raw<'a, T: bytemuck::Pod>(
    t: &TensorRef<'a>,
    op: &'static str,
) -> Result<&'a [T], KernelError> {
    if !t.has_data() {
        return Err(KernelError::NeedsData { op });
    }
    if t.data.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(t.data).map_err(|_| KernelError::Buffer { op })
}

/// Output elements reinterpreted as `T` without a dtype check.
pub fn raw_mut<'a, T: bytemuck::Pod>(
    t: &'a mut TensorMut<'_>,
    op: &'static str,
) -> Result<&'a mut [T], KernelError> {
    if t.data.len() != t.shape.numel() * t.dtype.size() {
        return Err(KernelError::Buffer { op });
    }
    bytemuck::try_cast_slice_mut(t.data).map_err(|_| KernelError::Buffer { op })
}

/// Checks that an input's data is present and its length matches its shape.
pub fn check_data(t: &TensorRef<'_>, op: &'static str) -> Result<(), KernelError> {
    if t.has_data() {
        Ok(())
    } else {
        Err(KernelError::NeedsData { op })
    }
}

/// Checks an output's dtype, shape and buffer length.
pub fn check_out(
    t: &TensorMut<'_>,
    dtype: DType,
    shape: &Shape,
    op: &'static str,
) -> Result<(), KernelError> {
    if t.dtype != dtype {
        return Err(KernelError::DTypeMismatch {
            op,
            expected: dtype,
            found: t.dtype,
        });
    }
    if t.shape != *shape {
        return Err(KernelError::Shape {
            op,
            msg: "output shape differs from the inferred one",
        });
    }
    if t.data.len() != shape.numel() * dtype.size() {
        return Err(KernelError::Buffer { op });
    }
    Ok(())
}

/// Reads a 1-D shape-like integer input into a stack array.
pub fn read_list(
    t: &TensorRef<'_>,
    op: &'static str,
) -> Result<([i64; 2 * MAX_RANK], usize), KernelError> {
    if t.shape.rank() > 1 {
        return Err(KernelError::Shape {
            op,
            msg: "expected a 1-D list",
        });
    }
    let mut v = [0i64; 2 * MAX_RANK];
    if t.numel() == 0 {
        // Nothing to read (and an empty placeholder slice may be unaligned).
        return Ok((v, 0));
    }
    let n = t.read_i64s(op, &mut v)?;
    Ok((v, n))
}
