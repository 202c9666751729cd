use super::transpose_tests::naive_convt;
use super::*;
use crate::ops::gemm::testutil::*;
use alloc::vec;
use alloc::vec::Vec;

/// Direct 2-D convolution (1-D inputs as H = 1).
#[allow(clippy::too_many_arguments)]
pub(super) fn naive_conv(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    wt: &[f32],
    [m, kh, kw]: [usize; 3],
    b: Option<&[f32]>,
    group: usize,
    [sh, sw]: [usize; 2],
    [pt, pl]: [usize; 2],
    [dh, dw]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<f32> {
    let (cg, mg) = (c / group, m / group);
    let mut y = vec![0f32; n * m * oh * ow];
    for ni in 0..n {
        for mi in 0..m {
            let gi = mi / mg;
            for yh in 0..oh {
                for yw in 0..ow {
                    let mut s = b.map_or(0.0, |b| b[mi]) as f64;
                    for ci in 0..cg {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let hh = (yh * sh + ki * dh) as isize - pt as isize;
                                let ww = (yw * sw + kj * dw) as isize - pl as isize;
                                if hh < 0 || ww < 0 || hh >= h as isize || ww >= w as isize {
                                    continue;
                                }
                                let xv = x
                                    [((ni * c + gi * cg + ci) * h + hh as usize) * w + ww as usize];
                                let wv = wt[((mi * cg + ci) * kh + ki) * kw + kj];
                                s += (xv * wv) as f64;
                            }
                        }
                    }
                    y[((ni * m + mi) * oh + yh) * ow + yw] = s as f32;
                }
            }
        }
    }
    y
}

pub(super) fn conv(
    group: usize,
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
) -> Conv {
    Conv {
        group,
        kernel: [0, 0],
        strides,
        pads,
        dilations,
        auto_pad: AutoPad::NotSet,
        activation: Activation::None,
        post_mul: 1.0,
        post_add: 0.0,
    }
}

#[test]
fn conv_paths_match_naive() {
    // (n, c, h, w, m, kh, kw, group, strides, pads, dilations)
    type Case = (
        usize,
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
        (1, 3, 7, 9, 5, 3, 3, 1, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 4, 8, 5, 6, 3, 2, 2, [2, 1], [0, 1, 2, 0], [1, 2]),
        (1, 5, 6, 6, 7, 1, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1]), // pointwise
        (2, 6, 5, 7, 4, 1, 1, 2, [1, 1], [0, 0, 0, 0], [1, 1]), // grouped pointwise
        (1, 3, 6, 6, 2, 1, 1, 1, [2, 2], [0, 0, 0, 0], [1, 1]), // strided 1x1
        (1, 6, 9, 11, 6, 3, 3, 6, [1, 1], [1, 1, 1, 1], [1, 1]), // depthwise
        (2, 4, 9, 8, 4, 5, 3, 4, [2, 3], [2, 1, 1, 2], [1, 2]), // depthwise strided
        // Depthwise with column stride 2 (even/odd split), odd and even widths.
        (1, 3, 7, 11, 3, 3, 3, 3, [2, 2], [1, 1, 1, 1], [1, 1]),
        (2, 2, 6, 10, 2, 3, 3, 2, [2, 2], [0, 2, 1, 1], [1, 2]),
        (1, 2, 5, 9, 2, 5, 5, 2, [1, 2], [2, 3, 2, 0], [1, 1]),
        (1, 4, 9, 8, 8, 3, 3, 4, [1, 1], [1, 1, 1, 1], [1, 1]), // multiplier 2
        (1, 3, 5, 5, 2, 5, 5, 1, [1, 1], [0, 0, 0, 0], [1, 1]), // 1x1 output
        // Pads wider than the kernel reaches: whole patch rows fall outside.
        (1, 2, 3, 4, 3, 1, 1, 1, [1, 1], [0, 2, 0, 2], [1, 1]),
        (1, 2, 3, 3, 2, 2, 1, 1, [1, 1], [2, 3, 2, 3], [1, 1]),
        (1, 2, 4, 5, 3, 3, 2, 1, [2, 3], [3, 4, 1, 5], [1, 2]),
        // A few output positions (the GEMM's dot products, the bias added
        // once per block after them): 1-D over 4 and 3 frames, batches
        // and groups.
        (2, 6, 1, 4, 12, 1, 3, 2, [1, 1], [0, 1, 0, 1], [1, 1]),
        (1, 5, 1, 5, 7, 1, 3, 1, [1, 2], [0, 1, 0, 1], [1, 1]),
    ];
    for (ci, &(n, c, h, w, m, kh, kw, group, strides, pads, dil)) in cases.iter().enumerate() {
        let x = rand_vec(n * c * h * w, ci as u64);
        let wt = rand_vec(m * (c / group) * kh * kw, 100 + ci as u64);
        let b = rand_vec(m, 200 + ci as u64);
        let op = conv(group, strides, pads, dil);
        let out = run(
            &op,
            &[
                Some(t(&x, &[n, c, h, w])),
                Some(t(&wt, &[m, c / group, kh, kw])),
                Some(t(&b, &[m])),
            ],
            1,
        )
        .unwrap();
        let oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) / strides[0] + 1;
        let ow = (w + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) / strides[1] + 1;
        assert_eq!(out[0].0, vec![n, m, oh, ow], "case {ci}");
        let want = naive_conv(
            &x,
            [n, c, h, w],
            &wt,
            [m, kh, kw],
            Some(&b),
            group,
            strides,
            [pads[0], pads[1]],
            dil,
            [oh, ow],
        );
        assert_close(&out[0].1, &want, 1e-5);
        // Without bias.
        let out = run(
            &op,
            &[
                Some(t(&x, &[n, c, h, w])),
                Some(t(&wt, &[m, c / group, kh, kw])),
                None,
            ],
            1,
        )
        .unwrap();
        let want = naive_conv(
            &x,
            [n, c, h, w],
            &wt,
            [m, kh, kw],
            None,
            group,
            strides,
            [pads[0], pads[1]],
            dil,
            [oh, ow],
        );
        assert_close(&out[0].1, &want, 1e-5);
    }
}

#[test]
fn im2col_and_col2im_chunking() {
    // k = 64 * 9 = 576 rows -> chunks of 1820 columns over 48 * 48 outputs.
    let (c, h, w, m) = (64, 48, 48, 3);
    let x = rand_vec(c * h * w, 11);
    let wt = rand_vec(m * c * 9, 12);
    let op = conv(1, [1, 1], [1, 1, 1, 1], [1, 1]);
    let out = run(
        &op,
        &[
            Some(t(&x, &[1, c, h, w])),
            Some(t(&wt, &[m, c, 3, 3])),
            None,
        ],
        1,
    )
    .unwrap();
    let want = naive_conv(
        &x,
        [1, c, h, w],
        &wt,
        [m, 3, 3],
        None,
        1,
        [1, 1],
        [1, 1],
        [1, 1],
        [h, w],
    );
    assert_close(&out[0].1, &want, 1e-4);
    // ConvTranspose: 64 rows -> chunks of 16384 input pixels over 130 * 130.
    let (c, h, w, mg) = (2, 130, 130, 4);
    let x = rand_vec(c * h * w, 13);
    let wt = rand_vec(c * mg * 16, 14);
    let op = ConvTranspose {
        group: 1,
        kernel: [4, 4],
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        dilations: [1, 1],
        output_padding: [0, 0],
        output_shape: None,
        auto_pad: AutoPad::NotSet,
        activation: Activation::None,
    };
    let out = run(
        &op,
        &[
            Some(t(&x, &[1, c, h, w])),
            Some(t(&wt, &[c, mg, 4, 4])),
            None,
        ],
        1,
    )
    .unwrap();
    let (oh, ow) = (2 * h, 2 * w);
    assert_eq!(out[0].0, vec![1, mg, oh, ow]);
    let want = naive_convt(
        &x,
        [1, c, h, w],
        &wt,
        [mg, 4, 4],
        1,
        [2, 2],
        [1, 1],
        [1, 1],
        [oh, ow],
    );
    assert_close(&out[0].1, &want, 1e-5);
    // The col2im of these chunks splits its channels over the threads:
    // the same bits on three threads.
    #[cfg(feature = "std")]
    {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        crate::threads::set_num_threads(3);
        let three = run(
            &op,
            &[
                Some(t(&x, &[1, c, h, w])),
                Some(t(&wt, &[c, mg, 4, 4])),
                None,
            ],
            1,
        );
        crate::threads::set_num_threads(1);
        assert_eq!(three.unwrap()[0].1, out[0].1);
    }
}

#[test]
fn conv_1d_and_auto_pad() {
    let x = rand_vec(2 * 3 * 10, 1);
    let wt = rand_vec(4 * 3 * 3, 2);
    let op = Conv {
        group: 1,
        kernel: [1, 3],
        strides: [1, 2],
        pads: [0, 1, 0, 1],
        dilations: [1, 1],
        auto_pad: AutoPad::NotSet,
        activation: Activation::None,
        post_mul: 1.0,
        post_add: 0.0,
    };
    let out = run(
        &op,
        &[Some(t(&x, &[2, 3, 10])), Some(t(&wt, &[4, 3, 3])), None],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![2, 4, 5]);
    let want = naive_conv(
        &x,
        [2, 3, 1, 10],
        &wt,
        [4, 1, 3],
        None,
        1,
        [1, 2],
        [0, 1],
        [1, 1],
        [1, 5],
    );
    assert_close(&out[0].1, &want, 1e-5);
    // SAME_UPPER on 7x7 with stride 2, kernel 4: out 4, total pad 3 -> begin 1.
    let x = rand_vec(7 * 7, 3);
    let wt = rand_vec(16, 4);
    for (ap, begin) in [(AutoPad::SameUpper, 1), (AutoPad::SameLower, 2)] {
        let op = Conv {
            auto_pad: ap,
            ..conv(1, [2, 2], [0; 4], [1, 1])
        };
        let out = run(
            &op,
            &[
                Some(t(&x, &[1, 1, 7, 7])),
                Some(t(&wt, &[1, 1, 4, 4])),
                None,
            ],
            1,
        )
        .unwrap();
        assert_eq!(out[0].0, vec![1, 1, 4, 4]);
        let want = naive_conv(
            &x,
            [1, 1, 7, 7],
            &wt,
            [1, 4, 4],
            None,
            1,
            [2, 2],
            [begin, begin],
            [1, 1],
            [4, 4],
        );
        assert_close(&out[0].1, &want, 1e-5);
    }
    let op = Conv {
        auto_pad: AutoPad::Valid,
        ..conv(1, [2, 2], [5; 4], [1, 1])
    };
    let out = run(
        &op,
        &[
            Some(t(&x, &[1, 1, 7, 7])),
            Some(t(&wt, &[1, 1, 4, 4])),
            None,
        ],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 1, 2, 2]);
    // Errors, not panics.
    assert!(
        run(
            &conv(2, [1, 1], [0; 4], [1, 1]),
            &[
                Some(t(&x, &[1, 1, 7, 7])),
                Some(t(&wt, &[1, 1, 4, 4])),
                None
            ],
            1
        )
        .is_err()
    );
    assert!(
        run(
            &conv(1, [0, 1], [0; 4], [1, 1]),
            &[
                Some(t(&x, &[1, 1, 7, 7])),
                Some(t(&wt, &[1, 1, 4, 4])),
                None
            ],
            1
        )
        .is_err()
    );
    assert!(
        run(
            &conv(1, [1, 1], [0; 4], [1, 1]),
            &[
                Some(t(&x, &[1, 1, 7, 7])),
                Some(t(&wt, &[1, 1, 4, 4, 1])),
                None
            ],
            1
        )
        .is_err()
    );
}

#[test]
fn conv_onnx_reference_literal() {
    // import numpy as np, onnx
    // from onnx.reference.ops.op_conv import Conv  (via ReferenceEvaluator)
    // x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    // w = np.ones((1, 1, 3, 3), dtype=np.float32)
    // node = onnx.helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    // -> [12, 27, 24, 63, 108, 81, 72, 117, 84]  (onnx/backend test "test_conv_with_strides_padding")
    let x: Vec<f32> = (0..25).map(|v| v as f32).collect();
    let w = [1f32; 9];
    let op = conv(1, [2, 2], [1, 1, 1, 1], [1, 1]);
    let out = run(
        &op,
        &[Some(t(&x, &[1, 1, 5, 5])), Some(t(&w, &[1, 1, 3, 3])), None],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 1, 3, 3]);
    assert_close(
        &out[0].1,
        &[12., 27., 24., 63., 108., 81., 72., 117., 84.],
        1e-6,
    );
}

/// A fused activation gives exactly the conv's output put through the
/// standalone activation kernel, on every conv path, and on 1 or 3
/// threads, NaNs included (an input NaN reaches the outputs over it).
#[test]
fn fused_activation_equals_conv_then_activation() {
    use crate::ops::unary::{GeluErf, Swish, Unary, UnaryOp};
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (c, h, w, m, k, group, stride): im2col (big enough to go parallel),
    // pointwise, depthwise.
    let shapes = [
        (8, 40, 37, 16, 3, 1, 1),
        (16, 30, 30, 24, 1, 1, 1),
        (6, 11, 9, 6, 3, 6, 2),
        // Depthwise, big enough to split its planes over threads.
        (32, 41, 40, 32, 3, 32, 1),
        // Over 128 output channels: the GEMM (bias added in its epilogue),
        // split over threads, pointwise and im2col.
        (64, 24, 24, 144, 1, 1, 1),
        (16, 20, 20, 144, 3, 1, 1),
        // A few output positions: the tail once per block after the
        // GEMM's dot products (one group, then two at stride 2).
        (12, 1, 4, 20, 3, 1, 1),
        (10, 3, 3, 40, 3, 2, 2),
    ];
    let mut single_thread: Vec<Vec<f32>> = Vec::new();
    let acts: [(Activation, &dyn Kernel); 6] = [
        (Activation::Relu, &Unary { op: UnaryOp::Relu }),
        (
            Activation::Sigmoid,
            &Unary {
                op: UnaryOp::Sigmoid,
            },
        ),
        (Activation::Swish, &Swish { alpha: 1.0 }),
        (
            Activation::HardSwish,
            &Unary {
                op: UnaryOp::HardSwish,
            },
        ),
        // The fused erf subgraph and ONNX `Gelu` share the f32 arithmetic.
        (Activation::Gelu, &GeluErf {}),
        (Activation::Gelu, &Unary { op: UnaryOp::Gelu }),
    ];
    for threads in [1, 3] {
        crate::threads::set_num_threads(threads);
        for (si, &(c, h, w, m, k, group, s)) in shapes.iter().enumerate() {
            let mut x = rand_vec(c * h * w, si as u64);
            x[w + 2] = f32::NAN;
            let wt = rand_vec(m * (c / group) * k * k, 10 + si as u64);
            let b = rand_vec(m, 20 + si as u64);
            let inputs = [
                Some(t(&x, &[1, c, h, w])),
                Some(t(&wt, &[m, c / group, k, k])),
                Some(t(&b, &[m])),
            ];
            let mut op = conv(group, [s, s], [k / 2; 4], [1, 1]);
            let plain = run(&op, &inputs, 1).unwrap();
            // Any thread count computes every element the same way.
            if threads == 1 {
                single_thread.push(plain[0].1.clone());
            } else {
                assert!(
                    plain[0]
                        .1
                        .iter()
                        .zip(&single_thread[si])
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "shape {si}: {threads} threads differ from 1"
                );
            }
            for (act, kernel) in acts {
                op.activation = act;
                let fused = run(&op, &inputs, 1).unwrap();
                let (dims, vals) = &plain[0];
                let want = run(kernel, &[Some(t(vals, dims))], 1).unwrap();
                // The same bits, or NaN on both sides (a NaN's sign and
                // payload are not specified).
                assert!(
                    fused[0]
                        .1
                        .iter()
                        .zip(&want[0].1)
                        .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
                    "{act:?} shape {si} threads {threads}"
                );
            }
        }
    }
    crate::threads::set_num_threads(1);
}

/// A fused residual (fourth input) equals the convolution followed by a
/// separate add, bit for bit: every path (direct and im2col GEMM, 1×1
/// GEMM, depthwise), batches and groups (each block's offset), after a
/// fused activation (one with a kernel of its own, the pointwise ones of
/// the one-pass epilogue) and scalar affine, on one and three threads; a
/// residual of another shape is refused.
#[cfg(feature = "std")]
#[test]
fn fused_residual_equals_conv_then_add() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // (n, c, h, w, m, k, group, stride)
    // The first is big enough for the GEMM to split its columns over
    // threads and block them (over 1024 columns).
    let shapes = [
        (1, 16, 40, 37, 16, 3, 1, 1),
        (2, 8, 12, 19, 10, 3, 2, 1),
        (1, 16, 30, 30, 24, 1, 1, 1),
        (2, 6, 11, 9, 6, 3, 6, 2),
        (1, 32, 41, 40, 32, 3, 32, 1),
        (1, 6, 21, 33, 12, 3, 1, 2),
        // More output channels than pixels: the GEMM splits rows.
        (1, 64, 13, 13, 200, 3, 1, 1),
        // Six output positions: the tail once per block (each image's
        // and group's offset).
        (2, 8, 2, 3, 10, 3, 2, 1),
    ];
    for threads in [1, 3] {
        crate::threads::set_num_threads(threads);
        for (si, &(n, c, h, w, m, k, group, s)) in shapes.iter().enumerate() {
            let x = rand_vec(n * c * h * w, 700 + si as u64);
            let wt = rand_vec(m * (c / group) * k * k, 710 + si as u64);
            let b = rand_vec(m, 720 + si as u64);
            for force in [Some(true), Some(false)] {
                direct::FORCE.with(|f| f.set(force));
                for (act, post_mul) in [
                    (Activation::None, 1.0),
                    (Activation::Swish, 0.5),
                    (Activation::HardSwish, 0.5),
                    (Activation::Relu, 1.0),
                ] {
                    let mut op = conv(group, [s, s], [k / 2; 4], [1, 1]);
                    op.activation = act;
                    op.post_mul = post_mul;
                    let mut inputs = vec![
                        Some(t(&x, &[n, c, h, w])),
                        Some(t(&wt, &[m, c / group, k, k])),
                        Some(t(&b, &[m])),
                    ];
                    let plain = run(&op, &inputs, 1).unwrap();
                    let (dims, vals) = &plain[0];
                    let r = rand_vec(vals.len(), 730 + si as u64);
                    inputs.push(Some(t(&r, dims)));
                    let fused = run(&op, &inputs, 1).unwrap();
                    assert_eq!(&fused[0].0, dims);
                    let same = fused[0]
                        .1
                        .iter()
                        .zip(vals.iter().zip(&r))
                        .all(|(f, (v, r))| f.to_bits() == (v + r).to_bits());
                    assert!(same, "shape {si} {act:?} force {force:?} threads {threads}");
                    // A broadcastable but different shape is not a residual.
                    let mut short = dims.clone();
                    short[3] = 1;
                    let r1 = rand_vec(short.iter().product(), 1);
                    inputs[3] = Some(t(&r1, &short));
                    assert!(run(&op, &inputs, 1).is_err(), "shape {si}");
                }
            }
            direct::FORCE.with(|f| f.set(None));
        }
    }
    crate::threads::set_num_threads(1);
}

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
    super::channel_tiles::OFF.with(|f| f.set(true));
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
            direct::FORCE.with(|f| f.set(Some(false)));
            assert!(!op.runs_direct(&g));
            let gemm = run(&op, &inputs, 1).unwrap();
            assert_close(&gemm[0].1, &want, 1e-5);
            direct::FORCE.with(|f| f.set(Some(true)));
            assert_eq!(op.runs_direct(&g), direct_here, "case {ci}");
            for &tm in &tile_kinds {
                direct::TILE_ROWS.with(|f| f.set(Some(tm)));
                op.activation = Activation::None;
                let direct = run(&op, &inputs, 1).unwrap();
                assert_close(&direct[0].1, &want, 1e-5);
                // Read in place, the segment's tiles row tile by row tile
                // or column step by column step: the same sums, the same
                // bits.
                for order in [true, false] {
                    direct::ROW_MAJOR.with(|f| f.set(Some(order)));
                    let ordered = run(&op, &inputs, 1).unwrap();
                    direct::ROW_MAJOR.with(|f| f.set(None));
                    assert!(
                        same_bits(&ordered[0].1, &direct[0].1),
                        "case {ci}: row-major {order}, {threads} threads, {tm}-row tiles"
                    );
                }
                // Staged in bands of a few output rows (each band's input
                // rows staged on its own): the same arithmetic, the same
                // bits.
                for band in [1, 2, 3] {
                    direct::BAND_ROWS.with(|f| f.set(Some(band)));
                    let banded = run(&op, &inputs, 1).unwrap();
                    direct::BAND_ROWS.with(|f| f.set(None));
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
            direct::TILE_ROWS.with(|f| f.set(None));
            direct::FORCE.with(|f| f.set(None));
        }
    }
    super::channel_tiles::OFF.with(|f| f.set(false));
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
    use super::direct::crowds_l1;
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
        direct::FORCE.with(|f| f.set(Some(true)));
        let mut outs = Vec::new();
        for threads in [1, 2, 3] {
            crate::threads::set_num_threads(threads);
            outs.push(run(&op, &inputs, 1).unwrap());
        }
        crate::threads::set_num_threads(1);
        direct::FORCE.with(|f| f.set(None));
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

/// The im2col operand packed column by column (a product over at most
/// eight output positions reads B's columns contiguously) holds what the
/// row-by-row packing holds, transposed: pads on every side, strides,
/// dilations, 1-D and 2-D kernels (short runs of taps and wide ones),
/// depth ranges that start and end inside a run of taps, column ranges
/// that start inside an output row, whole columns through the staged row
/// window and ones too wide for it.
#[test]
fn im2col_columns_match_rows() {
    use super::im2col::Im2col;
    use crate::ops::gemm::PackB;
    // (c, h, w, kh, kw, strides, pads, dilations)
    type Case = (
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
        (3, 1, 9, 1, 3, [1, 1], [0, 1, 0, 1], [1, 1]),
        (2, 1, 12, 1, 5, [1, 2], [0, 2, 0, 3], [1, 2]),
        (4, 5, 6, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
        (2, 7, 8, 3, 2, [2, 2], [0, 1, 2, 0], [1, 1]),
        (3, 6, 7, 2, 3, [1, 3], [2, 0, 1, 2], [2, 1]),
        // Wide 1-D kernels (runs of taps copied as one range, Silero's
        // STFT), with padding on both sides, a stride and a dilation.
        (1, 1, 300, 1, 40, [1, 7], [0, 10, 0, 12], [1, 1]),
        (2, 1, 200, 1, 20, [1, 3], [0, 25, 0, 5], [1, 2]),
        // Kernel widths with their own fixed-size gathers (1, 4, 7) and a
        // window of one output row wider than the staged 256 floats.
        (3, 4, 5, 2, 1, [1, 2], [1, 0, 0, 0], [1, 1]),
        (2, 2, 11, 1, 4, [1, 2], [0, 3, 0, 3], [1, 1]),
        (2, 1, 15, 1, 7, [1, 1], [0, 3, 0, 3], [1, 1]),
        (1, 1, 704, 1, 256, [1, 128], [0, 0, 0, 0], [1, 1]),
    ];
    for (ci, &(c, h, w, kh, kw, strides, pads, dil)) in cases.iter().enumerate() {
        let x = rand_vec(c * h * w, 900 + ci as u64);
        let wt = rand_vec(2 * c * kh * kw, 950 + ci as u64);
        let inputs = [
            Some(t(&x, &[1, c, h, w])),
            Some(t(&wt, &[2, c, kh, kw])),
            None,
        ];
        let op = conv(1, strides, pads, dil);
        let g = op.geom(&inputs).unwrap();
        let im = Im2col {
            conv: &op,
            g: &g,
            xg: &x,
        };
        let (k, n) = (g.k(), g.ohw());
        for (p0, kc) in [(0, k), (1, k - 2), (k / 2, k - k / 2)] {
            for (j0, nc) in [(0, n), (n / 3, n - n / 3 - 1)] {
                let mut columns = vec![f32::NAN; nc * kc];
                im.pack(p0, kc, j0, nc, 1, &mut columns);
                // One panel as wide as the range: row p at p·nc.
                let mut rows = vec![f32::NAN; nc * kc];
                im.pack(p0, kc, j0, nc, nc, &mut rows);
                for p in 0..kc {
                    for j in 0..nc {
                        assert_eq!(
                            columns[j * kc + p].to_bits(),
                            rows[p * nc + j].to_bits(),
                            "case {ci}: depth {p0}+{p} of {k}, column {j0}+{j} of {n}"
                        );
                    }
                }
            }
        }
    }
}
