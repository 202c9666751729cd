//! Dot products of quantized weight rows with quantized activations, the
//! way llama.cpp computes a quantized model's products: the activations
//! are quantized to 8 bits per block ([`quantize_q8_0`] for the 32-element
//! weight types, [`quantize_q8_k`] for the 256-element K types), each
//! block's products summed in integers, and the block's scales applied to
//! that sum once. This is the portable reference the vector versions will
//! be checked against.

use half::f16;

use super::{GgmlType, blocks};
use crate::error::KernelError;

const OP: &str = "ggml dot";

/// Bytes of a Q8_0 block: an f16 scale and 32 signed bytes.
pub const Q8_0_BYTES: usize = 34;
/// Bytes of a Q8_K block: an f32 scale, 256 signed bytes and the sums of
/// each 16 of them (i16).
pub const Q8_K_BYTES: usize = 292;

/// One weight block against the activation blocks covering it.
type BlockDot = fn(&[u8], &[u8]) -> f32;

/// A weight type's block product and the activation type it takes (the
/// one table of which types have a quantized dot product).
fn block_product(weights: GgmlType) -> Option<(BlockDot, GgmlType)> {
    use GgmlType::{Q4_0, Q4K, Q5_0, Q5K, Q6K, Q8_0, Q8K};
    Some(match weights {
        Q8_0 => (|w, a| dot_32(w[2..34].iter().map(|&q| q as i8), w, a), Q8_0),
        Q4_0 => (
            |w, a| dot_32(blocks::q4_0_values(w).into_iter(), w, a),
            Q8_0,
        ),
        Q5_0 => (
            |w, a| dot_32(blocks::q5_0_values(w).into_iter(), w, a),
            Q8_0,
        ),
        Q4K | Q5K => (k4_block_dot, Q8K),
        Q6K => (q6_k_block_dot, Q8K),
        _ => return None,
    })
}

/// The activation type a weight type's dot product takes.
pub fn activation_type(weights: GgmlType) -> Option<GgmlType> {
    block_product(weights).map(|(_, a)| a)
}

/// Quantizes `x` (a multiple of 32 floats) to Q8_0 blocks in `out`: per
/// block the scale `max|x| / 127` (stored as f16) and each `x / scale`
/// rounded half away from zero, as llama.cpp's reference does.
pub fn quantize_q8_0(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    if !x.len().is_multiple_of(32) || out.len() != x.len() / 32 * Q8_0_BYTES {
        return Err(KernelError::Buffer { op: OP });
    }
    for (x, b) in x.chunks_exact(32).zip(out.chunks_exact_mut(Q8_0_BYTES)) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        for (q, &v) in b[2..].iter_mut().zip(x) {
            // Half away from zero, as C's `roundf`.
            *q = (v * id).round() as i8 as u8;
        }
    }
    Ok(())
}

/// Quantizes activations `x` (a multiple of 32 floats) to Q8_0 blocks in
/// `out` the way llama.cpp's x86 build does before a product (its vector
/// quantizer, not the reference): the scale `max|x| / 127` (stored as
/// f16), each `x · (127 / max|x|)` rounded to nearest, ties to even. The
/// two differ in the last bit of some values, and which one a decoder uses
/// decides whether its greedy tokens equal llama.cpp's.
pub fn quantize_q8_0_activations(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    if !x.len().is_multiple_of(32) || out.len() != x.len() / 32 * Q8_0_BYTES {
        return Err(KernelError::Buffer { op: OP });
    }
    for (x, b) in x.chunks_exact(32).zip(out.chunks_exact_mut(Q8_0_BYTES)) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b[..2].copy_from_slice(&f16::from_f32(amax / 127.0).to_le_bytes());
        for (q, &v) in b[2..].iter_mut().zip(x) {
            *q = nearest_int(v * id) as i8 as u8;
        }
    }
    Ok(())
}

/// Rounds to nearest, ties to even, for |v| ≤ 2^22 (llama.cpp's
/// `nearest_int`, by its method): adding 1.5·2^23 leaves the integer in
/// the low mantissa bits, rounded by the addition itself. Unlike
/// `round_ties_even`, which outside the SIMD entry points is a call to
/// libm's `rintf`, it inlines.
#[inline(always)]
pub(super) fn nearest_int(v: f32) -> i32 {
    let shifted = (v + 12_582_912.0).to_bits() as i32;
    (shifted & 0x007f_ffff) - 0x0040_0000
}

/// Quantizes `x` (a multiple of 256 floats) to Q8_K blocks in `out`: per
/// block the scale `max / -127` of the element of largest magnitude (f32),
/// each `x / scale` rounded to nearest (at most 127), and the sums of each
/// 16 quantized values, as llama.cpp's reference does.
pub fn quantize_q8_k(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    if !x.len().is_multiple_of(256) || out.len() != x.len() / 256 * Q8_K_BYTES {
        return Err(KernelError::Buffer { op: OP });
    }
    for (x, b) in x.chunks_exact(256).zip(out.chunks_exact_mut(Q8_K_BYTES)) {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            b.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        let mut sums = [0i16; 16];
        for (j, &v) in x.iter().enumerate() {
            let q = nearest_int(iscale * v).min(127) as i8;
            b[4 + j] = q as u8;
            sums[j / 16] += i16::from(q);
        }
        b[..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
        for (s, sum) in b[260..].chunks_exact_mut(2).zip(sums) {
            s.copy_from_slice(&sum.to_le_bytes());
        }
    }
    Ok(())
}

fn i8s(b: &[u8]) -> impl Iterator<Item = i32> + '_ {
    b.iter().map(|&v| i32::from(v as i8))
}

/// `Σ w·a` over one row: `w` blocks of type `weights`, `act` the same
/// number of elements quantized to [`activation_type`]`(weights)`.
pub fn vec_dot(weights: GgmlType, w: &[u8], act: &[u8]) -> Result<f32, KernelError> {
    let (block, bytes) = weights.block().ok_or(KernelError::Buffer { op: OP })?;
    let (block_dot, act_type) = block_product(weights).ok_or(KernelError::Invalid {
        op: OP,
        msg: "no quantized dot product for this ggml type",
    })?;
    // The activation blocks covering one weight block.
    let (a_block, a_size) = act_type.block().ok_or(KernelError::Buffer { op: OP })?;
    let a_bytes = block / a_block * a_size;
    if !w.len().is_multiple_of(bytes) || act.len() != w.len() / bytes * a_bytes {
        return Err(KernelError::Buffer { op: OP });
    }
    Ok(w.chunks_exact(bytes)
        .zip(act.chunks_exact(a_bytes))
        .map(|(w, a)| block_dot(w, a))
        .sum())
}

/// The activation block's scale and its 256 values and 16 sums.
fn q8_k(a: &[u8]) -> (f32, &[u8], impl Fn(usize) -> i32 + '_) {
    let d = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
    let sums = move |i: usize| i32::from(i16::from_le_bytes([a[260 + 2 * i], a[261 + 2 * i]]));
    (d, &a[4..260], sums)
}

/// A 32-element block's values (`w`'s scale at 0) against a Q8_0 block:
/// the integer sum times the product of the scales.
fn dot_32(values: impl Iterator<Item = i8>, w: &[u8], a: &[u8]) -> f32 {
    let sum: i32 = values
        .zip(i8s(&a[2..34]))
        .map(|(x, y)| i32::from(x) * y)
        .sum();
    sum as f32 * (blocks::half_at(w, 0) * blocks::half_at(a, 0))
}

/// A Q4_K or Q5_K super-block (told apart by its length) against a Q8_K
/// one: per sub-block of 32, `sc·Σ q·a` and `m·Σ a` (from the activation's
/// sums), then `d·da·Σ sc·Σqa − dmin·da·Σ m·Σa`.
fn k4_block_dot(w: &[u8], a: &[u8]) -> f32 {
    let (d, dmin) = (blocks::half_at(w, 0), blocks::half_at(w, 2));
    let values = blocks::k4_values(w);
    let (da, aq, asum) = q8_k(a);
    let (mut sum_q, mut sum_m) = (0i32, 0i32);
    for (sub, (q, aq)) in values.chunks_exact(32).zip(aq.chunks_exact(32)).enumerate() {
        let (sc, m) = blocks::scale_min_k4(sub, &w[4..16]);
        let s: i32 = q.iter().zip(i8s(aq)).map(|(&x, y)| i32::from(x) * y).sum();
        sum_q += i32::from(sc) * s;
        sum_m += i32::from(m) * (asum(2 * sub) + asum(2 * sub + 1));
    }
    d * da * sum_q as f32 - dmin * da * sum_m as f32
}

/// A Q6_K super-block against a Q8_K one: `d·da·Σ sc·Σ (q − 32)·a` over
/// the 16 sub-blocks of 16.
fn q6_k_block_dot(w: &[u8], a: &[u8]) -> f32 {
    let d = blocks::half_at(w, 208);
    let (da, aq, _) = q8_k(a);
    let q = blocks::q6_k_values(w);
    let mut sum = 0i32;
    for (sub, (q, aq)) in q.chunks_exact(16).zip(aq.chunks_exact(16)).enumerate() {
        let s: i32 = q
            .iter()
            .zip(aq)
            .map(|(&x, &y)| i32::from(x) * i32::from(y as i8))
            .sum();
        sum += i32::from(w[192 + sub] as i8) * s;
    }
    d * da * sum as f32
}
