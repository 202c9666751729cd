//! `ConvTranspose` as GEMM + col2im.
use super::{AutoPad, COL_BUDGET, ConvGeom, kernel_from_w, nchw, out_shape, valid_range};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{MatRef, check_f32, f32_in, f32_out, scratch_f32, sgemm, sgemm_scratch_len};
use crate::ops::unary::Activation;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `ConvTranspose` (1-D or 2-D, grouped, dilated), as GEMM + col2im.
///
/// Inputs: `X` `[N, C, (H,) W]`, `W` `[C, M/group, (kH,) kW]`, optional `B`
/// `[M]`. Output `Y` `[N, M, (oH,) oW]`. When `output_shape` is given the
/// pads are derived from it (extra padding at the end for `SameUpper`, at
/// the beginning otherwise), as the ONNX spec says. A fused `activation`
/// (never set by ONNX itself: the compiler's fusion of the activation node
/// that follows) is applied to each output once it is final.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvTranspose {
    /// Number of groups.
    pub group: usize,
    /// `kernel_shape` (`[kH, kW]`); `[0, 0]` means "read it from `W`".
    pub kernel: [usize; 2],
    /// Strides `[sH, sW]`.
    pub strides: [usize; 2],
    /// Pads `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Dilations `[dH, dW]`.
    pub dilations: [usize; 2],
    /// Extra size added to the end of each output axis.
    pub output_padding: [usize; 2],
    /// Explicit spatial output size `[oH, oW]`.
    pub output_shape: Option<[usize; 2]>,
    /// Automatic padding.
    pub auto_pad: AutoPad,
    /// The fused activation applied to the output.
    pub activation: Activation,
}
crate::to_rust_struct!(ops::conv::ConvTranspose {
    group,
    kernel,
    strides,
    pads,
    dilations,
    output_padding,
    output_shape,
    auto_pad,
    activation
});

/// Output size and begin padding of one ConvTranspose axis.
#[allow(clippy::too_many_arguments)]
fn transpose_out(
    len: usize,
    k: usize,
    s: usize,
    d: usize,
    pads: (usize, usize),
    out_pad: usize,
    explicit: Option<usize>,
    auto_pad: AutoPad,
) -> Result<(usize, usize), KernelError> {
    const OP: &str = "ConvTranspose";
    if k == 0 || s == 0 || d == 0 || len == 0 {
        return Err(KernelError::Invalid {
            op: OP,
            msg: "kernel, strides, dilations and input size must be positive",
        });
    }
    let overflow = || KernelError::Invalid {
        op: OP,
        msg: "output size overflows",
    };
    let full = s
        .checked_mul(len - 1)
        .and_then(|f| f.checked_add(out_pad))
        .and_then(|f| f.checked_add((k - 1).checked_mul(d)?))
        .and_then(|f| f.checked_add(1))
        .ok_or_else(overflow)?;
    let target = match (explicit, auto_pad) {
        (Some(o), _) => Some(o),
        (None, AutoPad::SameUpper | AutoPad::SameLower) => {
            Some(len.checked_mul(s).ok_or_else(overflow)?)
        }
        _ => None,
    };
    match target {
        Some(out) => {
            let total = full.checked_sub(out).ok_or(KernelError::Invalid {
                op: OP,
                msg: "output_shape larger than the full transposed convolution",
            })?;
            let begin = if auto_pad == AutoPad::SameUpper {
                total / 2
            } else {
                total - total / 2
            };
            Ok((out, begin))
        }
        None => {
            let (b, e) = if auto_pad == AutoPad::Valid {
                (0, 0)
            } else {
                pads
            };
            let out =
                b.checked_add(e)
                    .and_then(|p| full.checked_sub(p))
                    .ok_or(KernelError::Shape {
                        op: OP,
                        msg: "pads larger than the output",
                    })?;
            Ok((out, b))
        }
    }
}

impl ConvTranspose {
    fn geom(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<ConvGeom, KernelError> {
        const OP: &str = "ConvTranspose";
        let xt = input(inputs, 0, OP)?;
        let wt = input(inputs, 1, OP)?;
        check_f32(xt, OP)?;
        check_f32(wt, OP)?;
        let x = nchw(&xt.shape, OP)?;
        let (kh, kw) = kernel_from_w(&wt.shape, x, self.kernel, OP)?;
        let g = self.group;
        if g == 0 || wt.shape.dim(0) != x.c || x.c % g != 0 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "channels do not match group and weights",
            });
        }
        let mg = wt.shape.dim(1);
        let m = mg * g;
        if let Some(b) = opt_input(inputs, 2) {
            check_f32(b, OP)?;
            if b.shape.numel() != m {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "bias length differs from output channels",
                });
            }
        }
        let [sh, sw] = self.strides;
        let [dh, dw] = self.dilations;
        let [pt, pl, pb, pr] = self.pads;
        let [oph, opw] = self.output_padding;
        let (eh, ew) = match self.output_shape {
            Some([h, w]) => (Some(h), Some(w)),
            None => (None, None),
        };
        let (oh, pt) = transpose_out(x.h, kh, sh, dh, (pt, pb), oph, eh, self.auto_pad)?;
        let (ow, pl) = transpose_out(x.w, kw, sw, dw, (pl, pr), opw, ew, self.auto_pad)?;
        Ok(ConvGeom {
            x,
            m,
            cg: x.c / g,
            mg,
            kh,
            kw,
            oh,
            ow,
            pt,
            pl,
        })
    }

    /// Rows of the column buffer (`M/group · kH · kW`).
    fn rows(g: &ConvGeom) -> usize {
        g.mg * g.kh * g.kw
    }

    fn chunk(g: &ConvGeom) -> usize {
        let ihw = g.x.h * g.x.w;
        (COL_BUDGET / Self::rows(g).max(1)).max(16).min(ihw).max(1)
    }
}

impl Kernel for ConvTranspose {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geom(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "ConvTranspose",
            msg: "no output",
        })? = out_shape(g.x, g.m, g.oh, g.ow)?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let Ok(g) = self.geom(inputs) else { return 0 };
        let (rows, ch) = (Self::rows(&g), Self::chunk(&g));
        4 * (rows * ch + sgemm_scratch_len(rows, ch, g.cg))
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        // Each input element meets `W`'s elements per input channel.
        let x = inputs
            .first()
            .copied()
            .flatten()
            .map_or(0, |t| t.shape.numel());
        crate::kernel::product_flops(x, crate::kernel::per_leading(inputs, 1))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "ConvTranspose";
        let g = self.geom(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = match opt_input(inputs, 2) {
            Some(b) => Some(f32_in(b, OP)?),
            None => None,
        };
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        let (ihw, ohw) = (g.x.h * g.x.w, g.ohw());
        let rows = Self::rows(&g);
        if y.len() != g.x.n * g.m * ohw || x.len() != g.x.n * g.x.c * ihw || w.len() != g.x.c * rows
        {
            return Err(KernelError::Buffer { op: OP });
        }
        if ohw == 0 {
            return Ok(());
        }
        let [sh, sw] = self.strides;
        let [dh, dw] = self.dilations;
        // Kernel as large as the stride, no padding, no dilation: every
        // output pixel gets exactly one product (PP-OCR's 2×2, stride-2
        // upsampling), written once with its bias, no accumulation.
        let tiles = g.kh == sh
            && g.kw == sw
            && [dh, dw] == [1, 1]
            && g.pt == 0
            && g.pl == 0
            && g.oh == g.x.h * sh
            && g.ow == g.x.w * sw;
        if !tiles {
            for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
                plane.fill(bias.map_or(0.0, |b| b[i % g.m]));
            }
        }
        if g.cg == 1 && g.mg == 1 && !tiles {
            // Depthwise: each output plane comes from one input plane and
            // its own kernel; the products go straight into it (a GEMM of
            // one input channel per group, then a column buffer, left
            // depthwise upsamplings running at a tiny fraction of peak).
            let plane = |first: usize, ys: &mut [f32]| {
                for (i, yp) in ys.chunks_exact_mut(ohw).enumerate() {
                    let c = (first + i) % g.x.c;
                    let xp = &x[(first + i) * ihw..][..ihw];
                    depthwise_plane(&g, [sh, sw], [dh, dw], xp, &w[c * rows..][..rows], yp);
                }
            };
            crate::threads::for_rows(y, ohw, &plane);
            if self.activation != Activation::None {
                self.activation.apply_in_place(y);
            }
            return Ok(());
        }
        let ch = Self::chunk(&g);
        let s = scratch_f32(scratch, rows * ch + sgemm_scratch_len(rows, ch, g.cg), OP)?;
        let (col, gs) = s.split_at_mut(rows * ch);
        for n in 0..g.x.n {
            for gi in 0..self.group {
                let xg = &x[(n * g.x.c + gi * g.cg) * ihw..][..g.cg * ihw];
                let wg = &w[gi * g.cg * rows..][..g.cg * rows];
                let yg = &mut y[(n * g.m + gi * g.mg) * ohw..][..g.mg * ohw];
                for j0 in (0..ihw).step_by(ch) {
                    let cw = ch.min(ihw - j0);
                    let col = &mut col[..rows * cw];
                    // col = W_gᵀ · X_g[:, j0..j0+cw]
                    sgemm(
                        rows,
                        cw,
                        g.cg,
                        1.0,
                        MatRef::transposed(wg, rows),
                        MatRef::row_major(&xg[j0..], ihw),
                        0.0,
                        col,
                        cw,
                        gs,
                    )?;
                    // col2im, one input-row segment at a time: the output
                    // columns a segment reaches form one strided run. Rows
                    // of one output channel touch only its plane, so
                    // channels split over the threads.
                    let khkw = g.kh * g.kw;
                    let col = &*col;
                    let scatter = |m: usize, yp: &mut [f32]| {
                        if tiles {
                            let b = bias.map_or(0.0, |b| b[gi * g.mg + m]);
                            place_tiles(&g, col, cw, j0, m, b, self.activation, yp);
                            return;
                        }
                        for (r, crow) in col.chunks_exact(cw).enumerate().skip(m * khkw).take(khkw)
                        {
                            let ki = (r / g.kw) % g.kh;
                            let kj = r % g.kw;
                            let mut t = 0;
                            while t < cw {
                                let (ih, iw0) = ((j0 + t) / g.x.w, (j0 + t) % g.x.w);
                                let seg = (g.x.w - iw0).min(cw - t);
                                let oh = (ih * sh + ki * dh) as isize - g.pt as isize;
                                if oh >= 0 && (oh as usize) < g.oh {
                                    let first = (iw0 * sw + kj * dw) as isize - g.pl as isize;
                                    let (lo, hi) =
                                        valid_range(first, sw as isize, g.ow as isize, seg);
                                    if hi > lo {
                                        let yrow =
                                            &mut yp[oh as usize * g.ow..(oh as usize + 1) * g.ow];
                                        let start = (first + (lo * sw) as isize) as usize;
                                        let src = &crow[t + lo..t + hi];
                                        for (d, &v) in yrow[start..].iter_mut().step_by(sw).zip(src)
                                        {
                                            *d += v;
                                        }
                                    }
                                }
                                t += seg;
                            }
                        }
                    };
                    #[cfg(feature = "std")]
                    {
                        let threads = crate::threads::num_threads();
                        if threads > 1
                            && g.mg > 1
                            && rows * cw >= crate::threads::PARALLEL_MIN_ELEMS
                        {
                            let per = g.mg.div_ceil(threads);
                            let shared = crate::threads::SharedMut::new(&mut *yg);
                            crate::threads::run(g.mg.div_ceil(per), &mut [], &|t, _| {
                                for m in t * per..((t + 1) * per).min(g.mg) {
                                    // SAFETY: channel m's plane belongs to
                                    // task t alone; `run` returns after
                                    // every task.
                                    scatter(m, unsafe { shared.range(m * ohw, ohw) });
                                }
                            });
                            continue;
                        }
                    }
                    for (m, yp) in yg.chunks_exact_mut(ohw).enumerate() {
                        scatter(m, yp);
                    }
                }
            }
        }
        // Where outputs accumulate over several products, the activation
        // waits for the last of them.
        if !tiles && self.activation != Activation::None {
            self.activation.apply_in_place(y);
        }
        Ok(())
    }
}

/// One depthwise channel: adds input plane `xp`'s products with its
/// `kh × kw` kernel `wk` into output plane `yp` (already holding the
/// bias). Input row `ih`, tap `(ki, kj)` reaches output row
/// `ih·sh + ki·dh - pt`, columns `iw·sw + kj·dw - pl`: one strided run per
/// input row and tap.
fn depthwise_plane(
    g: &ConvGeom,
    [sh, sw]: [usize; 2],
    [dh, dw]: [usize; 2],
    xp: &[f32],
    wk: &[f32],
    yp: &mut [f32],
) {
    let (iw, ow) = (g.x.w, g.ow);
    // Tap column kj's valid inputs and first output column are the same
    // for every row: found once (two divisions each, which per input row
    // cost more than the products of a narrow plane).
    for kj in 0..g.kw {
        let first = (kj * dw) as isize - g.pl as isize;
        let (lo, hi) = valid_range(first, sw as isize, ow as isize, iw);
        if hi <= lo {
            continue;
        }
        let start = (first + (lo * sw) as isize) as usize;
        for (ih, xrow) in xp.chunks_exact(iw).enumerate() {
            for ki in 0..g.kh {
                let oh = (ih * sh + ki * dh) as isize - g.pt as isize;
                if oh < 0 || oh as usize >= g.oh {
                    continue;
                }
                let yrow = &mut yp[oh as usize * ow..][..ow];
                add_strided(&mut yrow[start..], sw, &xrow[lo..hi], wk[ki * g.kw + kj]);
            }
        }
    }
}

/// `y[t·step] += x[t]·w` for every `t` (`y` long enough). Strides 1 and 2
/// (upsampling by two) with the step known to the compiler, which then
/// vectorizes them (interleaving for 2); a `step_by` iterator or a
/// variable step kept the loop scalar.
#[inline]
fn add_strided(y: &mut [f32], step: usize, x: &[f32], w: f32) {
    match step {
        1 => add_stepped::<1>(y, x, w),
        2 => add_stepped::<2>(y, x, w),
        _ => {
            for (t, &v) in x.iter().enumerate() {
                if let Some(d) = y.get_mut(t * step) {
                    *d += v * w;
                }
            }
        }
    }
}

/// [`add_strided`] with the step a constant.
#[inline(always)]
fn add_stepped<const STEP: usize>(y: &mut [f32], x: &[f32], w: f32) {
    let Some((&last, body)) = x.split_last() else {
        return;
    };
    for (d, &v) in y.chunks_exact_mut(STEP).zip(body) {
        d[0] += v * w;
    }
    if let Some(d) = y.get_mut(body.len() * STEP) {
        *d += last * w;
    }
}

/// The products of channel `m` for input positions `j0..j0 + cw` (`col`:
/// rows `(m, ki, kj)` of `cw` floats) put in its output plane `yp` with the
/// bias `b` and then `activation` (each output is final once placed), when
/// the kernel is the stride (no padding or dilation): input pixel
/// `(ih, iw)`, tap `(ki, kj)` is output pixel `(ih·kh + ki, iw·kw + kj)`,
/// so each output row segment interleaves the `kw` rows of one `ki`.
#[allow(clippy::too_many_arguments)]
fn place_tiles(
    g: &ConvGeom,
    col: &[f32],
    cw: usize,
    j0: usize,
    m: usize,
    b: f32,
    activation: Activation,
    yp: &mut [f32],
) {
    let (kh, kw) = (g.kh, g.kw);
    for ki in 0..kh {
        let r0 = (m * kh + ki) * kw;
        let mut t = 0;
        while t < cw {
            let (ih, iw0) = ((j0 + t) / g.x.w, (j0 + t) % g.x.w);
            let seg = (g.x.w - iw0).min(cw - t);
            let yrow = &mut yp[(ih * kh + ki) * g.ow + iw0 * kw..][..seg * kw];
            if kw == 2 {
                let c0 = &col[r0 * cw + t..][..seg];
                let c1 = &col[(r0 + 1) * cw + t..][..seg];
                for ((d, &v0), &v1) in yrow.chunks_exact_mut(2).zip(c0).zip(c1) {
                    d[0] = v0 + b;
                    d[1] = v1 + b;
                }
            } else {
                for (i, d) in yrow.chunks_exact_mut(kw).enumerate() {
                    for (kj, d) in d.iter_mut().enumerate() {
                        *d = col[(r0 + kj) * cw + t + i] + b;
                    }
                }
            }
            if activation != Activation::None {
                activation.apply_in_place(yrow);
            }
            t += seg;
        }
    }
}
