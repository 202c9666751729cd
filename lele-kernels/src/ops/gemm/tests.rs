use super::pack_a::pack_a_rows;
use super::*;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

#[allow(clippy::too_many_arguments)]
fn naive(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f64;
            for p in 0..k {
                s += a.at(i, p) as f64 * b.at(p, j) as f64;
            }
            let old = if beta == 0.0 {
                0.0
            } else {
                beta * c[i * ldc + j]
            };
            c[i * ldc + j] = alpha * s as f32 + old;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check(isa: Isa, m: usize, n: usize, k: usize, ta: bool, tb: bool, alpha: f32, beta: f32) {
    let av = rand_vec(m * k + 3, (m * 31 + k) as u64);
    let bv = rand_vec(k * n + 3, (n * 17 + k * 5) as u64);
    let a = if ta {
        MatRef::transposed(&av, m)
    } else {
        MatRef::row_major(&av, k)
    };
    let b = if tb {
        MatRef::transposed(&bv, k)
    } else {
        MatRef::row_major(&bv, n)
    };
    let ldc = n + 2;
    let c0 = rand_vec(m * ldc, 99);
    let mut want = c0.clone();
    naive(m, n, k, alpha, a, b, beta, &mut want, ldc);
    let mut got = c0.clone();
    let mut scratch = vec![0f32; sgemm_scratch_len(m, n, k)];
    sgemm_isa(
        isa,
        m,
        n,
        k,
        alpha,
        a,
        &b,
        beta,
        &mut got,
        ldc,
        &mut scratch,
        None,
    )
    .unwrap();
    for i in 0..m {
        for j in 0..ldc {
            let (g, w) = (got[i * ldc + j], want[i * ldc + j]);
            if j >= n {
                assert_eq!(g, c0[i * ldc + j], "wrote outside C");
            } else {
                assert!(
                    (g - w).abs() <= 1e-4 * (1.0 + k as f32).sqrt(),
                    "{isa:?} m={m} n={n} k={k} ta={ta} tb={tb}: ({i},{j}) {g} vs {w}"
                );
            }
        }
    }
}

fn isas() -> Vec<Isa> {
    crate::simd::runnable_isas()
}

#[test]
fn small_sizes_all_isas() {
    for isa in isas() {
        for m in 1..=37 {
            for n in [1, 2, 7, 8, 15, 16, 17, 31, 33, 37] {
                for k in [1, 3, 8, 37] {
                    check(isa, m, n, k, false, false, 1.0, 0.0);
                }
            }
        }
        for n in 1..=37 {
            check(isa, 9, n, 5, false, false, 1.0, 0.0);
            check(isa, 13, n, 29, true, true, 0.5, 1.5);
        }
        // Narrow products (n ≤ 8: B's columns copied, then dot products),
        // with alpha, beta, either B, across the boundary.
        for n in 1..=9 {
            check(isa, 11, n, 300, false, true, 0.5, 1.5);
            check(isa, 6, n, 13, false, false, -2.0, 0.0);
        }
        // Few rows against a transposed B (dot products straight from B),
        // every column tail, odd depths, alpha and beta.
        for m in 2..=17 {
            for n in [5, 6, 7, 8, 9, 13, 37] {
                for k in [1, 7, 8, 9, 300] {
                    check(isa, m, n, k, false, true, 0.75, 0.0);
                }
            }
            check(isa, m, 11, 33, false, true, -1.5, 0.5);
        }
        // One row against a transposed B (a GEMV: eight-column tiles and
        // every narrower tail), whole and masked depth steps.
        for n in (1..=17).chain([37]) {
            for k in [15, 16, 17, 300] {
                check(isa, 1, n, k, false, true, 0.75, 0.0);
            }
        }
        for k in 1..=37 {
            check(isa, 7, 19, k, true, false, -1.0, 0.25);
            check(isa, 1, 19, k, false, true, 2.0, 1.0);
        }
        // Few rows against a row-major B, A in either layout, beta 0 and 1.
        for m in [2, 5, 6, 7, 13, 64, 65] {
            for n in [16, 17, 31, 48] {
                for k in [1, 7, 120] {
                    for beta in [0.0, 1.0] {
                        check(isa, m, n, k, m % 2 == 1, false, 1.0, beta);
                    }
                }
            }
        }
    }
}

#[test]
fn block_tails_all_isas() {
    for isa in isas() {
        check(isa, 97, 513, 259, false, false, 1.0, 0.0);
        check(isa, 101, 35, 300, true, true, 1.0, 1.0);
        check(isa, 200, 600, 17, false, true, 0.7, -0.3);
        // Past one NC block of columns, both operand layouts.
        check(isa, 13, 1030, 40, false, false, 1.0, 0.5);
        check(isa, 7, 1031, 300, true, true, 1.0, 0.0);
        // Depths whose packed panels are a multiple of 4 KiB apart (B
        // packed eight rows at a time), with a column tail.
        for k in [64, 128, 256] {
            check(isa, 37, 45, k, false, false, 1.0, 0.5);
        }
    }
}

#[test]
fn simd_matches_scalar() {
    for isa in isas() {
        for (m, n, k) in [(37, 37, 37), (6, 16, 1), (23, 45, 67), (2, 100, 9)] {
            let av = rand_vec(m * k, 1);
            let bv = rand_vec(k * n, 2);
            let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
            let mut c1 = vec![0f32; m * n];
            let mut c2 = vec![0f32; m * n];
            let (a, b) = (MatRef::row_major(&av, k), MatRef::row_major(&bv, n));
            sgemm_isa(
                Isa::Scalar,
                m,
                n,
                k,
                1.0,
                a,
                &b,
                0.0,
                &mut c1,
                n,
                &mut s,
                None,
            )
            .unwrap();
            sgemm_isa(isa, m, n, k, 1.0, a, &b, 0.0, &mut c2, n, &mut s, None).unwrap();
            assert_close(&c2, &c1, 1e-5);
        }
    }
}

#[test]
fn beta_zero_ignores_nan_and_k_zero() {
    let a = [1.0f32; 4];
    let b = [2.0f32; 4];
    let mut c = [f32::NAN; 4];
    let mut s = vec![0f32; sgemm_scratch_len(2, 2, 2)];
    sgemm(
        2,
        2,
        2,
        1.0,
        MatRef::row_major(&a, 2),
        MatRef::row_major(&b, 2),
        0.0,
        &mut c,
        2,
        &mut s,
    )
    .unwrap();
    assert_eq!(c, [4.0; 4]);
    sgemm(
        2,
        2,
        0,
        1.0,
        MatRef::row_major(&a, 2),
        MatRef::row_major(&b, 2),
        0.5,
        &mut c,
        2,
        &mut s,
    )
    .unwrap();
    assert_eq!(c, [2.0; 4]);
    // Too small buffers are errors, not panics.
    assert!(
        sgemm(
            3,
            2,
            2,
            1.0,
            MatRef::row_major(&a, 2),
            MatRef::row_major(&b, 2),
            0.0,
            &mut c,
            2,
            &mut s
        )
        .is_err()
    );
    assert!(
        sgemm(
            2,
            2,
            2,
            1.0,
            MatRef::row_major(&a, 2),
            MatRef::row_major(&b, 2),
            0.0,
            &mut c,
            2,
            &mut []
        )
        .is_err()
    );
}

/// With `beta == 0` no micro-kernel reads C: NaNs in it (full tiles,
/// short rows, half-width edges, past the blocks' depth) do not reach the
/// result, which is bit for bit the product into zeros.
#[test]
fn beta_zero_never_reads_c_all_isas() {
    for isa in isas() {
        for (m, n, k) in [
            (24, 32, 5),
            (13, 37, 9),
            (7, 16, 3),
            (30, 20, 300),
            (5, 4, 2),
        ] {
            let av = rand_vec(m * k, 11);
            let bv = rand_vec(k * n, 12);
            let (a, b) = (MatRef::row_major(&av, k), MatRef::row_major(&bv, n));
            let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
            let mut zeros = vec![0f32; m * n];
            let mut nans = vec![f32::NAN; m * n];
            for c in [&mut zeros, &mut nans] {
                sgemm_isa(isa, m, n, k, 0.5, a, &b, 0.0, c, n, &mut s, None).unwrap();
            }
            assert!(
                zeros
                    .iter()
                    .zip(&nans)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{isa:?} {m}x{n}x{k}"
            );
        }
    }
}

/// Split over threads, every element is computed as on one thread.
#[cfg(feature = "std")]
#[test]
fn threads_give_bit_identical_results() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    for (m, n, k, tb, beta) in [
        (64, 700, 300, false, 0.25),
        (64, 700, 300, false, 1.0),
        (30, 1500, 70, true, 0.25),
        (100, 1500, 70, true, 0.25),
        (7, 2100, 200, false, 0.25),
        (7, 2103, 200, false, 1.0),
        // Taller than wide: split by rows.
        (700, 150, 300, false, 0.25),
        (301, 80, 100, false, 1.0),
    ] {
        let av = rand_vec(m * k, 3);
        let bv = rand_vec(k * n, 4);
        let a = MatRef::row_major(&av, k);
        let b = if tb {
            MatRef::transposed(&bv, k)
        } else {
            MatRef::row_major(&bv, n)
        };
        let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
        let mut one = vec![0.5f32; m * n];
        crate::threads::set_num_threads(1);
        sgemm(m, n, k, 1.0, a, b, beta, &mut one, n, &mut s).unwrap();
        for threads in [2, 3] {
            crate::threads::set_test_threads(threads);
            let mut many = vec![0.5f32; m * n];
            sgemm(m, n, k, 1.0, a, b, beta, &mut many, n, &mut s).unwrap();
            assert!(
                one.iter()
                    .zip(&many)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{m}x{n}x{k} on {threads} threads"
            );
        }
        crate::threads::set_num_threads(1);
    }
}

/// A node without scratch may be handed an empty slice at an odd address:
/// asking it for zero floats works, for one float fails cleanly.
#[test]
fn empty_scratch_at_an_odd_address() {
    let mut buf = [0u64; 2];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf[..]);
    assert!(scratch_f32(&mut bytes[1..1], 0, "test").unwrap().is_empty());
    assert!(scratch_f32(&mut bytes[1..5], 1, "test").is_err());
}

/// A weight packed ahead of time gives bit for bit the product of the same
/// weight packed per call (same blocks, same micro-kernel reading the same
/// numbers, only from another place): every ISA, odd sizes and tails, a
/// few columns (the narrow path), depth past KC, width past NC, alpha and
/// beta, split over 1–3 threads by columns and by rows. Shapes that the
/// AVX-512 few-rows path takes instead (one accumulator over the whole
/// depth, so other roundings) are skipped for that ISA here and checked
/// against the reference by
/// `few_rows_against_packed_weights_match_the_reference`.
#[test]
fn prepacked_b_is_bit_identical_to_packing_per_call() {
    use super::prepacked::{Prepacked, pack_into, packed_len};
    #[cfg(feature = "std")]
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    #[cfg(feature = "std")]
    let thread_counts = [1, 2, 3];
    #[cfg(not(feature = "std"))]
    let thread_counts = [1];
    for isa in isas() {
        for (m, n, k) in [
            (2, 5, 3),
            (7, 33, 1),
            (13, 47, 37),
            (6, 16, 8),
            (5, 3, 40),
            (37, 31, 300),
            (100, 1100, 70),
            (40, 700, 100),
            (9, 2103, 200),
            (64, 700, 300),
            (700, 150, 300),
        ] {
            let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
            #[cfg(target_arch = "x86_64")]
            if super::few_rows::takes(isa, m, k, s.len()) {
                continue;
            }
            let av = rand_vec(m * k, (m + k) as u64);
            let bv = rand_vec(k * n, (n + 3 * k) as u64);
            let a = MatRef::row_major(&av, k);
            let b = MatRef::row_major(&bv, n);
            let mut packed = vec![f32::NAN; packed_len(k, n)];
            assert!(pack_into(b, k, n, &mut packed));
            let pb = Prepacked::new(&packed, k, n).unwrap();
            let c0 = rand_vec(m * n, 5);
            for threads in thread_counts {
                #[cfg(feature = "std")]
                crate::threads::set_num_threads(threads);
                for (alpha, beta) in [(1.0, 0.0), (1.25, 0.75)] {
                    let mut want = c0.clone();
                    sgemm_isa(isa, m, n, k, alpha, a, &b, beta, &mut want, n, &mut s, None)
                        .unwrap();
                    let mut got = c0.clone();
                    sgemm_isa(isa, m, n, k, alpha, a, &pb, beta, &mut got, n, &mut s, None)
                        .unwrap();
                    assert!(
                        want.iter()
                            .zip(&got)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{isa:?} {m}x{n}x{k} on {threads} threads"
                    );
                }
            }
            #[cfg(feature = "std")]
            crate::threads::set_num_threads(1);
        }
    }
}

/// One row against a packed weight (its own GEMV) matches the reference,
/// every panel tail, odd depths, alpha and beta; a packed operand of other
/// dims than the product's is refused.
#[test]
fn prepacked_gemv_matches_reference() {
    use super::prepacked::{Prepacked, pack_into, packed_len};
    for n in [1, 5, 16, 17, 31, 32, 33, 48, 70] {
        for k in [1, 2, 7, 64, 301] {
            let av = rand_vec(k, k as u64);
            let bv = rand_vec(k * n, (n * k) as u64);
            let a = MatRef::row_major(&av, k);
            let b = MatRef::row_major(&bv, n);
            let mut packed = vec![f32::NAN; packed_len(k, n)];
            assert!(pack_into(b, k, n, &mut packed));
            let pb = Prepacked::new(&packed, k, n).unwrap();
            for (alpha, beta) in [(1.0, 0.0), (-0.5, 1.5)] {
                let c0 = rand_vec(n, 9);
                let mut want = c0.clone();
                naive(1, n, k, alpha, a, b, beta, &mut want, n);
                let mut got = c0.clone();
                let mut s = vec![0f32; sgemm_scratch_len(1, n, k)];
                sgemm_packed_b(1, n, k, alpha, a, &pb, beta, &mut got, n, &mut s, None).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-4 * (1.0 + k as f32).sqrt(),
                        "n={n} k={k}"
                    );
                }
            }
        }
    }
    let bv = rand_vec(6 * 40, 1);
    let mut packed = vec![0f32; packed_len(6, 40)];
    assert!(pack_into(MatRef::row_major(&bv, 40), 6, 40, &mut packed));
    let pb = Prepacked::new(&packed, 6, 40).unwrap();
    let av = rand_vec(3 * 7, 2);
    let mut c = vec![0f32; 3 * 40];
    let mut s = vec![0f32; sgemm_scratch_len(3, 40, 7)];
    let wrong_depth = MatRef::row_major(&av, 7);
    assert!(
        sgemm_packed_b(
            3,
            40,
            7,
            1.0,
            wrong_depth,
            &pb,
            0.0,
            &mut c,
            40,
            &mut s,
            None
        )
        .is_err()
    );
    assert!(Prepacked::new(&packed[1..], 6, 40).is_none());
    assert!(!pack_into(
        MatRef::row_major(&bv[1..], 40),
        6,
        40,
        &mut packed
    ));
}

/// `pack_a_rows` (the AVX 8 × 8 transposes for eight rows, the portable
/// loop for six and four) against the panel's definition, over depths
/// with and without a partial block of eight and row strides wider than
/// the depth.
#[test]
fn pack_a_rows_interleaves_every_row() {
    fn check<const MR: usize>() {
        for kc in [1, 7, 8, 9, 16, 23, 40, 67] {
            for rs in [kc, kc + 3] {
                let a: Vec<f32> = (0..MR * rs).map(|i| i as f32 * 0.25 - 3.0).collect();
                let mut panel = vec![f32::NAN; MR * kc];
                pack_a_rows::<MR>(&a, rs, kc, &mut panel);
                for p in 0..kc {
                    for ii in 0..MR {
                        assert_eq!(
                            panel[p * MR + ii],
                            a[ii * rs + p],
                            "MR {MR} kc {kc} rs {rs}"
                        );
                    }
                }
            }
        }
    }
    check::<8>();
    check::<6>();
    check::<4>();
}

/// `pack_row_panels` (the direct convolution's weights) against the
/// layout's definition: panels of 6, 8 and 16 rows (the tiles' heights;
/// one or two groups of eight through the transposes) and an odd 5, over
/// row counts that leave a partial last panel or a partial group of eight,
/// depths with and without a partial block of eight; rows past `m` zero.
#[test]
fn pack_row_panels_matches_the_layout() {
    use super::pack_row_panels;
    for tm in [5, 6, 8, 16] {
        for m in [1usize, 5, 8, 12, 16, 17, 30] {
            for k in [1, 7, 8, 9, 27, 64] {
                let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5 + 1.0).collect();
                let tiles = m.div_ceil(tm);
                let mut panels = vec![f32::NAN; tiles * tm * k];
                pack_row_panels(&a, m, k, tm, &mut panels);
                for t in 0..tiles {
                    for p in 0..k {
                        for i in 0..tm {
                            let row = t * tm + i;
                            let want = if row < m { a[row * k + p] } else { 0.0 };
                            assert_eq!(
                                panels[t * k * tm + p * tm + i].to_bits(),
                                want.to_bits(),
                                "tm {tm} m {m} k {k} tile {t} depth {p} row {i}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `MatRef::pack` puts row `p0 + p`, column `j0 + j` of a row-major B at
/// `(j / nr)·nr·kc + p·nr + j % nr` and zeros past column `j0 + nc`, for
/// every panel width the products use (1: the contiguous columns of the
/// dot products) and odd ones, row strides wider than the columns packed,
/// and blocks starting inside the matrix.
#[test]
fn row_major_b_packs_into_the_panel_layout() {
    let (rows, cols) = (41, 45);
    let bv: Vec<f32> = (0..rows * cols).map(|x| x as f32 * 0.25 - 7.0).collect();
    let b = MatRef::row_major(&bv, cols);
    for nr in [1usize, 3, 8, 16, 32] {
        for (p0, kc) in [(0usize, 1usize), (0, 41), (5, 17), (40, 1)] {
            for (j0, nc) in [(0usize, 1usize), (0, 5), (3, 9), (2, 43), (44, 1)] {
                let panels = nc.div_ceil(nr);
                let mut dst = vec![f32::NAN; panels * nr * kc];
                b.pack(p0, kc, j0, nc, nr, &mut dst);
                for q in 0..panels {
                    for p in 0..kc {
                        for jj in 0..nr {
                            let j = q * nr + jj;
                            let want = if j < nc {
                                bv[(p0 + p) * cols + j0 + j]
                            } else {
                                0.0
                            };
                            assert_eq!(
                                dst[q * nr * kc + p * nr + jj].to_bits(),
                                want.to_bits(),
                                "nr {nr} p0 {p0} kc {kc} j0 {j0} nc {nc} panel {q} row {p} col {jj}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `pack_a_panels` puts element (i, p) at `(i / 8)·8k + p·8 + i % 8`,
/// zero-fills the rows past `m`, and refuses a short destination.
#[test]
fn panels_a_layout_is_eight_rows_over_the_whole_depth() {
    let (m, k) = (11, 5);
    let av: Vec<f32> = (0..m * k).map(|x| x as f32 + 1.0).collect();
    let mut panels = vec![f32::NAN; panels_a_len(m, k)];
    assert_eq!(panels.len(), 16 * k);
    assert!(pack_a_panels(MatRef::row_major(&av, k), m, k, &mut panels));
    for i in 0..16 {
        for p in 0..k {
            let want = if i < m { av[i * k + p] } else { 0.0 };
            assert_eq!(panels[(i / 8) * 8 * k + p * 8 + i % 8], want, "({i}, {p})");
        }
    }
    let mut short = vec![0f32; panels_a_len(m, k) - 1];
    assert!(!pack_a_panels(MatRef::row_major(&av, k), m, k, &mut short));
}

/// A left operand packed ahead of time gives the same product as the
/// matrix it was packed from, bit for bit where both take the blocked
/// path (AVX-512 reads the panels in place, the other ISAs repack them)
/// and within rounding of the exact product elsewhere: row counts off the
/// panel size, depths past one depth block, one to 600 columns, and split
/// over threads by rows and by columns.
#[cfg(feature = "std")]
#[test]
fn panels_a_give_the_product_of_the_packed_matrix() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let shapes = [
        (8, 1, 5),
        (13, 7, 1),
        (131, 5, 9),
        (136, 33, 300),
        (200, 300, 40),
        (264, 600, 37),
        (392, 100, 260),
    ];
    for threads in [1, 3] {
        crate::threads::set_num_threads(threads);
        for isa in isas() {
            for (m, n, k) in shapes {
                let av = rand_vec(m * k, (m + k) as u64);
                let bv = rand_vec(k * n, (n * 3 + k) as u64);
                let (a, b) = (MatRef::row_major(&av, k), MatRef::row_major(&bv, n));
                let mut panels = vec![f32::NAN; panels_a_len(m, k)];
                assert!(pack_a_panels(a, m, k, &mut panels));
                let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
                let mut got = vec![f32::NAN; m * n];
                let left = LeftOp::Panels(&panels);
                sgemm_core(isa, m, n, k, 1.0, left, &b, 0.0, &mut got, n, &mut s, None).unwrap();
                let mut want = vec![0f32; m * n];
                naive(m, n, k, 1.0, a, b, 0.0, &mut want, n);
                assert_close(&got, &want, 1e-5);
                if m > DOT_M_MAX && n > NARROW_N {
                    let mut strided = vec![f32::NAN; m * n];
                    sgemm_isa(isa, m, n, k, 1.0, a, &b, 0.0, &mut strided, n, &mut s, None)
                        .unwrap();
                    assert!(
                        got.iter()
                            .zip(&strided)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{isa:?} {m}x{n}x{k} on {threads} threads"
                    );
                }
            }
        }
    }
    crate::threads::set_num_threads(1);
}

/// B read in place (rows 64-byte aligned, whole lines apart and spread over
/// L1's sets) gives bit for bit the product of the same B packed per call
/// (a copy one float off the alignment, which is packed): every SIMD ISA,
/// odd row counts, column tails (a half panel, a partial full one), depth
/// past KC, a row stride wider than the matrix, alpha and beta, 1–3
/// threads (row ranges); and both match the reference.
#[test]
#[cfg(feature = "std")]
fn b_read_in_place_is_bit_identical_to_packing() {
    use super::blocks::IN_PLACE_CALLS;
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // A copy of `v` starting on a 64-byte boundary (`shift` = 0) or `shift`
    // floats past one.
    fn placed(v: &[f32], shift: usize) -> (Vec<f32>, usize) {
        let mut buf = vec![0f32; v.len() + 32];
        let off = buf.as_ptr().align_offset(64) + shift;
        buf[off..off + v.len()].copy_from_slice(v);
        (buf, off)
    }
    for isa in isas() {
        if !micro::micro_for(isa).nr.is_multiple_of(16) {
            continue; // the scalar kernel's panels are half a line wide
        }
        for (m, n, k, rs, alpha, beta) in [
            (37, 240, 300, 240, 1.0, 0.0),
            (200, 240, 300, 240, 1.0, 1.0),
            (100, 250, 70, 272, 0.5, 1.0),
            (8, 208, 513, 208, 1.0, 0.25),
            (61, 48, 256, 48, 1.0, 0.0),
            (96, 1104, 96, 1104, 1.0, 0.0),
        ] {
            let av = rand_vec(m * k, (m + k) as u64);
            let bv = rand_vec((k - 1) * rs + n, (n * 3 + k) as u64);
            let a = MatRef::row_major(&av, k);
            let (aligned, at) = placed(&bv, 0);
            let (shifted, sat) = placed(&bv, 1);
            let b_in_place = MatRef::row_major(&aligned[at..at + bv.len()], rs);
            let b_packed = MatRef::row_major(&shifted[sat..sat + bv.len()], rs);
            let c0 = rand_vec(m * n, 7);
            let mut want = c0.clone();
            naive(m, n, k, alpha, a, b_packed, beta, &mut want, n);
            let mut scratch = vec![0f32; sgemm_scratch_len(m, n, k)];
            let mut product = |b: &MatRef<'_>| {
                let mut c = c0.clone();
                sgemm_isa(
                    isa,
                    m,
                    n,
                    k,
                    alpha,
                    a,
                    b,
                    beta,
                    &mut c,
                    n,
                    &mut scratch,
                    None,
                )
                .unwrap();
                c
            };
            crate::threads::set_num_threads(1);
            let before = IN_PLACE_CALLS.with(|c| c.get());
            let packed = product(&b_packed);
            assert_eq!(
                IN_PLACE_CALLS.with(|c| c.get()),
                before,
                "{m}x{n}x{k} packed"
            );
            let tol = 1e-4 * (1.0 + k as f32).sqrt();
            for (i, (g, w)) in packed.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= tol, "{isa:?} {m}x{n}x{k}: {i}: {g} vs {w}");
            }
            for threads in [1, 2, 3] {
                crate::threads::set_num_threads(threads);
                let before = IN_PLACE_CALLS.with(|c| c.get());
                let in_place = product(&b_in_place);
                if threads == 1 {
                    assert!(
                        IN_PLACE_CALLS.with(|c| c.get()) > before,
                        "{isa:?} {m}x{n}x{k} (stride {rs}) did not read B in place"
                    );
                }
                assert!(
                    in_place
                        .iter()
                        .zip(&packed)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{isa:?} {m}x{n}x{k} (stride {rs}) on {threads} threads"
                );
            }
            crate::threads::set_num_threads(1);
        }
    }
}

/// A few rows against a weight packed ahead of time (`few_rows`, AVX-512):
/// against the reference over one and two passes of one and two panels
/// (2 to 48 rows), column counts that leave a partial panel or an odd
/// one, depths of 1 to 300, alpha and beta, an epilogue, on 1–3 threads
/// (panel ranges) with the same bits on each; asserts the path ran.
#[test]
#[cfg(all(feature = "std", target_arch = "x86_64"))]
fn few_rows_against_packed_weights_match_the_reference() {
    use super::few_rows::CALLS;
    use super::prepacked::{Prepacked, pack_into, packed_len};
    if !isa_available(Isa::Avx512) {
        return;
    }
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let cases = [
        (2, 17, 5, 1.0, 0.0),
        (3, 1, 1, 1.0, 0.0),
        (7, 100, 300, 0.5, 1.0),
        (12, 48, 129, 1.0, 0.25),
        (13, 33, 64, 1.0, 0.0),
        (20, 700, 300, 1.0, 1.0),
        (24, 16, 17, 2.0, 0.0),
        (25, 70, 128, 1.0, 0.0),
        (40, 900, 120, 1.0, 1.0),
        (48, 15, 3, 1.0, 0.5),
    ];
    for (m, n, k, alpha, beta) in cases {
        let av = rand_vec(m * k, (m * 7 + k) as u64);
        let bv = rand_vec(k * n, (n * 3 + k) as u64);
        let a = MatRef::row_major(&av, k);
        let b = MatRef::row_major(&bv, n);
        let mut packed = vec![0f32; packed_len(k, n)];
        assert!(pack_into(b, k, n, &mut packed));
        let w = Prepacked::new(&packed, k, n).unwrap();
        let bias = rand_vec(n, 5);
        let c0 = rand_vec(m * n, 7);
        let mut want = c0.clone();
        naive(m, n, k, alpha, a, b, beta, &mut want, n);
        for (e, x) in want.iter_mut().enumerate() {
            *x += bias[e % n];
        }
        let add_bias = |seg: &mut [f32], at: usize| {
            for (x, &b) in seg.iter_mut().zip(&bias[at % n..]) {
                *x += b;
            }
        };
        let mut scratch = vec![0f32; sgemm_scratch_len(m, n, k)];
        let mut first: Option<Vec<f32>> = None;
        for threads in [1, 2, 3] {
            crate::threads::set_num_threads(threads);
            let before = CALLS.with(|c| c.get());
            let mut c = c0.clone();
            sgemm_isa(
                Isa::Avx512,
                m,
                n,
                k,
                alpha,
                a,
                &w,
                beta,
                &mut c,
                n,
                &mut scratch,
                Some(&add_bias),
            )
            .unwrap();
            assert!(
                CALLS.with(|c| c.get()) > before,
                "{m}x{n}x{k}: the few-rows path did not run"
            );
            let tol = 1e-5 * (1.0 + k as f32).sqrt();
            for (i, (g, w)) in c.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= tol,
                    "{m}x{n}x{k} {threads}T: {i}: {g} vs {w}"
                );
            }
            match &first {
                None => first = Some(c),
                Some(f) => assert!(
                    f.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{m}x{n}x{k}: {threads} threads differ from one"
                ),
            }
        }
        crate::threads::set_num_threads(1);
    }
}
