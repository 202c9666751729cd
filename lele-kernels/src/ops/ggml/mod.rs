//! `ggml`'s tensor element types (the types of a GGUF file's tensors) and
//! dequantization of their blocks to f32.
//!
//! A quantized type stores a tensor's innermost dimension in blocks of 32
//! (or super-blocks of 256) elements sharing scales; [`dequantize`] turns
//! whole blocks back into floats with the arithmetic of llama.cpp's
//! reference (each product in f32, in its order), so a model's weights
//! read here are the values llama.cpp computes with.
mod blocks;
mod dot;

mod embed;
mod matmul;
mod vector_dot;

pub use dot::{
    Q8_0_BYTES, Q8_K_BYTES, activation_type, quantize_q8_0, quantize_q8_0_activations,
    quantize_q8_k, vec_dot,
};
pub use embed::GgmlGather;
pub use matmul::GgmlMatMul;

use half::f16;

use crate::error::KernelError;

/// A tensor's element type: plain numbers, or quantized blocks of
/// elements that share scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// bfloat16.
    Bf16,
    /// 64-bit float.
    F64,
    /// 8-bit integer.
    I8,
    /// 16-bit integer.
    I16,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// Blocks of 32: an f16 scale and 4-bit values.
    Q4_0,
    /// Blocks of 32: f16 scale and minimum, 4-bit values.
    Q4_1,
    /// Blocks of 32: an f16 scale and 5-bit values.
    Q5_0,
    /// Blocks of 32: f16 scale and minimum, 5-bit values.
    Q5_1,
    /// Blocks of 32: an f16 scale and 8-bit values.
    Q8_0,
    /// Blocks of 32: f16 scale and sum, 8-bit values.
    Q8_1,
    /// Super-blocks of 256, 2-bit values.
    Q2K,
    /// Super-blocks of 256, 3-bit values.
    Q3K,
    /// Super-blocks of 256: 8 sub-blocks of 32 with 6-bit scales and
    /// minimums, 4-bit values.
    Q4K,
    /// Super-blocks of 256: as [`GgmlType::Q4K`] with a fifth bit.
    Q5K,
    /// Super-blocks of 256: 16 sub-blocks of 16 with 8-bit scales, 6-bit
    /// values.
    Q6K,
    /// Super-blocks of 256, 8-bit values (activations).
    Q8K,
    /// A type with no block size known here (its code).
    Other(u32),
}

impl GgmlType {
    /// The type of `ggml` type code `code`.
    pub const fn from_code(code: u32) -> GgmlType {
        use GgmlType::*;
        match code {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2K,
            11 => Q3K,
            12 => Q4K,
            13 => Q5K,
            14 => Q6K,
            15 => Q8K,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            30 => Bf16,
            c => Other(c),
        }
    }

    /// The type's `ggml` code (the inverse of [`GgmlType::from_code`]).
    pub const fn code(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2K => 10,
            Q3K => 11,
            Q4K => 12,
            Q5K => 13,
            Q6K => 14,
            Q8K => 15,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            Bf16 => 30,
            Other(c) => c,
        }
    }

    /// Bytes of a row of `elements` elements, `None` when the type has no
    /// known block layout, `elements` is not a whole number of blocks or
    /// the size overflows.
    pub fn row_bytes(self, elements: usize) -> Option<usize> {
        let (block, bytes) = self.block()?;
        if !elements.is_multiple_of(block) {
            return None;
        }
        (elements / block).checked_mul(bytes)
    }

    /// `(elements per block, bytes per block)`, `None` for
    /// [`GgmlType::Other`].
    pub fn block(self) -> Option<(usize, usize)> {
        use GgmlType::*;
        Some(match self {
            F32 | I32 => (1, 4),
            F16 | Bf16 | I16 => (1, 2),
            F64 | I64 => (1, 8),
            I8 => (1, 1),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 40),
            Q2K => (256, 84),
            Q3K => (256, 110),
            Q4K => (256, 144),
            Q5K => (256, 176),
            Q6K => (256, 210),
            Q8K => (256, 292),
            Other(_) => return None,
        })
    }
}

#[cfg(feature = "codegen")]
impl crate::codegen::ToRust for GgmlType {
    fn to_rust(&self) -> proc_macro2::TokenStream {
        let code = self.code();
        quote::quote!(::lele::kernels::ops::ggml::GgmlType::from_code(#code))
    }
}

const OP: &str = "ggml dequantize";

/// Dequantizes whole blocks of type `ty` from `raw` into `out` (as many
/// elements as the blocks hold: `out.len()` a multiple of the block and
/// `raw.len()` the bytes of `out.len()` elements). Float types convert;
/// the quantized types lele reads are Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
/// Q5_K, Q6_K and Q8_K (an error names any other).
pub fn dequantize(ty: GgmlType, raw: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
    let (block, bytes) = ty.block().ok_or(KernelError::Invalid {
        op: OP,
        msg: "this ggml type has no known block layout",
    })?;
    if !out.len().is_multiple_of(block) || raw.len() != out.len() / block * bytes {
        return Err(KernelError::Buffer { op: OP });
    }
    let per_block: fn(&[u8], &mut [f32]) = match ty {
        GgmlType::F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => |b, y| y[0] = f16::from_le_bytes([b[0], b[1]]).to_f32(),
        GgmlType::Bf16 => |b, y| y[0] = half::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        GgmlType::Q4_0 => blocks::q4_0,
        GgmlType::Q4_1 => blocks::q4_1,
        GgmlType::Q5_0 => blocks::q5_0,
        GgmlType::Q5_1 => blocks::q5_1,
        GgmlType::Q8_0 => blocks::q8_0,
        GgmlType::Q4K | GgmlType::Q5K => blocks::k4,
        GgmlType::Q6K => blocks::q6_k,
        GgmlType::Q8K => blocks::q8_k,
        _ => {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "dequantizing this ggml type is not implemented",
            });
        }
    };
    for (b, y) in raw.chunks_exact(bytes).zip(out.chunks_exact_mut(block)) {
        per_block(b, y);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
