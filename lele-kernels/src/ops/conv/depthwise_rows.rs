//! Depthwise convolution a channel plane at a time, several output rows
//! per pass, for the common kernels: 3×3, 5×5 and 7×7 at stride 1, 3×3
//! and 5×5 at strides 2×2, 2×1 and 1×2, no dilation. Written once over
//! [`Simd`]; chosen where vectors have eight lanes or more.
//!
//! The output is computed in bands of [`ROWS`] rows, [`VECS`] vectors of
//! columns at a time, straight from the input plane into the output
//! plane. Consecutive output rows read the same input rows one kernel row
//! apart (two at stride 2), so each input vector is loaded once per band
//! and feeds every output row that uses it: a 3×3 layer loads 4.5 vectors
//! per output vector instead of 9, a 7×7 one 17.5 instead of 49. At
//! horizontal stride 2 the input columns under a step's outputs (twice as
//! many) are loaded once per even kernel column and split into their even
//! and odd columns ([`Simd::unzip`]). The padding is never materialized:
//! rows above and below the image read a zero row, columns outside it are
//! left out of the loads ([`Simd::load_lanes`]). Nothing is transposed,
//! where the channel-interleaved kernel ([`super::depthwise_interleaved`],
//! which keeps the other shapes and the small planes) transposes its input
//! and its output (for a 3×3 layer about as many shuffles as
//! multiply-adds).
//!
//! The fused tail (activation, scalar affine, residual) runs on each band
//! of rows right after it is written, while it is in L1. Loads and stores
//! are partial only at a row's edges (partial ones are slow on AMD, and
//! emulated on the four-lane backends).

use super::{Conv, ConvGeom};
use crate::simd::{Isa, Simd, SimdKernel, dispatch_on};

/// Output rows computed together (a band).
const ROWS: usize = 4;
/// Vectors of output columns per step and row: with [`ROWS`] rows, eight
/// accumulators, which leave room in AVX2's sixteen registers for the
/// loaded inputs and a weight.
const VECS: usize = 2;

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to run the interleaved kernel on shapes this path
    /// would take.
    pub(super) static OFF: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Set by tests to run the kernel of an instruction set below the
    /// CPU's best.
    pub(super) static FORCE_ISA: core::cell::Cell<Option<Isa>> = const { core::cell::Cell::new(None) };
}

/// Narrowest output row this path takes: narrower rows leave most of a
/// step empty, where the interleaved kernel fills its vectors with
/// channels.
const MIN_OW: usize = 24;
/// Fewest output rows this path takes. A band of four over three rows
/// computes a row for nothing, yet a text recognizer's depthwise layers at
/// 6×80 and 3×80 run faster here in the model on two threads (and no
/// slower on one), though `kernel_bench` has the interleaved kernel ahead
/// on them with warm caches.
const MIN_OH: usize = 3;

/// Fewest lanes per vector this path is chosen for. With four (NEON,
/// wasm simd128) a step is eight columns, so the edge handling weighs on
/// every row and the channel-interleaved kernel, whose vectors hold
/// channels and never straddle an edge, ran faster in node (tests still
/// run this kernel on those backends).
const MIN_LANES: usize = 8;

/// The shapes of one plane as the kernels read it.
#[derive(Clone, Copy)]
struct PlaneGeom {
    /// Input rows and columns.
    ih: usize,
    iw: usize,
    /// Top and left padding.
    pt: usize,
    pl: usize,
    /// Output rows and columns.
    oh: usize,
    ow: usize,
}

/// How this convolution runs here: the instruction set and the kernel's
/// shape.
pub(super) struct Plan {
    isa: Isa,
    kernel: Kernel,
    /// Floats of scratch one plane needs ([`scratch_len`]).
    pub(super) len: usize,
}

/// The kernel shapes this path has: `KH × KW` taps, strides.
#[derive(Clone, Copy)]
enum Kernel {
    K3S11,
    K5S11,
    K7S11,
    K3S21,
    K5S21,
    K3S22,
    K5S22,
    K3S12,
    K5S12,
}

impl Kernel {
    fn of(kh: usize, kw: usize, strides: [usize; 2]) -> Option<Kernel> {
        Some(match (kh, kw, strides) {
            (3, 3, [1, 1]) => Kernel::K3S11,
            (5, 5, [1, 1]) => Kernel::K5S11,
            (7, 7, [1, 1]) => Kernel::K7S11,
            (3, 3, [2, 1]) => Kernel::K3S21,
            (5, 5, [2, 1]) => Kernel::K5S21,
            (3, 3, [2, 2]) => Kernel::K3S22,
            (5, 5, [2, 2]) => Kernel::K5S22,
            (3, 3, [1, 2]) => Kernel::K3S12,
            (5, 5, [1, 2]) => Kernel::K5S12,
            _ => return None,
        })
    }
}

/// Floats of scratch one plane needs (a zero row as wide as the input),
/// on any machine (the scratch is planned on the build machine), for the
/// shapes this path may take.
pub(super) fn scratch_len(conv: &Conv, g: &ConvGeom) -> Option<usize> {
    let supported = Kernel::of(g.kh, g.kw, conv.strides).is_some();
    (supported && conv.dilations == [1, 1] && g.ohw() > 0 && g.x.w <= crate::ops::gemm::MAX_SCRATCH)
        .then_some(g.x.w)
}

/// The plan when this path runs these shapes here: a kernel
/// [`scratch_len`] takes, a CPU with vectors of at least [`MIN_LANES`],
/// output planes of at least [`MIN_OH`] × [`MIN_OW`].
pub(super) fn plan(conv: &Conv, g: &ConvGeom) -> Option<Plan> {
    #[allow(unused_mut)]
    let (mut isa, mut forced) = (crate::simd::best_isa(), false);
    #[cfg(all(test, feature = "std"))]
    {
        if OFF.with(|f| f.get()) {
            return None;
        }
        if let Some(f) = FORCE_ISA.with(|f| f.get()) {
            (isa, forced) = (f, true);
        }
    }
    if crate::simd::vector_lanes(isa)? < MIN_LANES && !forced {
        return None;
    }
    if g.ow < MIN_OW || g.oh < MIN_OH {
        return None;
    }
    let len = scratch_len(conv, g)?;
    let kernel = Kernel::of(g.kh, g.kw, conv.strides)?;
    Some(Plan { isa, kernel, len })
}

/// One channel: `xp` (its input plane) convolved with `wk` (its `kh · kw`
/// taps) plus `bias` into `out` (its output plane, only written), `tail`
/// run on each finished band of rows (with the band's offset in the
/// plane). `buf` holds at least [`scratch_len`] floats. Returns `false`,
/// leaving `out` untouched, when a buffer is too small.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_plane(
    plan: &Plan,
    g: &ConvGeom,
    xp: &[f32],
    wk: &[f32],
    bias: f32,
    out: &mut [f32],
    buf: &mut [f32],
    tail: &dyn Fn(&mut [f32], usize),
) -> bool {
    let (Some(zero), Some(xp), Some(wk), Some(out)) = (
        buf.get_mut(..g.x.w),
        xp.get(..g.x.h * g.x.w),
        wk.get(..g.kh * g.kw),
        out.get_mut(..g.ohw()),
    ) else {
        return false;
    };
    zero.fill(0.0);
    let pg = PlaneGeom {
        ih: g.x.h,
        iw: g.x.w,
        pt: g.pt,
        pl: g.pl,
        oh: g.oh,
        ow: g.ow,
    };
    let args = Args {
        pg,
        x: xp.as_ptr(),
        zero: zero.as_ptr(),
        bias,
        w: wk,
        out,
        tail,
    };
    // `plan` picked an instruction set this CPU runs. Each shape is a
    // kernel of its own, compiled into its own function per backend.
    let isa = plan.isa;
    match plan.kernel {
        Kernel::K3S11 => dispatch_on(isa, PlaneRows::<3, 3, 1, 1>(args)).is_ok(),
        Kernel::K5S11 => dispatch_on(isa, PlaneRows::<5, 5, 1, 1>(args)).is_ok(),
        Kernel::K7S11 => dispatch_on(isa, PlaneRows::<7, 7, 1, 1>(args)).is_ok(),
        Kernel::K3S21 => dispatch_on(isa, PlaneRows::<3, 3, 2, 1>(args)).is_ok(),
        Kernel::K5S21 => dispatch_on(isa, PlaneRows::<5, 5, 2, 1>(args)).is_ok(),
        Kernel::K3S22 => dispatch_on(isa, PlaneRows::<3, 3, 2, 2>(args)).is_ok(),
        Kernel::K5S22 => dispatch_on(isa, PlaneRows::<5, 5, 2, 2>(args)).is_ok(),
        Kernel::K3S12 => dispatch_on(isa, PlaneRows::<3, 3, 1, 2>(args)).is_ok(),
        Kernel::K5S12 => dispatch_on(isa, PlaneRows::<5, 5, 1, 2>(args)).is_ok(),
    }
}

/// [`run_plane`]'s arguments, checked there: `x` holds the `ih × iw`
/// plane, `zero` an input row of zeros, `w` the kernel's taps, `out` the
/// `oh × ow` plane.
struct Args<'a> {
    pg: PlaneGeom,
    x: *const f32,
    zero: *const f32,
    bias: f32,
    w: &'a [f32],
    out: &'a mut [f32],
    tail: &'a dyn Fn(&mut [f32], usize),
}

/// The kernel of a `KH × KW` shape at strides `SH × SW` over [`Args`].
struct PlaneRows<'a, const KH: usize, const KW: usize, const SH: usize, const SW: usize>(Args<'a>);

impl<const KH: usize, const KW: usize, const SH: usize, const SW: usize> SimdKernel
    for PlaneRows<'_, KH, KW, SH, SW>
{
    type Output = ();

    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        plane_rows::<S, KH, KW, SH, SW>(s, self.0)
    }
}

/// Most input rows a band reads: the tallest kernel's rows plus the
/// band's other rows, one each at stride 1 (7 + 3 for 7×7), two at stride
/// 2 (5 + 6 for 5×5).
const MAX_BAND_INPUTS: usize = 2 * (ROWS - 1) + 5;

/// The input row of each of a band's first `inputs` input rows: row
/// `first + q − pt` of the plane at `x` (`first` is the band's first
/// output row times the stride), the zero row where that lies outside.
#[inline(always)]
fn band_inputs(
    pg: &PlaneGeom,
    x: *const f32,
    zero: *const f32,
    first: usize,
    inputs: usize,
) -> [*const f32; MAX_BAND_INPUTS] {
    let mut src = [zero; MAX_BAND_INPUTS];
    for (q, p) in src.iter_mut().enumerate().take(inputs) {
        let r = (first + q).wrapping_sub(pg.pt);
        if r < pg.ih {
            *p = x.wrapping_add(r * pg.iw);
        }
    }
    src
}

/// The lanes `first..end` of `count` loaded from input column `start` on
/// whose columns lie inside a row of `iw` columns.
#[inline(always)]
fn inside_row(start: isize, iw: usize, count: usize) -> (usize, usize) {
    let count = count as isize;
    (
        (-start).clamp(0, count) as usize,
        (iw as isize).saturating_sub(start).clamp(0, count) as usize,
    )
}

/// The sums of one kernel column `kj` over a band: for each of the
/// band's input rows `q` (at `src[q] + start`), one load of the step's
/// `2 · LANES` columns (lanes `first..end` of them, the others zero; plain
/// loads when `WHOLE`) feeds every output row `i` whose kernel has row
/// `q − SH·i`. (The edge test is a parameter, so the loop over rows has
/// no branch on it.)
///
/// # Safety
/// `src[q] + start + first .. + end` is readable for every `q`; `w` holds
/// `KH · KW` taps.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn column_taps<
    S: Simd,
    const KH: usize,
    const KW: usize,
    const SH: usize,
    const WHOLE: bool,
>(
    s: S,
    src: &[*const f32; MAX_BAND_INPUTS],
    start: isize,
    (first, end): (usize, usize),
    w: *const f32,
    kj: usize,
    acc: &mut [[S::F32; VECS]; ROWS],
) {
    for (q, &row) in src.iter().enumerate().take(SH * (ROWS - 1) + KH) {
        let p = row.wrapping_offset(start);
        // SAFETY: whole, the `2 · LANES` columns lie inside the row; else
        // only lanes `first..end` are read (the caller's contract).
        let (x0, x1) = unsafe {
            (
                load_part::<S, WHOLE>(s, p, 0, first, end),
                load_part::<S, WHOLE>(s, p, 1, first, end),
            )
        };
        for (i, acc) in acc.iter_mut().enumerate() {
            if q < SH * i || q - SH * i >= KH {
                continue;
            }
            // SAFETY: (q − SH·i)·KW + kj < KH · KW.
            let wv = s.splat(unsafe { *w.add((q - SH * i) * KW + kj) });
            acc[0] = s.mul_add_approx(wv, x0, acc[0]);
            acc[1] = s.mul_add_approx(wv, x1, acc[1]);
        }
    }
}

/// Vector `v` of the columns at `p`: lanes `first..end` of all the
/// loaded columns, the others zero (a plain load when `WHOLE`).
///
/// # Safety
/// `WHOLE`: the vector's columns are readable; else columns
/// `first..end` (counted from `p`) are.
#[inline(always)]
unsafe fn load_part<S: Simd, const WHOLE: bool>(
    s: S,
    p: *const f32,
    v: usize,
    first: usize,
    end: usize,
) -> S::F32 {
    let l = S::LANES;
    let at = p.wrapping_add(v * l);
    // SAFETY: the contract.
    unsafe {
        if WHOLE {
            s.load(at)
        } else {
            let lane = |i: usize| i.saturating_sub(v * l).min(l);
            s.load_lanes(at, lane(first), lane(end))
        }
    }
}

/// [`column_taps`] at horizontal stride 2: kernel columns `2t` and
/// `2t + 1` from one load of the step's `4 · LANES` input columns per band
/// row, split into their even and odd columns.
///
/// # Safety
/// As [`column_taps`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pair_taps<
    S: Simd,
    const KH: usize,
    const KW: usize,
    const SH: usize,
    const WHOLE: bool,
>(
    s: S,
    src: &[*const f32; MAX_BAND_INPUTS],
    start: isize,
    (first, end): (usize, usize),
    w: *const f32,
    t: usize,
    acc: &mut [[S::F32; VECS]; ROWS],
) {
    let has_odd = 2 * t + 1 < KW;
    for (q, &row) in src.iter().enumerate().take(SH * (ROWS - 1) + KH) {
        let p = row.wrapping_offset(start);
        // SAFETY: whole, the `4 · LANES` columns lie inside the row; else
        // only lanes `first..end` are read (the caller's contract).
        let v = unsafe {
            [
                load_part::<S, WHOLE>(s, p, 0, first, end),
                load_part::<S, WHOLE>(s, p, 1, first, end),
                load_part::<S, WHOLE>(s, p, 2, first, end),
                load_part::<S, WHOLE>(s, p, 3, first, end),
            ]
        };
        let (e0, o0) = s.unzip(v[0], v[1]);
        let (e1, o1) = s.unzip(v[2], v[3]);
        for (i, acc) in acc.iter_mut().enumerate() {
            if q < SH * i || q - SH * i >= KH {
                continue;
            }
            let tap = (q - SH * i) * KW + 2 * t;
            // SAFETY: tap (+ 1 when it exists) < KH · KW.
            let we = s.splat(unsafe { *w.add(tap) });
            acc[0] = s.mul_add_approx(we, e0, acc[0]);
            acc[1] = s.mul_add_approx(we, e1, acc[1]);
            if has_odd {
                // SAFETY: as above.
                let wo = s.splat(unsafe { *w.add(tap + 1) });
                acc[0] = s.mul_add_approx(wo, o0, acc[0]);
                acc[1] = s.mul_add_approx(wo, o1, acc[1]);
            }
        }
    }
}

/// Stores a band's sums: row `i` (of `rows`) at `out + (i·ow)`, `n`
/// columns of its `VECS · LANES` (partial stores only in a row's last
/// step).
///
/// # Safety
/// `out + i·ow .. + n` is writable for every `i < rows`.
#[inline(always)]
unsafe fn store_band<S: Simd>(
    s: S,
    acc: &[[S::F32; VECS]; ROWS],
    out: *mut f32,
    ow: usize,
    rows: usize,
    n: usize,
) {
    let l = S::LANES;
    // SAFETY: the contract; each store writes inside its row's `n`.
    unsafe {
        if n == VECS * l {
            for (i, acc) in acc.iter().enumerate().take(rows) {
                let d = out.add(i * ow);
                s.store(d, acc[0]);
                s.store(d.add(l), acc[1]);
            }
        } else {
            let (n0, n1) = (n.min(l), n.saturating_sub(l).min(l));
            for (i, acc) in acc.iter().enumerate().take(rows) {
                let d = out.add(i * ow);
                s.store_partial(d, n0, acc[0]);
                if n1 > 0 {
                    s.store_partial(d.add(l), n1, acc[1]);
                }
            }
        }
    }
}

/// The output plane (`oh × ow`, only written) from the input plane
/// (`ih × iw`) for a `KH × KW` kernel at strides `SH × SW` (each 1 or 2),
/// bands of [`ROWS`] rows and [`VECS`] vectors of columns at a time.
/// Output row `o + i`, column `c + l` reads input row `SH·(o + i) + ki −
/// pt`, column `SW·(c + l) + kj − pl`. At `SW` 1, for each kernel column
/// `kj` and input row `q` of the band, one load of the step's columns feeds
/// every output row `i` with `ki = q − SH·i` in the kernel
/// ([`column_taps`]); at `SW` 2, for each even shift `2t`, the input
/// columns from `2c + 2t − pl` are loaded once and split into their even
/// columns (tap `2t`) and odd ones (tap `2t + 1`) ([`pair_taps`]). Rows
/// outside the image read the zero row, columns outside it are left out of
/// the loads (zero). (Strides 2×1 halve a text line's height, keeping its
/// width: PP-OCR cls.)
#[inline(always)]
fn plane_rows<S: Simd, const KH: usize, const KW: usize, const SH: usize, const SW: usize>(
    s: S,
    k: Args<'_>,
) {
    let Args {
        pg,
        x,
        zero,
        bias,
        w,
        out,
        tail,
    } = k;
    let PlaneGeom { iw, pl, oh, ow, .. } = pg;
    let cols = VECS * S::LANES;
    let inputs = SH * (ROWS - 1) + KH;
    if w.len() < KH * KW || out.len() < oh * ow {
        return;
    }
    let wp = w.as_ptr();
    let b = s.splat(bias);
    // Loads per band row and kernel column (pair of columns at `SW` 2).
    let (loaded, shifts) = (SW * cols, KW.div_ceil(SW));
    // (Where partial loads cost as much as whole ones, a three-column
    // kernel's few loads per step skip the branch.)
    let branch = !(S::MASKED_LOADS && KW <= 3);
    for o in (0..oh).step_by(ROWS) {
        let rows = ROWS.min(oh - o);
        // Input row of the band's row q (the zero row outside the image).
        let src = band_inputs(&pg, x, zero, SH * o, inputs);
        for c in (0..ow).step_by(cols) {
            let mut acc = [[b; VECS]; ROWS];
            for t in 0..shifts {
                // Input column of lane 0 (negative in the left padding)
                // and the lanes inside the image.
                let start = (SW * c + t * SW) as isize - pl as isize;
                let range = inside_row(start, iw, loaded);
                let whole = branch && range == (0, loaded);
                // SAFETY: lanes `first..end` are columns of each band row
                // (an input row or the zero row, `iw` wide); `w` holds the
                // kernel's taps (checked above).
                unsafe {
                    match (SW, whole) {
                        (1, true) => column_taps::<S, KH, KW, SH, true>(
                            s, &src, start, range, wp, t, &mut acc,
                        ),
                        (1, false) => column_taps::<S, KH, KW, SH, false>(
                            s, &src, start, range, wp, t, &mut acc,
                        ),
                        (_, true) => {
                            pair_taps::<S, KH, KW, SH, true>(s, &src, start, range, wp, t, &mut acc)
                        }
                        (_, false) => pair_taps::<S, KH, KW, SH, false>(
                            s, &src, start, range, wp, t, &mut acc,
                        ),
                    }
                }
            }
            // SAFETY: rows o..o + rows < oh, columns c..c + n < ow of
            // `out` (oh · ow floats, checked above).
            unsafe {
                store_band(
                    s,
                    &acc,
                    out.as_mut_ptr().add(o * ow + c),
                    ow,
                    rows,
                    cols.min(ow - c),
                )
            };
        }
        tail(&mut out[o * ow..(o + rows) * ow], o * ow);
    }
}
