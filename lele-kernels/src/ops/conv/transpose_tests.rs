//! Tests of `ConvTranspose` against a scatter-form reference and ONNX's
//! own examples (split from `tests.rs`).
use super::*;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

/// Direct transposed convolution (scatter form).
#[allow(clippy::too_many_arguments)]
pub(super) fn naive_convt(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    wt: &[f32],
    [mg, kh, kw]: [usize; 3],
    group: usize,
    [sh, sw]: [usize; 2],
    [pt, pl]: [usize; 2],
    [dh, dw]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<f32> {
    let cg = c / group;
    let m = mg * group;
    let mut y = vec![0f32; n * m * oh * ow];
    for ni in 0..n {
        for ci in 0..c {
            let gi = ci / cg;
            for ih in 0..h {
                for iw in 0..w {
                    let xv = x[((ni * c + ci) * h + ih) * w + iw];
                    for mj in 0..mg {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let yh = (ih * sh + ki * dh) as isize - pt as isize;
                                let yw = (iw * sw + kj * dw) as isize - pl as isize;
                                if yh < 0 || yw < 0 || yh >= oh as isize || yw >= ow as isize {
                                    continue;
                                }
                                let mi = gi * mg + mj;
                                y[((ni * m + mi) * oh + yh as usize) * ow + yw as usize] +=
                                    xv * wt[((ci * mg + mj) * kh + ki) * kw + kj];
                            }
                        }
                    }
                }
            }
        }
    }
    y
}

#[test]
fn conv_transpose_matches_naive() {
    // (n, c, h, w, mg, kh, kw, group, strides, pads, dilations, output_padding)
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
        [usize; 2],
    );
    let cases: &[Case] = &[
        (1, 3, 4, 5, 2, 3, 3, 1, [2, 2], [1, 1, 1, 1], [1, 1], [1, 0]),
        (2, 4, 3, 3, 3, 2, 3, 2, [1, 2], [0, 1, 0, 0], [2, 1], [0, 1]),
        (1, 2, 5, 4, 1, 4, 4, 1, [2, 2], [1, 1, 1, 1], [1, 1], [0, 0]),
        // Stride 3, pads that cut whole taps off, odd widths.
        (1, 2, 6, 7, 2, 3, 2, 1, [3, 2], [2, 1, 0, 3], [1, 2], [2, 1]),
        // Kernel = stride, no padding: each output written once (2 wide,
        // 3×2, 3×3; batches and groups; input chunks that end mid-row).
        (2, 4, 5, 7, 3, 2, 2, 2, [2, 2], [0, 0, 0, 0], [1, 1], [0, 0]),
        (1, 3, 4, 5, 2, 3, 2, 1, [3, 2], [0, 0, 0, 0], [1, 1], [0, 0]),
        (1, 2, 3, 4, 2, 3, 3, 1, [3, 3], [0, 0, 0, 0], [1, 1], [0, 0]),
        (
            1,
            3,
            37,
            37,
            64,
            2,
            2,
            1,
            [2, 2],
            [0, 0, 0, 0],
            [1, 1],
            [0, 0],
        ),
        // The same with output padding: the extra pixels hold the bias.
        (1, 2, 3, 4, 2, 2, 2, 1, [2, 2], [0, 0, 0, 0], [1, 1], [1, 1]),
        // Depthwise (one input and one output channel per group): the
        // direct path. DeepFilterNet's 1×3 stride-(1, 2) upsampling with
        // its pads and output padding; batches, dilation, 2-D kernels and
        // taps cut off by the pads; a plane count above one thread's share.
        (1, 5, 4, 8, 1, 1, 3, 5, [1, 2], [0, 1, 0, 1], [1, 1], [0, 1]),
        (2, 3, 5, 6, 1, 3, 3, 3, [2, 3], [1, 2, 0, 1], [2, 1], [1, 0]),
        (1, 4, 3, 7, 1, 2, 4, 4, [1, 1], [1, 3, 1, 3], [1, 2], [0, 0]),
        (
            2,
            64,
            30,
            16,
            1,
            1,
            3,
            64,
            [1, 2],
            [0, 1, 0, 1],
            [1, 1],
            [0, 1],
        ),
    ];
    for (ci, &(n, c, h, w, mg, kh, kw, group, strides, pads, dil, opad)) in cases.iter().enumerate()
    {
        let x = rand_vec(n * c * h * w, ci as u64);
        let wt = rand_vec(c * mg * kh * kw, 50 + ci as u64);
        let b = rand_vec(mg * group, 70 + ci as u64);
        let op = ConvTranspose {
            group,
            kernel: [kh, kw],
            strides,
            pads,
            dilations: dil,
            output_padding: opad,
            output_shape: None,
            auto_pad: AutoPad::NotSet,
            activation: Activation::None,
        };
        let out = run(
            &op,
            &[
                Some(t(&x, &[n, c, h, w])),
                Some(t(&wt, &[c, mg, kh, kw])),
                Some(t(&b, &[mg * group])),
            ],
            1,
        )
        .unwrap();
        let oh = strides[0] * (h - 1) + opad[0] + (kh - 1) * dil[0] + 1 - pads[0] - pads[2];
        let ow = strides[1] * (w - 1) + opad[1] + (kw - 1) * dil[1] + 1 - pads[1] - pads[3];
        assert_eq!(out[0].0, vec![n, mg * group, oh, ow]);
        let mut want = naive_convt(
            &x,
            [n, c, h, w],
            &wt,
            [mg, kh, kw],
            group,
            strides,
            [pads[0], pads[1]],
            dil,
            [oh, ow],
        );
        for (i, v) in want.iter_mut().enumerate() {
            *v += b[(i / (oh * ow)) % (mg * group)];
        }
        assert_close(&out[0].1, &want, 1e-5);
        // A fused activation, on both the write-once and the accumulating
        // paths: exactly the activation of the unfused outputs.
        let activation = [Activation::Relu, Activation::Sigmoid][ci % 2];
        let fused = run(
            &ConvTranspose { activation, ..op },
            &[
                Some(t(&x, &[n, c, h, w])),
                Some(t(&wt, &[c, mg, kh, kw])),
                Some(t(&b, &[mg * group])),
            ],
            1,
        )
        .unwrap();
        let mut want = out[0].1.clone();
        activation.apply_in_place(&mut want);
        assert_eq!(fused[0].1, want, "case {ci}");
    }
}

#[test]
fn conv_transpose_onnx_literal_and_output_shape() {
    // import numpy as np, onnx
    // from onnx.reference import ReferenceEvaluator
    // x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    // w = np.ones((1, 2, 3, 3), dtype=np.float32)
    // (onnx backend test "test_convtranspose": ConvTranspose(x, w), no attributes)
    // y[0, 0] = [[0,1,3,3,2],[3,8,15,12,7],[9,21,36,27,15],[9,20,33,24,13],[6,13,21,15,8]]
    let x: Vec<f32> = (0..9).map(|v| v as f32).collect();
    let w = [1f32; 18];
    let op = ConvTranspose {
        group: 1,
        kernel: [0, 0],
        strides: [1, 1],
        pads: [0; 4],
        dilations: [1, 1],
        output_padding: [0, 0],
        output_shape: None,
        auto_pad: AutoPad::NotSet,
        activation: Activation::None,
    };
    let out = run(
        &op,
        &[Some(t(&x, &[1, 1, 3, 3])), Some(t(&w, &[1, 2, 3, 3])), None],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 2, 5, 5]);
    let plane = [
        0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24., 13.,
        6., 13., 21., 15., 8.,
    ];
    assert_close(&out[0].1[..25], &plane, 1e-6);
    assert_close(&out[0].1[25..], &plane, 1e-6);
    // output_shape [4, 4]: total padding 1 per axis -> begin 1 (NotSet puts the odd one first).
    let op2 = ConvTranspose {
        output_shape: Some([4, 4]),
        ..op
    };
    let out = run(
        &op2,
        &[Some(t(&x, &[1, 1, 3, 3])), Some(t(&w, &[1, 2, 3, 3])), None],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 2, 4, 4]);
    assert_close(&out[0].1[..4], &[8., 15., 12., 7.], 1e-6);
    // 1-D.
    let out = run(
        &ConvTranspose {
            strides: [1, 2],
            ..op
        },
        &[Some(t(&x, &[1, 3, 3])), Some(t(&w[..6], &[3, 2, 1])), None],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 2, 5]);
    // y[m, 2i] = sum_c x[c, i]; odd positions are zero.
    assert_close(&out[0].1[..5], &[9., 0., 12., 0., 15.], 1e-6);
}
