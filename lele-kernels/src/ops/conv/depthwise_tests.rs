//! Tests of the depthwise kernels: the plane-at-a-time paths (staged
//! rows, the row loop, the row kernels) and the blocked one (a vector of
//! channels at a time).
use super::tests::{conv, naive_conv};
use super::*;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

/// The staged depthwise path and the row loop against the naive
/// convolution, plane by plane: kernel sizes up to 7×7, strides 1–3,
/// dilations, asymmetric pads, output widths around the 8- and 32-column
/// register blocks.
#[test]
fn depthwise_staged_and_row_loop_match_naive() {
    // (h, w, kh, kw, strides, pads, dilations)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        [usize; 2],
        [usize; 4],
        [usize; 2],
    );
    let cases: &[Case] = &[
        (5, 7, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (6, 8, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (4, 33, 5, 5, [1, 1], [2, 2, 2, 2], [1, 1]),
        (9, 32, 7, 7, [1, 1], [3, 3, 3, 3], [1, 1]),
        (7, 41, 3, 3, [2, 2], [1, 1, 1, 1], [1, 1]),
        (8, 66, 5, 5, [2, 2], [2, 2, 2, 2], [1, 1]),
        (6, 50, 3, 5, [1, 3], [0, 2, 1, 0], [2, 1]),
        (5, 70, 3, 3, [1, 1], [2, 0, 0, 3], [1, 2]),
        (3, 9, 2, 2, [1, 1], [0, 0, 0, 0], [1, 1]),
    ];
    let staged_here = crate::simd::best_isa() != crate::simd::Isa::Scalar;
    for (ci, &(h, w, kh, kw, strides, pads, dil)) in cases.iter().enumerate() {
        let c = 3;
        let x = rand_vec(c * h * w, 600 + ci as u64);
        let wt = rand_vec(c * kh * kw, 700 + ci as u64);
        let b = rand_vec(c, 800 + ci as u64);
        let op = conv(c, strides, pads, dil);
        let inputs = [
            Some(t(&x, &[1, c, h, w])),
            Some(t(&wt, &[c, 1, kh, kw])),
            Some(t(&b, &[c])),
        ];
        let g = op.geom(&inputs).unwrap();
        let want = naive_conv(
            &x,
            [1, c, h, w],
            &wt,
            [c, kh, kw],
            Some(&b),
            c,
            strides,
            [g.pt, g.pl],
            dil,
            [g.oh, g.ow],
        );
        let ohw = g.oh * g.ow;
        let mut buf = vec![0f32; depthwise::staged_len(&op, &g).unwrap()];
        let plan = depthwise::staged_plan(&op, &g);
        for ch in 0..c {
            let xp = &x[ch * h * w..(ch + 1) * h * w];
            let wk = &wt[ch * kh * kw..(ch + 1) * kh * kw];
            let mut staged = vec![b[ch]; ohw];
            let ran = plan.as_ref().is_some_and(|p| {
                depthwise::plane_staged(p, &op, &g, xp, wk, &mut staged, &mut buf)
            });
            assert_eq!(ran, staged_here, "case {ci}");
            let mut rows = vec![b[ch]; ohw];
            depthwise_plane(&op, &g, xp, wk, &mut rows);
            let want = &want[ch * ohw..(ch + 1) * ohw];
            assert_close(&rows, want, 1e-5);
            if ran {
                assert_close(&staged, want, 1e-5);
            }
        }
    }
}

/// The blocked kernel through `Conv::run` against the naive convolution,
/// on every vector ISA this CPU runs (AVX-512's sixteen lanes and AVX2's
/// eight, forced, on an AVX-512 CPU; NEON's or simd128's four): channel
/// counts around 4, 8 and 16 (the zero lanes of a last partial block),
/// output widths around the groups, kernels from 1×1 to 7×7 and 1×7,
/// strides 1–3, dilations, asymmetric pads, batches, with and without
/// bias, and on two threads (blocks split by rows when there are few),
/// with an activation and a residual added in the row tail.
#[cfg(feature = "std")]
#[test]
fn depthwise_blocked_matches_naive() {
    use crate::simd::{Isa, runnable_isas};
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let isas: Vec<Isa> = runnable_isas()
        .into_iter()
        .filter(|&isa| isa != Isa::Scalar)
        .collect();
    assert!(
        !isas.is_empty() || cfg!(all(target_arch = "wasm32", not(target_feature = "simd128"))),
        "no vector ISA runs the blocked depthwise kernel here"
    );
    // Shapes the row-band kernel would take run blocked too.
    depthwise_rows::OFF.with(|f| f.set(true));
    for isa in isas {
        depthwise_interleaved::FORCE_ISA.with(|f| f.set(Some(isa)));
        blocked_cases(isa);
    }
    depthwise_interleaved::FORCE_ISA.with(|f| f.set(None));
    depthwise_rows::OFF.with(|f| f.set(false));
}

/// [`depthwise_blocked_matches_naive`] with `isa`'s kernel.
#[cfg(feature = "std")]
fn blocked_cases(isa: crate::simd::Isa) {
    let cases: &[DepthwiseCase] = &[
        (1, 16, 15, 15, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (1, 17, 16, 16, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 15, 9, 17, 3, 3, [2, 2], [1, 1, 1, 1], [1, 1]),
        (1, 1, 5, 33, 5, 5, [1, 1], [2, 2, 2, 2], [1, 1]),
        (1, 40, 12, 31, 7, 7, [1, 1], [3, 3, 3, 3], [1, 1]),
        (1, 33, 6, 47, 3, 5, [1, 3], [0, 2, 1, 0], [2, 1]),
        (1, 24, 7, 20, 3, 3, [1, 1], [2, 0, 0, 3], [1, 2]),
        (1, 20, 1, 40, 1, 7, [1, 1], [0, 3, 0, 3], [1, 1]),
        (2, 18, 3, 9, 2, 2, [1, 1], [0, 0, 0, 0], [1, 1]),
        (1, 16, 1, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (1, 9, 5, 8, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (1, 7, 6, 23, 5, 5, [2, 2], [2, 2, 2, 2], [1, 1]),
        (1, 32, 10, 10, 3, 3, [3, 3], [0, 0, 2, 2], [1, 1]),
        // Padding rows skipped: PP-OCRv4 rec's 5×5 over 3-row planes (two
        // of five kernel rows outside in every output row), and padding
        // so deep that some output rows read no input row (bias only).
        (1, 24, 3, 80, 5, 5, [1, 1], [2, 2, 2, 2], [1, 1]),
        (1, 8, 1, 12, 3, 3, [1, 1], [3, 1, 3, 1], [1, 1]),
        // Enough work to split over threads: one block, split by rows.
        (1, 16, 70, 66, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        // Enough work and blocks to split over threads by whole blocks,
        // unevenly (5 or 10 blocks: a contiguous range per thread).
        (1, 80, 20, 20, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
    ];
    for threads in [1, 2] {
        crate::threads::set_num_threads(threads);
        for (ci, &case) in cases.iter().enumerate() {
            check_against_naive(case, 900 + ci as u64, &|op, g| {
                assert!(
                    depthwise_interleaved::Ring::new(op, g).is_some(),
                    "case {ci} does not take the blocked kernel ({isa:?})"
                );
            });
        }
    }
    crate::threads::set_num_threads(1);
}

/// The row-band kernel (stride-1 3×3, 5×5, 7×7; 3×3 and 5×5 at strides
/// 2×2, 2×1 and 1×2) against the naive convolution through `Conv::run`:
/// every kernel, output heights that leave 0–3 rows in the last band,
/// widths that leave every kind of last step (and odd input widths at
/// stride 2), symmetric, asymmetric, zero and deeper-than-the-kernel
/// padding, batches, with and without bias, a ReLU and a residual in the
/// band tail, on one and two threads, on every vector backend this CPU
/// runs (forced on the four-lane ones, where it is not chosen). Each case
/// is checked to take the kernel.
#[cfg(feature = "std")]
#[test]
fn depthwise_rows_match_naive() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let isas: Vec<_> = crate::simd::runnable_isas()
        .into_iter()
        .filter(|&isa| crate::simd::vector_lanes(isa).is_some())
        .collect();
    assert!(
        !isas.is_empty() || cfg!(all(target_arch = "wasm32", not(target_feature = "simd128"))),
        "a vector backend runs here"
    );
    for isa in isas {
        depthwise_rows::FORCE_ISA.with(|f| f.set(Some(isa)));
        rows_cases(isa);
    }
    depthwise_rows::FORCE_ISA.with(|f| f.set(None));
}

/// [`depthwise_rows_match_naive`] with the `isa` kernels.
#[cfg(feature = "std")]
fn rows_cases(isa: crate::simd::Isa) {
    // (n, c, h, w, k, strides, pads)
    type Case = (usize, usize, usize, usize, usize, [usize; 2], [usize; 4]);
    let cases: &[Case] = &[
        (1, 3, 8, 24, 3, [1, 1], [1, 1, 1, 1]),
        (2, 5, 13, 45, 3, [1, 1], [1, 1, 1, 1]),
        (1, 2, 12, 64, 3, [1, 1], [1, 1, 1, 1]),
        (1, 2, 10, 33, 3, [1, 1], [0, 2, 1, 0]),
        (1, 2, 9, 30, 3, [1, 1], [3, 3, 3, 3]),
        (1, 4, 11, 70, 5, [1, 1], [2, 2, 2, 2]),
        (1, 2, 14, 40, 5, [1, 1], [0, 0, 0, 0]),
        (1, 3, 10, 33, 7, [1, 1], [3, 3, 3, 3]),
        (1, 2, 15, 97, 7, [1, 1], [3, 1, 2, 3]),
        (1, 3, 17, 49, 3, [2, 2], [1, 1, 1, 1]),
        (2, 2, 20, 70, 3, [2, 2], [1, 1, 1, 1]),
        (1, 2, 19, 67, 3, [2, 2], [0, 1, 1, 0]),
        (1, 3, 21, 80, 5, [2, 2], [2, 2, 2, 2]),
        (1, 2, 25, 131, 5, [2, 2], [2, 2, 2, 2]),
        (1, 2, 18, 60, 3, [2, 2], [3, 3, 3, 3]),
        // Three to seven output rows: a band of four partly past the
        // plane (PP-OCRv6 rec's 3×80 and 6×80 planes among them).
        (1, 3, 3, 80, 3, [1, 1], [1, 1, 1, 1]),
        (1, 4, 6, 80, 3, [1, 1], [1, 1, 1, 1]),
        (1, 2, 5, 40, 5, [1, 1], [2, 2, 2, 2]),
        (1, 2, 7, 33, 7, [1, 1], [3, 3, 3, 3]),
        (1, 3, 9, 50, 3, [2, 2], [1, 1, 1, 1]),
        // Enough work to split over threads.
        (1, 16, 40, 50, 3, [1, 1], [1, 1, 1, 1]),
        (1, 64, 6, 80, 3, [1, 1], [1, 1, 1, 1]),
        (1, 32, 64, 64, 3, [2, 2], [1, 1, 1, 1]),
        // Strides 2×1: PP-OCR cls's 3×3 over 12×96 and 5×5 over 6×96
        // among them, pads on some sides, odd widths.
        (1, 3, 12, 96, 3, [2, 1], [1, 1, 1, 1]),
        (2, 2, 24, 45, 3, [2, 1], [1, 1, 1, 1]),
        (1, 2, 11, 33, 3, [2, 1], [0, 2, 1, 0]),
        (1, 2, 13, 70, 5, [2, 1], [2, 2, 2, 2]),
        (1, 3, 6, 96, 5, [2, 1], [2, 2, 2, 2]),
        (1, 2, 15, 40, 5, [2, 1], [0, 0, 0, 0]),
        // Strides 1×2: PP-OCRv4 rec's 3×3 among them.
        (1, 3, 6, 160, 3, [1, 2], [1, 1, 1, 1]),
        (2, 2, 9, 67, 3, [1, 2], [0, 1, 1, 0]),
        (1, 2, 7, 81, 5, [1, 2], [2, 2, 2, 2]),
    ];
    for threads in [1, 2] {
        crate::threads::set_num_threads(threads);
        for (ci, &(n, c, h, w, k, strides, pads)) in cases.iter().enumerate() {
            let case = (n, c, h, w, k, k, strides, pads, [1, 1]);
            check_against_naive(case, 1000 + ci as u64, &|op, g| {
                assert!(
                    depthwise_rows::plan(op, g).is_some(),
                    "case {ci}: the {isa:?} row-band kernel takes it"
                );
            });
        }
    }
    crate::threads::set_num_threads(1);
}

/// A depthwise case: `(n, c, h, w, kh, kw, strides, pads, dilations)`.
#[cfg(feature = "std")]
type DepthwiseCase = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    [usize; 2],
    [usize; 4],
    [usize; 2],
);

/// One depthwise case through `Conv::run` against the naive convolution
/// (inputs drawn from `seed`, `seed + 10`, …): with bias, without, and
/// with a ReLU and a residual in the tail; `check_path` asserts first
/// which kernel the case takes.
#[cfg(feature = "std")]
fn check_against_naive(
    (n, c, h, w, kh, kw, strides, pads, dil): DepthwiseCase,
    seed: u64,
    check_path: &dyn Fn(&Conv, &ConvGeom),
) {
    let x = rand_vec(n * c * h * w, seed);
    let wt = rand_vec(c * kh * kw, seed + 10);
    let b = rand_vec(c, seed + 20);
    let mut op = conv(c, strides, pads, dil);
    let mut inputs = vec![
        Some(t(&x, &[n, c, h, w])),
        Some(t(&wt, &[c, 1, kh, kw])),
        Some(t(&b, &[c])),
    ];
    let g = op.geom(&inputs).unwrap();
    check_path(&op, &g);
    let naive = |bias: Option<&[f32]>| {
        naive_conv(
            &x,
            [n, c, h, w],
            &wt,
            [c, kh, kw],
            bias,
            c,
            strides,
            [g.pt, g.pl],
            dil,
            [g.oh, g.ow],
        )
    };
    let want = naive(Some(&b));
    let got = run(&op, &inputs, 1).unwrap();
    assert_eq!(got[0].0, vec![n, c, g.oh, g.ow], "seed {seed}");
    assert_close(&got[0].1, &want, 1e-5);
    // Without bias.
    inputs[2] = None;
    let got = run(&op, &inputs, 1).unwrap();
    assert_close(&got[0].1, &naive(None), 1e-5);
    // ReLU, then a residual, in the tail.
    inputs[2] = Some(t(&b, &[c]));
    let r = rand_vec(want.len(), seed + 30);
    inputs.push(Some(t(&r, &[n, c, g.oh, g.ow])));
    op.activation = Activation::Relu;
    let got = run(&op, &inputs, 1).unwrap();
    let want: Vec<f32> = want.iter().zip(&r).map(|(v, r)| v.max(0.0) + r).collect();
    assert_close(&got[0].1, &want, 1e-5);
}
