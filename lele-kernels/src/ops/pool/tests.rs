#![allow(clippy::excessive_precision)]
use super::*;
use crate::Elem;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

#[cfg(feature = "std")]
mod threads;
mod unpool;

/// Dims and bytes of each output.
type RawOutputs = Vec<(Vec<usize>, Vec<u8>)>;

/// Runs `k` with outputs of the given dtypes.
fn run_raw(
    k: &impl Kernel,
    inputs: &[Option<TensorRef<'_>>],
    dtypes: &[DType],
) -> Result<RawOutputs, KernelError> {
    let mut shapes = vec![Shape::SCALAR; dtypes.len()];
    k.infer(inputs, &mut shapes)?;
    let mut bufs: Vec<Vec<u64>> = shapes
        .iter()
        .zip(dtypes)
        .map(|(s, d)| vec![0u64; (s.numel() * d.size()).div_ceil(8)])
        .collect();
    {
        let mut outs: Vec<TensorMut<'_>> = shapes
            .iter()
            .zip(dtypes)
            .zip(bufs.iter_mut())
            .map(|((s, d), b)| {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(b);
                TensorMut::new(*d, *s, &mut bytes[..s.numel() * d.size()]).unwrap()
            })
            .collect();
        let mut scratch = vec![0f32; k.scratch_bytes(inputs, &shapes).div_ceil(4)];
        k.run(inputs, &mut outs, bytemuck::cast_slice_mut(&mut scratch))?;
    }
    Ok(shapes
        .iter()
        .zip(dtypes)
        .zip(bufs)
        .map(|((s, d), b)| {
            let bytes: &[u8] = bytemuck::cast_slice(&b);
            (s.dims().to_vec(), bytes[..s.numel() * d.size()].to_vec())
        })
        .collect())
}

/// The elements of an output's bytes.
fn vals<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(core::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}

fn typed<'a, T: Elem>(data: &'a [T], dims: &[usize]) -> TensorRef<'a> {
    TensorRef::new(
        T::DTYPE,
        Shape::new(dims).unwrap(),
        bytemuck::cast_slice(data),
    )
    .unwrap()
}

/// Pool mode of the naive reference.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Max,
    AvgExclude,
    AvgInclude,
    Lp(u32),
}

/// Geometry of the naive reference, right-aligned over 3 slots.
#[derive(Clone, Copy)]
struct Ref {
    x: [usize; 3],
    k: [usize; 3],
    s: [usize; 3],
    d: [usize; 3],
    p0: [usize; 3],
    p1: [usize; 3],
    out: [usize; 3],
}

/// Straightforward pool over one plane: every tap of every window, bounds
/// checked per tap. Returns values and row-major argmax indices.
fn naive(xp: &[f32], r: Ref, mode: Mode) -> (Vec<f32>, Vec<i64>) {
    let (mut y, mut idx) = (vec![], vec![]);
    for o0 in 0..r.out[0] {
        for o1 in 0..r.out[1] {
            for o2 in 0..r.out[2] {
                let o = [o0, o1, o2];
                let (mut m, mut arg, mut sum, mut cnt, mut cnt_pad) =
                    (f32::NEG_INFINITY, -1i64, 0f32, 0, 0);
                for t0 in 0..r.k[0] {
                    for t1 in 0..r.k[1] {
                        for t2 in 0..r.k[2] {
                            let t = [t0, t1, t2];
                            let mut pos = [0isize; 3];
                            let (mut inside, mut in_pad) = (true, true);
                            for a in 0..3 {
                                pos[a] =
                                    (o[a] * r.s[a] + t[a] * r.d[a]) as isize - r.p0[a] as isize;
                                inside &= pos[a] >= 0 && pos[a] < r.x[a] as isize;
                                in_pad &= pos[a] < (r.x[a] + r.p1[a]) as isize;
                            }
                            if in_pad {
                                cnt_pad += 1;
                            }
                            if inside {
                                let off = ((pos[0] as usize * r.x[1]) + pos[1] as usize) * r.x[2]
                                    + pos[2] as usize;
                                let v = xp[off];
                                if v > m {
                                    m = v;
                                    arg = off as i64;
                                }
                                sum += match mode {
                                    Mode::Lp(p) => v.abs().powi(p as i32),
                                    _ => v,
                                };
                                cnt += 1;
                            }
                        }
                    }
                }
                y.push(match mode {
                    Mode::Max => m,
                    Mode::AvgExclude => sum / cnt as f32,
                    Mode::AvgInclude => sum / cnt_pad as f32,
                    Mode::Lp(p) => sum.powf(1.0 / p as f32),
                });
                idx.push(arg);
            }
        }
    }
    (y, idx)
}

/// A window over the trailing `dims.len()` slots.
fn window(
    k: &[usize],
    s: &[usize],
    d: &[usize],
    pads: &[usize],
    ceil: bool,
    auto_pad: AutoPad,
) -> Window {
    let n = k.len();
    let lead = MAX_SPATIAL - n;
    let mut w = Window::new(n, [1; MAX_SPATIAL]);
    w.kernel[lead..].copy_from_slice(k);
    w.strides[lead..].copy_from_slice(s);
    w.dilations[lead..].copy_from_slice(d);
    w.pads[lead..MAX_SPATIAL].copy_from_slice(&pads[..n]);
    w.pads[MAX_SPATIAL + lead..].copy_from_slice(&pads[n..]);
    w.ceil_mode = ceil;
    w.auto_pad = auto_pad;
    w
}

fn reference_geom(w: &Window, dims: &[usize]) -> Ref {
    let mut r = Ref {
        x: [1; 3],
        k: w.kernel,
        s: w.strides,
        d: w.dilations,
        p0: [0; 3],
        p1: [0; 3],
        out: [1; 3],
    };
    let lead = MAX_SPATIAL - w.spatial;
    r.x[lead..].copy_from_slice(&dims[2..]);
    for a in lead..3 {
        let (o, b, e) = window_out(
            r.x[a],
            w.kernel[a],
            w.strides[a],
            w.dilations[a],
            w.pads[a],
            w.pads[3 + a],
            w.auto_pad,
            w.ceil_mode,
            "t",
        )
        .unwrap();
        r.out[a] = o;
        r.p0[a] = b;
        r.p1[a] = e;
    }
    r
}

/// Checks every pool kind over `w` against the naive reference.
fn check_all(w: Window, dims: &[usize], seed: u64) {
    let n: usize = dims.iter().product();
    let x = rand_vec(n, seed);
    let xt = t(&x, dims);
    let r = reference_geom(&w, dims);
    let (ip, op) = (
        r.x.iter().product::<usize>(),
        r.out.iter().product::<usize>(),
    );
    let planes = dims[0] * dims[1];
    let mut want_dims = dims[..2].to_vec();
    want_dims.extend_from_slice(&r.out[MAX_SPATIAL - w.spatial..]);
    let plane_ref = |mode| {
        let mut y = vec![];
        let mut ix = vec![];
        for p in 0..planes {
            let (v, i) = naive(&x[p * ip..(p + 1) * ip], r, mode);
            y.extend(v);
            ix.extend(i.iter().map(|&i| i + (p * ip) as i64));
        }
        (y, ix)
    };
    // Max: fast f32 path (no indices) and general path (indices).
    let mp = MaxPool {
        window: w,
        column_major: false,
    };
    let (want, want_ix) = plane_ref(Mode::Max);
    let out = run(&mp, &[Some(xt)], 1).unwrap();
    assert_eq!(out[0].0, want_dims);
    assert_close(&out[0].1, &want, 0.0);
    let out = run_raw(&mp, &[Some(xt)], &[DType::F32, DType::I64]).unwrap();
    assert_close(&vals::<f32>(&out[0].1), &want, 0.0);
    assert_eq!(vals::<i64>(&out[1].1), want_ix);
    assert_eq!(out[0].1.len(), planes * op * 4);
    // Average, both divisors.
    for (include, mode) in [(false, Mode::AvgExclude), (true, Mode::AvgInclude)] {
        let ap = AveragePool {
            window: w,
            count_include_pad: include,
        };
        let out = run(&ap, &[Some(xt)], 1).unwrap();
        assert_eq!(out[0].0, want_dims);
        assert_close(&out[0].1, &plane_ref(mode).0, 1e-5);
    }
    for p in [1, 2, 3] {
        let lp = LpPool { window: w, p };
        let out = run(&lp, &[Some(xt)], 1).unwrap();
        assert_eq!(out[0].0, want_dims);
        assert_close(&out[0].1, &plane_ref(Mode::Lp(p)).0, 1e-5);
    }
}

/// Pads and strides past what an index can address are an error, not an
/// overflow (found by the compiler fuzz target, case 8200416: an LpPool with
/// pads `[2^63 - 1, 5]` and stride `2^57` over 2 columns subtracted past
/// zero counting a window's taps).
#[test]
fn unaddressable_pads_are_an_error() {
    let x = rand_vec(8, 1);
    let xt = t(&x, &[1, 4, 2]);
    let w = window(
        &[3],
        // Written from usize::MAX so 32-bit targets (wasm) get the same
        // shape of overflow: 2^57 and 2^63 - 1 on 64-bit.
        &[(usize::MAX >> 7) + 1],
        &[1],
        &[usize::MAX >> 1, 5],
        false,
        AutoPad::NotSet,
    );
    let mp = MaxPool {
        window: w,
        column_major: false,
    };
    assert!(run(&mp, &[Some(t(&x, &[1, 4, 2]))], 1).is_err());
    let ap = AveragePool {
        window: w,
        count_include_pad: true,
    };
    assert!(run(&ap, &[Some(t(&x, &[1, 4, 2]))], 1).is_err());
    assert!(run(&LpPool { window: w, p: 2 }, &[Some(xt)], 1).is_err());
}

#[test]
fn pools_match_naive_2d() {
    // (h, w, k, s, d, pads, ceil)
    type Case = (
        usize,
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 4],
        bool,
    );
    let cases: &[Case] = &[
        (7, 9, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], false),
        (7, 9, [3, 2], [2, 3], [1, 1], [0, 1, 1, 0], true),
        (8, 8, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], false),
        (6, 7, [3, 3], [1, 2], [2, 1], [2, 2, 2, 2], true),
        (5, 5, [3, 3], [3, 3], [1, 1], [0, 0, 0, 0], true),
        (9, 11, [2, 3], [1, 2], [2, 3], [1, 0, 0, 2], true),
        (4, 4, [2, 2], [1, 1], [2, 2], [0, 0, 0, 0], true),
        // Rows wider than the vectors: full sixteen- and 32-column steps
        // plus tails (stride 2 splits rows into phases by permutes).
        (3, 97, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], false),
        (5, 70, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], true),
        (6, 45, [5, 5], [1, 1], [1, 1], [2, 2, 2, 2], false),
        (4, 66, [3, 2], [2, 2], [1, 2], [0, 1, 1, 0], true),
        // PP-OCR rec's average pool (3×2, strides 3 and 2) and a wide
        // stride-3 row (phases staged one column at a time).
        (3, 80, [3, 2], [3, 2], [1, 1], [0, 0, 0, 0], false),
        (4, 50, [2, 3], [1, 3], [1, 1], [1, 1, 1, 1], true),
    ];
    for (ci, &(h, wd, k, s, d, pads, ceil)) in cases.iter().enumerate() {
        let w = window(&k, &s, &d, &pads, ceil, AutoPad::NotSet);
        check_all(w, &[2, 3, h, wd], ci as u64);
    }
}

#[test]
fn pools_match_naive_1d_and_3d() {
    let w = window(&[3], &[2], &[1], &[1, 2], true, AutoPad::NotSet);
    check_all(w, &[2, 3, 11], 1);
    let w = window(&[2], &[1], &[3], &[0, 0], false, AutoPad::SameUpper);
    check_all(w, &[1, 2, 9], 2);
    // (dims, k, s, d, pads, ceil)
    type Case = (
        [usize; 3],
        [usize; 3],
        [usize; 3],
        [usize; 3],
        [usize; 6],
        bool,
    );
    let cases: &[Case] = &[
        ([4, 5, 6], [2, 2, 2], [1, 1, 1], [1, 1, 1], [0; 6], false),
        (
            [5, 6, 7],
            [3, 2, 3],
            [2, 1, 2],
            [1, 2, 1],
            [1, 0, 1, 1, 1, 0],
            true,
        ),
        ([9, 8, 7], [3, 3, 3], [3, 3, 3], [2, 2, 2], [0; 6], true),
        (
            [3, 4, 5],
            [2, 3, 2],
            [2, 2, 2],
            [1, 1, 1],
            [1, 1, 1, 1, 1, 1],
            false,
        ),
    ];
    for (ci, &(dims, k, s, d, pads, ceil)) in cases.iter().enumerate() {
        let w = window(&k, &s, &d, &pads, ceil, AutoPad::NotSet);
        check_all(w, &[2, 2, dims[0], dims[1], dims[2]], 10 + ci as u64);
    }
    let w = window(
        &[2, 3, 2],
        &[2, 2, 1],
        &[1; 3],
        &[0; 6],
        false,
        AutoPad::SameLower,
    );
    check_all(w, &[1, 2, 5, 4, 3], 20);
}

#[test]
fn onnx_reference_literals() {
    // import numpy as np, onnx
    // from onnx import helper as h, TensorProto as T
    // from onnx.reference import ReferenceEvaluator
    // x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    // def run(op, inputs, **attrs):  # one-node model through ReferenceEvaluator
    //     names = [f"i{k}" for k in range(len(inputs))]
    //     node = h.make_node(op, names, ["y"], **attrs)
    //     g = h.make_graph([node], "g", [h.make_tensor_value_info(n, T.FLOAT, None) for n in names],
    //                      [h.make_tensor_value_info("y", T.FLOAT, None)])
    //     return ReferenceEvaluator(h.make_model(g)).run(None, dict(zip(names, inputs)))[0]
    // run("MaxPool", [x], kernel_shape=[3,3], strides=[2,2], ceil_mode=1)  -> [12, 14, 22, 24]
    // run("AveragePool", [x], kernel_shape=[3,3], pads=[1,1,1,1], count_include_pad=1).ravel()[:3]
    //   -> [1.3333334, 2.3333333, 3.0]
    // run("AveragePool", [x], kernel_shape=[2,2], strides=[2,2], ceil_mode=1)  (either count_include_pad)
    //   -> [3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24]
    let x: Vec<f32> = (0..25).map(|v| v as f32).collect();
    let xt = t(&x, &[1, 1, 5, 5]);
    let mp = MaxPool {
        window: window(&[3, 3], &[2, 2], &[1, 1], &[0; 4], true, AutoPad::NotSet),
        column_major: false,
    };
    let out = run(&mp, &[Some(xt)], 1).unwrap();
    assert_eq!(out[0].1, vec![12., 14., 22., 24.]);
    let ap = AveragePool {
        window: window(&[3, 3], &[1, 1], &[1, 1], &[1; 4], false, AutoPad::NotSet),
        count_include_pad: true,
    };
    let out = run(&ap, &[Some(xt)], 1).unwrap();
    assert_close(&out[0].1[..3], &[1.3333334, 2.3333333, 3.0], 1e-6);
    let ap = AveragePool {
        window: window(&[2, 2], &[2, 2], &[1, 1], &[0; 4], true, AutoPad::NotSet),
        count_include_pad: false,
    };
    let out = run(&ap, &[Some(xt)], 1).unwrap();
    let want = [3., 5., 6.5, 13., 15., 16.5, 20.5, 22.5, 24.];
    assert_close(&out[0].1, &want, 1e-6);
    let ap = AveragePool {
        count_include_pad: true,
        ..ap
    };
    let out = run(&ap, &[Some(xt)], 1).unwrap();
    assert_close(&out[0].1, &want, 1e-6);
    // onnx/backend/test/case/node/averagepool.py, export_averagepool_2d_dilations:
    // x = 1..=16 as 4x4, kernel 2x2, strides 1, dilations 2, ceil_mode -> [[6, 7], [10, 11]]
    let x16: Vec<f32> = (1..=16).map(|v| v as f32).collect();
    let ap = AveragePool {
        window: window(&[2, 2], &[1, 1], &[2, 2], &[0; 4], true, AutoPad::NotSet),
        count_include_pad: false,
    };
    let out = run(&ap, &[Some(t(&x16, &[1, 1, 4, 4]))], 1).unwrap();
    assert_eq!(out[0].1, vec![6., 7., 10., 11.]);
    // More outputs than Y and Indices are rejected.
    assert!(run(&mp, &[Some(xt)], 3).is_err());
}

#[test]
fn max_pool_indices_literals() {
    // onnx/backend/test/case/node/maxpool.py, export_maxpool_with_argmax_2d_precomputed_strides:
    // x = 1..=25 as 5x5, kernel 2x2, strides 2, storage_order 1
    //   -> y [[7, 9], [17, 19]], z [[6, 16], [8, 18]]
    let x: Vec<f32> = (1..=25).map(|v| v as f32).collect();
    let mut mp = MaxPool {
        window: window(&[2, 2], &[2, 2], &[1, 1], &[0; 4], false, AutoPad::NotSet),
        column_major: true,
    };
    let out = run_raw(
        &mp,
        &[Some(t(&x, &[1, 1, 5, 5]))],
        &[DType::F32, DType::I64],
    )
    .unwrap();
    assert_eq!(vals::<f32>(&out[0].1), vec![7., 9., 17., 19.]);
    assert_eq!(vals::<i64>(&out[1].1), vec![6, 16, 8, 18]);
    mp.column_major = false;
    let out = run_raw(
        &mp,
        &[Some(t(&x, &[1, 1, 5, 5]))],
        &[DType::F32, DType::I64],
    )
    .unwrap();
    assert_eq!(vals::<i64>(&out[1].1), vec![6, 8, 16, 18]);
    // Indices include the plane offset; column-major over 3 spatial dims.
    let x: Vec<f32> = (0..2 * 2 * 3 * 4).map(|v| ((v * 7) % 11) as f32).collect();
    let mp = MaxPool {
        window: window(
            &[2, 2, 2],
            &[1, 2, 2],
            &[1; 3],
            &[0; 6],
            false,
            AutoPad::NotSet,
        ),
        column_major: true,
    };
    let out = run_raw(
        &mp,
        &[Some(t(&x, &[1, 2, 2, 3, 4]))],
        &[DType::F32, DType::I64],
    )
    .unwrap();
    assert_eq!(out[1].0, vec![1, 2, 1, 1, 2]);
    let ix = vals::<i64>(&out[1].1);
    let y = vals::<f32>(&out[0].1);
    for (p, (&i, &v)) in ix.iter().zip(&y).enumerate() {
        // Decode (plane, column-major d, h, w) and check the value.
        let plane = (i / 24) as usize;
        let s = (i % 24) as usize;
        let (d, h, w) = (s % 2, (s / 2) % 3, s / 6);
        assert_eq!(plane, p / 2);
        assert_eq!(x[plane * 24 + (d * 3 + h) * 4 + w], v);
    }
}

#[test]
fn max_pool_integer_and_f64() {
    // onnx/backend/test/case/node/maxpool.py, export_maxpool_2d_uint8:
    // x = 1..=25 as 5x5 uint8, kernel 5x5, pads 2 -> rows [13,14,15,15,15], [18,19,20,20,20],
    // [23,24,25,25,25] x3
    let x: Vec<u8> = (1..=25).collect();
    let mp = MaxPool {
        window: window(&[5, 5], &[1, 1], &[1, 1], &[2; 4], false, AutoPad::NotSet),
        column_major: false,
    };
    let out = run_raw(&mp, &[Some(typed(&x, &[1, 1, 5, 5]))], &[DType::U8]).unwrap();
    let want: Vec<u8> = vec![
        13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25, 23, 24, 25,
        25, 25,
    ];
    assert_eq!(out[0].1, want);
    let xi: Vec<i8> = (0..30).map(|v| ((v * 37) % 256) as u8 as i8).collect();
    let mp = MaxPool {
        window: window(&[3], &[2], &[1], &[1, 1], false, AutoPad::NotSet),
        column_major: false,
    };
    let out = run_raw(&mp, &[Some(typed(&xi, &[1, 2, 15]))], &[DType::I8]).unwrap();
    let got = vals::<i8>(&out[0].1);
    let want: Vec<i8> = (0..2)
        .flat_map(|p| {
            let xp = &xi[p * 15..(p + 1) * 15];
            (0..8usize).map(move |o| {
                let lo = (2 * o).saturating_sub(1);
                let hi = (2 * o + 2).min(15);
                *xp[lo..hi].iter().max().unwrap()
            })
        })
        .collect();
    assert_eq!(got, want);
    let xd: Vec<f64> = rand_vec(2 * 36, 4).iter().map(|&v| v as f64).collect();
    let xf: Vec<f32> = xd.iter().map(|&v| v as f32).collect();
    let mp = MaxPool {
        window: window(
            &[3, 2],
            &[2, 1],
            &[1, 2],
            &[1, 0, 0, 1],
            true,
            AutoPad::NotSet,
        ),
        column_major: false,
    };
    let out = run_raw(&mp, &[Some(typed(&xd, &[1, 2, 6, 6]))], &[DType::F64]).unwrap();
    let got: Vec<f32> = vals::<f64>(&out[0].1).iter().map(|&v| v as f32).collect();
    let want = run(&mp, &[Some(t(&xf, &[1, 2, 6, 6]))], 1).unwrap();
    assert_eq!(got, want[0].1);
    // Average pools are float32 only.
    let ap = AveragePool {
        window: mp.window,
        count_include_pad: false,
    };
    assert!(run_raw(&ap, &[Some(typed(&xd, &[1, 2, 6, 6]))], &[DType::F64]).is_err());
}

#[test]
fn nan_propagates_and_first_max_wins() {
    let x = [1f32, f32::NAN, 3., 3., 2., 5., 5., 0.];
    let mp = MaxPool {
        window: window(&[4], &[4], &[1], &[0, 0], false, AutoPad::NotSet),
        column_major: false,
    };
    for n_out in [1, 2] {
        let dts = [DType::F32, DType::I64];
        let out = run_raw(&mp, &[Some(t(&x, &[1, 1, 8]))], &dts[..n_out]).unwrap();
        let y = vals::<f32>(&out[0].1);
        assert!(y[0].is_nan());
        assert_eq!(y[1], 5.0);
        if n_out == 2 {
            assert_eq!(vals::<i64>(&out[1].1), vec![1, 5]);
        }
    }
}

#[test]
fn same_padding_and_1d() {
    let x = rand_vec(2 * 10, 3);
    let mp = MaxPool {
        window: window(&[3], &[2], &[1], &[0, 0], false, AutoPad::SameUpper),
        column_major: false,
    };
    let out = run(&mp, &[Some(t(&x, &[1, 2, 10]))], 1).unwrap();
    assert_eq!(out[0].0, vec![1, 2, 5]);
    // total pad = (5-1)*2 + 3 - 10 = 1 -> begin 0, end 1.
    let r = Ref {
        x: [1, 1, 10],
        k: [1, 1, 3],
        s: [1, 1, 2],
        d: [1; 3],
        p0: [0; 3],
        p1: [0, 0, 1],
        out: [1, 1, 5],
    };
    assert_close(&out[0].1[..5], &naive(&x[..10], r, Mode::Max).0, 0.0);
    let ap = AveragePool {
        window: window(&[3], &[2], &[1], &[0, 0], false, AutoPad::SameLower),
        count_include_pad: true,
    };
    let out = run(&ap, &[Some(t(&x, &[1, 2, 10]))], 1).unwrap();
    let r = Ref {
        p0: [0, 0, 1],
        p1: [0; 3],
        ..r
    };
    assert_close(
        &out[0].1[5..],
        &naive(&x[10..], r, Mode::AvgInclude).0,
        1e-6,
    );
}

#[test]
fn window_errors() {
    let x = rand_vec(2 * 3 * 4 * 4, 5);
    let w2 = window(&[2, 2], &[1, 1], &[1, 1], &[0; 4], false, AutoPad::NotSet);
    // A 2-D window on a 3-D (rank 5) or 1-D (rank 3) input.
    assert!(
        run(
            &AveragePool {
                window: w2,
                count_include_pad: false
            },
            &[Some(t(&x, &[1, 2, 3, 4, 4]))],
            1
        )
        .is_err()
    );
    assert!(
        run(
            &AveragePool {
                window: w2,
                count_include_pad: false
            },
            &[Some(t(&x, &[2, 3, 16]))],
            1
        )
        .is_err()
    );
    assert!(
        run(
            &LpPool { window: w2, p: 0 },
            &[Some(t(&x, &[2, 3, 4, 4]))],
            1
        )
        .is_err()
    );
    let mut bad = w2;
    bad.spatial = 4;
    assert!(
        run(
            &LpPool { window: bad, p: 2 },
            &[Some(t(&x, &[2, 3, 4, 4]))],
            1
        )
        .is_err()
    );
    // A window larger than the input.
    let w5 = window(&[5, 5], &[1, 1], &[1, 1], &[0; 4], false, AutoPad::NotSet);
    let mp = MaxPool {
        window: w5,
        column_major: false,
    };
    assert!(run(&mp, &[Some(t(&x, &[2, 3, 4, 4]))], 1).is_err());
    // Indices must be int64.
    assert!(
        run(
            &MaxPool {
                window: w2,
                column_major: false
            },
            &[Some(t(&x, &[2, 3, 4, 4]))],
            2
        )
        .is_err()
    );
}

#[test]
fn global_pools() {
    let x = rand_vec(2 * 3 * 4 * 5 * 2, 9);
    let out = run(&GlobalAveragePool {}, &[Some(t(&x, &[2, 3, 4, 5, 2]))], 1).unwrap();
    assert_eq!(out[0].0, vec![2, 3, 1, 1, 1]);
    let want: Vec<f32> = x.chunks(40).map(|c| c.iter().sum::<f32>() / 40.0).collect();
    assert_close(&out[0].1, &want, 1e-5);
    let out = run(&GlobalMaxPool {}, &[Some(t(&x, &[2, 3, 40]))], 1).unwrap();
    assert_eq!(out[0].0, vec![2, 3, 1]);
    let want: Vec<f32> = x
        .chunks(40)
        .map(|c| c.iter().cloned().fold(f32::MIN, f32::max))
        .collect();
    assert_close(&out[0].1, &want, 0.0);
    assert!(run(&GlobalMaxPool {}, &[Some(t(&x, &[240]))], 1).is_err());
}

/// GlobalAveragePool over plane sizes around its 64 lanes, against the
/// mean in f64; the vector sums give the portable loop's bits.
#[test]
fn global_average_over_plane_sizes() {
    for size in [1usize, 7, 63, 64, 65, 100, 1000, 4099] {
        let x = rand_vec(3 * size, size as u64);
        let out = run(&GlobalAveragePool {}, &[Some(t(&x, &[1, 3, size]))], 1).unwrap();
        for (c, &got) in out[0].1.iter().enumerate() {
            let plane = &x[c * size..(c + 1) * size];
            let want = plane.iter().map(|&v| v as f64).sum::<f64>() / size as f64;
            assert!((got as f64 - want).abs() <= 1e-6, "{size}: {got} {want}");
            let portable = crate::simd::sums_portable::<64>(plane, None) / size as f32;
            assert_eq!(portable.to_bits(), got.to_bits(), "{size}");
        }
    }
}

#[test]
fn f32_max_plane_path_matches_general_path_bitwise() {
    // Few distinct values, so windows are full of ties between +0 and -0
    // (the first in row-major order must win) and NaNs (one must win).
    let level = |i: usize| match (i as u64).wrapping_mul(2654435761) % 23 {
        0 => f32::NAN,
        1..=6 => 0.0,
        7..=12 => -0.0,
        13 => f32::NEG_INFINITY,
        v => v as f32 / 4.0 - 5.0,
    };
    // (h, w, k, s, d, pads [top, left, bottom, right], ceil)
    type Case = (
        usize,
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 4],
        bool,
    );
    let cases: &[Case] = &[
        // YOLO's SPPF window, and one wider than a vector row.
        (20, 20, [5, 5], [1, 1], [1, 1], [2, 2, 2, 2], false),
        (9, 37, [5, 5], [1, 1], [1, 1], [2, 2, 2, 2], false),
        (12, 35, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], true),
        (10, 50, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], false),
        (11, 33, [3, 4], [3, 3], [2, 2], [2, 1, 0, 3], true),
        (7, 17, [1, 1], [2, 3], [1, 1], [0, 0, 0, 0], false),
        // Output row 16 wide exactly, the input one column past the last
        // window (floor mode).
        (5, 33, [1, 2], [1, 2], [1, 1], [0, 0, 0, 0], false),
        // Dilated rows clipped at the top: windows restart higher up.
        (9, 11, [3, 3], [1, 1], [3, 1], [4, 1, 4, 1], false),
    ];
    // 2×2 windows at stride 1 padded at the end (PP-OCRv6's stem, a path
    // of its own with AVX-512): rows of one pixel up to past two vectors.
    let mut cases = cases.to_vec();
    for (h, wd) in [
        (1, 1),
        (2, 2),
        (5, 15),
        (3, 16),
        (4, 17),
        (2, 31),
        (3, 33),
        (6, 160),
    ] {
        for pads in [[0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]] {
            if h + pads[2] >= 2 && wd + pads[3] >= 2 {
                cases.push((h, wd, [2, 2], [1, 1], [1, 1], pads, false));
            }
        }
    }
    for (ci, &(h, wd, k, s, d, pads, ceil)) in cases.iter().enumerate() {
        let w = window(&k, &s, &d, &pads, ceil, AutoPad::NotSet);
        let dims = [2, 3, h, wd];
        let x: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|i| level(i + 7 * ci))
            .collect();
        let mp = MaxPool {
            window: w,
            column_major: false,
        };
        let fast = run(&mp, &[Some(t(&x, &dims))], 1).unwrap();
        let general = run_raw(&mp, &[Some(t(&x, &dims))], &[DType::F32, DType::I64]).unwrap();
        let want = vals::<f32>(&general[0].1);
        assert_eq!(fast[0].1.len(), want.len());
        for (i, (g, e)) in fast[0].1.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()),
                "case {ci} output {i}: {g} vs {e}"
            );
        }
    }
}

/// Found by `lele-build/tests/fuzz` (compiler target): a stride of
/// i64::MAX wrapped the plane loops' scratch length (`s * phase`), which
/// then panicked splitting a scratch too small ("mid > len").
#[test]
fn hostile_strides_are_errors_not_panics() {
    let x = rand_vec(3 * 5 * 5, 7);
    for (k, s) in [(3, i64::MAX as usize), (3, usize::MAX), (usize::MAX, 1)] {
        let w = window(&[k], &[s], &[1], &[0, 0], false, AutoPad::NotSet);
        let avg = AveragePool {
            window: w,
            count_include_pad: false,
        };
        // Either an error or a result, never a panic.
        let _ = run_raw(&avg, &[Some(t(&x, &[3, 5, 5]))], &[DType::F32]);
        let max = MaxPool {
            window: w,
            column_major: false,
        };
        let _ = run_raw(&max, &[Some(t(&x, &[3, 5, 5]))], &[DType::F32]);
    }
}

/// Windows starting anywhere, even near `isize::MIN` (a fuzz finding: the
/// negation and the distance to the end overflowed), give the taps inside
/// the input, as the direct definition does for ordinary starts. (The
/// extreme starts are those of a 64-bit `isize`.)
#[cfg(target_pointer_width = "64")]
#[test]
fn valid_taps_at_extreme_starts() {
    use super::valid_taps;
    assert_eq!(valid_taps(isize::MIN, 3, 1, 10), (1 << 63, 1 << 63));
    assert_eq!(
        valid_taps(isize::MIN + 1, usize::MAX, 2, 10),
        (1 << 62, 1 << 62)
    );
    assert_eq!(valid_taps(isize::MAX, 3, 1, 10), (0, 0));
    for start in -7isize..12 {
        for (k, d) in [(3usize, 1usize), (4, 2), (1, 5)] {
            let inside: Vec<usize> = (0..k)
                .filter(|&i| (0..10).contains(&(start + (i * d) as isize)))
                .collect();
            let (lo, hi) = valid_taps(start, k, d, 10);
            let want = match (inside.first(), inside.last()) {
                (Some(&a), Some(&b)) => (a, b + 1),
                _ => (lo, lo),
            };
            assert_eq!((lo, hi), want, "start {start} k {k} d {d}");
        }
    }
}
