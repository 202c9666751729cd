//! `Conv` and `ConvTranspose` over 1-D (`N,C,W`) and 2-D (`N,C,H,W`) inputs.
//!
//! Attribute convention: every spatial attribute is given in its 2-D form.
//! A 1-D operator is a 2-D one with `H = 1`: `kernel = [1, k]`,
//! `strides = [1, s]`, `pads = [0, begin, 0, end]`, `dilations = [1, d]`,
//! `output_padding = [0, p]`, `output_shape = Some([1, w])`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{MatRef, check_f32, f32_in, f32_out, scratch_f32, sgemm, sgemm_scratch_len};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `auto_pad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    /// Use the explicit `pads`.
    NotSet,
    /// Output size `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output size `ceil(in / stride)`, extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}
crate::to_rust_enum!(ops::conv::AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid
});

/// Floats of im2col buffer we aim for per chunk.
const COL_BUDGET: usize = 1 << 20;

/// `N, C, H, W` of a rank-3 (`H = 1`) or rank-4 tensor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nchw {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub one_d: bool,
}

pub(crate) fn nchw(s: &Shape, op: &'static str) -> Result<Nchw, KernelError> {
    match *s.dims() {
        [n, c, w] => Ok(Nchw {
            n,
            c,
            h: 1,
            w,
            one_d: true,
        }),
        [n, c, h, w] => Ok(Nchw {
            n,
            c,
            h,
            w,
            one_d: false,
        }),
        _ => Err(KernelError::Shape {
            op,
            msg: "expected a rank-3 (N,C,W) or rank-4 (N,C,H,W) input",
        }),
    }
}

/// The output shape `[N, C, (H,) W]` matching `x`'s rank.
pub(crate) fn out_shape(x: Nchw, c: usize, h: usize, w: usize) -> Result<Shape, KernelError> {
    if x.one_d {
        Shape::new(&[x.n, c, w])
    } else {
        Shape::new(&[x.n, c, h, w])
    }
}

/// Output size and `(begin, end)` padding of one spatial axis of a
/// convolution or pooling window. `ceil` selects pooling's `ceil_mode`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_out(
    len: usize,
    k: usize,
    s: usize,
    d: usize,
    pad_begin: usize,
    pad_end: usize,
    auto_pad: AutoPad,
    ceil: bool,
    op: &'static str,
) -> Result<(usize, usize, usize), KernelError> {
    if k == 0 || s == 0 || d == 0 {
        return Err(KernelError::Invalid {
            op,
            msg: "kernel, strides and dilations must be positive",
        });
    }
    let eff = (k - 1) * d + 1;
    let too_small = KernelError::Shape {
        op,
        msg: "input smaller than the kernel window",
    };
    match auto_pad {
        AutoPad::SameUpper | AutoPad::SameLower => {
            let out = len.div_ceil(s);
            let total = ((out.max(1) - 1) * s + eff).saturating_sub(len);
            let begin = if auto_pad == AutoPad::SameUpper {
                total / 2
            } else {
                total - total / 2
            };
            Ok((out, begin, total - begin))
        }
        AutoPad::Valid => {
            if len < eff {
                return Err(too_small);
            }
            Ok(((len - eff) / s + 1, 0, 0))
        }
        AutoPad::NotSet => {
            let padded = len + pad_begin + pad_end;
            if padded < eff {
                return Err(too_small);
            }
            let span = padded - eff;
            let mut out = if ceil { span.div_ceil(s) } else { span / s } + 1;
            // The last window must start inside the input or the begin padding.
            if ceil && (out - 1) * s >= len + pad_begin {
                out -= 1;
            }
            Ok((out, pad_begin, pad_end))
        }
    }
}

/// ONNX `Conv` (1-D or 2-D, grouped, dilated).
///
/// Inputs: `X` `[N, C, (H,) W]`, `W` `[M, C/group, (kH,) kW]`, optional `B`
/// `[M]`. Output `Y` `[N, M, (oH,) oW]`. See the module docs for how 1-D
/// attributes are given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv {
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
    /// Automatic padding.
    pub auto_pad: AutoPad,
}
crate::to_rust_struct!(ops::conv::Conv {
    group,
    kernel,
    strides,
    pads,
    dilations,
    auto_pad
});

/// Everything `Conv::run` needs to know about the shapes.
#[derive(Clone, Copy, Debug)]
struct ConvGeom {
    x: Nchw,
    m: usize,
    cg: usize,
    mg: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    pt: usize,
    pl: usize,
}

impl ConvGeom {
    fn k(&self) -> usize {
        self.cg * self.kh * self.kw
    }
    fn ohw(&self) -> usize {
        self.oh * self.ow
    }
}

/// The kernel size from `W` (`[.., .., (kH,) kW]`), checked against the attribute.
fn kernel_from_w(
    w: &Shape,
    x: Nchw,
    attr: [usize; 2],
    op: &'static str,
) -> Result<(usize, usize), KernelError> {
    let (kh, kw) = match (x.one_d, w.dims()) {
        (true, [_, _, kw]) => (1, *kw),
        (false, [_, _, kh, kw]) => (*kh, *kw),
        _ => {
            return Err(KernelError::Shape {
                op,
                msg: "weight rank does not match the input rank",
            });
        }
    };
    if attr != [0, 0] && attr != [kh, kw] {
        return Err(KernelError::Shape {
            op,
            msg: "kernel_shape does not match the weights",
        });
    }
    Ok((kh, kw))
}

impl Conv {
    fn geom(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<ConvGeom, KernelError> {
        const OP: &str = "Conv";
        let xt = input(inputs, 0, OP)?;
        let wt = input(inputs, 1, OP)?;
        check_f32(xt, OP)?;
        check_f32(wt, OP)?;
        let x = nchw(&xt.shape, OP)?;
        let (kh, kw) = kernel_from_w(&wt.shape, x, self.kernel, OP)?;
        let m = wt.shape.dim(0);
        let g = self.group;
        if g == 0 || x.c % g != 0 || m % g != 0 || wt.shape.dim(1) * g != x.c {
            return Err(KernelError::Shape {
                op: OP,
                msg: "channels do not match group and weights",
            });
        }
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
        let (oh, pt, _) = window_out(x.h, kh, sh, dh, pt, pb, self.auto_pad, false, OP)?;
        let (ow, pl, _) = window_out(x.w, kw, sw, dw, pl, pr, self.auto_pad, false, OP)?;
        Ok(ConvGeom {
            x,
            m,
            cg: x.c / g,
            mg: m / g,
            kh,
            kw,
            oh,
            ow,
            pt,
            pl,
        })
    }

    fn is_depthwise(&self, g: &ConvGeom) -> bool {
        g.cg == 1 && g.mg == 1
    }

    fn is_pointwise(&self, g: &ConvGeom) -> bool {
        g.kh == 1 && g.kw == 1 && self.strides == [1, 1] && g.oh == g.x.h && g.ow == g.x.w
    }

    /// Columns of the im2col buffer processed at once.
    fn chunk(g: &ConvGeom) -> usize {
        (COL_BUDGET / g.k().max(1)).max(16).min(g.ohw()).max(1)
    }
}

impl Kernel for Conv {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geom(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "Conv",
            msg: "no output",
        })? = out_shape(g.x, g.m, g.oh, g.ow)?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let Ok(g) = self.geom(inputs) else { return 0 };
        if self.is_depthwise(&g) {
            0
        } else if self.is_pointwise(&g) {
            4 * sgemm_scratch_len(g.mg, g.ohw(), g.cg)
        } else {
            let ch = Self::chunk(&g);
            4 * (g.k() * ch + sgemm_scratch_len(g.mg, ch, g.k()))
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Conv";
        let g = self.geom(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = match opt_input(inputs, 2) {
            Some(b) => Some(f32_in(b, OP)?),
            None => None,
        };
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        let (ihw, ohw, k) = (g.x.h * g.x.w, g.ohw(), g.k());
        if y.len() != g.x.n * g.m * ohw || x.len() != g.x.n * g.x.c * ihw || w.len() != g.m * k {
            return Err(KernelError::Buffer { op: OP });
        }
        if ohw == 0 {
            return Ok(());
        }
        // Start from the bias (GEMMs then accumulate with beta = 1).
        for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
            plane.fill(bias.map_or(0.0, |b| b[i % g.m]));
        }
        let beta = if bias.is_some() { 1.0 } else { 0.0 };
        if self.is_depthwise(&g) {
            for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
                let c = i % g.m;
                let xp = &x[i * ihw..(i + 1) * ihw];
                depthwise_plane(self, &g, xp, &w[c * k..(c + 1) * k], plane);
            }
            return Ok(());
        }
        let groups = self.group;
        if self.is_pointwise(&g) {
            let s = scratch_f32(scratch, sgemm_scratch_len(g.mg, ohw, g.cg), OP)?;
            for n in 0..g.x.n {
                for gi in 0..groups {
                    let xg = &x[(n * g.x.c + gi * g.cg) * ihw..][..g.cg * ihw];
                    let wg = &w[gi * g.mg * k..][..g.mg * k];
                    let yg = &mut y[(n * g.m + gi * g.mg) * ohw..][..g.mg * ohw];
                    sgemm(
                        g.mg,
                        ohw,
                        g.cg,
                        1.0,
                        MatRef::row_major(wg, k),
                        MatRef::row_major(xg, ihw),
                        beta,
                        yg,
                        ohw,
                        s,
                    )?;
                }
            }
            return Ok(());
        }
        let ch = Self::chunk(&g);
        let s = scratch_f32(scratch, k * ch + sgemm_scratch_len(g.mg, ch, k), OP)?;
        let (col, gs) = s.split_at_mut(k * ch);
        for n in 0..g.x.n {
            for gi in 0..groups {
                let xg = &x[(n * g.x.c + gi * g.cg) * ihw..][..g.cg * ihw];
                let wg = &w[gi * g.mg * k..][..g.mg * k];
                let yg = &mut y[(n * g.m + gi * g.mg) * ohw..][..g.mg * ohw];
                for j0 in (0..ohw).step_by(ch) {
                    let cw = ch.min(ohw - j0);
                    let col = &mut col[..k * cw];
                    im2col(self, &g, xg, j0, cw, col);
                    sgemm(
                        g.mg,
                        cw,
                        k,
                        1.0,
                        MatRef::row_major(wg, k),
                        MatRef::row_major(col, cw),
                        beta,
                        &mut yg[j0..],
                        ohw,
                        gs,
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Fills `col` (`k × cw`, row-major) with the input patches of output
/// positions `j0..j0 + cw` of one group.
fn im2col(conv: &Conv, g: &ConvGeom, xg: &[f32], j0: usize, cw: usize, col: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    let mut r = 0;
    for c in 0..g.cg {
        let xc = &xg[c * g.x.h * g.x.w..(c + 1) * g.x.h * g.x.w];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &mut col[r * cw..(r + 1) * cw];
                r += 1;
                let mut j = 0;
                while j < cw {
                    let pos = j0 + j;
                    let (oh, ow0) = (pos / g.ow, pos % g.ow);
                    let seg = (g.ow - ow0).min(cw - j);
                    let dst = &mut row[j..j + seg];
                    let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
                    if hh < 0 || hh >= ih {
                        dst.fill(0.0);
                    } else {
                        let xrow = &xc[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
                        let base = (kj * dw) as isize - g.pl as isize;
                        for (t, d) in dst.iter_mut().enumerate() {
                            let ww = ((ow0 + t) * sw) as isize + base;
                            *d = if ww >= 0 && ww < iw {
                                xrow[ww as usize]
                            } else {
                                0.0
                            };
                        }
                    }
                    j += seg;
                }
            }
        }
    }
}

/// One channel of a depthwise convolution, accumulated into `out` (which
/// holds the bias).
fn depthwise_plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    for oh in 0..g.oh {
        let orow = &mut out[oh * g.ow..(oh + 1) * g.ow];
        for ki in 0..g.kh {
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            if hh < 0 || hh >= ih {
                continue;
            }
            let xrow = &xp[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
            for kj in 0..g.kw {
                let wv = wk[ki * g.kw + kj];
                let base = (kj * dw) as isize - g.pl as isize;
                // Output columns whose input column is inside the row.
                let lo = if base >= 0 {
                    0
                } else {
                    ((-base) as usize).div_ceil(sw)
                };
                let hi = if iw - 1 - base < 0 {
                    0
                } else {
                    (((iw - 1 - base) as usize) / sw + 1).min(g.ow)
                };
                if sw == 1 {
                    for ow in lo..hi {
                        orow[ow] += wv * xrow[(ow as isize + base) as usize];
                    }
                } else {
                    for ow in lo..hi {
                        orow[ow] += wv * xrow[((ow * sw) as isize + base) as usize];
                    }
                }
            }
        }
    }
}

/// ONNX `ConvTranspose` (1-D or 2-D, grouped, dilated), as GEMM + col2im.
///
/// Inputs: `X` `[N, C, (H,) W]`, `W` `[C, M/group, (kH,) kW]`, optional `B`
/// `[M]`. Output `Y` `[N, M, (oH,) oW]`. When `output_shape` is given the
/// pads are derived from it (extra padding at the end for `SameUpper`, at
/// the beginning otherwise), as the ONNX spec says.
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
}
crate::to_rust_struct!(ops::conv::ConvTranspose {
    group,
    kernel,
    strides,
    pads,
    dilations,
    output_padding,
    output_shape,
    auto_pad
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
    let full = s * (len - 1) + out_pad + (k - 1) * d + 1;
    let target = match (explicit, auto_pad) {
        (Some(o), _) => Some(o),
        (None, AutoPad::SameUpper | AutoPad::SameLower) => Some(len * s),
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
            let out = full.checked_sub(b + e).ok_or(KernelError::Shape {
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
        for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
            plane.fill(bias.map_or(0.0, |b| b[i % g.m]));
        }
        let ch = Self::chunk(&g);
        let s = scratch_f32(scratch, rows * ch + sgemm_scratch_len(rows, ch, g.cg), OP)?;
        let (col, gs) = s.split_at_mut(rows * ch);
        let [sh, sw] = self.strides;
        let [dh, dw] = self.dilations;
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
                    // col2im
                    for (r, crow) in col.chunks_exact(cw).enumerate() {
                        let m = r / (g.kh * g.kw);
                        let ki = (r / g.kw) % g.kh;
                        let kj = r % g.kw;
                        let yp = &mut yg[m * ohw..(m + 1) * ohw];
                        for (t, &v) in crow.iter().enumerate() {
                            let (ih, iw) = ((j0 + t) / g.x.w, (j0 + t) % g.x.w);
                            let oh = (ih * sh + ki * dh) as isize - g.pt as isize;
                            let ow = (iw * sw + kj * dw) as isize - g.pl as isize;
                            if oh >= 0 && (oh as usize) < g.oh && ow >= 0 && (ow as usize) < g.ow {
                                yp[oh as usize * g.ow + ow as usize] += v;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::gemm::testutil::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Direct 2-D convolution (1-D inputs as H = 1).
    #[allow(clippy::too_many_arguments)]
    fn naive_conv(
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
                                    let xv = x[((ni * c + gi * cg + ci) * h + hh as usize) * w
                                        + ww as usize];
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

    fn conv(group: usize, strides: [usize; 2], pads: [usize; 4], dilations: [usize; 2]) -> Conv {
        Conv {
            group,
            kernel: [0, 0],
            strides,
            pads,
            dilations,
            auto_pad: AutoPad::NotSet,
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
            (1, 4, 9, 8, 8, 3, 3, 4, [1, 1], [1, 1, 1, 1], [1, 1]), // multiplier 2
            (1, 3, 5, 5, 2, 5, 5, 1, [1, 1], [0, 0, 0, 0], [1, 1]), // 1x1 output
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

    /// Direct transposed convolution (scatter form).
    #[allow(clippy::too_many_arguments)]
    fn naive_convt(
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
        ];
        for (ci, &(n, c, h, w, mg, kh, kw, group, strides, pads, dil, opad)) in
            cases.iter().enumerate()
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
        };
        let out = run(
            &op,
            &[Some(t(&x, &[1, 1, 3, 3])), Some(t(&w, &[1, 2, 3, 3])), None],
            1,
        )
        .unwrap();
        assert_eq!(out[0].0, vec![1, 2, 5, 5]);
        let plane = [
            0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24.,
            13., 6., 13., 21., 15., 8.,
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
}

#[cfg(all(test, feature = "codegen"))]
mod codegen_tests {
    use super::*;
    use crate::codegen::ToRust;
    use alloc::string::ToString;

    #[test]
    fn params_print_as_rust() {
        let op = ConvTranspose {
            group: 2,
            kernel: [3, 3],
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            dilations: [1, 1],
            output_padding: [1, 0],
            output_shape: Some([8, 9]),
            auto_pad: AutoPad::SameLower,
        };
        let s = op.to_rust().to_string().replace(' ', "");
        assert!(
            s.starts_with("::lele::kernels::ops::conv::ConvTranspose{group:2usize"),
            "{s}"
        );
        assert!(
            s.contains("auto_pad:::lele::kernels::ops::conv::AutoPad::SameLower"),
            "{s}"
        );
        assert!(
            s.contains("output_shape:::core::option::Option::Some([8usize,9usize])"),
            "{s}"
        );
        let r = crate::ops::resize::CoordMode::TfCropAndResize
            .to_rust()
            .to_string()
            .replace(' ', "");
        assert_eq!(
            r,
            "::lele::kernels::ops::resize::CoordMode::TfCropAndResize"
        );
    }
}
