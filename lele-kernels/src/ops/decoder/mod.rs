//! The pieces of a transformer decoder read from a GGUF file that have no
//! ONNX counterpart with the same arithmetic: llama.cpp's RMS norm, RoPE
//! over the halves of a head, the f16-tabled GELU gate and attention over
//! a key/value cache that lives across calls.
//!
//! Their arithmetic follows llama.cpp's CPU backend rounding for rounding
//! (sums of squares in f64, GELU of the f16-rounded input rounded to f16,
//! keys and values cached as f16, the attention's value sum kept in f16)
//! because a greedy decoder's tokens are only equal to llama.cpp's when
//! its logits are, to well below the gap between the two best tokens.
mod attention;
mod gelu_gate;
mod rms_norm;
mod rope;
#[cfg(test)]
mod tests;

pub use attention::CachedAttention;
pub use gelu_gate::GeluGate;
pub use rms_norm::RmsNorm;
pub use rope::RopeHalves;

use crate::error::KernelError;
use crate::tensor::TensorRef;

/// The first position of a call: input `index`, an i64 scalar or `[1]`,
/// at least 0.
fn position(
    inputs: &[Option<TensorRef<'_>>],
    index: usize,
    op: &'static str,
) -> Result<usize, KernelError> {
    let p = crate::kernel::input(inputs, index, op)?;
    if p.shape.numel() != 1 {
        return Err(KernelError::Shape {
            op,
            msg: "the position must be one value",
        });
    }
    let v = p.typed::<i64>(op)?[0];
    usize::try_from(v).map_err(|_| KernelError::Invalid {
        op,
        msg: "the position is negative",
    })
}
