//! One block of each quantized type to f32. `b` is the block's bytes (its
//! length is the type's block size, checked by the caller), `y` its
//! elements. Scales are f16; each value is scale × integer (minus a
//! minimum for the `_1` and K types), computed in f32 in llama.cpp's order.

use half::f16;

fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_0: scale `d`, then 16 bytes whose low nibbles are elements 0..16 and
/// high nibbles 16..32, each `(q - 8)·d`.
pub(super) fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// Q4_1: scale `d` and minimum `m`, nibbles as Q4_0, each `q·d + m`.
pub(super) fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// The fifth bits of a Q5 block (one u32, bit `j` for element `j`) and its
/// 16 nibble bytes: element `j`'s and `j + 16`'s 5-bit values.
fn five_bits(qh: u32, qs: &[u8], j: usize) -> (u8, u8) {
    let lo = (qs[j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
    let hi = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    (lo, hi)
}

/// Q5_0: scale `d`, the fifth bits, the nibbles; each `(q - 16)·d`.
pub(super) fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let (lo, hi) = five_bits(qh, qs, j);
        y[j] = (lo as i32 - 16) as f32 * d;
        y[j + 16] = (hi as i32 - 16) as f32 * d;
    }
}

/// Q5_1: scale `d` and minimum `m`, the fifth bits, the nibbles; each
/// `q·d + m`.
pub(super) fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let (lo, hi) = five_bits(qh, qs, j);
        y[j] = lo as f32 * d + m;
        y[j + 16] = hi as f32 * d + m;
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

/// Q4_K: scale `d`, minimum scale `dmin`, the sub-block scales and
/// minimums, then 128 bytes: per 64 elements, 32 bytes whose low nibbles
/// are the first 32 and high nibbles the next 32; each `d·sc·q − dmin·m`.
pub(super) fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (k, (q, y)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * k, scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, scales);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
        for l in 0..32 {
            y[l] = d1 * (q[l] & 0x0f) as f32 - min1;
            y[32 + l] = d2 * (q[l] >> 4) as f32 - min2;
        }
    }
}

/// Q5_K: as Q4_K with 32 bytes of fifth bits (bits `2k` and `2k + 1` of
/// byte `l` for element `l` of the 64-element group `k`'s two halves).
pub(super) fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (k, (q, y)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * k, scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, scales);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
        let (u1, u2) = (1u8 << (2 * k), 2u8 << (2 * k));
        for l in 0..32 {
            let hi1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let hi2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[l] = d1 * ((q[l] & 0x0f) + hi1) as f32 - min1;
            y[32 + l] = d2 * ((q[l] >> 4) + hi2) as f32 - min2;
        }
    }
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed
/// sub-block scales (one per 16 elements), then `d`; each
/// `d·sc·(q − 32)`. Per 128 elements: 64 low-nibble bytes and 32 high
/// bytes, element `l + 32i` (i in 0..4) from nibble `i / 2` of byte
/// `l + 32·(i % 2)` and bits `2i..2i+2` of high byte `l`.
pub(super) fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 208);
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let s = |i: usize| d * sc[is + i] as i8 as f32;
            y[l] = s(0) * q1 as f32;
            y[l + 32] = s(2) * q2 as f32;
            y[l + 64] = s(4) * q3 as f32;
            y[l + 96] = s(6) * q4 as f32;
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
