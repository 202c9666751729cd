//! `Resize` (opset 13+ inputs: `X`, `roi`, `scales`, `sizes`).
//!
//! Supported: nearest, linear and cubic interpolation over the last two
//! axes of a tensor of rank >= 2 (every other axis must keep its size), all
//! coordinate transformation modes, `exclude_outside` and
//! `extrapolation_value`. Anything else (resizing a leading axis, antialias
//! when downsampling) is rejected with [`KernelError::Invalid`].
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::{IntList, MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

mod coords;
#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests;

use coords::{EXTRAPOLATE, taps};

const OP: &str = "Resize";

/// Interpolation `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    /// Nearest neighbour (see [`NearestMode`]).
    Nearest,
    /// (Bi)linear.
    Linear,
    /// (Bi)cubic with `cubic_coeff_a`.
    Cubic,
}
crate::to_rust_enum!(ops::resize::ResizeMode {
    Nearest,
    Linear,
    Cubic
});

/// `coordinate_transformation_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordMode {
    /// `half_pixel` (the default).
    HalfPixel,
    /// `pytorch_half_pixel`.
    PytorchHalfPixel,
    /// `align_corners`.
    AlignCorners,
    /// `asymmetric`.
    Asymmetric,
    /// `tf_crop_and_resize` (uses `roi` and `extrapolation_value`).
    TfCropAndResize,
    /// `half_pixel_symmetric`.
    HalfPixelSymmetric,
}
crate::to_rust_enum!(ops::resize::CoordMode {
    HalfPixel,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
    HalfPixelSymmetric
});

/// `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    /// `round_prefer_floor` (the default).
    RoundPreferFloor,
    /// `round_prefer_ceil`.
    RoundPreferCeil,
    /// `floor`.
    Floor,
    /// `ceil`.
    Ceil,
}
crate::to_rust_enum!(ops::resize::NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil
});

/// ONNX `Resize`.
///
/// Inputs: `X`, optional `roi` (f32, `2·rank` values, only read for
/// `TfCropAndResize`), optional `scales` (f32, one per axis), optional
/// `sizes` (i64, one per axis). An empty `scales`/`sizes` tensor counts as
/// absent; exactly one of them must be given. With `axes`, `scales`,
/// `sizes` and `roi` hold values for those axes only. Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resize {
    /// Interpolation mode.
    pub mode: ResizeMode,
    /// Coordinate transformation.
    pub coord: CoordMode,
    /// Rounding of nearest mode.
    pub nearest: NearestMode,
    /// Cubic coefficient `A` (ONNX default -0.75).
    pub cubic_coeff_a: f32,
    /// Zero (and renormalize) the cubic weights of taps outside the input.
    pub exclude_outside: bool,
    /// Value of outputs mapping outside the input in `TfCropAndResize`.
    pub extrapolation_value: f32,
    /// Antialiasing filter when downsampling (only accepted when no axis is
    /// downsampled, where it changes nothing).
    pub antialias: bool,
    /// The axes `scales`, `sizes` and `roi` refer to (empty: all, in order).
    pub axes: IntList,
    /// How `sizes` is met.
    pub aspect: AspectPolicy,
}
crate::to_rust_struct!(ops::resize::Resize {
    mode,
    coord,
    nearest,
    cubic_coeff_a,
    exclude_outside,
    extrapolation_value,
    antialias,
    axes,
    aspect
});

/// An optional input that is present and non-empty.
fn present<'a, 'b>(inputs: &'b [Option<TensorRef<'a>>], i: usize) -> Option<&'b TensorRef<'a>> {
    opt_input(inputs, i).filter(|t| t.numel() > 0)
}

/// `keep_aspect_ratio_policy` (applies to `sizes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AspectPolicy {
    /// Each axis gets its size (the default).
    Stretch,
    /// One scale for all resized axes, the largest keeping every axis within
    /// its size.
    NotLarger,
    /// One scale for all resized axes, the smallest reaching every size.
    NotSmaller,
}
crate::to_rust_enum!(ops::resize::AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller
});

impl Resize {
    /// The axis each `scales`/`sizes`/`roi` entry refers to, and how many
    /// entries there are (every axis in order when `axes` is empty).
    fn axis_map(&self, rank: usize) -> Result<([usize; MAX_RANK], usize), KernelError> {
        let mut map = [0usize; MAX_RANK];
        if self.axes.len == 0 {
            for (i, m) in map.iter_mut().enumerate().take(rank) {
                *m = i;
            }
            return Ok((map, rank));
        }
        if self.axes.len > rank {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "more axes than the input has",
            });
        }
        for (i, &a) in self.axes.as_slice().iter().enumerate() {
            map[i] = crate::shape::normalize_axis(a, rank, OP)?;
            if map[..i].contains(&map[i]) {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "repeated axis",
                });
            }
        }
        Ok((map, self.axes.len))
    }

    /// Output dims and per-axis scale factors.
    fn plan(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Shape, Shape, [f64; MAX_RANK]), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        let r = x.shape.rank();
        let (map, n) = self.axis_map(r)?;
        let map = &map[..n];
        let mut scales = [1f64; MAX_RANK];
        let mut out = x.shape;
        if let Some(sz) = present(inputs, 3) {
            if sz.numel() != n {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "sizes must have one value per resized axis",
                });
            }
            if !sz.has_data() {
                return Err(KernelError::NeedsData { op: OP });
            }
            let mut v = [0i64; MAX_RANK];
            sz.read_i64s(OP, &mut v)?;
            if v[..n].iter().any(|&d| d < 0) {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "negative size",
                });
            }
            let ratio = |i: usize| v[i] as f64 / x.shape.dim(map[i]) as f64;
            let common = match self.aspect {
                AspectPolicy::Stretch => None,
                AspectPolicy::NotLarger => (0..n).map(ratio).reduce(f64::min),
                AspectPolicy::NotSmaller => (0..n).map(ratio).reduce(f64::max),
            };
            for (i, &ax) in map.iter().enumerate() {
                match common {
                    None => {
                        out.dims_mut()[ax] = v[i] as usize;
                        scales[ax] = ratio(i);
                    }
                    Some(s) => {
                        // Rounded half up, as the ONNX reference does.
                        out.dims_mut()[ax] = (s * x.shape.dim(ax) as f64 + 0.5).floor() as usize;
                        scales[ax] = s;
                    }
                }
            }
        } else if let Some(sc) = present(inputs, 2) {
            if sc.numel() != n {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "scales must have one value per resized axis",
                });
            }
            if sc.dtype != DType::F32 {
                return Err(KernelError::UnsupportedDType {
                    op: OP,
                    dtype: sc.dtype,
                });
            }
            if !sc.has_data() {
                return Err(KernelError::NeedsData { op: OP });
            }
            let v = sc.typed::<f32>(OP)?;
            for (i, &ax) in map.iter().enumerate() {
                let s = v[i] as f64;
                if !s.is_finite() || s <= 0.0 {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "scales must be positive",
                    });
                }
                scales[ax] = s;
                out.dims_mut()[ax] = (s * x.shape.dim(ax) as f64).floor() as usize;
            }
        } else {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "one of scales or sizes is required",
            });
        }
        Ok((x.shape, out, scales))
    }

    /// Reads `roi` (start, end) of the last two axes.
    fn roi_of(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        rank: usize,
    ) -> Result<[(f64, f64); 2], KernelError> {
        let roi = present(inputs, 1).ok_or(KernelError::Invalid {
            op: OP,
            msg: "tf_crop_and_resize needs roi",
        })?;
        let v = f32_in(roi, OP)?;
        let (map, n) = self.axis_map(rank)?;
        if v.len() != 2 * n {
            return Err(KernelError::Shape {
                op: OP,
                msg: "roi must have 2 values per resized axis",
            });
        }
        let mut full = [(0f64, 1f64); MAX_RANK];
        for (i, &ax) in map[..n].iter().enumerate() {
            full[ax] = (v[i] as f64, v[n + i] as f64);
        }
        if full[..rank - 2].iter().any(|&r| r != (0.0, 1.0)) {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "only the last two axes may be cropped",
            });
        }
        Ok([full[rank - 2], full[rank - 1]])
    }
}

impl Resize {
    /// Checks what this implementation supports; returns `(in, out, scales)`.
    fn check(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Shape, Shape, [f64; MAX_RANK]), KernelError> {
        let (xs, ys, scales) = self.plan(inputs)?;
        let r = xs.rank();
        if r < 2 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "Resize needs a tensor of rank >= 2",
            });
        }
        for (i, sc) in scales.iter().enumerate().take(r - 2) {
            if xs.dim(i) != ys.dim(i) || (sc - 1.0).abs() > 1e-6 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "only the last two axes may be resized",
                });
            }
        }
        if self.antialias
            && (scales[r - 2] < 1.0 || scales[r - 1] < 1.0 || self.mode == ResizeMode::Nearest)
        {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "antialias is not supported",
            });
        }
        Ok((xs, ys, scales))
    }
}

impl Kernel for Resize {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (_, ys, _) = self.check(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: OP,
            msg: "no output",
        })? = ys;
        Ok(())
    }

    fn scratch_bytes(&self, _inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        // Tap tables for the output rows and columns (from the output shape,
        // which the compiler may know only from the model's declaration).
        match outputs.first().map(|ys| (ys.rank(), ys)) {
            // Saturated: a size past usize is refused by the arena cap.
            Some((r, ys)) if r >= 2 => {
                (8 * taps(self.mode)).saturating_mul(ys.dim(r - 2).saturating_add(ys.dim(r - 1)))
            }
            Some((_, ys)) => (8 * taps(self.mode) * 2).saturating_mul(ys.numel()),
            None => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (xs, ys, scales) = self.check(inputs)?;
        let r = xs.rank();
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if y.len() != ys.numel() || x.len() != xs.numel() {
            return Err(KernelError::Buffer { op: OP });
        }
        let (ih, iw) = (xs.dim(r - 2), xs.dim(r - 1));
        let (oh, ow) = (ys.dim(r - 2), ys.dim(r - 1));
        if y.is_empty() {
            return Ok(());
        }
        if ih == 0 || iw == 0 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "cannot resize an empty input to a non-empty output",
            });
        }
        let rois = if self.coord == CoordMode::TfCropAndResize {
            self.roi_of(inputs, r)?
        } else {
            [(0.0, 1.0); 2]
        };
        let t = taps(self.mode);
        let n = t * (oh + ow);
        let bytes = scratch
            .get_mut(..8 * n)
            .ok_or(KernelError::Buffer { op: OP })?;
        let (ib, wb) = bytes.split_at_mut(4 * n);
        let idx: &mut [u32] =
            bytemuck::try_cast_slice_mut(ib).map_err(|_| KernelError::Buffer { op: OP })?;
        let wts: &mut [f32] =
            bytemuck::try_cast_slice_mut(wb).map_err(|_| KernelError::Buffer { op: OP })?;
        let (hi, wi) = idx.split_at_mut(t * oh);
        let (hw, ww) = wts.split_at_mut(t * oh);
        self.axis_taps(scales[r - 2], ih, oh, rois[0], hi, hw);
        self.axis_taps(scales[r - 1], iw, ow, rois[1], wi, ww);
        let ext = self.extrapolation_value;
        let (hi, hw, wi, ww) = (&*hi, &*hw, &*wi, &*ww);
        // Nearest along W by a whole factor (`ow = s·iw`, column `o` reads
        // `o / s`, none outside): each input value repeated `s` times.
        let upsample = (t == 1 && ow % iw == 0)
            .then_some(ow / iw)
            .filter(|&s| wi.iter().enumerate().all(|(o, &c)| c as usize == o / s));
        let plane = |xp: &[f32], yp: &mut [f32]| {
            if t == 1 {
                nearest_plane(xp, yp, hi, wi, iw, ow, upsample, ext);
                return;
            }
            for (o_h, yr) in yp.chunks_exact_mut(ow).enumerate() {
                let th = &hi[o_h * t..(o_h + 1) * t];
                let tw = &hw[o_h * t..(o_h + 1) * t];
                if th[0] == EXTRAPOLATE {
                    yr.fill(ext);
                    continue;
                }
                for (o_w, o) in yr.iter_mut().enumerate() {
                    let cw = &wi[o_w * t..(o_w + 1) * t];
                    if cw[0] == EXTRAPOLATE {
                        *o = ext;
                        continue;
                    }
                    let cwt = &ww[o_w * t..(o_w + 1) * t];
                    let mut acc = 0f32;
                    for (&rh, &wh) in th.iter().zip(tw) {
                        let row = &xp[rh as usize * iw..(rh as usize + 1) * iw];
                        let mut s = 0f32;
                        for (&c, &wv) in cw.iter().zip(cwt) {
                            s += wv * row[c as usize];
                        }
                        acc += wh * s;
                    }
                    *o = acc;
                }
            }
        };
        #[cfg(feature = "std")]
        {
            let (planes, threads) = (y.len() / (oh * ow), crate::threads::num_threads());
            if threads > 1 && planes > 1 && y.len() >= crate::threads::PARALLEL_MIN_ELEMS {
                // Whole planes per task.
                let per = planes.div_ceil(threads);
                let shared = crate::threads::SharedMut::new(y);
                crate::threads::run(planes.div_ceil(per), &mut [], &|t, _| {
                    for p in t * per..((t + 1) * per).min(planes) {
                        // SAFETY: plane p of Y belongs to task t alone, and
                        // `run` returns after every task.
                        let yp = unsafe { shared.range(p * oh * ow, oh * ow) };
                        plane(&x[p * ih * iw..(p + 1) * ih * iw], yp);
                    }
                });
                return Ok(());
            }
        }
        for (xp, yp) in x.chunks_exact(ih * iw).zip(y.chunks_exact_mut(oh * ow)) {
            plane(xp, yp);
        }
        Ok(())
    }
}

/// One plane of a nearest-neighbour resize: output row `o` reads input row
/// `rows[o]` through the column table `cols` (see [`nearest_row`]); a row
/// that reads the same input row as the one above is a copy of it.
#[allow(clippy::too_many_arguments)]
fn nearest_plane(
    xp: &[f32],
    yp: &mut [f32],
    rows: &[u32],
    cols: &[u32],
    iw: usize,
    ow: usize,
    upsample: Option<usize>,
    ext: f32,
) {
    for (o_h, &src) in rows.iter().enumerate() {
        let (done, rest) = yp.split_at_mut(o_h * ow);
        let yr = &mut rest[..ow];
        if src == EXTRAPOLATE {
            yr.fill(ext);
        } else if o_h > 0 && rows[o_h - 1] == src {
            yr.copy_from_slice(&done[(o_h - 1) * ow..]);
        } else {
            let row = &xp[src as usize * iw..(src as usize + 1) * iw];
            nearest_row(row, cols, upsample, ext, yr);
        }
    }
}

/// One output row of a nearest-neighbour resize from its input row: column
/// `o` is `row[cols[o]]` (`ext` where `cols[o]` is [`EXTRAPOLATE`]); with
/// `upsample = Some(s)` (which the caller checked `cols` to be), each input
/// value repeated `s` times.
fn nearest_row(row: &[f32], cols: &[u32], upsample: Option<usize>, ext: f32, yr: &mut [f32]) {
    /// `S` copies of each value, a constant width the compiler vectorizes.
    fn repeat<const S: usize>(row: &[f32], yr: &mut [f32]) {
        for (dst, &v) in yr.chunks_exact_mut(S).zip(row) {
            dst.copy_from_slice(&[v; S]);
        }
    }
    match upsample {
        Some(1) => yr.copy_from_slice(&row[..yr.len()]),
        Some(2) => repeat::<2>(row, yr),
        Some(4) => repeat::<4>(row, yr),
        Some(8) => repeat::<8>(row, yr),
        Some(s) => {
            for (dst, &v) in yr.chunks_exact_mut(s).zip(row) {
                dst.fill(v);
            }
        }
        None => {
            for (o, &c) in yr.iter_mut().zip(cols) {
                *o = if c == EXTRAPOLATE {
                    ext
                } else {
                    row[c as usize]
                };
            }
        }
    }
}
