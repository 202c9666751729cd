use super::super::tests::{conv, naive_conv};
use super::*;
use crate::ops::test_util::{assert_close, rand_vec, run, t};
use crate::ops::unary::Activation;
use alloc::vec::Vec;

/// Both layouts put channel `i`, tap `t` where [`block_index`] says:
/// blocks of 32 and a last one of 16, depths shorter and longer than a
/// run of taps and not a multiple of it; channel counts short of whole
/// vectors (12, 24, 40) padded with zero channels.
#[test]
fn weight_layouts_follow_the_block_index() {
    use crate::ops::gemm::{MatRef, pack_a_panels, panels_a_len};
    for m in [16, 32, 48, 80, 96, 12, 24, 40] {
        for k in [1, 7, 16, 17, 64, 130, 864] {
            let w = rand_vec(m * k, (m * k) as u64);
            let mp = padded(m);
            let mut want = vec![f32::NAN; mp * k];
            for i in 0..mp {
                for t in 0..k {
                    want[block_index(m, k, i, t)] = if i < m { w[i * k + t] } else { 0.0 };
                }
            }
            let mut from_rows = vec![f32::NAN; mp * k];
            weights_from_rows(&w, m, k, &mut from_rows);
            assert_eq!(from_rows, want, "rows, m={m} k={k}");
            let mut copied = vec![f32::NAN; mp * k];
            weights_from_rows_copy(&w, m, k, &mut copied);
            assert_eq!(copied, want, "rows copied, m={m} k={k}");
            let mut panels = vec![0f32; panels_a_len(m, k)];
            assert!(pack_a_panels(MatRef::row_major(&w, k), m, k, &mut panels));
            let mut from_panels = vec![f32::NAN; mp * k];
            weights_from_panels(&panels, m, k, &mut from_panels);
            assert_eq!(from_panels, want, "panels, m={m} k={k}");
        }
    }
}

/// Strided convolutions over odd sizes, paddings and strides, 16 to 64
/// output channels, rows of exactly one tile and of one tile plus a
/// pixel, padding wide enough to leave few inner columns: equal to the
/// naive convolution, with bias, Swish and a residual fused, on one
/// and three threads (bit for bit), the weight packed per call or at
/// build time.
#[test]
fn strided_convolutions_match_naive() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (c, h, w, m, kh, kw, strides, pads)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        [usize; 2],
        [usize; 4],
    );
    let cases: &[Case] = &[
        (16, 40, 40, 32, 3, 3, [2, 2], [1, 1, 1, 1]),
        (3, 33, 47, 16, 3, 3, [2, 2], [1, 1, 1, 1]),
        (5, 9, 35, 48, 3, 3, [2, 2], [0, 1, 2, 1]),
        (4, 7, 30, 64, 5, 5, [2, 2], [2, 2, 2, 2]),
        (6, 8, 17, 32, 1, 1, [2, 2], [0, 0, 0, 0]),
        (3, 6, 16, 16, 2, 2, [2, 2], [0, 0, 0, 0]),
        (7, 5, 40, 32, 3, 3, [1, 2], [1, 1, 1, 1]),
        (5, 11, 20, 16, 3, 3, [2, 1], [1, 1, 1, 1]),
        (4, 5, 9, 32, 3, 3, [3, 2], [1, 4, 1, 4]),
        (3, 7, 11, 16, 3, 3, [2, 1], [0, 0, 1, 0]),
        // More output channels than the direct path takes: the weight
        // can be stored packed for the GEMM (blocks of 32, 32, 16).
        (6, 13, 37, 80, 3, 3, [2, 2], [1, 1, 1, 1]),
        (5, 9, 34, 144, 1, 1, [2, 2], [0, 0, 0, 0]),
        // Big enough to split its rows over threads.
        (32, 30, 64, 64, 3, 3, [2, 2], [1, 1, 1, 1]),
        // Channel counts short of whole vectors (blocks padded with zero
        // channels, which are not stored): 24 (PP-OCRv6 det's 48→24), 12,
        // 40, and one split over threads.
        (8, 21, 45, 24, 3, 3, [2, 2], [1, 1, 1, 1]),
        (5, 9, 40, 12, 3, 3, [2, 1], [1, 1, 1, 1]),
        (6, 11, 35, 40, 3, 3, [2, 2], [0, 1, 2, 1]),
        (16, 30, 70, 24, 3, 3, [2, 2], [1, 1, 1, 1]),
        // 72 channels stored packed (panels of 8) into blocks of 48 + 32.
        (4, 9, 33, 72, 3, 3, [2, 2], [1, 1, 1, 1]),
    ];
    FORCE.with(|f| f.set(true));
    let same_bits = |a: &[f32], b: &[f32]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    };
    let mut packed_cases = 0;
    let mut one_thread: Vec<Vec<f32>> = Vec::new();
    for threads in [1, 3] {
        crate::threads::set_num_threads(threads);
        for (ci, &(c, h, w, m, kh, kw, strides, pads)) in cases.iter().enumerate() {
            let x = rand_vec(c * h * w, 700 + ci as u64);
            let wt = rand_vec(m * c * kh * kw, 800 + ci as u64);
            let b = rand_vec(m, 900 + ci as u64);
            let mut op = conv(1, strides, pads, [1, 1]);
            let inputs = [
                Some(t(&x, &[1, c, h, w])),
                Some(t(&wt, &[m, c, kh, kw])),
                Some(t(&b, &[m])),
            ];
            let g = op.geom(&inputs).unwrap();
            assert!(eligible(strides, [1, 1], 1, &g), "case {ci}");
            // The path runs wherever the CPU has AVX-512.
            #[cfg(target_arch = "x86_64")]
            {
                use crate::ops::gemm::{Isa, isa_available};
                assert_eq!(
                    op.runs_channel_tiles(&g),
                    isa_available(Isa::Avx512),
                    "case {ci}"
                );
            }
            let want = naive_conv(
                &x,
                [1, c, h, w],
                &wt,
                [m, kh, kw],
                Some(&b),
                1,
                strides,
                [g.pt, g.pl],
                [1, 1],
                [g.oh, g.ow],
            );
            let plain = run(&op, &inputs, 1).unwrap();
            assert_close(&plain[0].1, &want, 1e-5);
            // Fused Swish and residual: the plain result through them.
            op.activation = Activation::Swish;
            let r = rand_vec(want.len(), 1000 + ci as u64);
            let with_residual = [
                inputs[0],
                inputs[1],
                inputs[2],
                Some(t(&r, &[1, m, g.oh, g.ow])),
            ];
            let fused = run(&op, &with_residual, 1).unwrap();
            let mut expect = plain[0].1.clone();
            Activation::Swish.apply_in_place(&mut expect);
            for (e, r) in expect.iter_mut().zip(&r) {
                *e += r;
            }
            assert!(
                same_bits(&fused[0].1, &expect),
                "case {ci}: fused tail, {threads} threads"
            );
            // The weight packed at build time, where it qualifies.
            if super::super::ConvPackedWeights::applies(1, &[m, c, kh, kw]) {
                let packed =
                    super::super::ConvPackedWeights::pack(1, &[m, c, kh, kw], &wt).unwrap();
                let op = super::super::ConvPackedWeights { conv: op };
                let got = run(
                    &op,
                    &[
                        inputs[0],
                        Some(t(&packed, &[m, c, kh, kw])),
                        inputs[2],
                        Some(t(&r, &[1, m, g.oh, g.ow])),
                    ],
                    1,
                )
                .unwrap();
                assert!(
                    same_bits(&got[0].1, &expect),
                    "case {ci}: packed weight, {threads} threads"
                );
                packed_cases += 1;
            }
            if threads == 1 {
                one_thread.push(plain[0].1.clone());
            } else {
                assert!(
                    same_bits(&plain[0].1, &one_thread[ci]),
                    "case {ci}: {threads} threads differ from one"
                );
            }
        }
    }
    FORCE.with(|f| f.set(false));
    crate::threads::set_num_threads(1);
    // The three packed cases, on both thread counts.
    assert_eq!(packed_cases, 6);
}
