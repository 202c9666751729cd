//! Pooling: `MaxPool` (with its optional `Indices` output), `AveragePool`,
//! `LpPool`, `MaxUnpool`, `GlobalAveragePool`, `GlobalMaxPool`.
//!
//! Windowed pools take inputs `[N, C, D1, …, Dk]` with `1 <= k <= 3`
//! ([`MAX_SPATIAL`]). Their window attributes ([`Window`]) are stored
//! right-aligned in arrays of [`MAX_SPATIAL`] entries: a 2-D pool has
//! `kernel = [1, kH, kW]`, `strides = [1, sH, sW]`,
//! `pads = [0, top, left, 0, bottom, right]`, `dilations = [1, dH, dW]`, and
//! `spatial = 2` (the input must then have rank 4).
//!
//! 1-D and 2-D float32 max and (undilated) average pools run on a dedicated
//! plane loop (`plane2d`); everything else (3-D, other dtypes, dilated
//! averages, `LpPool`, indices) on the general N-D loop (`nd`).
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::conv::{AutoPad, window_out};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::gemm::{check_f32, f32_in, f32_out, scratch_f32};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

mod fold;
mod nd;
mod plane2d;
mod unpool;

pub use unpool::MaxUnpool;

#[cfg(test)]
mod tests;

/// The most spatial dims a windowed pool supports.
pub const MAX_SPATIAL: usize = 3;

/// Window attributes shared by the windowed pools (see the module docs for
/// the right-aligned layout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Number of spatial dims (`1..=3`); the input has rank `2 + spatial`.
    pub spatial: usize,
    /// Window size per spatial dim.
    pub kernel: [usize; MAX_SPATIAL],
    /// Strides per spatial dim.
    pub strides: [usize; MAX_SPATIAL],
    /// Begin pads of each spatial dim, then end pads.
    pub pads: [usize; 2 * MAX_SPATIAL],
    /// Dilations per spatial dim.
    pub dilations: [usize; MAX_SPATIAL],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Automatic padding.
    pub auto_pad: AutoPad,
}
crate::to_rust_struct!(ops::pool::Window {
    spatial,
    kernel,
    strides,
    pads,
    dilations,
    ceil_mode,
    auto_pad
});

impl Window {
    /// A window over `spatial` dims with unit strides and dilations, no
    /// padding, `ceil_mode` off and `auto_pad` `NOTSET`; `kernel` is
    /// right-aligned like the other fields.
    pub const fn new(spatial: usize, kernel: [usize; MAX_SPATIAL]) -> Window {
        Window {
            spatial,
            kernel,
            strides: [1; MAX_SPATIAL],
            pads: [0; 2 * MAX_SPATIAL],
            dilations: [1; MAX_SPATIAL],
            ceil_mode: false,
            auto_pad: AutoPad::NotSet,
        }
    }

    /// The geometry of this window over an input of shape `x`.
    fn geom(&self, x: &Shape, op: &'static str) -> Result<Geom, KernelError> {
        if self.spatial == 0 || self.spatial > MAX_SPATIAL {
            return Err(KernelError::Invalid {
                op,
                msg: "pools have 1 to 3 spatial dims",
            });
        }
        if x.rank() != 2 + self.spatial {
            return Err(KernelError::Shape {
                op,
                msg: "input rank is not 2 + the number of kernel dims",
            });
        }
        let lead = MAX_SPATIAL - self.spatial;
        let mut g = Geom {
            n: x.dim(0),
            c: x.dim(1),
            x: [1; MAX_SPATIAL],
            out: [1; MAX_SPATIAL],
            k: [1; MAX_SPATIAL],
            s: [1; MAX_SPATIAL],
            d: [1; MAX_SPATIAL],
            pad0: [0; MAX_SPATIAL],
            pad1: [0; MAX_SPATIAL],
            lead,
        };
        g.x[lead..].copy_from_slice(&x.dims()[2..]);
        for i in lead..MAX_SPATIAL {
            let (o, p0, p1) = window_out(
                g.x[i],
                self.kernel[i],
                self.strides[i],
                self.dilations[i],
                self.pads[i],
                self.pads[MAX_SPATIAL + i],
                self.auto_pad,
                self.ceil_mode,
                op,
            )?;
            // The padded extent plus a stride and a window must be
            // addressable, so that no window coordinate (an output index
            // times the stride, less the begin pad) overflows.
            let span = self.kernel[i]
                .checked_sub(1)
                .and_then(|k| k.checked_mul(self.dilations[i]))
                .and_then(|v| v.checked_add(1));
            let extent = g.x[i]
                .checked_add(p0)
                .and_then(|v| v.checked_add(p1))
                .and_then(|v| v.checked_add(self.strides[i]))
                .zip(span)
                .and_then(|(e, sp)| e.checked_add(sp));
            if extent.is_none_or(|e| e > isize::MAX as usize) {
                return Err(KernelError::Invalid {
                    op,
                    msg: "the padded input is larger than this machine can address",
                });
            }
            g.out[i] = o;
            g.pad0[i] = p0;
            g.pad1[i] = p1;
            g.k[i] = self.kernel[i];
            g.s[i] = self.strides[i];
            g.d[i] = self.dilations[i];
        }
        Ok(g)
    }
}

/// Window geometry of a pool over one input, right-aligned in
/// [`MAX_SPATIAL`] slots (leading unused slots have size 1 and a unit
/// window).
#[derive(Clone, Copy, Debug)]
struct Geom {
    n: usize,
    c: usize,
    /// Input spatial sizes.
    x: [usize; MAX_SPATIAL],
    /// Output spatial sizes.
    out: [usize; MAX_SPATIAL],
    k: [usize; MAX_SPATIAL],
    s: [usize; MAX_SPATIAL],
    d: [usize; MAX_SPATIAL],
    /// Begin padding per axis (after `auto_pad`).
    pad0: [usize; MAX_SPATIAL],
    /// End padding per axis (after `auto_pad`).
    pad1: [usize; MAX_SPATIAL],
    /// Number of unused leading slots.
    lead: usize,
}

impl Geom {
    fn in_plane(&self) -> usize {
        self.x.iter().product()
    }

    fn out_plane(&self) -> usize {
        self.out.iter().product()
    }

    fn planes(&self) -> usize {
        self.n * self.c
    }

    /// `[N, C, out…]`.
    fn out_shape(&self) -> Result<Shape, KernelError> {
        let mut s = Shape::new(&[self.n, self.c])?;
        for &o in &self.out[self.lead..] {
            s.push(o)?;
        }
        Ok(s)
    }

    /// Checks the buffer sizes of a plane-wise pool; `Ok(false)` when there
    /// is nothing to compute.
    fn check_buffers(&self, x: usize, y: usize, op: &'static str) -> Result<bool, KernelError> {
        let (ip, op_) = (self.in_plane(), self.out_plane());
        if x != self.planes() * ip || y != self.planes() * op_ {
            return Err(KernelError::Buffer { op });
        }
        if op_ == 0 || self.planes() == 0 {
            return Ok(false);
        }
        if ip == 0 {
            return Err(KernelError::Shape {
                op,
                msg: "empty spatial input",
            });
        }
        Ok(true)
    }
}

/// Input index range `[lo, hi)` (in window steps) of the window starting at
/// `start` that lies inside `0..len`.
#[inline]
fn valid_taps(start: isize, k: usize, d: usize, len: usize) -> (usize, usize) {
    // Without overflow for any start: a hostile window can start near
    // isize::MIN (the negation and the distance to the end overflowed).
    let d = d.max(1);
    let lo = if start >= 0 {
        0
    } else {
        start.unsigned_abs().div_ceil(d)
    };
    let last = (len as isize - 1).checked_sub(start).unwrap_or(isize::MAX);
    let hi = if last < 0 {
        0
    } else {
        (last as usize / d).saturating_add(1).min(k)
    };
    (lo, hi.max(lo))
}

/// Number of taps of the window starting at `start` that lie before `end`
/// (the end of the explicitly padded input).
#[inline]
fn taps_before(start: isize, k: usize, d: usize, end: usize) -> usize {
    let room = end as isize - start;
    if room <= 0 {
        0
    } else {
        (room as usize).div_ceil(d).min(k)
    }
}

fn check_outputs(n: usize, max: usize, op: &'static str) -> Result<(), KernelError> {
    if n == 0 || n > max {
        return Err(KernelError::Invalid {
            op,
            msg: if max == 1 {
                "expected 1 output"
            } else {
                "expected 1 or 2 outputs"
            },
        });
    }
    Ok(())
}

/// ONNX `MaxPool` over 1 to 3 spatial dims, for float32, float64, int8 and
/// uint8 (float16/bfloat16 are widened to float32 by the compiler).
///
/// Input: `X` `[N, C, D1, …]`. Outputs: `Y`, optional `Indices` (int64):
/// the flat index of each selected element in `X`, with the spatial part
/// row-major (`storage_order = 0`) or column-major (`storage_order = 1`);
/// the first maximum of a window wins. A window without any element inside
/// `X` yields the dtype's lowest value and index -1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxPool {
    /// Window attributes.
    pub window: Window,
    /// `storage_order = 1`: column-major spatial indices.
    pub column_major: bool,
}
crate::to_rust_struct!(ops::pool::MaxPool {
    window,
    column_major
});

impl Kernel for MaxPool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "MaxPool";
        check_outputs(outputs.len(), 2, OP)?;
        let x = input(inputs, 0, OP)?;
        if !matches!(x.dtype, DType::F32 | DType::F64 | DType::I8 | DType::U8) {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: x.dtype,
            });
        }
        let s = self.window.geom(&x.shape, OP)?.out_shape()?;
        outputs.fill(s);
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        // The float32 plane path stages rows (reserved with or without an
        // `Indices` output: a few rows' worth).
        match inputs.first() {
            Some(Some(x)) if x.dtype == DType::F32 => self
                .window
                .geom(&x.shape, "MaxPool")
                .ok()
                .filter(|g| g.lead > 0)
                .and_then(|g| plane2d::max_scratch_len(&g)?.checked_mul(4))
                // `run` refuses a geometry whose scratch does not fit.
                .unwrap_or(0),
            _ => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "MaxPool";
        check_outputs(outputs.len(), 2, OP)?;
        let xt = input(inputs, 0, OP)?;
        let g = self.window.geom(&xt.shape, OP)?;
        let (first, rest) = outputs.split_at_mut(1);
        let yt = &mut first[0];
        if yt.dtype != xt.dtype {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: xt.dtype,
                found: yt.dtype,
            });
        }
        let indices = match rest.first_mut() {
            Some(t) => Some(t.typed::<i64>(OP)?),
            None => None,
        };
        if indices.is_none() && xt.dtype == DType::F32 && g.lead > 0 {
            let x = f32_in(xt, OP)?;
            let y = f32_out(yt, OP)?;
            if g.check_buffers(x.len(), y.len(), OP)? {
                let len = plane2d::max_scratch_len(&g).ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "window too large for the plane loops",
                })?;
                let rows = scratch_f32(scratch, len, OP)?;
                plane2d::max(&g, x, y, rows);
            }
            return Ok(());
        }
        dispatch!(xt.dtype, OP, [F32 => f32, F64 => f64, I8 => i8, U8 => u8], |T| {
            let x = xt.typed::<T>(OP)?;
            let y = yt.typed::<T>(OP)?;
            if let Some(ix) = &indices
                && ix.len() != y.len()
            {
                return Err(KernelError::Buffer { op: OP });
            }
            if g.check_buffers(x.len(), y.len(), OP)? {
                nd::max(&g, x, y, indices, self.column_major);
            }
            Ok(())
        })
    }
}

/// ONNX `AveragePool` over 1 to 3 spatial dims (float32).
///
/// Input: `X`. Output: `Y`. With `count_include_pad` the divisor counts the
/// window taps inside the explicitly padded input (not the extra positions
/// `ceil_mode` adds); otherwise only taps inside `X`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AveragePool {
    /// Window attributes.
    pub window: Window,
    /// Count padded positions in the divisor.
    pub count_include_pad: bool,
}
crate::to_rust_struct!(ops::pool::AveragePool {
    window,
    count_include_pad
});

impl AveragePool {
    /// Whether the float32 plane loops take this geometry: at most two
    /// spatial dims, undilated.
    fn plane_path(g: &Geom) -> bool {
        g.lead > 0 && g.d == [1; MAX_SPATIAL]
    }
}

impl Kernel for AveragePool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "AveragePool";
        check_outputs(outputs.len(), 1, OP)?;
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        outputs[0] = self.window.geom(&x.shape, OP)?.out_shape()?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        // The plane path stages rows and keeps a row of divisors.
        match inputs.first() {
            Some(Some(x)) if x.dtype == DType::F32 => self
                .window
                .geom(&x.shape, "AveragePool")
                .ok()
                .filter(Self::plane_path)
                .and_then(|g| plane2d::avg_scratch_len(&g)?.checked_mul(4))
                .unwrap_or(0),
            _ => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "AveragePool";
        check_outputs(outputs.len(), 1, OP)?;
        let xt = input(inputs, 0, OP)?;
        let g = self.window.geom(&xt.shape, OP)?;
        let x = f32_in(xt, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if !g.check_buffers(x.len(), y.len(), OP)? {
            return Ok(());
        }
        if Self::plane_path(&g) {
            let len = plane2d::avg_scratch_len(&g).ok_or(KernelError::Invalid {
                op: OP,
                msg: "window too large for the plane loops",
            })?;
            let rows = scratch_f32(scratch, len, OP)?;
            plane2d::avg(&g, x, y, rows, self.count_include_pad);
        } else {
            nd::avg(&g, x, y, self.count_include_pad);
        }
        Ok(())
    }
}

/// ONNX `LpPool` over 1 to 3 spatial dims (float32):
/// `Y = (Σ |x|^p)^(1/p)` over the window taps inside `X` (padding adds
/// zeros).
///
/// Input: `X`. Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LpPool {
    /// Window attributes.
    pub window: Window,
    /// The norm's exponent (at least 1).
    pub p: u32,
}
crate::to_rust_struct!(ops::pool::LpPool { window, p });

impl Kernel for LpPool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "LpPool";
        check_outputs(outputs.len(), 1, OP)?;
        if self.p == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "p must be positive",
            });
        }
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        outputs[0] = self.window.geom(&x.shape, OP)?.out_shape()?;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "LpPool";
        check_outputs(outputs.len(), 1, OP)?;
        if self.p == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "p must be positive",
            });
        }
        let xt = input(inputs, 0, OP)?;
        let g = self.window.geom(&xt.shape, OP)?;
        let x = f32_in(xt, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if g.check_buffers(x.len(), y.len(), OP)? {
            nd::lp(&g, x, y, self.p);
        }
        Ok(())
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
    let big = || KernelError::Invalid {
        op,
        msg: "element count overflows",
    };
    let planes = xt
        .shape
        .dim(0)
        .checked_mul(xt.shape.dim(1))
        .ok_or_else(big)?;
    let area = xt.shape.dims()[2..]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(big)?;
    Ok((s, planes, area))
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
            plane_sum(p) / p.len() as f32
        })
    }
}

/// The sum of a plane: [`crate::simd::pairwise_sum`] with 64 partial
/// sums (on AVX-512, four accumulators of independent chains; one chain of
/// eight lanes, bound by the add latency, was a visible share of a small
/// classifier's time).
fn plane_sum(p: &[f32]) -> f32 {
    crate::simd::pairwise_sum::<64>(p, None)
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
