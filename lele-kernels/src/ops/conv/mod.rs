//! `Conv` and `ConvTranspose` over 1-D (`N,C,W`) and 2-D (`N,C,H,W`) inputs.
//!
//! Attribute convention: every spatial attribute is given in its 2-D form.
//! A 1-D operator is a 2-D one with `H = 1`: `kernel = [1, k]`,
//! `strides = [1, s]`, `pads = [0, begin, 0, end]`, `dilations = [1, d]`,
//! `output_padding = [0, p]`, `output_shape = Some([1, w])`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{
    Epilogue, MatRef, PackB, PanelsA, check_f32, check_residual, f32_in, f32_out, panels_a_len,
    scratch_f32, sgemm_packed_b, sgemm_panels_a, sgemm_scratch_len,
};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

// Only x86-64 runs it, but every target sizes its scratch.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod channel_tiles;
#[cfg(all(test, feature = "codegen"))]
mod codegen_tests;
mod depthwise;
// Only x86-64 runs it, but every target sizes its scratch.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod depthwise_interleaved;
mod depthwise_rows;
#[cfg(test)]
mod depthwise_tests;
mod row_kernels;
// Only x86-64 runs it, but every target sizes its scratch (the compiler
// sizes arenas on the build machine).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod direct;
mod geometry;
mod im2col;
mod packed;
#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests;
mod transpose;
#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod transpose_tests;
mod winograd;
#[cfg(all(test, feature = "std"))]
mod winograd_tests;

use crate::ops::unary::Activation;
use depthwise::{depthwise_plane, plane_staged, staged_plan};
pub use geometry::AutoPad;
pub(crate) use geometry::{Nchw, nchw, out_shape, window_out};
use im2col::Im2col;
pub(crate) use im2col::valid_range;
pub use packed::ConvPackedWeights;
pub use transpose::ConvTranspose;
pub use winograd::ConvWinograd;

/// Output positions up to which the GEMM's tail runs once per block after
/// the product ([`Conv::finish_block`]) rather than per row: the GEMM's
/// dot-product path for narrow products calls its epilogue per row, a few
/// floats each (Silero VAD's convolutions over 1–4 frames: 128 calls of
/// 4 floats).
const FEW_POSITIONS: usize = 8;

/// Floats of column buffer ConvTranspose aims for per chunk.
const COL_BUDGET: usize = 1 << 18;

/// `infer` of a convolution of geometry `g`: its output shape, the fused
/// residual (input 3, if any) checked against it.
fn infer_output(
    g: &ConvGeom,
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [Shape],
) -> Result<(), KernelError> {
    let y = out_shape(g.x, g.m, g.oh, g.ow)?;
    check_residual(inputs, 3, &y, "Conv")?;
    *outputs.first_mut().ok_or(KernelError::Invalid {
        op: "Conv",
        msg: "no output",
    })? = y;
    Ok(())
}

/// ONNX `Conv` (1-D or 2-D, grouped, dilated).
///
/// Inputs: `X` `[N, C, (H,) W]`, `W` `[M, C/group, (kH,) kW]`, optional `B`
/// `[M]`. Output `Y` `[N, M, (oH,) oW]`. See the module docs for how 1-D
/// attributes are given.
///
/// A fourth input (never present in ONNX; the residual `Add` fusion of
/// `lele-build` adds it) is a tensor of `Y`'s exact shape added to the
/// output after the fused activation and scalar affine, as the separate
/// `Add` did.
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
    /// Applied to the output as it is produced (a fused activation node).
    pub activation: Activation,
    /// After the activation, `y · post_mul + post_add` (fused scalar Mul
    /// and Add nodes; 1 and 0 when there are none).
    pub post_mul: f32,
    /// See [`Conv::post_mul`].
    pub post_add: f32,
}
crate::to_rust_struct!(ops::conv::Conv {
    group,
    kernel,
    strides,
    pads,
    dilations,
    auto_pad,
    activation,
    post_mul,
    post_add
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
    /// Twice the multiply-adds of the convolution ([`Kernel::flops`]).
    fn flops(&self) -> u64 {
        let outputs = [self.x.n, self.m, self.oh, self.ow]
            .iter()
            .fold(1usize, |a, &v| a.saturating_mul(v));
        crate::kernel::product_flops(outputs, self.k())
    }
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

/// The f32 operands of one [`Conv`] run (see [`Conv::operands`]).
struct Operands<'a> {
    g: ConvGeom,
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    residual: Option<&'a [f32]>,
    y: &'a mut [f32],
}

/// A convolution's weight as the GEMM paths read it: row-major
/// `[M, C/g·kH·kW]`, or packed at build time ([`ConvPackedWeights`]).
#[derive(Clone, Copy)]
enum GemmWeight<'a> {
    RowMajor(&'a [f32]),
    Panels(&'a [f32]),
}

impl GemmWeight<'_> {
    /// Group `gi`'s `mg × depth` weight times `b` into `yg`.
    #[allow(clippy::too_many_arguments)]
    fn product<B: PackB>(
        self,
        g: &ConvGeom,
        gi: usize,
        depth: usize,
        b: &B,
        yg: &mut [f32],
        s: &mut [f32],
        epilogue: Option<Epilogue<'_>>,
    ) -> Result<(), KernelError> {
        let ohw = g.ohw();
        match self {
            GemmWeight::RowMajor(w) => {
                let a = MatRef::row_major(&w[gi * g.mg * depth..][..g.mg * depth], depth);
                sgemm_packed_b(g.mg, ohw, depth, 1.0, a, b, 0.0, yg, ohw, s, epilogue)
            }
            GemmWeight::Panels(w) => {
                let per = panels_a_len(g.mg, depth);
                let a = PanelsA {
                    data: &w[gi * per..][..per],
                };
                sgemm_panels_a(g.mg, ohw, depth, 1.0, a, b, 0.0, yg, ohw, s, epilogue)
            }
        }
    }
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
        self.geom_from(inputs, x, [kh, kw], wt.shape.dim(0), wt.shape.dim(1))
    }

    /// The geometry of a run over input `x` with a `kernel` (`[kH, kW]`)
    /// weight of `m` output and `wc` input channels per group (the bias,
    /// if any, checked against `m`).
    fn geom_from(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        x: Nchw,
        [kh, kw]: [usize; 2],
        m: usize,
        wc: usize,
    ) -> Result<ConvGeom, KernelError> {
        const OP: &str = "Conv";
        let g = self.group;
        if g == 0
            || !x.c.is_multiple_of(g)
            || !m.is_multiple_of(g)
            || wc.checked_mul(g) != Some(x.c)
        {
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
        let (oh, pt, pb) = window_out(x.h, kh, sh, dh, pt, pb, self.auto_pad, false, OP)?;
        let (ow, pl, pr) = window_out(x.w, kw, sw, dw, pl, pr, self.auto_pad, false, OP)?;
        // The staged input of one group (its padded planes, rounded up to
        // the strides) must be addressable, so that no product of the
        // staging layout wraps, whatever the pads and strides say.
        let padded = |len: usize, a: usize, b: usize, s: usize| {
            len.checked_add(a)?.checked_add(b)?.checked_add(s)
        };
        let staged_bytes = padded(x.h, pt, pb, sh)
            .zip(padded(x.w, pl, pr, sw))
            .and_then(|(h, w)| h.checked_mul(w))
            .and_then(|p| p.checked_mul((x.c / g).max(1)))
            .and_then(|p| p.checked_mul(4));
        if staged_bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "the padded input is larger than this machine can address",
            });
        }
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

    /// Whether outputs need [`Conv::finish`].
    fn has_epilogue(&self) -> bool {
        self.activation != Activation::None || self.post_mul != 1.0 || self.post_add != 0.0
    }

    /// The fused tail applied to finished outputs: the activation, then
    /// the scalar multiply and add, each rounded as the separate nodes were.
    fn finish(&self, y: &mut [f32]) {
        self.activation.apply_in_place(y);
        if self.post_mul != 1.0 || self.post_add != 0.0 {
            let (s, t) = (self.post_mul, self.post_add);
            crate::ops::unary::map_in_place_f32(y, |v| v * s + t);
        }
    }

    fn is_depthwise(&self, g: &ConvGeom) -> bool {
        g.cg == 1 && g.mg == 1
    }

    /// A depthwise convolution through [`depthwise_rows`]: every plane
    /// (batch item × channel) on its own, the planes split over the
    /// threads in a few chunks per thread. `own` holds `plan.len` floats
    /// (a worker's buffer, `MAX_SCRATCH`, always does).
    #[allow(clippy::too_many_arguments)]
    fn run_depthwise_rows(
        &self,
        plan: &depthwise_rows::Plan,
        g: &ConvGeom,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        y: &mut [f32],
        own: &mut [f32],
    ) -> Result<(), KernelError> {
        let (ihw, ohw, taps) = (g.x.h * g.x.w, g.ohw(), g.kh * g.kw);
        let fused = self.has_epilogue() || residual.is_some();
        let short = core::sync::atomic::AtomicBool::new(false);
        let one = |i: usize, plane: &mut [f32], buf: &mut [f32]| {
            let c = i % g.m;
            let tail = self.tail(residual, i * ohw);
            let tail = |seg: &mut [f32], at: usize| {
                if fused {
                    tail(seg, at)
                }
            };
            let done = depthwise_rows::run_plane(
                plan,
                g,
                &x[i * ihw..(i + 1) * ihw],
                &w[c * taps..(c + 1) * taps],
                bias.map_or(0.0, |b| b[c]),
                plane,
                buf,
                &tail,
            );
            if !done {
                short.store(true, core::sync::atomic::Ordering::Relaxed);
            }
        };
        each_plane(y, ohw, taps, own, &one);
        match short.load(core::sync::atomic::Ordering::Relaxed) {
            true => Err(KernelError::Buffer { op: "Conv" }),
            false => Ok(()),
        }
    }

    /// The fused tail of the output block that starts at `base` in `Y`:
    /// [`Conv::finish_segment`] without a bias. Its second argument is the
    /// segment's offset inside the block.
    fn tail<'a>(
        &'a self,
        residual: Option<&'a [f32]>,
        base: usize,
    ) -> impl Fn(&mut [f32], usize) + Sync + 'a {
        move |seg: &mut [f32], at: usize| self.finish_segment(seg, None, residual, base + at)
    }

    /// Everything after the product for one finished output segment `seg`
    /// (at `at` in `Y`): `bias` added, [`Conv::finish`], then the residual
    /// (if any) added. With a pointwise activation all of it is one pass
    /// while the segment is in L1 ([`crate::ops::unary::pointwise_tail`]).
    fn finish_segment(
        &self,
        seg: &mut [f32],
        bias: Option<f32>,
        residual: Option<&[f32]>,
        at: usize,
    ) {
        // `r` has Y's length (checked in `run`), so the range is whole.
        let r = residual.map(|r| r.get(at..at + seg.len()).unwrap_or(&[]));
        if r.is_none_or(|r| r.len() == seg.len())
            && crate::ops::unary::pointwise_tail(
                seg,
                bias,
                self.activation,
                (self.post_mul, self.post_add),
                r,
            )
        {
            return;
        }
        if let Some(b) = bias {
            crate::ops::unary::add_in_place(seg, b);
        }
        self.finish(seg);
        if let Some(r) = r {
            for (v, &x) in seg.iter_mut().zip(r) {
                *v += x;
            }
        }
    }

    /// The epilogue of a GEMM over one group's output block (which starts
    /// at `base` in `Y`, its first channel `m0`, `ohw` outputs per
    /// channel): the channel's bias added to each finished row segment (the
    /// product is computed from zero, so the output is written once, not
    /// filled with the bias first), then as [`Conv::tail`].
    fn gemm_tail<'a>(
        &'a self,
        bias: Option<&'a [f32]>,
        residual: Option<&'a [f32]>,
        base: usize,
        m0: usize,
        ohw: usize,
    ) -> impl Fn(&mut [f32], usize) + Sync + 'a {
        move |seg: &mut [f32], at: usize| {
            // A segment lies in one row of the block (one channel).
            let b = bias.and_then(|b| b.get(m0 + at / ohw)).copied();
            self.finish_segment(seg, b, residual, base + at);
        }
    }

    /// The f32 operands of a run, their lengths checked against the
    /// shapes (the weight's against `w_len`, which depends on its layout).
    fn operands<'a>(
        &self,
        inputs: &[Option<TensorRef<'a>>],
        outputs: &'a mut [TensorMut<'_>],
        w_len: impl Fn(&ConvGeom) -> usize,
    ) -> Result<Operands<'a>, KernelError> {
        self.operands_of(self.geom(inputs)?, inputs, outputs, w_len)
    }

    /// [`Conv::operands`] for the geometry `g` (computed by the caller).
    fn operands_of<'a>(
        &self,
        g: ConvGeom,
        inputs: &[Option<TensorRef<'a>>],
        outputs: &'a mut [TensorMut<'_>],
        w_len: impl Fn(&ConvGeom) -> usize,
    ) -> Result<Operands<'a>, KernelError> {
        const OP: &str = "Conv";
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = match opt_input(inputs, 2) {
            Some(b) => Some(f32_in(b, OP)?),
            None => None,
        };
        let residual = match opt_input(inputs, 3) {
            Some(r) => Some(f32_in(r, OP)?),
            None => None,
        };
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if y.len() != g.x.n * g.m * g.ohw()
            || x.len() != g.x.n * g.x.c * g.x.h * g.x.w
            || w.len() != w_len(&g)
            || residual.is_some_and(|r| r.len() != y.len())
        {
            return Err(KernelError::Buffer { op: OP });
        }
        Ok(Operands {
            g,
            x,
            w,
            bias,
            residual,
            y,
        })
    }

    /// Scratch bytes of the GEMM paths (pointwise, im2col).
    fn gemm_scratch_bytes(&self, g: &ConvGeom) -> usize {
        let depth = if self.is_pointwise(g) { g.cg } else { g.k() };
        4 * sgemm_scratch_len(g.mg, g.ohw(), depth)
    }

    /// The GEMM paths: per image and group, the weight (`mg × k`) times
    /// the input read in place (pointwise) or as im2col patches, the bias
    /// and fused tail added in the GEMM's epilogue.
    #[allow(clippy::too_many_arguments)]
    fn run_gemm(
        &self,
        g: &ConvGeom,
        x: &[f32],
        w: GemmWeight<'_>,
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        y: &mut [f32],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Conv";
        let (ihw, ohw, k) = (g.x.h * g.x.w, g.ohw(), g.k());
        if ohw == 0 {
            return Ok(());
        }
        let fused_tail = self.has_epilogue() || residual.is_some();
        let pointwise = self.is_pointwise(g);
        let depth = if pointwise { g.cg } else { k };
        let s = scratch_f32(scratch, sgemm_scratch_len(g.mg, ohw, depth), OP)?;
        for n in 0..g.x.n {
            for gi in 0..self.group {
                let xg = &x[(n * g.x.c + gi * g.cg) * ihw..][..g.cg * ihw];
                let base = (n * g.m + gi * g.mg) * ohw;
                let yg = &mut y[base..][..g.mg * ohw];
                let tail = self.gemm_tail(bias, residual, base, gi * g.mg, ohw);
                // Over a few output positions the tail runs once over the
                // block after the product, not per row of a few floats.
                let after = (fused_tail || bias.is_some()) && ohw <= FEW_POSITIONS;
                let epilogue: Option<Epilogue<'_>> =
                    (fused_tail || bias.is_some()).then_some(&tail);
                let epilogue = epilogue.filter(|_| !after);
                if pointwise {
                    let b = MatRef::row_major(xg, ihw);
                    w.product(g, gi, depth, &b, yg, s, epilogue)?;
                } else {
                    let b = Im2col { conv: self, g, xg };
                    w.product(g, gi, depth, &b, yg, s, epilogue)?;
                }
                if after {
                    let bias = bias.map(|b| &b[gi * g.mg..][..g.mg]);
                    self.finish_block(yg, bias, residual, base, ohw);
                }
            }
        }
        Ok(())
    }

    /// The tail of one group's output block `block` (at `at` in `Y`,
    /// `ohw` outputs per channel) after its product: each channel's bias
    /// added, then [`Conv::finish_segment`] once over the whole block (the
    /// same arithmetic per element as the per-row epilogue).
    fn finish_block(
        &self,
        block: &mut [f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        at: usize,
        ohw: usize,
    ) {
        if let Some(b) = bias {
            for (row, &bv) in block.chunks_exact_mut(ohw).zip(b) {
                row.iter_mut().for_each(|v| *v += bv);
            }
        }
        self.finish_segment(block, None, residual, at);
    }

    /// Scratch bytes of the channel tiles (the weight laid out per call),
    /// 0 when they never take this convolution.
    fn channel_tiles_scratch_bytes(&self, g: &ConvGeom) -> usize {
        if channel_tiles::eligible(self.strides, self.dilations, self.group, g) {
            4 * channel_tiles::padded(g.mg) * g.k()
        } else {
            0
        }
    }

    /// Whether the channel-vector tiles ([`channel_tiles`]) run this
    /// convolution on this machine.
    #[cfg(target_arch = "x86_64")]
    fn runs_channel_tiles(&self, g: &ConvGeom) -> bool {
        !self.is_depthwise(g) && channel_tiles::applies(self.strides, self.dilations, self.group, g)
    }

    /// [`channel_tiles::run`] over every image, the weight laid out in
    /// `blocks` (one group).
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments)]
    fn run_channel_tiles(
        &self,
        g: &ConvGeom,
        x: &[f32],
        blocks: &[f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        y: &mut [f32],
    ) {
        let (ihw, ohw) = (g.x.h * g.x.w, g.ohw());
        let fused_tail = self.has_epilogue() || residual.is_some();
        for n in 0..g.x.n {
            let xn = &x[n * g.x.c * ihw..][..g.x.c * ihw];
            let base = n * g.m * ohw;
            let yn = &mut y[base..][..g.m * ohw];
            let tail = self.tail(residual, base);
            let epilogue: Option<Epilogue<'_>> = fused_tail.then_some(&tail);
            channel_tiles::run(self.strides, g, xn, blocks, bias, yn, epilogue);
        }
    }

    /// Whether the direct path (few output channels, no im2col packing)
    /// runs this convolution on this machine.
    fn runs_direct(&self, g: &ConvGeom) -> bool {
        !self.is_depthwise(g) && direct::applies(self.strides, self.dilations, g)
    }

    fn is_pointwise(&self, g: &ConvGeom) -> bool {
        g.kh == 1 && g.kw == 1 && self.strides == [1, 1] && g.oh == g.x.h && g.ow == g.x.w
    }
}

/// The work on one output plane: `(plane index, plane, scratch)`.
type PlaneJob<'a> = dyn Fn(usize, &mut [f32], &mut [f32]) + Sync + 'a;

/// `one(i, plane, buf)` for every output plane `i` of `y` (`ohw` floats
/// each, `taps` multiply-adds per output): on the threads in a few chunks
/// per thread when there is enough work (`buf` a worker's own scratch, or
/// `own`), else in order on this thread with `own`.
fn each_plane(y: &mut [f32], ohw: usize, taps: usize, own: &mut [f32], one: &PlaneJob<'_>) {
    #[cfg(feature = "std")]
    {
        let planes = y.len() / ohw;
        let threads = crate::threads::num_threads();
        if threads > 1 && planes >= 2 && planes * ohw * taps >= 1 << 18 {
            let per = planes.div_ceil(2 * threads);
            let shared = crate::threads::SharedMut::new(y);
            crate::threads::run(planes.div_ceil(per), own, &|t, buf| {
                for i in t * per..((t + 1) * per).min(planes) {
                    // SAFETY: plane i belongs to task t only, and `run`
                    // returns after every task.
                    one(i, unsafe { shared.range(i * ohw, ohw) }, buf);
                }
            });
            return;
        }
    }
    #[cfg(not(feature = "std"))]
    let _ = taps;
    for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
        one(i, plane, own);
    }
}

impl Kernel for Conv {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        infer_output(&self.geom(inputs)?, inputs, outputs)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let Ok(g) = self.geom(inputs) else { return 0 };
        if self.is_depthwise(&g) {
            // Either depthwise kernel may run (AVX-512 or not).
            let staged = depthwise::staged_len(self, &g).unwrap_or(0);
            let blocked = depthwise_interleaved::Ring::new(self, &g).map_or(0, |r| r.scratch_len());
            let rows = depthwise_rows::scratch_len(self, &g).unwrap_or(0);
            4 * staged.max(blocked).max(rows)
        } else {
            let gemm = self.gemm_scratch_bytes(&g);
            // Whichever path the running machine picks must fit.
            let direct = if direct::eligible(self.strides, self.dilations, &g) {
                direct::scratch_bytes(self.strides, self.dilations, &g)
            } else {
                0
            };
            gemm.max(direct).max(self.channel_tiles_scratch_bytes(&g))
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        self.geom(inputs).map_or(0, |g| g.flops())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Conv";
        let Operands {
            g,
            x,
            w,
            bias,
            residual,
            y,
        } = self.operands(inputs, outputs, |g| g.m * g.k())?;
        let (ihw, ohw, k) = (g.x.h * g.x.w, g.ohw(), g.k());
        let fused_tail = self.has_epilogue() || residual.is_some();
        if ohw == 0 {
            return Ok(());
        }
        if ihw == 0 || g.cg == 0 {
            // An empty input plane (every tap falls in the padding) or no
            // input channels: each output is its bias, then the epilogue.
            for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
                plane.fill(0.0);
                self.finish_segment(plane, bias.map(|b| b[i % g.m]), residual, i * ohw);
            }
            return Ok(());
        }
        // Depthwise 1×1, stride 1, no padding: a scale per channel (the
        // pathway convolutions of DeepFilterNet's decoders), one pass over
        // each plane, then its bias and epilogue.
        if self.is_depthwise(&g)
            && k == 1
            && self.strides == [1, 1]
            && (g.oh, g.ow) == (g.x.h, g.x.w)
        {
            for (i, (plane, xp)) in y.chunks_exact_mut(ohw).zip(x.chunks_exact(ihw)).enumerate() {
                let c = i % g.m;
                let scale = w[c];
                for (o, &v) in plane.iter_mut().zip(xp) {
                    *o = v * scale;
                }
                self.finish_segment(plane, bias.map(|b| b[c]), residual, i * ohw);
            }
            return Ok(());
        }
        // Depthwise 3×3, 5×5, 7×7 on any vector ISA: bands of rows of a plane.
        if self.is_depthwise(&g)
            && let Some(plan) = depthwise_rows::plan(self, &g)
            && let Ok(own) = scratch_f32(scratch, plan.len, OP)
        {
            return self.run_depthwise_rows(&plan, &g, x, w, bias, residual, y, own);
        }
        // Depthwise on any vector ISA: a vector of channels at a time.
        if self.is_depthwise(&g)
            && let Some(kernel) = depthwise_interleaved::Blocked::detect()
            && let Some(ring) = depthwise_interleaved::Ring::new(self, &g)
            && let Ok(own) = scratch_f32(scratch, ring.scratch_len(), OP)
        {
            let row_tail = |plane: usize, seg: &mut [f32], at: usize| {
                self.tail(residual, plane * ohw)(seg, at)
            };
            let tail: Option<depthwise_interleaved::RowTail<'_>> = fused_tail.then_some(&row_tail);
            // SAFETY: the kernel was detected here; the buffers' lengths
            // were checked against the shapes above (the bias's in `geom`).
            unsafe {
                depthwise_interleaved::run(kernel, self, &g, &ring, x, w, bias, y, own, tail)
            };
            return Ok(());
        }
        // Strided, whole vectors of output channels, AVX-512: the channel
        // tiles, the weight packed into the scratch. (At input sizes the
        // scratch was not planned for it may be too small: then below.)
        #[cfg(target_arch = "x86_64")]
        if self.runs_channel_tiles(&g)
            && let Ok(blocks) = scratch_f32(scratch, channel_tiles::padded(g.mg) * k, OP)
        {
            channel_tiles::weights_from_rows(w, g.mg, k, blocks);
            self.run_channel_tiles(&g, x, blocks, bias, residual, y);
            return Ok(());
        }
        // The scratch was planned at a few input sizes; at others (dynamic
        // dims) the direct path may need more than was reserved, then the
        // GEMM (whose need only grows with the shapes) computes it.
        let direct = !self.is_depthwise(&g)
            && self.runs_direct(&g)
            && scratch.len() >= direct::scratch_bytes(self.strides, self.dilations, &g);
        if self.is_depthwise(&g) {
            // Start from the bias (the plane kernels accumulate into it).
            for (i, plane) in y.chunks_exact_mut(ohw).enumerate() {
                plane.fill(bias.map_or(0.0, |b| b[i % g.m]));
            }
            // `buf`: room to stage one plane (the caller's scratch, or a
            // worker's own buffer).
            let plan = staged_plan(self, &g);
            let one = |i: usize, plane: &mut [f32], buf: &mut [f32]| {
                let c = i % g.m;
                let xp = &x[i * ihw..(i + 1) * ihw];
                let wk = &w[c * k..(c + 1) * k];
                let staged = plan
                    .as_ref()
                    .is_some_and(|p| plane_staged(p, self, &g, xp, wk, plane, buf));
                if !staged {
                    depthwise_plane(self, &g, xp, wk, plane);
                }
                self.tail(residual, i * ohw)(plane, 0);
            };
            let staged = depthwise::staged_len(self, &g).unwrap_or(0);
            let own = scratch_f32(scratch, staged, OP)?;
            each_plane(y, ohw, k, own, &one);
            return Ok(());
        }
        let groups = self.group;
        if direct {
            // A lone ReLU is clamped by the tiles as they store (a pass
            // over each finished segment was a measurable share of a
            // detector's time).
            let relu = self.activation == Activation::Relu
                && self.post_mul == 1.0
                && self.post_add == 0.0
                && residual.is_none();
            let fused_tail = fused_tail && !relu;
            for n in 0..g.x.n {
                for gi in 0..groups {
                    let xg = &x[(n * g.x.c + gi * g.cg) * ihw..][..g.cg * ihw];
                    let wg = &w[gi * g.mg * k..][..g.mg * k];
                    let base = (n * g.m + gi * g.mg) * ohw;
                    let yg = &mut y[base..][..g.mg * ohw];
                    let tail = self.tail(residual, base);
                    let epilogue: Option<Epilogue<'_>> = fused_tail.then_some(&tail);
                    direct::run_group(
                        self.strides,
                        self.dilations,
                        &g,
                        xg,
                        wg,
                        bias.map(|b| &b[gi * g.mg..][..g.mg]),
                        yg,
                        scratch,
                        relu,
                        epilogue,
                    )?;
                }
            }
            return Ok(());
        }
        self.run_gemm(&g, x, GemmWeight::RowMajor(w), bias, residual, y, scratch)
    }
}
