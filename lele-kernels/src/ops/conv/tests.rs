use super::transpose_tests::naive_convt;
use super::*;
use crate::ops::test_util::*;
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

/// An input of width 0 padded to a non-empty output (found by the compiler
/// fuzz target, case 1943111: im2col split the empty input into chunks of
/// zero floats): every output is its bias, through the activation.
#[test]
fn an_empty_input_padded_to_an_output_gives_the_bias() {
    let wt = rand_vec(3 * 5 * 3, 1);
    let b = [0.5f32, -2.0, 1.5];
    let mut op = conv(1, [1, 1], [0, 1, 0, 3], [1, 1]);
    op.activation = Activation::Relu;
    let out = run(
        &op,
        &[
            Some(t(&[], &[1, 5, 0])),
            Some(t(&wt, &[3, 5, 3])),
            Some(t(&b, &[3])),
        ],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 3, 2]);
    assert_eq!(out[0].1, [0.5, 0.5, 0.0, 0.0, 1.5, 1.5]);
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
