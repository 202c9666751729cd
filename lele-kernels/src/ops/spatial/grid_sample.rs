//! `GridSample`: samples an N-D input at normalized grid positions
//! (PyTorch's `grid_sample`), for any number of spatial dims.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

use super::{Coord, set_out};

const OP: &str = "GridSample";
/// Most spatial dims: `X` is `(N, C, d1, …, dr)` within [`MAX_RANK`].
const MAX_SPATIAL: usize = MAX_RANK - 2;
/// Most taps per dim (cubic).
const MAX_TAPS: usize = 4;
/// A tap outside the input with zero padding.
const OUTSIDE: usize = usize::MAX;
/// Keys' cubic convolution parameter (as PyTorch).
const CUBIC_A: f64 = -0.75;

/// Interpolation `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridSampleMode {
    /// (Multi)linear interpolation (`linear`, formerly `bilinear`).
    Linear,
    /// The nearest cell, ties to even (`nearest`).
    Nearest,
    /// Keys cubic interpolation with `a = -0.75` (`cubic`, formerly
    /// `bicubic`).
    Cubic,
}
crate::to_rust_enum!(ops::spatial::grid_sample::GridSampleMode {
    Linear,
    Nearest,
    Cubic
});

/// `padding_mode`: the value of positions outside the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridPadding {
    /// Zero.
    Zeros,
    /// The nearest border cell.
    Border,
    /// Reflected at the border (repeatedly) back inside.
    Reflection,
}
crate::to_rust_enum!(ops::spatial::grid_sample::GridPadding {
    Zeros,
    Border,
    Reflection
});

/// ONNX `GridSample`: inputs `X` `(N, C, d1, …, dr)` and `grid`
/// `(N, D1, …, Dr, r)` whose last dim holds normalized positions in
/// `[-1, 1]`, innermost spatial dim first (`x, y[, z]`). Output
/// `(N, C, D1, …, Dr)` with `X`'s dtype. `X` and `grid` are float (`f32`,
/// `f64`, `f16`, `bf16`); the math runs in `f64` for `f64` inputs, else in
/// `f32`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridSample {
    /// Interpolation mode.
    pub mode: GridSampleMode,
    /// Padding mode.
    pub padding: GridPadding,
    /// Whether `-1` and `1` are the centers of the corner cells (else
    /// their outer edges).
    pub align_corners: bool,
}
crate::to_rust_struct!(ops::spatial::grid_sample::GridSample {
    mode,
    padding,
    align_corners
});

fn out_shape(x: &TensorRef<'_>, grid: &TensorRef<'_>) -> Result<Shape, KernelError> {
    let (xd, gd) = (x.shape.dims(), grid.shape.dims());
    let bad = |msg| Err(KernelError::Shape { op: OP, msg });
    if xd.len() < 3 {
        return bad("X must have rank 3 or more (N, C, spatial…)");
    }
    let r = xd.len() - 2;
    if gd.len() != r + 2 || gd[r + 1] != r {
        return bad("grid must be (N, D1, …, Dr, r) for an X of r spatial dims");
    }
    if gd[0] != xd[0] {
        return bad("X and grid batch sizes differ");
    }
    let mut s = x.shape;
    s.dims_mut()[2..].copy_from_slice(&gd[1..=r]);
    Ok(s)
}

impl Kernel for GridSample {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = out_shape(input(inputs, 0, OP)?, input(inputs, 1, OP)?)?;
        set_out(outputs, s, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let grid = input(inputs, 1, OP)?;
        check_data(x, OP)?;
        check_data(grid, OP)?;
        let s = out_shape(x, grid)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &s, OP)?;
        if s.numel() == 0 {
            return Ok(());
        }
        let k = *self;
        let xs = x.shape;
        dispatch!(x.dtype, OP, [
            F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
        ], |T| {
            let src = raw::<T>(x, OP)?;
            let dst = raw_mut::<T>(out, OP)?;
            dispatch!(grid.dtype, OP, [
                F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
            ], |G| {
                sample::<T, G>(&k, src, &xs, raw::<G>(grid, OP)?, dst);
                Ok(())
            })
        })
    }
}

/// Element types of `X` with the float type their math runs in.
pub(crate) trait SampleElem: Num {
    /// The compute type.
    type F: Coord;
}
impl SampleElem for f32 {
    type F = f32;
}
impl SampleElem for f64 {
    type F = f64;
}
impl SampleElem for half::f16 {
    type F = f32;
}
impl SampleElem for half::bf16 {
    type F = f32;
}

/// Reflects `x` into `[lo, hi]` by folding at the borders (as the ONNX
/// reference, in `f64`).
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let fold = |dx: f64, near: f64, far: f64, dir: f64| {
        let n = (dx / range).floor();
        let r = dx - n * range;
        if (n * 0.5).floor() * 2.0 == n {
            near + dir * r
        } else {
            far - dir * r
        }
    };
    if x < lo {
        fold(lo - x, lo, hi, 1.0)
    } else if x > hi {
        fold(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// Per spatial dim: size, stride in `X` and the valid coordinate range.
#[derive(Clone, Copy)]
struct Axis {
    size: usize,
    stride: usize,
    lo: f64,
    hi: f64,
}

/// The offset contribution of integer index `i` along `ax`, or [`OUTSIDE`].
#[inline]
fn tap(i: i64, ax: &Axis, padding: GridPadding) -> usize {
    let d = ax.size as i64;
    let j = match padding {
        GridPadding::Zeros => {
            if i < 0 || i >= d {
                return OUTSIDE;
            }
            i
        }
        GridPadding::Border => i.clamp(0, d - 1),
        GridPadding::Reflection => (reflect(i as f64, ax.lo, ax.hi) as i64).clamp(0, d - 1),
    };
    j as usize * ax.stride
}

/// Keys cubic weights of the taps at `-1, 0, 1, 2` for fraction `t`.
fn cubic<F: Coord>(t: F) -> [F; 4] {
    let a = F::c(CUBIC_A);
    let (one, two) = (F::c(1.0), F::c(2.0));
    let (c3, c4, c5, c8) = (F::c(3.0), F::c(4.0), F::c(5.0), F::c(8.0));
    let x = t.abs();
    let far = |x: F| ((a * x - c5 * a) * x + c8 * a) * x - c4 * a;
    let near = |x: F| ((a + two) * x - (a + c3)) * x * x + one;
    [far(x + one), near(x), near(one - x), far(two - x)]
}

/// Taps (offsets into one `X` plane) and weights of one output position.
struct Taps<F> {
    r: usize,
    n: usize,
    off: [[usize; MAX_TAPS]; MAX_SPATIAL],
    w: [[F; MAX_TAPS]; MAX_SPATIAL],
}

/// Separable interpolation, innermost dim first: the weighted sum over the
/// taps of dim `dim` of the interpolation of the remaining dims.
fn interp<T: SampleElem>(plane: &[T], t: &Taps<T::F>, dim: usize, base: usize) -> T::F {
    let zero = T::F::c(0.0);
    if dim == t.r {
        return plane.get(base).map_or(zero, |v| T::F::c(v.to_f64()));
    }
    let mut acc = zero;
    for k in 0..t.n {
        let o = t.off[dim][k];
        let v = if o == OUTSIDE {
            zero
        } else {
            interp(plane, t, dim + 1, base + o)
        };
        acc = acc + t.w[dim][k] * v;
    }
    acc
}

/// [`interp`] unrolled for two spatial dims (images, the common case).
#[inline]
fn interp2<T: SampleElem>(plane: &[T], t: &Taps<T::F>) -> T::F {
    let zero = T::F::c(0.0);
    let mut acc = zero;
    for ky in 0..t.n {
        let oy = t.off[0][ky];
        let mut row = zero;
        if oy != OUTSIDE {
            for kx in 0..t.n {
                let ox = t.off[1][kx];
                let v = if ox == OUTSIDE {
                    zero
                } else {
                    plane.get(oy + ox).map_or(zero, |v| T::F::c(v.to_f64()))
                };
                row = row + t.w[1][kx] * v;
            }
        }
        acc = acc + t.w[0][ky] * row;
    }
    acc
}

fn sample<T: SampleElem, G: Num>(k: &GridSample, x: &[T], xs: &Shape, grid: &[G], out: &mut [T]) {
    let xd = xs.dims();
    let r = xd.len() - 2;
    let (n, c) = (xd[0], xd[1]);
    let plane: usize = xd[2..].iter().product();
    let points = grid.len() / r.max(1) / n.max(1);
    let st = xs.strides();
    let mut axes = [Axis {
        size: 0,
        stride: 0,
        lo: 0.0,
        hi: 0.0,
    }; MAX_SPATIAL];
    for (i, ax) in axes[..r].iter_mut().enumerate() {
        let d = xd[2 + i];
        *ax = Axis {
            size: d,
            stride: st[2 + i],
            lo: if k.align_corners { 0.0 } else { -0.5 },
            hi: if k.align_corners {
                d as f64 - 1.0
            } else {
                d as f64 - 0.5
            },
        };
    }
    let (one, two) = (T::F::c(1.0), T::F::c(2.0));
    let mut t = Taps {
        r,
        n: match k.mode {
            GridSampleMode::Nearest => 1,
            GridSampleMode::Linear => 2,
            GridSampleMode::Cubic => 4,
        },
        off: [[OUTSIDE; MAX_TAPS]; MAX_SPATIAL],
        w: [[T::F::c(0.0); MAX_TAPS]; MAX_SPATIAL],
    };
    for b in 0..n {
        for p in 0..points {
            let g = &grid[(b * points + p) * r..(b * points + p + 1) * r];
            for (i, ax) in axes[..r].iter().enumerate() {
                // The grid lists coordinates innermost dim first.
                let gv = T::F::c(g[r - 1 - i].to_f64());
                let len = T::F::c(ax.size as f64);
                let mut v = if k.align_corners {
                    (gv + one) / two * (len - one)
                } else {
                    ((gv + one) * len - one) / two
                };
                if k.mode == GridSampleMode::Nearest {
                    v = v.rint();
                }
                let vf = v.f64();
                if vf < ax.lo || vf > ax.hi {
                    match k.padding {
                        GridPadding::Zeros => {}
                        GridPadding::Border => {
                            v = if vf < 0.0 {
                                T::F::c(0.0)
                            } else if vf > len.f64() - 1.0 {
                                len - one
                            } else {
                                v
                            };
                        }
                        GridPadding::Reflection => v = T::F::c(reflect(vf, ax.lo, ax.hi)),
                    }
                }
                match k.mode {
                    GridSampleMode::Nearest => {
                        t.off[i][0] = tap(v.trunc_i64(), ax, k.padding);
                        t.w[i][0] = one;
                    }
                    GridSampleMode::Linear | GridSampleMode::Cubic => {
                        let f = v.floor();
                        let x0 = f.trunc_i64();
                        let frac = v - f;
                        if k.mode == GridSampleMode::Linear {
                            t.w[i][0] = one - frac.abs();
                            t.w[i][1] = frac.abs();
                            for j in 0..2 {
                                t.off[i][j] = tap(x0.saturating_add(j as i64), ax, k.padding);
                            }
                        } else {
                            t.w[i] = cubic(frac);
                            for j in 0..4 {
                                t.off[i][j] = tap(x0.saturating_add(j as i64 - 1), ax, k.padding);
                            }
                        }
                    }
                }
            }
            for ch in 0..c {
                let src = &x[(b * c + ch) * plane..(b * c + ch + 1) * plane];
                let v = if r == 2 {
                    interp2(src, &t)
                } else {
                    interp(src, &t, 0, 0)
                };
                out[(b * c + ch) * points + p] = T::from_f64(v.f64());
            }
        }
    }
}
