//! The layouts of the quantized block types: each block's integer values
//! unpacked ([`q4_0_values`], …), and the block to f32 from them. `b` is
//! a block's bytes (its length is the type's block size, checked by the
//! caller), `y` its elements. Scales are f16; each value is scale ×
//! integer (minus a minimum for the `_1` and K types), computed in f32 in
//! llama.cpp's order. The dot products (`dot.rs`) take the same unpacked
//! values.

use half::f16;

pub(super) fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_0's values, `q − 8`: 16 bytes after the scale whose low nibbles are
/// elements 0..16 and high nibbles 16..32.
pub(super) fn q4_0_values(b: &[u8]) -> [i8; 32] {
    let mut v = [0i8; 32];
    for (j, &q) in b[2..18].iter().enumerate() {
        v[j] = (q & 0x0f) as i8 - 8;
        v[j + 16] = (q >> 4) as i8 - 8;
    }
    v
}

/// The 5-bit values of a Q5 block: the fifth bits (one u32 at `qh_at`, bit
/// `j` for element `j`) over the 16 nibble bytes after them.
fn five_bit_values(b: &[u8], qh_at: usize) -> [u8; 32] {
    let qh = u32::from_le_bytes([b[qh_at], b[qh_at + 1], b[qh_at + 2], b[qh_at + 3]]);
    let mut v = [0u8; 32];
    for (j, &q) in b[qh_at + 4..qh_at + 20].iter().enumerate() {
        v[j] = (q & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
        v[j + 16] = (q >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    v
}

/// Q5_0's values, `q − 16`.
pub(super) fn q5_0_values(b: &[u8]) -> [i8; 32] {
    five_bit_values(b, 2).map(|q| q as i8 - 16)
}

/// Q4_0: each value times the scale.
pub(super) fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    for (y, q) in y.iter_mut().zip(q4_0_values(b)) {
        *y = q as f32 * d;
    }
}

/// Q4_1: scale `d` and minimum `m`, nibbles as Q4_0, each `q·d + m`.
pub(super) fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    for (j, &q) in b[4..20].iter().enumerate() {
        y[j] = (q & 0x0f) as f32 * d + m;
        y[j + 16] = (q >> 4) as f32 * d + m;
    }
}

/// Q5_0: each value times the scale.
pub(super) fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    for (y, q) in y.iter_mut().zip(q5_0_values(b)) {
        *y = q as f32 * d;
    }
}

/// Q5_1: scale `d` and minimum `m`, the 5-bit values, each `q·d + m`.
pub(super) fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    for (y, q) in y.iter_mut().zip(five_bit_values(b, 4)) {
        *y = q as f32 * d + m;
    }
}

/// Q8_0: scale `d` and 32 signed bytes, each `q·d`.
pub(super) fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    for (y, &q) in y.iter_mut().zip(&b[2..34]) {
        *y = q as i8 as f32 * d;
    }
}

/// The 6-bit scale and minimum of sub-block `j` (0..8) of a Q4_K or Q5_K
/// super-block, packed in 12 bytes: sub-blocks 0..4 in the low 6 bits of
/// bytes `j` and `j + 4`, sub-blocks 4..8 in the nibbles of bytes 8..12
/// with their top 2 bits in the high bits of bytes `j - 4` and `j`.
pub(super) fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The 256 values of a Q4_K (`b` of 144 bytes) or Q5_K (176 bytes)
/// super-block, in element order: per 64 elements, 32 bytes whose low
/// nibbles are the first 32 and high nibbles the next 32; Q5_K adds a
/// fifth bit, bit `j` of byte `l` for element `l` of sub-block `j`.
pub(super) fn k4_values(b: &[u8]) -> [u8; 256] {
    let five = b.len() == 176;
    let (qh, qs) = if five {
        (&b[16..48], &b[48..176])
    } else {
        (&b[..0], &b[16..144])
    };
    let mut v = [0u8; 256];
    for (sub, v) in v.chunks_exact_mut(32).enumerate() {
        let q = &qs[32 * (sub / 2)..32 * (sub / 2) + 32];
        for l in 0..32 {
            v[l] = if sub % 2 == 0 { q[l] & 0x0f } else { q[l] >> 4 };
            if five && qh[l] & (1 << sub) != 0 {
                v[l] += 16;
            }
        }
    }
    v
}

/// Q4_K and Q5_K (told apart by the block's length): scale `d`, minimum
/// scale `dmin`, the sub-block scales and minimums, then the values; each
/// `d·sc·q − dmin·m`.
pub(super) fn k4(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let values = k4_values(b);
    for (sub, (y, q)) in y
        .chunks_exact_mut(32)
        .zip(values.chunks_exact(32))
        .enumerate()
    {
        let (sc, m) = scale_min_k4(sub, &b[4..16]);
        let (d1, min1) = (d * sc as f32, dmin * m as f32);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = d1 * q as f32 - min1;
        }
    }
}

/// Q6_K's 256 values, `q − 32`: 128 bytes of low nibbles and 64 of high
/// 2-bit pairs; per 128 elements, element `l + 32i` (i in 0..4) from
/// nibble `i / 2` of byte `l + 32·(i % 2)` and bits `2i..2i+2` of high
/// byte `l`.
pub(super) fn q6_k_values(b: &[u8]) -> [i8; 256] {
    let mut v = [0i8; 256];
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let y = &mut v[128 * half..128 * half + 128];
        for l in 0..32 {
            y[l] = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    v
}

/// Q6_K: the values, 16 signed sub-block scales (one per 16 elements),
/// then `d`; each `d·sc·q`.
pub(super) fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 208);
    let values = q6_k_values(b);
    for (sub, (y, q)) in y
        .chunks_exact_mut(16)
        .zip(values.chunks_exact(16))
        .enumerate()
    {
        let s = d * b[192 + sub] as i8 as f32;
        for (y, &q) in y.iter_mut().zip(q) {
            *y = s * q as f32;
        }
    }
}

/// Q8_K (activations): an f32 scale, 256 signed bytes (and their sums,
/// not needed here); each `q·d`.
pub(super) fn q8_k(b: &[u8], y: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (y, &q) in y.iter_mut().zip(&b[4..260]) {
        *y = q as i8 as f32 * d;
    }
}
