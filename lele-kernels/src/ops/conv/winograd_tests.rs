//! [`ConvWinograd`] against the plain [`Conv`] on the same operands.
use alloc::vec::Vec;

use super::{AutoPad, Conv, ConvWinograd};
use crate::ops::test_util::{assert_close, rand_vec, run, t};
use crate::ops::unary::Activation;

/// A 3×3, unit-stride, one-group convolution with these pads and epilogue.
pub(super) fn conv(
    pads: [usize; 4],
    auto_pad: AutoPad,
    activation: Activation,
    post_mul: f32,
) -> Conv {
    Conv {
        group: 1,
        kernel: [3, 3],
        strides: [1, 1],
        pads,
        dilations: [1, 1],
        auto_pad,
        activation,
        post_mul,
        post_add: 0.0,
    }
}

/// Winograd gives the plain convolution's output (within rounding; also
/// with fewer input channels than [`ConvWinograd::applies`] asks) over
/// partial tiles at the right and bottom edges, zero, one, two and uneven
/// pads, `SAME` padding, output channels not a whole panel, tile rows
/// longer than a transform run, several blocks, two images, with and
/// without bias, fused Swish, a scalar multiply and a residual, 4×4 tiles
/// in blocks of one panel; on one
/// thread and split over three (bit for bit the same); with 2×2 and 4×4
/// output tiles. 4×4 tiles round more (their transforms scale by up to 8
/// and 1/24): their error is held to the output's largest magnitude, as
/// Winograd error bounds are stated (norm-wise), at 1e-5 of it; 2×2 tiles
/// element by element at 2e-5 (the direct sum's own rounding differs by
/// about 1e-6 of the largest output here).
#[test]
fn winograd_matches_the_plain_convolution() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (n, c, h, w, m, pads, auto_pad, activation, post_mul, bias, residual)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        [usize; 4],
        AutoPad,
        Activation,
        f32,
        bool,
        bool,
    );
    let none = Activation::None;
    let swish = Activation::Swish;
    let cases: [Case; 8] = [
        (
            1,
            16,
            7,
            9,
            8,
            [1; 4],
            AutoPad::NotSet,
            none,
            1.0,
            true,
            false,
        ),
        (
            1,
            17,
            12,
            70,
            20,
            [1; 4],
            AutoPad::NotSet,
            swish,
            1.0,
            true,
            true,
        ),
        (
            1,
            32,
            5,
            5,
            16,
            [0; 4],
            AutoPad::NotSet,
            none,
            1.0,
            false,
            false,
        ),
        (
            1,
            16,
            9,
            6,
            24,
            [2, 0, 1, 2],
            AutoPad::NotSet,
            none,
            0.5,
            true,
            false,
        ),
        (
            2,
            24,
            11,
            13,
            9,
            [0; 4],
            AutoPad::SameUpper,
            swish,
            1.0,
            true,
            true,
        ),
        (
            1,
            64,
            40,
            40,
            64,
            [1; 4],
            AutoPad::NotSet,
            swish,
            1.0,
            true,
            false,
        ),
        (
            1,
            16,
            3,
            3,
            8,
            [0; 4],
            AutoPad::Valid,
            none,
            1.0,
            true,
            false,
        ),
        // Blocks of one panel of 4×4 tiles (a run's block would not fit
        // a worker's scratch at 128 + 130 channels).
        (
            1,
            128,
            20,
            20,
            130,
            [1; 4],
            AutoPad::NotSet,
            swish,
            1.0,
            true,
            true,
        ),
    ];
    for (i, &(n, c, h, w, m, pads, auto_pad, act, post_mul, with_bias, with_res)) in
        cases.iter().enumerate()
    {
        let op = conv(pads, auto_pad, act, post_mul);
        let dims = [m, c, 3, 3];
        let xv = rand_vec(n * c * h * w, i as u64);
        let wv = rand_vec(m * c * 9, 10 + i as u64);
        let bv = rand_vec(m, 20 + i as u64);
        let x = t(&xv, &[n, c, h, w]);
        let b = with_bias.then(|| t(&bv, &[m]));
        crate::threads::set_num_threads(1);
        let shape = run(&op, &[Some(x), Some(t(&wv, &dims)), b], 1).unwrap()[0]
            .0
            .clone();
        let res = rand_vec(shape.iter().product(), 30 + i as u64);
        let r = with_res.then(|| t(&res, &shape));
        let want = run(&op, &[Some(x), Some(t(&wv, &dims)), b, r], 1).unwrap();
        for tile in [2, 4] {
            let packed = ConvWinograd::pack_for(tile, &dims, &wv).unwrap();
            let pdims = ConvWinograd::packed_dims_for(tile, &dims).unwrap();
            let kernel = ConvWinograd { conv: op, m };
            let ins = [Some(x), Some(t(&packed, &pdims)), b, r];
            crate::threads::set_num_threads(1);
            let got = run(&kernel, &ins, 1).unwrap();
            assert_eq!(got[0].0, want[0].0, "case {i} tile {tile}");
            if tile == 2 {
                assert_close(&got[0].1, &want[0].1, 2e-5);
            } else {
                let scale = want[0].1.iter().fold(1f32, |a, b| a.max(b.abs()));
                let err = got[0].1.iter().zip(&want[0].1);
                let err = err.fold(0f32, |e, (g, w)| e.max((g - w).abs()));
                assert!(
                    err <= 1e-5 * scale,
                    "case {i} tile 4: error {err} of {scale}"
                );
            }
            crate::threads::set_num_threads(3);
            let split = run(&kernel, &ins, 1).unwrap();
            let same = split[0].1.iter().zip(&got[0].1);
            let same: Vec<bool> = same.map(|(a, b)| a.to_bits() == b.to_bits()).collect();
            assert!(
                same.iter().all(|&s| s),
                "case {i} tile {tile} on three threads"
            );
        }
    }
    crate::threads::set_num_threads(1);
}

/// Only one-group 3×3 convolutions of unit strides and dilations with at
/// least 32 input channels qualify (with fewer, the products are too
/// shallow to pay for the transforms); a weight of the wrong size is
/// refused.
#[test]
fn only_dense_unit_stride_3x3_convolutions_qualify() {
    let op = conv([1; 4], AutoPad::NotSet, Activation::None, 1.0);
    assert!(ConvWinograd::applies(&op, &[64, 64, 3, 3]));
    assert!(ConvWinograd::applies(&op, &[8, 32, 3, 3]));
    assert!(!ConvWinograd::applies(&op, &[64, 16, 3, 3]));
    assert!(!ConvWinograd::applies(&op, &[0, 64, 3, 3]));
    // Absurd channel counts from a model file are refused, not overflowed.
    assert!(!ConvWinograd::applies(&op, &[64, usize::MAX / 4, 3, 3]));
    assert!(!ConvWinograd::applies(&op, &[usize::MAX, 64, 3, 3]));
    assert!(ConvWinograd::pack_for(2, &[usize::MAX, 64, 3, 3], &[0.0; 9]).is_none());
    assert!(!ConvWinograd::applies(&op, &[64, 64, 1, 1]));
    assert!(!ConvWinograd::applies(&op, &[64, 64, 3]));
    for changed in [
        Conv { group: 2, ..op },
        Conv {
            strides: [2, 2],
            ..op
        },
        Conv {
            dilations: [1, 2],
            ..op
        },
        Conv {
            kernel: [5, 5],
            ..op
        },
    ] {
        assert!(!ConvWinograd::applies(&changed, &[64, 64, 3, 3]));
    }
    assert!(ConvWinograd::pack_for(2, &[8, 16, 3, 3], &[0.0; 8 * 16 * 9 - 1]).is_none());
}
