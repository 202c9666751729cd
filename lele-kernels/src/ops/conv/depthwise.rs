//! Direct depthwise convolution (one input channel per group).
use super::direct::{Layout, stage};
use super::row_kernels;
use super::{Conv, ConvGeom, valid_range};
use crate::simd::Isa;

/// Longest run of staged positions [`plane_staged`] computes in one go
/// (a stride-1 plane up to about 60×60; the scratch is sized with it on
/// every target, so the build machine and the target agree).
const FLAT_MAX: usize = 4096;
/// Kernels with more taps than this take the row loop of [`plane`].
const STAGED_TAPS_MAX: usize = 128;

/// Floats of scratch [`plane_staged`] needs for one plane, when it applies
/// to these shapes (not a 1×1 stride-1 unpadded kernel, which has nothing
/// to stage, nor one with more than [`STAGED_TAPS_MAX`] taps).
pub(super) fn staged_len(conv: &Conv, g: &ConvGeom) -> Option<usize> {
    let l = Layout::new(conv.strides, conv.dilations, g);
    (!l.in_place && g.kh * g.kw <= STAGED_TAPS_MAX && g.ohw() > 0)
        .then(|| l.staged_len(g) + flat_run(conv, g, &l).unwrap_or(0))
}

/// Staged positions from the first output to the last when the output
/// rows are computed as one run ([`plane_staged`]): stride 1 and at most
/// [`FLAT_MAX`] of them.
fn flat_run(conv: &Conv, g: &ConvGeom, l: &Layout) -> Option<usize> {
    let run = (g.oh.checked_sub(1)?) * l.phase_w + g.ow;
    (conv.strides == [1, 1] && run <= FLAT_MAX).then_some(run)
}

/// What [`plane_staged`] needs for every plane of one call, computed once:
/// the staging layout and each tap's offset from the first input of an
/// output row, and the instruction set whose row kernel runs.
pub(super) struct StagedPlan {
    layout: Layout,
    offs: [usize; STAGED_TAPS_MAX],
    taps: usize,
    len: usize,
    isa: Isa,
}

/// The plan of [`plane_staged`] for these shapes, or `None` when it does
/// not apply here (no vector ISA, or shapes [`staged_len`] rejects); the caller
/// then runs [`depthwise_plane`].
pub(super) fn staged_plan(conv: &Conv, g: &ConvGeom) -> Option<StagedPlan> {
    let isa = crate::simd::best_isa();
    if isa == Isa::Scalar {
        return None;
    }
    let len = staged_len(conv, g)?;
    let l = Layout::new(conv.strides, conv.dilations, g);
    let taps = g.kh * g.kw;
    let mut offs = [0usize; STAGED_TAPS_MAX];
    for (t, o) in offs[..taps].iter_mut().enumerate() {
        *o = l.tap(0, t / g.kw, t % g.kw, conv.dilations);
    }
    Some(StagedPlan {
        layout: l,
        offs,
        taps,
        len,
        isa,
    })
}

/// One channel from a staged copy of its plane (zero padded, columns split
/// by the stride, as the direct convolution stages its input), each output
/// row accumulated in vector registers over every tap onto `out`, which
/// holds the channel's bias (or zero) in every element. Returns `false`,
/// leaving `out` untouched, when a buffer is too small; the caller then
/// runs [`depthwise_plane`].
pub(super) fn plane_staged(
    plan: &StagedPlan,
    conv: &Conv,
    g: &ConvGeom,
    xp: &[f32],
    wk: &[f32],
    out: &mut [f32],
    buf: &mut [f32],
) -> bool {
    let (Some(buf), Some(wk), Some(out)) = (
        buf.get_mut(..plan.len),
        wk.get(..plan.taps),
        out.get_mut(..g.ohw()),
    ) else {
        return false;
    };
    let l = &plan.layout;
    if stage(conv.strides, g, l, xp, buf, 0).is_err() {
        return false;
    }
    let offs = &plan.offs[..plan.taps];
    let rs = l.phase_w;
    // Stride 1 over a small plane: its output rows are computed as one
    // run over the staged rows back to back (the `kw - 1` padding
    // columns between them computed and dropped), not row by row: a
    // 15-wide row costs a call and a partial chunk of its own. The run
    // lives after the staged plane in `buf` and starts from the bias
    // (`out` holds it in every element).
    if let Some(flat) = flat_run(conv, g, l) {
        let (staged, run) = buf.split_at_mut(l.staged_len(g));
        let Some(run) = run.get_mut(..flat) else {
            return false;
        };
        run.fill(out[0]);
        // SAFETY: tap offsets reach `(kh - 1)·rs + kw - 1`, the run
        // `flat`: together inside the plane (`rows·rs` floats) and
        // its slack.
        if !unsafe { row_kernels::depthwise_row(plan.isa, staged.as_ptr(), offs, wk, run) } {
            return false;
        }
        for (oh, orow) in out.chunks_exact_mut(g.ow).enumerate() {
            orow.copy_from_slice(&run[oh * rs..oh * rs + g.ow]);
        }
        return true;
    }
    for (oh, orow) in out.chunks_exact_mut(g.ow).enumerate() {
        let row0 = &buf[oh * rs..];
        // SAFETY: each tap's offset plus an output column stays inside
        // the staged plane and its slack: the last valid input of the
        // last output row is inside the plane.
        if !unsafe { row_kernels::depthwise_row(plan.isa, row0.as_ptr(), offs, wk, orow) } {
            return false;
        }
    }
    true
}

/// One channel of a depthwise convolution, accumulated into `out` (which
/// holds the bias). Compiled twice: for the baseline target and with AVX2+FMA
/// (chosen at run time), so the row loops vectorize eight wide.
pub(super) fn depthwise_plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(
        crate::ops::gemm::best_isa(),
        crate::ops::gemm::Isa::Avx2 | crate::ops::gemm::Isa::Avx512
    ) {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { plane_avx2(conv, g, xp, wk, out) };
    }
    plane(conv, g, xp, wk, out)
}

/// [`plane`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_avx2(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    plane(conv, g, xp, wk, out)
}

/// Widest input row the stride-2 path splits on the stack.
const SPLIT_MAX: usize = 4096;

#[inline(always)]
fn plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    // Stride 2: each input row is split into its even and odd columns, so
    // every tap reads a contiguous run (a strided read does not vectorize).
    let split = sw == 2 && g.x.w <= SPLIT_MAX;
    let mut halves = [[0f32; SPLIT_MAX / 2]; 2];
    for oh in 0..g.oh {
        let orow = &mut out[oh * g.ow..(oh + 1) * g.ow];
        for ki in 0..g.kh {
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            if hh < 0 || hh >= ih {
                continue;
            }
            let xrow = &xp[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
            if split {
                let [even, odd] = &mut halves;
                for (i, pair) in xrow.chunks(2).enumerate() {
                    even[i] = pair[0];
                    if let Some(&v) = pair.get(1) {
                        odd[i] = v;
                    }
                }
            }
            for kj in 0..g.kw {
                let wv = wk[ki * g.kw + kj];
                // Input column of output column t: base + t·sw.
                let base = (kj * dw) as isize - g.pl as isize;
                let (lo, hi) = valid_range(base, sw as isize, iw, g.ow);
                if hi <= lo {
                    continue;
                }
                // First input column read: lo·sw + base (inside the row).
                let start = ((lo * sw) as isize + base) as usize;
                let dst = &mut orow[lo..hi];
                let src = if sw == 1 {
                    &xrow[start..start + (hi - lo)]
                } else if split {
                    // Column `start + 2i` is element `start / 2 + i` of
                    // the half of `start`'s parity.
                    &halves[start % 2][start / 2..start / 2 + (hi - lo)]
                } else {
                    for (o, &v) in dst.iter_mut().zip(xrow[start..].iter().step_by(sw)) {
                        *o += wv * v;
                    }
                    continue;
                };
                for (o, &v) in dst.iter_mut().zip(src) {
                    *o += wv * v;
                }
            }
        }
    }
}
