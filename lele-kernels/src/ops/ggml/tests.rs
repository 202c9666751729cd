//! Hand-built blocks with values worked out from the layouts; the
//! comparison with llama.cpp's Python reference over random blocks of
//! every type is `lele-build/tests/ggml_formats.rs`.
use alloc::vec;
use alloc::vec::Vec;

use super::*;

const ONE: [u8; 2] = [0x00, 0x3c];
const HALF: [u8; 2] = [0x00, 0x38];

fn deq(ty: GgmlType, raw: &[u8]) -> Vec<f32> {
    let (block, bytes) = ty.block().unwrap();
    let mut out = vec![0f32; raw.len() / bytes * block];
    dequantize(ty, raw, &mut out).unwrap();
    out
}

#[test]
fn q8_0_is_scale_times_signed_bytes() {
    let mut b = HALF.to_vec();
    b.extend((0..32).map(|i| (i as i8 * 4 - 64) as u8));
    let y = deq(GgmlType::Q8_0, &b);
    let want: Vec<f32> = (0..32).map(|i| (i * 4 - 64) as f32 * 0.5).collect();
    assert_eq!(y, want);
}

#[test]
fn q4_0_and_q4_1_split_nibbles_into_halves() {
    let mut b = ONE.to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let y = deq(GgmlType::Q4_0, &b);
    for j in 0..16 {
        assert_eq!(y[j], j as f32 - 8.0);
        assert_eq!(y[j + 16], (15 - j) as f32 - 8.0);
    }
    let mut b = HALF.to_vec();
    b.extend(ONE);
    b.extend((0..16u8).map(|j| j | (j << 4)));
    let y = deq(GgmlType::Q4_1, &b);
    for j in 0..16 {
        assert_eq!(y[j], j as f32 * 0.5 + 1.0);
        assert_eq!(y[j + 16], y[j]);
    }
}

#[test]
fn q5_0_takes_its_fifth_bits_from_one_word() {
    let mut b = ONE.to_vec();
    // Fifth bit set for elements 1 and 17 (bits 1 and 17 of the word).
    b.extend(((1u32 << 1) | (1 << 17)).to_le_bytes());
    b.extend([0x33u8; 16]);
    let y = deq(GgmlType::Q5_0, &b);
    for (j, &v) in y.iter().enumerate() {
        let hi = if j == 1 || j == 17 { 16 } else { 0 };
        assert_eq!(v, (3 + hi) as f32 - 16.0, "{j}");
    }
}

#[test]
fn q4_k_unpacks_six_bit_scales_and_minimums() {
    let mut b = ONE.to_vec();
    b.extend(HALF);
    // Sub-blocks 0..4: scales 1..4, minimums 2 (low 6 bits); sub-blocks
    // 4..8: scale 5 + 16 (nibble 5, top bits 01 from byte j - 4) and
    // minimum 3 (nibble 3, top bits 00).
    let mut scales = [0u8; 12];
    for j in 0..4 {
        scales[j] = (j as u8 + 1) | (1 << 6);
        scales[j + 4] = 2;
        scales[j + 8] = 5 | (3 << 4);
    }
    b.extend(scales);
    b.extend([0x21u8; 128]);
    let y = deq(GgmlType::Q4K, &b);
    for (i, &v) in y.iter().enumerate() {
        let sub = i / 32;
        let q = if sub % 2 == 0 { 1.0 } else { 2.0 };
        let (sc, m) = if sub < 4 {
            (sub as f32 + 1.0, 2.0)
        } else {
            (21.0, 3.0)
        };
        assert_eq!(v, sc * q - 0.5 * m, "{i}");
    }
}

#[test]
fn q6_k_centres_six_bit_values_on_32() {
    let mut b = vec![0u8; 210];
    // Element 0: low nibble 5, high bits 2 → 37 − 32 = 5; element 96 of
    // the second half: high nibble of byte 64 + 32 = 96 and bits 6..8 of
    // high byte 128 + 32.
    b[0] = 5;
    b[128] = 2;
    b[64 + 32] = 7 << 4;
    b[128 + 32] = 3 << 6;
    for s in &mut b[192..208] {
        *s = (-2i8) as u8;
    }
    b[208..210].copy_from_slice(&HALF);
    let y = deq(GgmlType::Q6K, &b);
    assert_eq!(y[0], 0.5 * -2.0 * (5 + 32 - 32) as f32);
    assert_eq!(y[128 + 96], 0.5 * -2.0 * (7 + 48 - 32) as f32);
    assert_eq!(y[1], 0.5 * -2.0 * -32.0);
}

#[test]
fn sizes_are_checked_and_unknown_types_refused() {
    let mut out = vec![0f32; 32];
    assert!(dequantize(GgmlType::Q8_0, &[0; 33], &mut out).is_err());
    assert!(dequantize(GgmlType::Q8_0, &[0; 34], &mut out[..31]).is_err());
    assert!(dequantize(GgmlType::Q2K, &[0; 84], &mut vec![0f32; 256]).is_err());
    assert!(dequantize(GgmlType::Other(23), &[], &mut []).is_err());
    assert_eq!(GgmlType::from_code(14), GgmlType::Q6K);
    assert_eq!(GgmlType::from_code(99), GgmlType::Other(99));
}
