//! The interface every operator implements.
use crate::error::KernelError;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// An operator with all its static parameters (the ONNX attributes).
///
/// Generated code and the compiler's constant folder both call exactly these
/// two methods, so a folded constant is computed by the same code as the
/// value at run time.
pub trait Kernel {
    /// Computes output shapes from the inputs. `inputs[i]` is `None` for an
    /// omitted optional input. At build time an input's `data` may be empty
    /// (values unknown); kernels whose output shape depends on values then
    /// return [`KernelError::NeedsData`].
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError>;

    /// Whether output element `i` depends only on element `i` of each
    /// same-shaped input (and on scalar inputs), with output 0 of the same
    /// dtype as input 0. Such kernels may run in place over input 0 (see
    /// [`crate::rt::exec_in_place`]).
    fn elementwise(&self) -> bool {
        false
    }

    /// Upper bounds on the element counts of the outputs, for when `infer`
    /// answered [`KernelError::NeedsData`] because some input values are
    /// unknown at build time (an `axes` or `k` input fed by the caller).
    /// Only input shapes are used. Kernels whose output can grow without
    /// limit with those values (Expand, Tile, Range, Pad…) keep the default,
    /// `Ok(false)`: no bound.
    fn max_output_elems(
        &self,
        _inputs: &[Option<TensorRef<'_>>],
        _outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        Ok(false)
    }

    /// Bytes of scratch memory `run` needs for these shapes (default none).
    fn scratch_bytes(&self, _inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        0
    }

    /// The arithmetic `run` does for these shapes, a multiply-add counted
    /// as two operations (for a profile's GFLOP/s; integer products count
    /// alike). Default 0: the op is judged by the bytes it moves.
    fn flops(&self, _inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        0
    }

    /// Computes the outputs. Output shapes are the ones `infer` returned and
    /// output buffers are exactly sized. `scratch` has at least
    /// `scratch_bytes` bytes (64-byte aligned).
    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError>;
}

/// `2 · outputs · k` (each output element a sum of `k` products), the
/// [`Kernel::flops`] of a product, saturating.
pub fn product_flops(outputs: usize, k: usize) -> u64 {
    (outputs as u64).saturating_mul(k as u64).saturating_mul(2)
}

/// The size of the last dim of input `i` (1 for a scalar, 0 when absent).
pub fn last_dim(inputs: &[Option<TensorRef<'_>>], i: usize) -> usize {
    inputs
        .get(i)
        .copied()
        .flatten()
        .map_or(0, |t| t.shape.dims().last().copied().unwrap_or(1))
}

/// Elements of input `i` per index of its first dim (a weight's elements
/// per output channel: `W.numel / W.shape[0]`; 0 when absent or empty).
pub fn per_leading(inputs: &[Option<TensorRef<'_>>], i: usize) -> usize {
    inputs.get(i).copied().flatten().map_or(0, |t| {
        let lead = t.shape.dims().first().copied().unwrap_or(1);
        t.shape.numel().checked_div(lead).unwrap_or(0)
    })
}

/// Sets every output bound to `n` elements (for
/// [`Kernel::max_output_elems`]).
pub fn bound_outputs(outputs: &mut [usize], n: usize) -> Result<bool, KernelError> {
    outputs.fill(n);
    Ok(true)
}

/// Fetches a required input.
pub fn input<'a, 'b>(
    inputs: &'b [Option<TensorRef<'a>>],
    index: usize,
    op: &'static str,
) -> Result<&'b TensorRef<'a>, KernelError> {
    inputs
        .get(index)
        .and_then(|t| t.as_ref())
        .ok_or(KernelError::MissingInput { op, index })
}

/// Fetches an optional input.
pub fn opt_input<'a, 'b>(
    inputs: &'b [Option<TensorRef<'a>>],
    index: usize,
) -> Option<&'b TensorRef<'a>> {
    inputs.get(index).and_then(|t| t.as_ref())
}

/// Sets the shape of output 0 (for [`Kernel::infer`] of a one-output
/// kernel).
pub fn set_out(outputs: &mut [Shape], s: Shape, op: &'static str) -> Result<(), KernelError> {
    *outputs
        .first_mut()
        .ok_or(KernelError::MissingInput { op, index: 0 })? = s;
    Ok(())
}

/// Fetches output `index`.
pub fn output<'a, 'b>(
    outputs: &'b mut [TensorMut<'a>],
    index: usize,
    op: &'static str,
) -> Result<&'b mut TensorMut<'a>, KernelError> {
    outputs
        .get_mut(index)
        .ok_or(KernelError::MissingInput { op, index })
}
