//! Hand-built blocks with values worked out from the layouts; the
//! comparison with llama.cpp's Python reference over random blocks of
//! every type is `lele-build/tests/ggml_formats.rs`.
use alloc::vec;
use alloc::vec::Vec;

use half::f16;

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

/// The weight types with dot products, and where their f16 scales sit.
const DOT_TYPES: [(GgmlType, &[usize]); 6] = [
    (GgmlType::Q8_0, &[0]),
    (GgmlType::Q4_0, &[0]),
    (GgmlType::Q5_0, &[0]),
    (GgmlType::Q4K, &[0, 2]),
    (GgmlType::Q5K, &[0, 2]),
    (GgmlType::Q6K, &[208]),
];

/// A deterministic stream of bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// `blocks` random blocks of `ty` whose f16 scales (at `scales`) are
/// finite, in ±[2^-8, 2^-4).
fn weights(ty: GgmlType, blocks: usize, scales: &[usize], seed: u64) -> Vec<u8> {
    let (_, size) = ty.block().unwrap();
    let mut raw = bytes(blocks * size, seed);
    for (b, block) in raw.chunks_exact_mut(size).enumerate() {
        for (k, &at) in scales.iter().enumerate() {
            let v =
                (1.0 + ((b + k) % 16) as f32 / 16.0) / 256.0 * if b % 3 == 0 { -1.0 } else { 1.0 };
            block[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
        }
    }
    raw
}

/// Each quantized dot product against the f64 dot of the dequantized
/// weights and activations (the same values, summed exactly): within
/// 1e-5 of the sum of the terms' magnitudes, over rows of 1, 2 and 5
/// blocks.
#[test]
fn quantized_dot_products_equal_the_dot_of_the_dequantized_rows() {
    let types = DOT_TYPES;
    for (ty, scales) in types {
        let (block, _) = ty.block().unwrap();
        let aty = activation_type(ty).unwrap();
        let (ablock, asize) = aty.block().unwrap();
        for blocks in [1usize, 2, 5] {
            let n = blocks * block;
            let w = weights(ty, blocks, scales, n as u64 + block as u64);
            let x: Vec<f32> = bytes(n, 7 + n as u64)
                .iter()
                .map(|&b| (b as f32 - 127.5) / 37.0)
                .collect();
            let mut a = vec![0u8; n / ablock * asize];
            if aty == GgmlType::Q8_0 {
                quantize_q8_0(&x, &mut a).unwrap();
            } else {
                quantize_q8_k(&x, &mut a).unwrap();
            }
            let (mut wf, mut af) = (vec![0f32; n], vec![0f32; n]);
            dequantize(ty, &w, &mut wf).unwrap();
            dequantize(aty, &a, &mut af).unwrap();
            let exact: f64 = wf.iter().zip(&af).map(|(&p, &q)| p as f64 * q as f64).sum();
            let scale: f64 = wf
                .iter()
                .zip(&af)
                .map(|(&p, &q)| (p as f64 * q as f64).abs())
                .sum();
            let got = vec_dot(ty, &w, &a).unwrap() as f64;
            assert!(
                (got - exact).abs() <= 1e-5 * scale + 1e-9,
                "{ty:?} x {blocks}: {got} vs {exact} (scale {scale})"
            );
            assert!(scale > 0.0);
        }
    }
}

/// Q8_K: each value within half a step of its input, the block's largest
/// magnitude exactly ±127 steps, the sums of 16 right; zeros give zeros.
#[test]
fn q8_k_quantization_is_faithful() {
    let x: Vec<f32> = bytes(512, 3)
        .iter()
        .map(|&b| (b as f32 - 100.0) / 9.0)
        .collect();
    let mut a = vec![0u8; 2 * Q8_K_BYTES];
    quantize_q8_k(&x, &mut a).unwrap();
    let mut y = vec![0f32; 512];
    dequantize(GgmlType::Q8K, &a, &mut y).unwrap();
    for (blk, (x, a)) in x
        .chunks_exact(256)
        .zip(a.chunks_exact(Q8_K_BYTES))
        .enumerate()
    {
        let d = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
        for (j, (&v, &q)) in x.iter().zip(&y[256 * blk..]).enumerate() {
            assert!(
                (v - q).abs() <= d.abs() * 0.5 + 1e-6,
                "{blk}/{j}: {v} vs {q}"
            );
        }
        assert!(a[4..260].iter().any(|&q| q as i8 == -127));
        for s in 0..16 {
            let want: i32 = a[4 + 16 * s..4 + 16 * s + 16]
                .iter()
                .map(|&q| i32::from(q as i8))
                .sum();
            let got = i16::from_le_bytes([a[260 + 2 * s], a[261 + 2 * s]]);
            assert_eq!(i32::from(got), want);
        }
    }
    quantize_q8_k(&[0.0; 256], &mut a[..Q8_K_BYTES]).unwrap();
    assert!(a[..Q8_K_BYTES].iter().all(|&b| b == 0));
    assert!(vec_dot(GgmlType::Q4_1, &[0; 20], &[0; 34]).is_err());
    assert!(vec_dot(GgmlType::Q8_0, &[0; 34], &[0; 33]).is_err());
}

/// The activation quantizer of products: each value within half a step
/// of its input (plus what rounding the step to f16 moves 127 steps), the largest magnitude exactly ±127 steps, and the same
/// bytes as the reference quantizer except where the two round a tie or
/// a last bit differently (a step apart at most).
#[test]
fn q8_0_activation_quantization_is_faithful() {
    let x: Vec<f32> = bytes(96, 11)
        .iter()
        .map(|&b| (b as f32 - 120.0) / 7.0)
        .collect();
    let (mut a, mut r) = (vec![0u8; 3 * Q8_0_BYTES], vec![0u8; 3 * Q8_0_BYTES]);
    quantize_q8_0_activations(&x, &mut a).unwrap();
    quantize_q8_0(&x, &mut r).unwrap();
    let mut y = vec![0f32; 96];
    dequantize(GgmlType::Q8_0, &a, &mut y).unwrap();
    for (blk, (x, a)) in x
        .chunks_exact(32)
        .zip(a.chunks_exact(Q8_0_BYTES))
        .enumerate()
    {
        let d = f16::from_le_bytes([a[0], a[1]]).to_f32();
        for (&v, &q) in x.iter().zip(&y[32 * blk..]) {
            assert!((v - q).abs() <= d * (0.5 + 127.0 / 2048.0), "{v} vs {q}");
        }
        assert!(a[2..].iter().any(|&q| (q as i8).abs() == 127));
    }
    for (p, q) in a.iter().zip(&r) {
        assert!(((*p as i8) as i32 - (*q as i8) as i32).abs() <= 1);
    }
}

fn tref<'a, T: bytemuck::Pod>(
    d: &'a [T],
    dtype: crate::DType,
    s: &[usize],
) -> Option<crate::TensorRef<'a>> {
    Some(crate::TensorRef {
        dtype,
        shape: crate::Shape::new(s).unwrap(),
        data: bytemuck::cast_slice(d),
    })
}

/// Random weights of `ty` (`n` rows of `k`) and activations (`rows` of
/// `k`) for a product.
fn product_inputs(
    ty: GgmlType,
    scales: &[usize],
    (rows, n, k): (usize, usize, usize),
    seed: u64,
) -> (Vec<u8>, Vec<f32>) {
    let (block, _) = ty.block().unwrap();
    let w = weights(ty, n * k / block, scales, seed);
    let x = bytes(rows * k, seed + 1)
        .iter()
        .map(|&b| (b as f32 - 127.5) / 41.0)
        .collect();
    (w, x)
}

/// `GgmlMatMul { ty, k }` of `x` (`rows` of `k`) and `w` (`n` rows): its
/// output.
fn run_product(ty: GgmlType, w: &[u8], x: &[f32], (rows, n, k): (usize, usize, usize)) -> Vec<f32> {
    use crate::kernel::Kernel;
    use crate::{DType, Shape, TensorMut};
    let (block, size) = ty.block().unwrap();
    let mm = GgmlMatMul { ty, k };
    let ins = [
        tref(x, DType::F32, &[rows, k]),
        tref(w, DType::U8, &[n, k / block * size]),
    ];
    let mut shape = [Shape::SCALAR];
    mm.infer(&ins, &mut shape).unwrap();
    assert_eq!(shape[0].dims(), &[rows, n]);
    let mut scratch = vec![0u8; mm.scratch_bytes(&ins, &shape)];
    let mut y = vec![0f32; rows * n];
    let mut out = [TensorMut {
        dtype: DType::F32,
        shape: shape[0],
        data: bytemuck::cast_slice_mut(&mut y),
    }];
    mm.run(&ins, &mut out, &mut scratch).unwrap();
    y
}

/// `GgmlMatMul`: every output the quantized dot product of its row of X
/// (quantized as the kernel's activation type) with its weight row; a
/// row length that is not whole blocks, or a weight of the wrong row
/// size, is an error. (The product runs on the CPU's best vector ISA, whose
/// float additions go in another order than the portable dot's.)
#[test]
fn ggml_matmul_is_the_row_by_row_quantized_product() {
    use crate::kernel::Kernel;
    use crate::{DType, Shape};
    for (ty, scales) in [(GgmlType::Q5_0, &[0usize][..]), (GgmlType::Q4K, &[0, 2])] {
        let (block, size) = ty.block().unwrap();
        let (rows, n, k) = (3, 5, 2 * 256);
        let (w, x) = product_inputs(ty, scales, (rows, n, k), 21);
        let y = run_product(ty, &w, &x, (rows, n, k));
        let mm = GgmlMatMul { ty, k };
        let ins = [
            tref(&x, DType::F32, &[rows, k]),
            tref(&w, DType::U8, &[n, k / block * size]),
        ];
        let mut shape = [Shape::SCALAR];
        let aty = activation_type(ty).unwrap();
        let row_bytes = aty.row_bytes(k).unwrap();
        for r in 0..rows {
            let mut a = vec![0u8; row_bytes];
            if aty == GgmlType::Q8_0 {
                quantize_q8_0_activations(&x[r * k..][..k], &mut a).unwrap();
            } else {
                quantize_q8_k(&x[r * k..][..k], &mut a).unwrap();
            }
            for c in 0..n {
                let wr = &w[c * k / block * size..][..k / block * size];
                let (got, want) = (y[r * n + c] as f64, vec_dot(ty, wr, &a).unwrap() as f64);
                let tol = 1e-5 * magnitude(ty, wr, aty, &a);
                assert!((got - want).abs() <= tol, "{ty:?} {r} {c}: {got} vs {want}");
            }
        }
        let bad = GgmlMatMul { ty, k: k + 1 };
        assert!(bad.infer(&ins, &mut shape).is_err());
        let short = [
            ins[0],
            tref(
                &w[..n * (k / block * size - 1)],
                DType::U8,
                &[n, k / block * size - 1],
            ),
        ];
        assert!(mm.infer(&short, &mut shape).is_err());
    }
}

/// `GgmlGather`: picked rows dequantized, an index outside the table an
/// error.
#[test]
fn ggml_gather_dequantizes_the_picked_rows() {
    use crate::kernel::Kernel;
    use crate::{DType, Shape, TensorMut};
    let (rows, cols) = (4, 64);
    let w = weights(GgmlType::Q8_0, rows * 2, &[0], 31);
    let mut all = vec![0f32; rows * cols];
    dequantize(GgmlType::Q8_0, &w, &mut all).unwrap();
    let g = GgmlGather {
        ty: GgmlType::Q8_0,
        cols,
    };
    for (ids, ok) in [
        (vec![3i64, 0, 3], true),
        (vec![4], false),
        (vec![-1], false),
    ] {
        let ins = [
            tref(&w, DType::U8, &[rows, 68]),
            tref(&ids, DType::I64, &[ids.len()]),
        ];
        let mut shape = [Shape::SCALAR];
        g.infer(&ins, &mut shape).unwrap();
        let mut y = vec![0f32; ids.len() * cols];
        let mut out = [TensorMut {
            dtype: DType::F32,
            shape: shape[0],
            data: bytemuck::cast_slice_mut(&mut y),
        }];
        let r = g.run(&ins, &mut out, &mut []);
        assert_eq!(r.is_ok(), ok, "{ids:?}");
        if ok {
            for (i, &id) in ids.iter().enumerate() {
                assert_eq!(y[i * cols..][..cols], all[id as usize * cols..][..cols]);
            }
        }
    }
}

/// `Σ |w·a|` of a row's dequantized weights and activations: the scale of
/// a product's rounding error.
fn magnitude(ty: GgmlType, w: &[u8], aty: GgmlType, a: &[u8]) -> f64 {
    let (wf, af) = (deq(ty, w), deq(aty, a));
    wf.iter()
        .zip(&af)
        .map(|(&p, &q)| (p as f64 * q as f64).abs())
        .sum()
}

/// The vector products of every ISA this CPU runs against the portable
/// ones, over 6 activation rows × 3 weight rows of 1, 2, 5 and 7 blocks of
/// each type: within 1e-5 of the sum of the terms' magnitudes (only the
/// order of float additions and where block scales apply differ). Q8_0
/// weights include −128, which x86's unsigned-by-signed products must
/// still get right.
#[test]
fn vector_products_equal_the_portable_ones_on_every_isa() {
    use super::vector_dot::RowProducts;
    let types = DOT_TYPES;
    for isa in crate::simd::runnable_isas() {
        for (ty, scales) in types {
            let (block, size) = ty.block().unwrap();
            let aty = activation_type(ty).unwrap();
            let (ablock, asize) = aty.block().unwrap();
            for blocks in [1usize, 2, 5, 7] {
                let k = blocks * block;
                // Six rows: a group of four sharing each unpacked block, two alone.
                let (n, rows) = (3, 6);
                let mut w = weights(ty, blocks * n, scales, (k + block) as u64);
                if ty == GgmlType::Q8_0 {
                    w[2] = 0x80;
                }
                let x: Vec<f32> = bytes(k * rows, 11 + k as u64)
                    .iter()
                    .map(|&b| (b as f32 - 127.5) / 29.0)
                    .collect();
                let act_row = k / ablock * asize;
                let mut a = vec![0u8; act_row * rows];
                for (x, a) in x.chunks_exact(k).zip(a.chunks_exact_mut(act_row)) {
                    if aty == GgmlType::Q8_0 {
                        quantize_q8_0_activations(x, a).unwrap();
                    } else {
                        quantize_q8_k(x, a).unwrap();
                    }
                }
                let w_row = blocks * size;
                let mut y = vec![f32::NAN; rows * n];
                let done = crate::simd::dispatch_on(
                    isa,
                    RowProducts {
                        ty,
                        w: &w,
                        w_row,
                        act: &a,
                        act_row,
                        y: &mut y,
                        n,
                    },
                );
                if isa == crate::simd::Isa::Scalar {
                    assert!(done.is_err(), "the portable code has no vector form");
                    continue;
                }
                assert!(matches!(done, Ok(Some(()))), "{isa:?} {ty:?}");
                for (r, (a, y)) in a.chunks_exact(act_row).zip(y.chunks_exact(n)).enumerate() {
                    for (c, w) in w.chunks_exact(w_row).enumerate() {
                        let want = vec_dot(ty, w, a).unwrap() as f64;
                        let scale = magnitude(ty, w, aty, a);
                        let got = y[c] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * scale,
                            "{isa:?} {ty:?} x{blocks} row {r} col {c}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}

/// `GgmlMatMul` split over threads (one row: by weight rows; a batch: by
/// its rows) computes every output as on one thread.
#[cfg(feature = "std")]
#[test]
fn ggml_matmul_on_threads_is_bit_identical() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    for (ty, scales, rows) in [
        (GgmlType::Q8_0, &[0usize][..], 1),
        (GgmlType::Q8_0, &[0], 7),
        (GgmlType::Q4K, &[0, 2], 1),
        (GgmlType::Q6K, &[208], 5),
    ] {
        let dims = (rows, 301, 2 * 256);
        let (w, x) = product_inputs(ty, scales, dims, 31);
        let run = || run_product(ty, &w, &x, dims);
        crate::threads::set_num_threads(1);
        let one = run();
        for threads in [2, 3] {
            crate::threads::set_test_threads(threads);
            let many = run();
            assert!(
                one.iter()
                    .zip(&many)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{ty:?} x{rows} on {threads} threads"
            );
        }
        crate::threads::set_num_threads(1);
    }
}

/// The activation quantizers' rounding is round-half-to-even over their
/// whole range (|v| ≤ 127), halves included.
#[test]
fn nearest_int_rounds_half_to_even() {
    let mut v = -130.0f32;
    while v <= 130.0 {
        assert_eq!(
            super::dot::nearest_int(v),
            v.round_ties_even() as i32,
            "{v}"
        );
        v += 0.125;
    }
    for v in [0.49999997f32, -0.49999997, 2.5, -2.5, 3.5, 1e-30, -0.0] {
        assert_eq!(
            super::dot::nearest_int(v),
            v.round_ties_even() as i32,
            "{v}"
        );
    }
}
