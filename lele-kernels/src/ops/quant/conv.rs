//! `ConvInteger` and `QLinearConv`: direct N-D integer convolution with
//! zero points (padding contributes nothing, i.e. pads hold the input's
//! zero point), accumulated in 32 bits (wrapping, as ONNX allows).
use crate::dtype::{DType, Elem};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::conv::{AutoPad, window_out};
use crate::shape::{IntList, MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

use super::matmul::{Int8, dispatch_int8};
use super::{QOut, Vals, qrange, rint, saturate, set_out};

/// Most spatial dims of an input (`N, C` plus these).
const MAX_SPATIAL: usize = MAX_RANK - 2;

/// Convolution attributes shared by both operators. Empty lists mean the
/// ONNX defaults (kernel from `W`, unit strides and dilations, no pads).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QConvAttrs {
    /// Number of groups.
    pub group: usize,
    /// `kernel_shape`, one entry per spatial dim (or empty).
    pub kernel: IntList,
    /// Strides (or empty).
    pub strides: IntList,
    /// Pads `[begin.., end..]` (or empty).
    pub pads: IntList,
    /// Dilations (or empty).
    pub dilations: IntList,
    /// Automatic padding.
    pub auto_pad: AutoPad,
}
crate::to_rust_struct!(ops::quant::QConvAttrs {
    group,
    kernel,
    strides,
    pads,
    dilations,
    auto_pad
});

/// Shapes of one convolution.
#[derive(Clone, Copy, Debug)]
struct Geom {
    n: usize,
    c: usize,
    m: usize,
    cg: usize,
    mg: usize,
    nd: usize,
    input: [usize; MAX_SPATIAL],
    kernel: [usize; MAX_SPATIAL],
    out: [usize; MAX_SPATIAL],
    strides: [usize; MAX_SPATIAL],
    dil: [usize; MAX_SPATIAL],
    pad: [usize; MAX_SPATIAL],
}

impl Geom {
    fn in_size(&self) -> usize {
        self.input[..self.nd].iter().product()
    }
    fn k_size(&self) -> usize {
        self.kernel[..self.nd].iter().product()
    }
    fn out_size(&self) -> usize {
        self.out[..self.nd].iter().product()
    }
    fn out_shape(&self) -> Result<Shape, KernelError> {
        let mut s = Shape::new(&[self.n, self.m])?;
        for &d in &self.out[..self.nd] {
            s.push(d)?;
        }
        Ok(s)
    }
}

fn attr(l: &IntList, i: usize, default: i64, op: &'static str) -> Result<usize, KernelError> {
    let v = l.as_slice().get(i).copied().unwrap_or(default);
    usize::try_from(v).map_err(|_| KernelError::Invalid {
        op,
        msg: "negative convolution attribute",
    })
}

impl QConvAttrs {
    fn geom(&self, x: &Shape, w: &Shape, op: &'static str) -> Result<Geom, KernelError> {
        let r = x.rank();
        if r < 3 || w.rank() != r {
            return Err(KernelError::Shape {
                op,
                msg: "input and weights must have the same rank >= 3",
            });
        }
        let nd = r - 2;
        let lens_ok = |l: &IntList, n: usize| l.len == 0 || l.len == n;
        if !lens_ok(&self.kernel, nd)
            || !lens_ok(&self.strides, nd)
            || !lens_ok(&self.dilations, nd)
            || !lens_ok(&self.pads, 2 * nd)
        {
            return Err(KernelError::Invalid {
                op,
                msg: "convolution attributes do not match the spatial rank",
            });
        }
        let (n, c, m) = (x.dim(0), x.dim(1), w.dim(0));
        let g = self.group;
        if g == 0 || c % g != 0 || m % g != 0 || w.dim(1) * g != c {
            return Err(KernelError::Shape {
                op,
                msg: "channels do not match group and weights",
            });
        }
        let mut geom = Geom {
            n,
            c,
            m,
            cg: c / g,
            mg: m / g,
            nd,
            input: [0; MAX_SPATIAL],
            kernel: [0; MAX_SPATIAL],
            out: [0; MAX_SPATIAL],
            strides: [0; MAX_SPATIAL],
            dil: [0; MAX_SPATIAL],
            pad: [0; MAX_SPATIAL],
        };
        for i in 0..nd {
            let k = w.dim(i + 2);
            if self.kernel.len != 0 && attr(&self.kernel, i, 0, op)? != k {
                return Err(KernelError::Shape {
                    op,
                    msg: "kernel_shape does not match the weights",
                });
            }
            let s = attr(&self.strides, i, 1, op)?;
            let d = attr(&self.dilations, i, 1, op)?;
            let pb = attr(&self.pads, i, 0, op)?;
            let pe = attr(&self.pads, i + nd, 0, op)?;
            let (o, begin, _) =
                window_out(x.dim(i + 2), k, s, d, pb, pe, self.auto_pad, false, op)?;
            geom.input[i] = x.dim(i + 2);
            geom.kernel[i] = k;
            geom.out[i] = o;
            geom.strides[i] = s;
            geom.dil[i] = d;
            geom.pad[i] = begin;
        }
        Ok(geom)
    }
}

/// Advances a row-major multi-index; false after the last one.
#[inline]
fn next(idx: &mut [usize], dims: &[usize]) -> bool {
    for (i, &d) in idx.iter_mut().zip(dims).rev() {
        *i += 1;
        if *i < d {
            return true;
        }
        *i = 0;
    }
    false
}

/// Direct integer convolution: calls `emit(flat output index, output
/// channel, acc)` for every output element.
#[allow(clippy::too_many_arguments)]
fn conv_core<X: Int8 + Elem, W: Int8 + Elem>(
    g: &Geom,
    xt: &TensorRef<'_>,
    wt: &TensorRef<'_>,
    x_zp: i32,
    w_zp: Option<&Vals<'_>>,
    w_zp_per_channel: bool,
    op: &'static str,
    emit: &mut dyn FnMut(usize, usize, i32),
) -> Result<(), KernelError> {
    let x = xt.typed::<X>(op)?;
    let w = wt.typed::<W>(op)?;
    let (isz, ksz, osz, nd) = (g.in_size(), g.k_size(), g.out_size(), g.nd);
    if x.len() != g.n * g.c * isz || w.len() != g.m * g.cg * ksz {
        return Err(KernelError::Buffer { op });
    }
    if osz == 0 {
        return Ok(());
    }
    let (odims, kdims) = (&g.out[..nd], &g.kernel[..nd]);
    let mut flat = 0;
    for n in 0..g.n {
        for m in 0..g.m {
            let grp = m / g.mg;
            let wz = w_zp.map_or(0, |z| z.get(if w_zp_per_channel { m } else { 0 }) as i32);
            let mut opos = [0usize; MAX_SPATIAL];
            loop {
                let mut acc = 0i32;
                for ci in 0..g.cg {
                    let c = grp * g.cg + ci;
                    let xb = &x[(n * g.c + c) * isz..(n * g.c + c + 1) * isz];
                    let wb = &w[(m * g.cg + ci) * ksz..(m * g.cg + ci + 1) * ksz];
                    let mut kpos = [0usize; MAX_SPATIAL];
                    let mut kflat = 0;
                    loop {
                        // Input offset of this tap, or None in the padding.
                        let mut off = Some(0usize);
                        for i in 0..nd {
                            let p = (opos[i] * g.strides[i] + kpos[i] * g.dil[i])
                                .checked_sub(g.pad[i])
                                .filter(|&p| p < g.input[i]);
                            off = match (off, p) {
                                (Some(o), Some(p)) => Some(o * g.input[i] + p),
                                _ => None,
                            };
                        }
                        if let (Some(o), Some(&wv)) = (off, wb.get(kflat))
                            && let Some(&xv) = xb.get(o)
                        {
                            acc = acc.wrapping_add((xv.i32() - x_zp) * (wv.i32() - wz));
                        }
                        kflat += 1;
                        if !next(&mut kpos[..nd], kdims) {
                            break;
                        }
                    }
                }
                emit(flat, m, acc);
                flat += 1;
                if !next(&mut opos[..nd], odims) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// A scalar zero point (`None` reads as 0), checked to be a single value of
/// the operand's dtype.
fn scalar_zp(
    t: Option<&TensorRef<'_>>,
    x: &TensorRef<'_>,
    op: &'static str,
) -> Result<i32, KernelError> {
    let Some(t) = t else { return Ok(0) };
    if t.dtype != x.dtype {
        return Err(KernelError::DTypeMismatch {
            op,
            expected: x.dtype,
            found: t.dtype,
        });
    }
    if t.numel() != 1 {
        return Err(KernelError::Shape {
            op,
            msg: "the input zero point must be a scalar",
        });
    }
    Ok(Vals::new(t, op)?.get(0) as i32)
}

/// Whether a weight parameter is per output channel (`[M]`), checking that
/// it is that or a single value.
fn per_channel(t: &TensorRef<'_>, m: usize, op: &'static str) -> Result<bool, KernelError> {
    if t.numel() == 1 {
        Ok(false)
    } else if t.shape.rank() == 1 && t.numel() == m {
        Ok(true)
    } else {
        Err(KernelError::Shape {
            op,
            msg: "weight scale and zero point must be scalars or per output channel",
        })
    }
}

// ---------------------------------------------------------------------------
// ConvInteger.

/// ONNX `ConvInteger`: `Y = conv(X - x_zero_point, W - w_zero_point)` in
/// int32, over any number of spatial dims.
///
/// Inputs: `x` (int8 or uint8, `[N, C, D1, ..]`), `w` (int8 or uint8,
/// `[M, C/group, k1, ..]`), optional `x_zero_point` (scalar, dtype of `x`),
/// optional `w_zero_point` (scalar or `[M]`, dtype of `w`). Output: int32
/// `[N, M, o1, ..]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvInteger {
    /// Convolution attributes.
    pub attrs: QConvAttrs,
}
crate::to_rust_struct!(ops::quant::ConvInteger { attrs });

const CI: &str = "ConvInteger";

impl Kernel for ConvInteger {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, CI)?;
        let w = input(inputs, 1, CI)?;
        let g = self.attrs.geom(&x.shape, &w.shape, CI)?;
        if let Some(z) = opt_input(inputs, 3) {
            per_channel(z, g.m, CI)?;
        }
        set_out(outputs, 0, g.out_shape()?, CI)
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        // Each output sums `W`'s elements per output channel of products.
        let out = outputs.first().map_or(0, |s| s.numel());
        crate::kernel::product_flops(out, crate::kernel::per_leading(inputs, 1))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, CI)?;
        let w = input(inputs, 1, CI)?;
        let g = self.attrs.geom(&x.shape, &w.shape, CI)?;
        let xz = scalar_zp(opt_input(inputs, 2), x, CI)?;
        let wzt = opt_input(inputs, 3);
        let (wz, wz_pc) = match wzt {
            Some(t) => {
                if t.dtype != w.dtype {
                    return Err(KernelError::DTypeMismatch {
                        op: CI,
                        expected: w.dtype,
                        found: t.dtype,
                    });
                }
                (Some(Vals::new(t, CI)?), per_channel(t, g.m, CI)?)
            }
            None => (None, false),
        };
        let y = output(outputs, 0, CI)?.typed::<i32>(CI)?;
        if y.len() != g.n * g.m * g.out_size() {
            return Err(KernelError::Buffer { op: CI });
        }
        let mut emit = |i: usize, _m: usize, acc: i32| {
            if let Some(o) = y.get_mut(i) {
                *o = acc;
            }
        };
        dispatch_int8!(
            CI,
            x.dtype,
            w.dtype,
            conv_core(&g, x, w, xz, wz.as_ref(), wz_pc, CI, &mut emit)
        )
    }
}

// ---------------------------------------------------------------------------
// QLinearConv.

/// ONNX `QLinearConv`: an integer convolution of quantized tensors plus an
/// optional int32 bias, requantized as `y = saturate(round((acc + B) *
/// x_scale * w_scale / y_scale) + y_zero_point)`.
///
/// Inputs: `x`, `x_scale`, `x_zero_point`, `w`, `w_scale`, `w_zero_point`,
/// `y_scale`, `y_zero_point`, optional `B` (`[M]`, int32). `x`, `w` and `y`
/// are int8 or uint8 with the dtype of their zero points; scales are
/// float32. `w_scale` and `w_zero_point` may be per output channel. The
/// combined scale is computed in float32, the product in float64 (as in the
/// ONNX reference).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QLinearConv {
    /// Convolution attributes.
    pub attrs: QConvAttrs,
}
crate::to_rust_struct!(ops::quant::QLinearConv { attrs });

const QLC: &str = "QLinearConv";

impl Kernel for QLinearConv {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, QLC)?;
        let w = input(inputs, 3, QLC)?;
        let g = self.attrs.geom(&x.shape, &w.shape, QLC)?;
        per_channel(input(inputs, 4, QLC)?, g.m, QLC)?;
        if let Some(z) = opt_input(inputs, 5) {
            per_channel(z, g.m, QLC)?;
        }
        for i in [1, 2, 6, 7] {
            if let Some(t) = opt_input(inputs, i)
                && t.numel() != 1
            {
                return Err(KernelError::Shape {
                    op: QLC,
                    msg: "input and output scales and zero points must be scalars",
                });
            }
        }
        if let Some(b) = opt_input(inputs, 8)
            && b.numel() != g.m
        {
            return Err(KernelError::Shape {
                op: QLC,
                msg: "bias length differs from output channels",
            });
        }
        set_out(outputs, 0, g.out_shape()?, QLC)
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        // Each output sums `W`'s elements per output channel of products.
        let out = outputs.first().map_or(0, |s| s.numel());
        crate::kernel::product_flops(out, crate::kernel::per_leading(inputs, 3))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, QLC)?;
        let w = input(inputs, 3, QLC)?;
        let g = self.attrs.geom(&x.shape, &w.shape, QLC)?;
        let float = |i: usize| -> Result<(Vals<'_>, usize), KernelError> {
            let t = input(inputs, i, QLC)?;
            if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
                return Err(KernelError::UnsupportedDType {
                    op: QLC,
                    dtype: t.dtype,
                });
            }
            Ok((Vals::new(t, QLC)?, t.numel()))
        };
        let (xs, xs_n) = float(1)?;
        let (ws, _) = float(4)?;
        let (ys, ys_n) = float(6)?;
        let ws_pc = per_channel(input(inputs, 4, QLC)?, g.m, QLC)?;
        if xs_n != 1 || ys_n != 1 {
            return Err(KernelError::Shape {
                op: QLC,
                msg: "input and output scales must be scalars",
            });
        }
        let xz = scalar_zp(opt_input(inputs, 2), x, QLC)?;
        let wzt = opt_input(inputs, 5);
        let (wz, wz_pc) = match wzt {
            Some(t) => {
                if t.dtype != w.dtype {
                    return Err(KernelError::DTypeMismatch {
                        op: QLC,
                        expected: w.dtype,
                        found: t.dtype,
                    });
                }
                (Some(Vals::new(t, QLC)?), per_channel(t, g.m, QLC)?)
            }
            None => (None, false),
        };
        let y = output(outputs, 0, QLC)?;
        let yzt = opt_input(inputs, 7);
        let out_dtype = yzt.map_or(x.dtype, |z| z.dtype);
        if y.dtype != out_dtype {
            return Err(KernelError::DTypeMismatch {
                op: QLC,
                expected: out_dtype,
                found: y.dtype,
            });
        }
        let yz = match yzt {
            Some(t) if t.numel() != 1 => {
                return Err(KernelError::Shape {
                    op: QLC,
                    msg: "the output zero point must be a scalar",
                });
            }
            Some(t) => Vals::new(t, QLC)?.get(0),
            None => 0.0,
        };
        let bias = match opt_input(inputs, 8) {
            Some(b) if b.numel() != g.m => {
                return Err(KernelError::Shape {
                    op: QLC,
                    msg: "bias length differs from output channels",
                });
            }
            Some(b) => Some(b.typed::<i32>(QLC)?),
            None => None,
        };
        let range = qrange(y.dtype, QLC)?;
        let mut y = QOut::new(y, QLC)?;
        if y.len() != g.n * g.m * g.out_size() {
            return Err(KernelError::Buffer { op: QLC });
        }
        let (xs, ys) = (xs.get(0) as f32, ys.get(0) as f32);
        let mut emit = |i: usize, m: usize, acc: i32| {
            let b = bias.and_then(|b| b.get(m)).copied().unwrap_or(0);
            let wsv = ws.get(if ws_pc { m } else { 0 }) as f32;
            let f = (xs * wsv / ys) as f64;
            let v = acc.wrapping_add(b) as f64 * f;
            y.set(i, saturate(rint(v) + yz, range));
        };
        dispatch_int8!(
            QLC,
            x.dtype,
            w.dtype,
            conv_core(&g, x, w, xz, wz.as_ref(), wz_pc, QLC, &mut emit)
        )
    }
}
