//! Tests of the spatial kernels against scalar references and against
//! values of the ONNX backend test cases (computed by PyTorch).
use alloc::vec::Vec;

use super::affine_grid::AffineGrid;
use super::center_crop_pad::CenterCropPad;
use super::col2im::Col2Im;
use super::depth_space::{BlockMode, DepthToSpace, SpaceToDepth};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::ops::test_util::{Owned, run1};
use crate::shape::IntList;

/// Deterministic pseudo-random values in `[lo, hi)`, multiples of 1/256.
fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((s >> 40) % 256) as f32 / 256.0;
            lo + (u * (hi - lo) * 256.0).floor() / 256.0
        })
        .collect()
}

fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: at {i} got {g}, want {w}"
        );
    }
}

fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = alloc::vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = i % dims[a];
        i /= dims[a];
    }
    idx
}

fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i)
}

// ---------------------------------------------------------------------------
// DepthToSpace / SpaceToDepth

/// NumPy reference: reshape to 6-D, transpose, reshape (as the ONNX docs).
fn d2s_ref(x: &[i32], [b, c, h, w]: [usize; 4], bs: usize, crd: bool) -> Vec<i32> {
    let c2 = c / (bs * bs);
    let mut y = alloc::vec![0; x.len()];
    for (n, v) in x.iter().enumerate() {
        // Index in the 6-D view of x.
        let (six, perm) = if crd {
            ([b, c2, bs, bs, h, w], [0, 1, 4, 2, 5, 3])
        } else {
            ([b, bs, bs, c2, h, w], [0, 3, 4, 1, 5, 2])
        };
        let i = unravel(n, &six);
        // Position in the transposed tensor.
        let tdims: Vec<usize> = perm.iter().map(|&p| six[p]).collect();
        // transpose: element i lands at j with j[k] = i[perm[k]].
        let ti: Vec<usize> = (0..6).map(|k| i[perm[k]]).collect();
        y[ravel(&ti, &tdims)] = *v;
    }
    y
}

#[test]
fn depth_to_space_matches_the_numpy_definition() {
    for (dims, bs) in [
        ([1, 8, 2, 3], 2),
        ([2, 18, 1, 5], 3),
        ([1, 4, 3, 1], 2),
        ([3, 5, 2, 2], 1),
    ] {
        for (mode, crd) in [(BlockMode::Dcr, false), (BlockMode::Crd, true)] {
            let n: usize = dims.iter().product();
            let x: Vec<i32> = (0..n as i32).collect();
            let xt = Owned::new(&dims, &x);
            let k = DepthToSpace {
                blocksize: bs,
                mode,
            };
            let y = run1(&k, &[Some(&xt)], DType::I32).unwrap();
            let c2 = dims[1] / (bs * bs);
            assert_eq!(y.dims(), &[dims[0], c2, dims[2] * bs, dims[3] * bs]);
            assert_eq!(
                y.to::<i32>(),
                d2s_ref(&x, dims, bs, crd),
                "{dims:?} bs={bs} {mode:?}"
            );
            // SpaceToDepth with the same mode is the inverse.
            let s = run1(
                &SpaceToDepth {
                    blocksize: bs,
                    mode,
                },
                &[Some(&y)],
                DType::I32,
            )
            .unwrap();
            assert_eq!(s.dims(), &dims);
            assert_eq!(s.to::<i32>(), x);
        }
    }
}

#[test]
fn space_to_depth_example_and_errors() {
    // The ONNX example: (1, 1, 4, 6) → (1, 4, 2, 3), DCR.
    let x: Vec<u8> = (0..24).collect();
    let xt = Owned::new(&[1, 1, 4, 6], &x);
    let k = SpaceToDepth {
        blocksize: 2,
        mode: BlockMode::Dcr,
    };
    let y = run1(&k, &[Some(&xt)], DType::U8).unwrap();
    let want: Vec<u8> = [
        0, 2, 4, 12, 14, 16, 1, 3, 5, 13, 15, 17, 6, 8, 10, 18, 20, 22, 7, 9, 11, 19, 21, 23,
    ]
    .to_vec();
    assert_eq!(y.to::<u8>(), want);
    let odd = Owned::new(&[1, 1, 3, 6], &x[..18]);
    assert!(run1(&k, &[Some(&odd)], DType::U8).is_err());
    let zero = SpaceToDepth {
        blocksize: 0,
        mode: BlockMode::Dcr,
    };
    assert!(run1(&zero, &[Some(&xt)], DType::U8).is_err());
    let bad = DepthToSpace {
        blocksize: 2,
        mode: BlockMode::Crd,
    };
    let c3 = Owned::new(&[1, 3, 2, 4], &x);
    assert!(run1(&bad, &[Some(&c3)], DType::U8).is_err());
}

// ---------------------------------------------------------------------------
// CenterCropPad

/// Reference: each output coordinate maps to input `o + start` (crop) or
/// `o - before` (pad), as the slices of the ONNX reference.
fn ccp_ref(x: &[f32], dims: &[usize], target: &[usize]) -> Vec<f32> {
    let n: usize = target.iter().product();
    (0..n)
        .map(|o| {
            let oi = unravel(o, target);
            let mut ii = Vec::new();
            for a in 0..dims.len() {
                let (d, t) = (dims[a] as i64, target[a] as i64);
                let src = if t <= d {
                    oi[a] as i64 + (d - t) / 2
                } else {
                    oi[a] as i64 - (t - d) / 2
                };
                if src < 0 || src >= d {
                    return 0.0;
                }
                ii.push(src as usize);
            }
            x[ravel(&ii, dims)]
        })
        .collect()
}

#[test]
fn center_crop_pad_matches_a_reference() {
    let dims = [5usize, 4, 3];
    let x: Vec<f32> = (1..=60).map(|v| v as f32).collect();
    let xt = Owned::new(&dims, &x);
    for target in [
        [3, 4, 3],
        [2, 7, 1],
        [8, 1, 6],
        [5, 4, 3],
        [0, 2, 3],
        [6, 6, 4],
    ] {
        let shape: Vec<i64> = target.iter().map(|&v| v as i64).collect();
        let st = Owned::new(&[3], &shape);
        let k = CenterCropPad {
            axes: IntList::EMPTY,
        };
        let y = run1(&k, &[Some(&xt), Some(&st)], DType::F32).unwrap();
        assert_eq!(y.dims(), &target);
        assert_eq!(y.to::<f32>(), ccp_ref(&x, &dims, &target), "{target:?}");
    }
    // A subset of axes (negative ones too), sizes as int32.
    let st = Owned::new(&[2], &[7i32, 1]);
    for axes in [[0i64, 2], [-3, -1]] {
        let k = CenterCropPad {
            axes: IntList::new(&axes).unwrap(),
        };
        let y = run1(&k, &[Some(&xt), Some(&st)], DType::F32).unwrap();
        assert_eq!(y.dims(), &[7, 4, 1]);
        assert_eq!(y.to::<f32>(), ccp_ref(&x, &dims, &[7, 4, 1]));
    }
}

#[test]
fn center_crop_pad_needs_the_sizes_and_checks_them() {
    let xt = Owned::new(&[4, 4], &[0u8; 16]);
    let k = CenterCropPad {
        axes: IntList::EMPTY,
    };
    let blind = [
        Some(xt.r()),
        Some(crate::tensor::TensorRef::shape_only(
            DType::I64,
            crate::shape::Shape::new(&[2]).unwrap(),
        )),
    ];
    let mut out = [crate::shape::Shape::SCALAR];
    assert!(matches!(
        crate::Kernel::infer(&k, &blind, &mut out),
        Err(KernelError::NeedsData { .. })
    ));
    let neg = Owned::new(&[2], &[-1i64, 2]);
    assert!(run1(&k, &[Some(&xt), Some(&neg)], DType::U8).is_err());
    let short = Owned::new(&[1], &[2i64]);
    assert!(run1(&k, &[Some(&xt), Some(&short)], DType::U8).is_err());
}

// ---------------------------------------------------------------------------
// Col2Im

/// Reference from the image side: output pixel `p` sums every column entry
/// `(k, l)` with `l·stride - pad + k·dilation == p` along every dim.
fn col2im_ref(
    x: &[f32],
    [n, ck, l]: [usize; 3],
    img: &[usize],
    blk: &[usize],
    strides: &[usize],
    pads: &[usize],
    dils: &[usize],
) -> Vec<f32> {
    let r = img.len();
    let kk: usize = blk.iter().product();
    let c = ck / kk;
    let cols: Vec<usize> = (0..r)
        .map(|i| (img[i] + pads[i] + pads[i + r] - (dils[i] * (blk[i] - 1) + 1)) / strides[i] + 1)
        .collect();
    assert_eq!(cols.iter().product::<usize>(), l);
    let isz: usize = img.iter().product();
    let mut y = alloc::vec![0f32; n * c * isz];
    for b in 0..n {
        for ch in 0..c {
            for p in 0..isz {
                let pi = unravel(p, img);
                let mut acc = 0.0;
                for k in 0..kk {
                    let ki = unravel(k, blk);
                    let mut li = Vec::new();
                    for i in 0..r {
                        let t = pi[i] as i64 + pads[i] as i64 - (ki[i] * dils[i]) as i64;
                        if t < 0
                            || t % strides[i] as i64 != 0
                            || t / strides[i] as i64 >= cols[i] as i64
                        {
                            break;
                        }
                        li.push((t / strides[i] as i64) as usize);
                    }
                    if li.len() == r {
                        acc += x[(b * ck + ch * kk + k) * l + ravel(&li, &cols)];
                    }
                }
                y[(b * c + ch) * isz + p] = acc;
            }
        }
    }
    y
}

fn col2im_case(
    img: &[usize],
    blk: &[usize],
    strides: &[usize],
    pads: &[usize],
    dils: &[usize],
    n: usize,
    c: usize,
) {
    let r = img.len();
    let kk: usize = blk.iter().product();
    let l: usize = (0..r)
        .map(|i| (img[i] + pads[i] + pads[i + r] - (dils[i] * (blk[i] - 1) + 1)) / strides[i] + 1)
        .product();
    let x = values(n * c * kk * l, 7, -2.0, 2.0);
    let xt = Owned::new(&[n, c * kk, l], &x);
    let to_i = |v: &[usize]| -> Vec<i64> { v.iter().map(|&v| v as i64).collect() };
    let it = Owned::new(&[r], &to_i(img));
    let bt = Owned::new(&[r], &to_i(blk));
    let k = Col2Im {
        strides: IntList::new(&to_i(strides)).unwrap(),
        pads: IntList::new(&to_i(pads)).unwrap(),
        dilations: IntList::new(&to_i(dils)).unwrap(),
    };
    let y = run1(&k, &[Some(&xt), Some(&it), Some(&bt)], DType::F32).unwrap();
    let mut want_dims = alloc::vec![n, c];
    want_dims.extend_from_slice(img);
    assert_eq!(y.dims(), &want_dims[..]);
    let want = col2im_ref(&x, [n, c * kk, l], img, blk, strides, pads, dils);
    close(&y.to::<f32>(), &want, 1e-5, "col2im");
}

#[test]
fn col2im_matches_a_reference() {
    col2im_case(&[5, 5], &[1, 5], &[1, 1], &[0, 0, 0, 0], &[1, 1], 1, 1);
    col2im_case(&[7, 6], &[3, 2], &[2, 1], &[1, 0, 2, 1], &[1, 2], 2, 3);
    col2im_case(
        &[5, 4, 3],
        &[2, 2, 1],
        &[1, 2, 1],
        &[0; 6],
        &[2, 1, 1],
        1,
        2,
    );
    col2im_case(&[9], &[3], &[2], &[1, 1], &[1], 3, 1);
    col2im_case(&[4, 5], &[5, 1], &[3, 3], &[1, 0, 1, 2], &[1, 1], 1, 1);
}

#[test]
fn col2im_onnx_pads_case() {
    // test_col2im_pads: input (1, 5, 15), image 5×5, block 1×5, pads 0,1,0,1.
    let x: Vec<f32> = (0..75)
        .map(|i| (1 + (i % 15) * 5 + i / 15) as f32)
        .collect();
    let xt = Owned::new(&[1, 5, 15], &x);
    let k = Col2Im {
        strides: IntList::EMPTY,
        pads: IntList::new(&[0, 1, 0, 1]).unwrap(),
        dilations: IntList::EMPTY,
    };
    let it = Owned::new(&[2], &[5i64, 5]);
    let bt = Owned::new(&[2], &[1i64, 5]);
    let y = run1(&k, &[Some(&xt), Some(&it), Some(&bt)], DType::F32).unwrap();
    let want = [
        8.0, 21.0, 24.0, 27.0, 24.0, 38.0, 66.0, 69.0, 72.0, 54.0, 68.0, 111.0, 114.0, 117.0, 84.0,
        98.0, 156.0, 159.0, 162.0, 114.0, 128.0, 201.0, 204.0, 207.0, 144.0,
    ];
    assert_eq!(y.to::<f32>(), want);
    // Wrong number of block positions, and a block larger than the image.
    let bad = Owned::new(&[1, 5, 14], &x[..70]);
    assert!(run1(&k, &[Some(&bad), Some(&it), Some(&bt)], DType::F32).is_err());
    let big = Owned::new(&[2], &[1i64, 9]);
    assert!(run1(&k, &[Some(&xt), Some(&it), Some(&big)], DType::F32).is_err());
}

// ---------------------------------------------------------------------------
// AffineGrid

#[test]
fn affine_grid_matches_a_reference() {
    for (size, align) in [
        ([2usize, 1, 3, 4, 0], false),
        ([1, 2, 5, 1, 0], true),
        ([2, 1, 2, 3, 4], true),
        ([1, 1, 3, 1, 2], false),
    ] {
        let r = if size[4] == 0 { 2 } else { 3 };
        let n = size[0];
        let theta = values(n * r * (r + 1), 3, -2.0, 2.0);
        let tt = Owned::new(&[n, r, r + 1], &theta);
        let sz: Vec<i64> = size[..r + 2].iter().map(|&v| v as i64).collect();
        let st = Owned::new(&[r + 2], &sz);
        let y = run1(
            &AffineGrid {
                align_corners: align,
            },
            &[Some(&tt), Some(&st)],
            DType::F32,
        )
        .unwrap();
        let sp = &size[2..r + 2];
        let mut want = Vec::new();
        let lin = |i: usize, d: usize| -> f64 {
            if d == 1 {
                0.0
            } else if align {
                -1.0 + 2.0 * i as f64 / (d - 1) as f64
            } else {
                (2 * i + 1) as f64 / d as f64 - 1.0
            }
        };
        let cells: usize = sp.iter().product();
        for b in 0..n {
            for cell in 0..cells {
                let ci = unravel(cell, sp);
                // (x, y[, z], 1): innermost dim first.
                let mut pos: Vec<f64> = (0..r).map(|i| lin(ci[r - 1 - i], sp[r - 1 - i])).collect();
                pos.push(1.0);
                for k in 0..r {
                    let row = &theta[(b * r + k) * (r + 1)..(b * r + k + 1) * (r + 1)];
                    want.push(
                        row.iter()
                            .zip(&pos)
                            .map(|(&a, &p)| a as f64 * p)
                            .sum::<f64>() as f32,
                    );
                }
            }
        }
        let mut dims = alloc::vec![n];
        dims.extend_from_slice(sp);
        dims.push(r);
        assert_eq!(y.dims(), &dims[..]);
        close(&y.to::<f32>(), &want, 1e-6, "affine_grid");
    }
}

#[test]
fn affine_grid_onnx_case_and_errors() {
    // The first cells of test_affine_grid_2d (size (2, 3, 5, 6), align 0).
    let theta: [f32; 12] = [
        1.088_944_4,
        -3.288_046_6,
        5.0,
        2.022_325_3,
        1.096_015_5,
        -3.3,
        0.835_788_4,
        -0.554_422_86,
        2.5,
        0.787_627_9,
        0.839_711_4,
        1.1,
    ];
    let tt = Owned::new(&[2, 2, 3], &theta);
    let st = Owned::new(&[4], &[2i64, 3, 5, 6]);
    let y = run1(
        &AffineGrid {
            align_corners: false,
        },
        &[Some(&tt), Some(&st)],
        DType::F32,
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 5, 6, 2]);
    close(
        &y.to::<f32>()[..6],
        &[
            6.722_983_4,
            -5.862_083_4,
            7.085_965,
            -5.187_975,
            7.448_946_5,
            -4.513_866_4,
        ],
        1e-6,
        "affine_grid_2d",
    );
    let st3 = Owned::new(&[5], &[2i64, 3, 5, 6, 7]);
    assert!(
        run1(
            &AffineGrid {
                align_corners: false
            },
            &[Some(&tt), Some(&st3)],
            DType::F32
        )
        .is_err()
    );
}
