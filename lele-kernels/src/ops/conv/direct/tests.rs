use super::super::tests::{conv, naive_conv};
use super::layout::crowds_l1;
use super::*;
use crate::ops::test_util::*;
use crate::ops::unary::Activation;
use alloc::vec;
use alloc::vec::Vec;

/// The direct path (few output channels) and the im2col GEMM path against
/// the naive convolution: output widths around the 16-column tile, channel
/// counts around the 6- and 16-row tiles (each tile the CPU can run),
/// strides, dilations, pads, groups, the
/// in-place 1×1 case across its 256-column segments, staged whole or in
/// bands of 1–3 output rows, with and without a fused activation, on one
/// and three threads.
#[cfg(feature = "std")]
#[test]
fn direct_and_gemm_paths_match_naive_over_tails() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (c, h, w, m, kh, kw, group, strides, pads, dilations)
    type Case = (
        usize,
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
    let cases: &[Case] = &[
        (3, 5, 15, 6, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 4, 16, 7, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (3, 4, 17, 11, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (3, 5, 23, 1, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (4, 6, 24, 5, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (5, 4, 25, 8, 3, 3, 1, [1, 1], [0, 1, 2, 1], [1, 1]),
        (6, 7, 49, 13, 3, 3, 1, [2, 2], [1, 1, 1, 1], [1, 1]),
        (7, 9, 50, 24, 3, 3, 1, [2, 2], [1, 0, 1, 1], [1, 1]),
        (4, 8, 53, 3, 3, 5, 1, [1, 3], [2, 2, 1, 3], [2, 1]),
        (6, 5, 61, 12, 2, 2, 2, [1, 1], [0, 0, 0, 0], [1, 2]),
        (2, 3, 97, 48, 1, 7, 1, [1, 2], [0, 3, 0, 3], [1, 1]),
        // Output channels around the 16-row tile: 15, 17, 31, 33.
        (3, 4, 19, 15, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (3, 4, 18, 17, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 3, 33, 31, 3, 3, 1, [2, 1], [1, 1, 1, 1], [1, 1]),
        (4, 2, 40, 33, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        // 1×1 stride 1 (input read in place): plane sizes around the
        // 256-column segment and the 16-column tile.
        (5, 1, 255, 7, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (5, 1, 257, 7, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (9, 16, 16, 16, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (3, 5, 83, 4, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (8, 17, 31, 34, 1, 1, 2, [1, 1], [0, 0, 0, 0], [1, 1]),
        // Planes of 1024 floats, whose output rows crowd L1's sets (the
        // wide tiles then run row tile by row tile), and a segment tail
        // after whole 32-column steps (300 = 256 + 32 + 12).
        (5, 32, 32, 20, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (7, 16, 64, 9, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        (3, 1, 300, 10, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]),
        // 1×1 strided or padded: staged.
        (6, 9, 40, 10, 1, 1, 1, [2, 2], [0, 0, 0, 0], [1, 1]),
        (4, 6, 30, 6, 1, 1, 1, [1, 1], [1, 1, 0, 2], [1, 1]),
        // Stride 1 with rows narrower than a tile: flat tiles cross two
        // or three output rows (5 wide, 7 staged).
        (3, 6, 5, 7, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 9, 3, 17, 1, 3, 1, [1, 1], [0, 2, 0, 1], [1, 1]),
        // Big enough to split over threads (whole, or band by band), flat
        // (70 of 72 staged columns) and row by row (64 wide).
        (8, 20, 70, 16, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (8, 20, 64, 16, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (12, 33, 45, 9, 3, 3, 1, [2, 2], [1, 1, 1, 1], [1, 1]),
        // Row strides with several taps per row phase (dilation 2 over
        // stride 2), and three row phases (stride 3 under a 5-tall kernel).
        (5, 11, 29, 9, 3, 3, 1, [2, 2], [1, 1, 1, 1], [2, 2]),
        (5, 10, 31, 9, 5, 3, 1, [3, 2], [2, 1, 2, 1], [1, 1]),
        // More taps than one pass of the wide tiles over output rows (256):
        // two and three passes, the later ones adding to what the first
        // stored (32 and 64 wide rows, not flat).
        (37, 6, 64, 11, 3, 3, 1, [2, 2], [1, 1, 1, 1], [1, 1]),
        (60, 4, 64, 9, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
    ];
    // The paths below, not the channel tiles that take some strided cases.
    super::super::channel_tiles::OFF.with(|f| f.set(true));
    let direct_here = crate::ops::gemm::isa_available(crate::ops::gemm::Isa::Avx2);
    // The AVX2 tile (6 rows) everywhere the direct path runs, the AVX-512
    // ones (8 × 32 wide with 8 × 16 after it, and 16 × 16) where the CPU
    // has it.
    let mut tile_kinds = vec![crate::ops::gemm::rows::AVX2_TILE_M];
    if crate::ops::gemm::isa_available(crate::ops::gemm::Isa::Avx512) {
        tile_kinds.push(crate::ops::gemm::rows::WIDE_M);
        tile_kinds.push(crate::ops::gemm::rows::TILE_M);
    }
    for threads in [1, 3] {
        crate::threads::set_num_threads(threads);
        for (ci, &(c, h, w, m, kh, kw, group, strides, pads, dil)) in cases.iter().enumerate() {
            let x = rand_vec(c * h * w, 300 + ci as u64);
            let wt = rand_vec(m * (c / group) * kh * kw, 400 + ci as u64);
            let b = rand_vec(m, 500 + ci as u64);
            let inputs = [
                Some(t(&x, &[1, c, h, w])),
                Some(t(&wt, &[m, c / group, kh, kw])),
                Some(t(&b, &[m])),
            ];
            let mut op = conv(group, strides, pads, dil);
            let g = op.geom(&inputs).unwrap();
            let want = naive_conv(
                &x,
                [1, c, h, w],
                &wt,
                [m, kh, kw],
                Some(&b),
                group,
                strides,
                [g.pt, g.pl],
                dil,
                [g.oh, g.ow],
            );
            FORCE.with(|f| f.set(Some(false)));
            assert!(!op.runs_direct(&g));
            let gemm = run(&op, &inputs, 1).unwrap();
            assert_close(&gemm[0].1, &want, 1e-5);
            FORCE.with(|f| f.set(Some(true)));
            assert_eq!(op.runs_direct(&g), direct_here, "case {ci}");
            for &tm in &tile_kinds {
                TILE_ROWS.with(|f| f.set(Some(tm)));
                op.activation = Activation::None;
                let direct = run(&op, &inputs, 1).unwrap();
                assert_close(&direct[0].1, &want, 1e-5);
                // Read in place, the segment's tiles row tile by row tile
                // or column step by column step: the same sums, the same
                // bits.
                for order in [true, false] {
                    ROW_MAJOR.with(|f| f.set(Some(order)));
                    let ordered = run(&op, &inputs, 1).unwrap();
                    ROW_MAJOR.with(|f| f.set(None));
                    assert!(
                        same_bits(&ordered[0].1, &direct[0].1),
                        "case {ci}: row-major {order}, {threads} threads, {tm}-row tiles"
                    );
                }
                // Staged in bands of a few output rows (each band's input
                // rows staged on its own): the same arithmetic, the same
                // bits.
                for band in [1, 2, 3] {
                    BAND_ROWS.with(|f| f.set(Some(band)));
                    let banded = run(&op, &inputs, 1).unwrap();
                    BAND_ROWS.with(|f| f.set(None));
                    assert!(
                        same_bits(&banded[0].1, &direct[0].1),
                        "case {ci}: bands of {band} rows, {threads} threads, {tm}-row tiles"
                    );
                }
                // The fused activation, on the direct path, equals the
                // plain result passed through it.
                op.activation = Activation::Swish;
                let fused = run(&op, &inputs, 1).unwrap();
                let mut swished = direct[0].1.clone();
                Activation::Swish.apply_in_place(&mut swished);
                assert!(
                    same_bits(&fused[0].1, &swished),
                    "case {ci}: fused swish, {threads} threads, {tm}-row tiles"
                );
                // ReLU, clamped by the tiles as they store (in every
                // pass-count and tail of the cases), the same.
                op.activation = Activation::Relu;
                let fused = run(&op, &inputs, 1).unwrap();
                let mut clamped = direct[0].1.clone();
                clamped
                    .iter_mut()
                    .for_each(|v| *v = if *v < 0.0 { 0.0 } else { *v });
                assert!(
                    same_bits(&fused[0].1, &clamped),
                    "case {ci}: fused relu, {threads} threads, {tm}-row tiles"
                );
            }
            TILE_ROWS.with(|f| f.set(None));
            FORCE.with(|f| f.set(None));
        }
    }
    super::super::channel_tiles::OFF.with(|f| f.set(false));
    crate::threads::set_num_threads(1);
}

/// Whether two outputs hold the same floats bit for bit (and as many).
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Which output-row strides crowd L1's sets (the order of an in-place
/// segment's tiles): a plane of 1024 floats puts every row's two lines
/// into sets 0 and 1 (crowded from nine rows); 160×161 floats move each
/// row ten lines on (64 rows, two lines in each set); 80² floats cycle
/// through four pairs of sets (8 rows each at 32 rows, crowded at 64); a
/// stride whose row offsets pass 4 GiB still counts modulo 4 KiB.
#[test]
fn output_rows_crowding_l1_sets() {
    assert!(crowds_l1(1024, 9));
    assert!(!crowds_l1(1024, 8));
    assert!(!crowds_l1(160 * 161, 64));
    assert!(!crowds_l1(80 * 80, 32));
    assert!(crowds_l1(80 * 80, 64));
    assert!(crowds_l1((1 << 30) + 1024, 16));
}

/// The direct path with a staged input large enough to run in parallel
/// (input channels staged a run per thread, then the segments): PP-OCRv6
/// rec's 2×2 stem layers padded at the end, a strided 3×3 one and an odd
/// channel count that leaves the last thread fewer channels. Every thread
/// count gives the one-thread bits, and those match the naive convolution.
#[cfg(feature = "std")]
#[test]
fn direct_staged_over_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (c, h, w, m, k, stride, pads [top, left, bottom, right])
    let shapes = [
        (48, 24, 160, 24, 2, 1, [0, 0, 1, 1]),
        (24, 24, 160, 48, 2, 1, [0, 0, 1, 1]),
        (7, 33, 70, 40, 3, 2, [1, 1, 1, 1]),
    ];
    for (si, &(c, h, w, m, k, s, pads)) in shapes.iter().enumerate() {
        let x = rand_vec(c * h * w, 900 + si as u64);
        let wt = rand_vec(m * c * k * k, 910 + si as u64);
        let b = rand_vec(m, 920 + si as u64);
        let op = conv(1, [s, s], pads, [1, 1]);
        let inputs = [
            Some(t(&x, &[1, c, h, w])),
            Some(t(&wt, &[m, c, k, k])),
            Some(t(&b, &[m])),
        ];
        FORCE.with(|f| f.set(Some(true)));
        let mut outs = Vec::new();
        for threads in [1, 2, 3] {
            crate::threads::set_num_threads(threads);
            outs.push(run(&op, &inputs, 1).unwrap());
        }
        crate::threads::set_num_threads(1);
        FORCE.with(|f| f.set(None));
        let (oh, ow) = (
            (h + pads[0] + pads[2] - k) / s + 1,
            (w + pads[1] + pads[3] - k) / s + 1,
        );
        assert_eq!(outs[0][0].0, vec![1, m, oh, ow]);
        for (i, o) in outs.iter().enumerate().skip(1) {
            assert!(o[0].1 == outs[0][0].1, "shape {si}: {} threads", i + 1);
        }
        let want = naive_conv(
            &x,
            [1, c, h, w],
            &wt,
            [m, k, k],
            Some(&b),
            1,
            [s, s],
            [pads[0], pads[1]],
            [1, 1],
            [oh, ow],
        );
        assert_close(&outs[0][0].1, &want, 1e-4);
    }
}
