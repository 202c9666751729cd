//! Pooling: `MaxPool`, `AveragePool`, `GlobalAveragePool`, `GlobalMaxPool`.
//!
//! Windowed pools take 1-D (`N,C,W`) and 2-D (`N,C,H,W`) inputs with the
//! attribute convention of [`crate::ops::conv`]: a 1-D pool is a 2-D one
//! with `H = 1`, `kernel = [1, k]`, `strides = [1, s]`,
//! `pads = [0, begin, 0, end]`, `dilations = [1, d]`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::conv::{AutoPad, Nchw, nchw, out_shape, window_out};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// Window geometry of a pool.
#[derive(Clone, Copy, Debug)]
struct PoolGeom {
    x: Nchw,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    out: [usize; 2],
    /// Begin padding (top, left).
    pad0: [usize; 2],
    /// End padding (bottom, right).
    pad1: [usize; 2],
}

#[allow(clippy::too_many_arguments)]
fn pool_geom(
    inputs: &[Option<TensorRef<'_>>],
    n_outputs: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
    ceil_mode: bool,
    auto_pad: AutoPad,
    op: &'static str,
) -> Result<PoolGeom, KernelError> {
    if n_outputs != 1 {
        return Err(KernelError::Invalid {
            op,
            msg: "only the first output is supported",
        });
    }
    let xt = input(inputs, 0, op)?;
    check_f32(xt, op)?;
    let x = nchw(&xt.shape, op)?;
    let (oh, pt, pb) = window_out(
        x.h,
        kernel[0],
        strides[0],
        dilations[0],
        pads[0],
        pads[2],
        auto_pad,
        ceil_mode,
        op,
    )?;
    let (ow, pl, pr) = window_out(
        x.w,
        kernel[1],
        strides[1],
        dilations[1],
        pads[1],
        pads[3],
        auto_pad,
        ceil_mode,
        op,
    )?;
    Ok(PoolGeom {
        x,
        k: kernel,
        s: strides,
        d: dilations,
        out: [oh, ow],
        pad0: [pt, pl],
        pad1: [pb, pr],
    })
}

/// Calls `f(out_index, plane_in, plane_out)` for every `(n, c)` plane after
/// checking buffer sizes.
fn for_planes(
    g: &PoolGeom,
    x: &[f32],
    y: &mut [f32],
    op: &'static str,
    mut f: impl FnMut(&[f32], &mut [f32]),
) -> Result<(), KernelError> {
    let (ihw, ohw) = (g.x.h * g.x.w, g.out[0] * g.out[1]);
    let planes = g.x.n * g.x.c;
    if x.len() != planes * ihw || y.len() != planes * ohw {
        return Err(KernelError::Buffer { op });
    }
    if ohw == 0 {
        return Ok(());
    }
    if ihw == 0 {
        return Err(KernelError::Shape {
            op,
            msg: "empty spatial input",
        });
    }
    for (xp, yp) in x.chunks_exact(ihw).zip(y.chunks_exact_mut(ohw)) {
        f(xp, yp);
    }
    Ok(())
}

/// Input index range `[lo, hi)` (in window steps) of the window starting at
/// `start` that lies inside `0..len`.
#[inline]
fn valid_taps(start: isize, k: usize, d: usize, len: usize) -> (usize, usize) {
    let d = d as isize;
    let lo = if start >= 0 {
        0
    } else {
        ((-start + d - 1) / d) as usize
    };
    let last = len as isize - 1 - start;
    let hi = if last < 0 {
        0
    } else {
        ((last / d) as usize + 1).min(k)
    };
    (lo, hi.max(lo))
}

/// ONNX `MaxPool` (output `Y` only; requesting `Indices` is an error).
///
/// Input: `X`. Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxPool {
    /// Window `[kH, kW]`.
    pub kernel: [usize; 2],
    /// Strides `[sH, sW]`.
    pub strides: [usize; 2],
    /// Pads `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Dilations `[dH, dW]`.
    pub dilations: [usize; 2],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Automatic padding.
    pub auto_pad: AutoPad,
}
crate::to_rust_struct!(ops::pool::MaxPool {
    kernel,
    strides,
    pads,
    dilations,
    ceil_mode,
    auto_pad
});

impl MaxPool {
    fn geom(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        n_out: usize,
    ) -> Result<PoolGeom, KernelError> {
        pool_geom(
            inputs,
            n_out,
            self.kernel,
            self.strides,
            self.pads,
            self.dilations,
            self.ceil_mode,
            self.auto_pad,
            "MaxPool",
        )
    }
}

impl Kernel for MaxPool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geom(inputs, outputs.len())?;
        outputs[0] = out_shape(g.x, g.x.c, g.out[0], g.out[1])?;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "MaxPool";
        let g = self.geom(inputs, outputs.len())?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        for_planes(&g, x, y, OP, |xp, yp| {
            for oh in 0..g.out[0] {
                let hs = (oh * g.s[0]) as isize - g.pad0[0] as isize;
                let (hlo, hhi) = valid_taps(hs, g.k[0], g.d[0], g.x.h);
                for ow in 0..g.out[1] {
                    let ws = (ow * g.s[1]) as isize - g.pad0[1] as isize;
                    let (wlo, whi) = valid_taps(ws, g.k[1], g.d[1], g.x.w);
                    let mut m = f32::NEG_INFINITY;
                    for ki in hlo..hhi {
                        let h = (hs + (ki * g.d[0]) as isize) as usize;
                        let row = &xp[h * g.x.w..(h + 1) * g.x.w];
                        for kj in wlo..whi {
                            let v = row[(ws + (kj * g.d[1]) as isize) as usize];
                            if v > m || v.is_nan() {
                                m = v;
                            }
                        }
                    }
                    yp[oh * g.out[1] + ow] = m;
                }
            }
        })
    }
}

/// ONNX `AveragePool`.
///
/// Input: `X`. Output: `Y`. With `count_include_pad` the divisor counts the
/// window positions inside the explicitly padded input (not the extra
/// positions `ceil_mode` adds); otherwise only positions inside `X`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AveragePool {
    /// Window `[kH, kW]`.
    pub kernel: [usize; 2],
    /// Strides `[sH, sW]`.
    pub strides: [usize; 2],
    /// Pads `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Count padded positions in the divisor.
    pub count_include_pad: bool,
    /// Automatic padding.
    pub auto_pad: AutoPad,
}
crate::to_rust_struct!(ops::pool::AveragePool {
    kernel,
    strides,
    pads,
    ceil_mode,
    count_include_pad,
    auto_pad
});

impl AveragePool {
    fn geom(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        n_out: usize,
    ) -> Result<PoolGeom, KernelError> {
        pool_geom(
            inputs,
            n_out,
            self.kernel,
            self.strides,
            self.pads,
            [1, 1],
            self.ceil_mode,
            self.auto_pad,
            "AveragePool",
        )
    }
}

impl Kernel for AveragePool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geom(inputs, outputs.len())?;
        outputs[0] = out_shape(g.x, g.x.c, g.out[0], g.out[1])?;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "AveragePool";
        let g = self.geom(inputs, outputs.len())?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        let include = self.count_include_pad;
        for_planes(&g, x, y, OP, |xp, yp| {
            for oh in 0..g.out[0] {
                let hs = (oh * g.s[0]) as isize - g.pad0[0] as isize;
                let (hlo, hhi) = valid_taps(hs, g.k[0], 1, g.x.h);
                // Taps inside the padded extent [-pad0, len + pad1).
                let hpad = ((g.x.h + g.pad1[0]) as isize - hs).clamp(0, g.k[0] as isize) as usize;
                for ow in 0..g.out[1] {
                    let ws = (ow * g.s[1]) as isize - g.pad0[1] as isize;
                    let (wlo, whi) = valid_taps(ws, g.k[1], 1, g.x.w);
                    let mut sum = 0f32;
                    for ki in hlo..hhi {
                        let h = (hs + ki as isize) as usize;
                        let row = &xp[h * g.x.w..(h + 1) * g.x.w];
                        let w0 = (ws + wlo as isize) as usize;
                        sum += row[w0..w0 + (whi - wlo)].iter().sum::<f32>();
                    }
                    let count = if include {
                        let wpad =
                            ((g.x.w + g.pad1[1]) as isize - ws).clamp(0, g.k[1] as isize) as usize;
                        hpad * wpad
                    } else {
                        (hhi - hlo) * (whi - wlo)
                    };
                    yp[oh * g.out[1] + ow] = sum / count as f32;
                }
            }
        })
    }
}

/// Shape `[N, C, 1, …]` and `(planes, plane size)` of a global pool input.
fn global_dims(
    inputs: &[Option<TensorRef<'_>>],
    op: &'static str,
) -> Result<(Shape, usize, usize), KernelError> {
    let xt = input(inputs, 0, op)?;
    check_f32(xt, op)?;
    if xt.shape.rank() < 3 {
        return Err(KernelError::Shape {
            op,
            msg: "expected an input of rank >= 3 (N, C, spatial…)",
        });
    }
    let mut s = xt.shape;
    for d in &mut s.dims_mut()[2..] {
        *d = 1;
    }
    let planes = xt.shape.dim(0) * xt.shape.dim(1);
    Ok((s, planes, xt.shape.dims()[2..].iter().product()))
}

fn global_run(
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
    op: &'static str,
    f: impl Fn(&[f32]) -> f32,
) -> Result<(), KernelError> {
    let (_, planes, size) = global_dims(inputs, op)?;
    let x = f32_in(input(inputs, 0, op)?, op)?;
    let y = f32_out(output(outputs, 0, op)?, op)?;
    if y.len() != planes || x.len() != planes * size {
        return Err(KernelError::Buffer { op });
    }
    if size == 0 {
        return Err(KernelError::Shape {
            op,
            msg: "empty spatial input",
        });
    }
    for (o, p) in y.iter_mut().zip(x.chunks_exact(size)) {
        *o = f(p);
    }
    Ok(())
}

/// ONNX `GlobalAveragePool`: mean over all spatial dims (any rank >= 3).
///
/// Input: `X`. Output: `Y` `[N, C, 1, …]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalAveragePool {}
crate::to_rust_struct!(ops::pool::GlobalAveragePool {});

impl Kernel for GlobalAveragePool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _, _) = global_dims(inputs, "GlobalAveragePool")?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "GlobalAveragePool",
            msg: "no output",
        })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        global_run(inputs, outputs, "GlobalAveragePool", |p| {
            // Pairwise-ish: accumulate in 8 lanes for accuracy and speed.
            let mut acc = [0f32; 8];
            let mut it = p.chunks_exact(8);
            for c in &mut it {
                for (a, v) in acc.iter_mut().zip(c) {
                    *a += v;
                }
            }
            let s: f32 = acc.iter().sum::<f32>() + it.remainder().iter().sum::<f32>();
            s / p.len() as f32
        })
    }
}

/// ONNX `GlobalMaxPool`: max over all spatial dims (any rank >= 3).
///
/// Input: `X`. Output: `Y` `[N, C, 1, …]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalMaxPool {}
crate::to_rust_struct!(ops::pool::GlobalMaxPool {});

impl Kernel for GlobalMaxPool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _, _) = global_dims(inputs, "GlobalMaxPool")?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "GlobalMaxPool",
            msg: "no output",
        })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        global_run(inputs, outputs, "GlobalMaxPool", |p| {
            p.iter().fold(
                f32::NEG_INFINITY,
                |m, &v| if v > m || v.is_nan() { v } else { m },
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::gemm::testutil::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Straightforward pool over one plane with explicit geometry.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        xp: &[f32],
        h: usize,
        w: usize,
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        p0: [usize; 2],
        p1: [usize; 2],
        out: [usize; 2],
        mode: u8, // 0 max, 1 avg exclude pad, 2 avg include pad
    ) -> Vec<f32> {
        let mut y = vec![];
        for oh in 0..out[0] {
            for ow in 0..out[1] {
                let (mut m, mut sum, mut cnt, mut cnt_pad) = (f32::NEG_INFINITY, 0f32, 0, 0);
                for ki in 0..k[0] {
                    for kj in 0..k[1] {
                        let hh = (oh * s[0] + ki * d[0]) as isize - p0[0] as isize;
                        let ww = (ow * s[1] + kj * d[1]) as isize - p0[1] as isize;
                        if hh < (h + p1[0]) as isize && ww < (w + p1[1]) as isize {
                            cnt_pad += 1;
                        }
                        if hh >= 0 && ww >= 0 && hh < h as isize && ww < w as isize {
                            let v = xp[hh as usize * w + ww as usize];
                            m = m.max(v);
                            sum += v;
                            cnt += 1;
                        }
                    }
                }
                y.push(match mode {
                    0 => m,
                    1 => sum / cnt as f32,
                    _ => sum / cnt_pad as f32,
                });
            }
        }
        y
    }

    #[test]
    fn pools_match_naive() {
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
        ];
        for (ci, &(h, w, k, s, d, pads, ceil)) in cases.iter().enumerate() {
            let x = rand_vec(2 * 3 * h * w, ci as u64);
            let ap = AutoPad::NotSet;
            let (oh, _, _) =
                window_out(h, k[0], s[0], d[0], pads[0], pads[2], ap, ceil, "t").unwrap();
            let (ow, _, _) =
                window_out(w, k[1], s[1], d[1], pads[1], pads[3], ap, ceil, "t").unwrap();
            let mp = MaxPool {
                kernel: k,
                strides: s,
                pads,
                dilations: d,
                ceil_mode: ceil,
                auto_pad: ap,
            };
            let out = run(&mp, &[Some(t(&x, &[2, 3, h, w]))], 1).unwrap();
            assert_eq!(out[0].0, vec![2, 3, oh, ow]);
            let p0 = [pads[0], pads[1]];
            let p1 = [pads[2], pads[3]];
            for p in 0..6 {
                let want = naive(
                    &x[p * h * w..(p + 1) * h * w],
                    h,
                    w,
                    k,
                    s,
                    d,
                    p0,
                    p1,
                    [oh, ow],
                    0,
                );
                assert_close(&out[0].1[p * oh * ow..(p + 1) * oh * ow], &want, 1e-6);
            }
            if d != [1, 1] {
                continue;
            }
            for include in [false, true] {
                let avg = AveragePool {
                    kernel: k,
                    strides: s,
                    pads,
                    ceil_mode: ceil,
                    count_include_pad: include,
                    auto_pad: ap,
                };
                let out = run(&avg, &[Some(t(&x, &[2, 3, h, w]))], 1).unwrap();
                for p in 0..6 {
                    let want = naive(
                        &x[p * h * w..(p + 1) * h * w],
                        h,
                        w,
                        k,
                        s,
                        d,
                        p0,
                        p1,
                        [oh, ow],
                        1 + include as u8,
                    );
                    assert_close(&out[0].1[p * oh * ow..(p + 1) * oh * ow], &want, 1e-5);
                }
            }
        }
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
            kernel: [3, 3],
            strides: [2, 2],
            pads: [0; 4],
            dilations: [1, 1],
            ceil_mode: true,
            auto_pad: AutoPad::NotSet,
        };
        let out = run(&mp, &[Some(xt)], 1).unwrap();
        assert_eq!(out[0].1, vec![12., 14., 22., 24.]);
        let ap = AveragePool {
            kernel: [3, 3],
            strides: [1, 1],
            pads: [1, 1, 1, 1],
            ceil_mode: false,
            count_include_pad: true,
            auto_pad: AutoPad::NotSet,
        };
        let out = run(&ap, &[Some(xt)], 1).unwrap();
        assert_close(&out[0].1[..3], &[1.3333334, 2.3333333, 3.0], 1e-6);
        let ap = AveragePool {
            kernel: [2, 2],
            strides: [2, 2],
            pads: [0; 4],
            ceil_mode: true,
            count_include_pad: false,
            auto_pad: AutoPad::NotSet,
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
        // Indices output is rejected.
        assert!(run(&mp, &[Some(xt)], 2).is_err());
    }

    #[test]
    fn same_padding_and_1d() {
        let x = rand_vec(2 * 10, 3);
        let mp = MaxPool {
            kernel: [1, 3],
            strides: [1, 2],
            pads: [0; 4],
            dilations: [1, 1],
            ceil_mode: false,
            auto_pad: AutoPad::SameUpper,
        };
        let out = run(&mp, &[Some(t(&x, &[1, 2, 10]))], 1).unwrap();
        assert_eq!(out[0].0, vec![1, 2, 5]);
        // total pad = (5-1)*2 + 3 - 10 = 1 -> begin 0, end 1.
        let want = naive(
            &x[..10],
            1,
            10,
            [1, 3],
            [1, 2],
            [1, 1],
            [0, 0],
            [0, 1],
            [1, 5],
            0,
        );
        assert_close(&out[0].1[..5], &want, 0.0);
        let ap = AveragePool {
            kernel: [1, 3],
            strides: [1, 2],
            pads: [0; 4],
            ceil_mode: false,
            count_include_pad: true,
            auto_pad: AutoPad::SameLower,
        };
        let out = run(&ap, &[Some(t(&x, &[1, 2, 10]))], 1).unwrap();
        let want = naive(
            &x[10..],
            1,
            10,
            [1, 3],
            [1, 2],
            [1, 1],
            [0, 1],
            [0, 0],
            [1, 5],
            2,
        );
        assert_close(&out[0].1[5..], &want, 1e-6);
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
}
