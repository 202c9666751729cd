//! The float32 plane loops of 1-D and 2-D max and (undilated) average pools,
//! the shapes of real vision models. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]) and that the leading spatial slot is unused.
use super::fold::{
    Combine, FOLD_TAPS, Lanes, Portable, RowOps, combine_lanes, load_len, store_len,
};
use super::{Geom, valid_taps};
use crate::simd::{Simd, SimdKernel, dispatch};

/// Geometry of the two trailing slots (`H`, `W`).
#[derive(Clone, Copy)]
struct Plane {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pad0: [usize; 2],
    pad1: [usize; 2],
}

impl Plane {
    fn of(g: &Geom) -> Plane {
        Plane {
            h: g.x[1],
            w: g.x[2],
            oh: g.out[1],
            ow: g.out[2],
            k: [g.k[1], g.k[2]],
            s: [g.s[1], g.s[2]],
            d: [g.d[1], g.d[2]],
            pad0: [g.pad0[1], g.pad0[2]],
            pad1: [g.pad1[1], g.pad1[2]],
        }
    }
}

/// Lanes the staged rows are padded to, so every vector loop over a row
/// runs without a tail (a multiple of the widest vector).
const ROW_ALIGN: usize = 16;

/// Layout of the pools' row scratch (in floats): the padded input row split
/// into `s[1]` phases, then a ring of horizontally pooled rows.
struct RowLayout {
    /// Output columns rounded up to [`ROW_ALIGN`].
    owr: usize,
    /// Length of each phase of the staged row: the columns the windows
    /// read, and every input column (in floor mode up to one more per phase
    /// than any window reaches).
    phase: usize,
    /// Rows in the ring: the input rows one window spans.
    span: usize,
}

impl RowLayout {
    fn of(p: &Plane) -> RowLayout {
        let owr = p.ow.next_multiple_of(ROW_ALIGN);
        RowLayout {
            owr,
            phase: owr + (p.k[1] - 1) * p.d[1] / p.s[1] + 1,
            span: (p.k[0] - 1) * p.d[0] + 1,
        }
    }

    /// [`RowLayout::of`] in checked arithmetic, with the scratch length
    /// (`s[1] * phase + span * owr` floats): `None` when hostile strides,
    /// dilations or kernels (2^63…) overflow them. Once this is `Some`, the
    /// unchecked [`RowLayout::of`] the loops use cannot overflow either.
    fn checked(p: &Plane) -> Option<(RowLayout, usize)> {
        let owr = p.ow.checked_next_multiple_of(ROW_ALIGN)?;
        let reach = |k: usize, d: usize| k.checked_sub(1)?.checked_mul(d);
        let phase = owr
            .checked_add(reach(p.k[1], p.d[1])?.checked_div(p.s[1])?)?
            .checked_add(1)?;
        let span = reach(p.k[0], p.d[0])?.checked_add(1)?;
        let len = p.s[1]
            .checked_mul(phase)?
            .checked_add(span.checked_mul(owr)?)?;
        Some((RowLayout { owr, phase, span }, len))
    }
}

/// Floats of scratch [`max`] needs (`None`: more than `usize` counts).
pub(super) fn max_scratch_len(g: &Geom) -> Option<usize> {
    RowLayout::checked(&Plane::of(g)).map(|(_, len)| len)
}

/// Max pool of every `(n, c)` plane; NaN propagates. Separable: each input
/// row is pooled along W once (into a ring of rows, reused by every output
/// row whose window covers it), then each output row is the maximum of its
/// window's pooled rows. Taken in that order (W inside H) the running
/// maximum sees the taps in row-major order, so the result is bit-identical
/// to a per-element loop (which of two equal zeros or NaNs wins included).
/// `scratch` holds [`max_scratch_len`] floats. Built for the baseline target
/// and with AVX2 (chosen at run time).
pub(super) fn max(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    // The caller sized `scratch` to [`max_scratch_len`], which was `Some`.
    let len = scratch.len();
    by_planes(g, x, y, scratch, len, y.len(), &|x, y, s| {
        max_planes(g, x, y, s)
    });
}

/// A pool over whole planes: `(x, y, scratch)`.
type PlanesFn<'a> = &'a (dyn Fn(&[f32], &mut [f32], &mut [f32]) + Sync);

/// Runs `planes_fn(x, y, scratch)` over whole planes of `x` and `y`: split
/// into one range of planes per thread when there are threads, more than
/// one plane, at least [`PARALLEL_MIN_OUTPUTS`] of `work` and `len` floats
/// of scratch fit a worker's (each plane is computed the same way whatever
/// the split), else all of them on the caller's thread.
fn by_planes(
    g: &Geom,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
    len: usize,
    work: usize,
    planes_fn: PlanesFn<'_>,
) {
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        let planes = g.planes();
        let (ip, op) = (g.in_plane(), g.out_plane());
        if threads > 1
            && planes > 1
            && work >= PARALLEL_MIN_OUTPUTS
            && len <= crate::threads::WORKER_SCRATCH
        {
            let per = planes.div_ceil(threads);
            let tasks = planes.div_ceil(per);
            let ys = crate::threads::SharedMut::new(y);
            crate::threads::run(tasks, scratch, &|t, s| {
                let (p0, n) = (t * per, per.min(planes - t * per));
                // SAFETY: task t writes only planes p0..p0 + n of Y, which
                // no other task touches; `run` joins every task before `y`'s
                // borrow ends.
                let yt = unsafe { ys.range(p0 * op, n * op) };
                planes_fn(&x[p0 * ip..(p0 + n) * ip], yt, &mut s[..len]);
            });
            return;
        }
    }
    #[cfg(not(feature = "std"))]
    let _ = (g, len, work);
    planes_fn(x, y, scratch)
}

/// Fewest outputs (inputs, for an average) worth splitting over threads.
#[cfg(feature = "std")]
const PARALLEL_MIN_OUTPUTS: usize = 1 << 14;

/// [`max`] on the caller's thread, over whole planes of `x` and `y`: on
/// the best vector backend, else the portable loops.
fn max_planes(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    let kernel = MaxPlanes {
        g,
        x,
        y: &mut *y,
        scratch: &mut *scratch,
    };
    if dispatch(kernel).is_err() {
        pool_body(
            g,
            x,
            y,
            scratch,
            f32::NEG_INFINITY,
            Portable,
            Combine::Max,
            Keep,
        )
    }
}

/// [`max_planes`]' arguments, run on a vector backend.
struct MaxPlanes<'a> {
    g: &'a Geom,
    x: &'a [f32],
    y: &'a mut [f32],
    scratch: &'a mut [f32],
}

impl SimdKernel for MaxPlanes<'_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let MaxPlanes { g, x, y, scratch } = self;
        let p = Plane::of(g);
        if two_by_two(&p) {
            return max_2x2_lanes(s, &p, x, y);
        }
        pool_body(
            g,
            x,
            y,
            scratch,
            f32::NEG_INFINITY,
            Lanes(s),
            Combine::Max,
            Keep,
        )
    }
}

/// Whether a pool is a 2×2 window at stride 1 padded at most one row and
/// column at the end (PP-OCRv6 and PP-HGNet stems' `SAME_UPPER` max pool),
/// which [`max_2x2_lanes`] computes straight from the input rows.
fn two_by_two(p: &Plane) -> bool {
    p.k == [2, 2]
        && p.s == [1, 1]
        && p.d == [1, 1]
        && p.pad0 == [0, 0]
        && p.pad1[0] <= 1
        && p.pad1[1] <= 1
        && p.h >= 1
        && p.w >= 1
        && p.oh + 1 == p.h + p.pad1[0]
        && p.ow + 1 == p.w + p.pad1[1]
}

/// The max pool of [`two_by_two`] planes, a vector of outputs at a time:
/// each output is `(a ⊕ b) ⊕ (c ⊕ d)` of its window's taps `a b` over
/// `c d` (`⊕` the running maximum of the row folds, a tap in the padding
/// −∞, the bottom padded row left out), the values and order of [`max`]'s
/// separable loop, so the result is the same bit for bit. `x` holds whole
/// `h × w` planes and `y` as many `oh × ow` planes (the caller checked).
#[inline(always)]
fn max_2x2_lanes<S: Simd>(s: S, p: &Plane, x: &[f32], y: &mut [f32]) {
    let w = S::LANES;
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let top = xp[oh * p.w..].as_ptr();
            let below = (oh + 1 < p.h).then(|| xp[(oh + 1) * p.w..].as_ptr());
            let out = yp[oh * p.ow..].as_mut_ptr();
            let mut ow0 = 0;
            while ow0 < p.ow {
                // Outputs ow0..ow0 + n; their right taps inside the row for
                // the first `right` of them (the last column's is padding).
                let n = (p.ow - ow0).min(w);
                let right = n.min(p.w - 1 - ow0);
                let low = f32::NEG_INFINITY;
                // SAFETY: columns ow0..ow0 + n of row oh (and oh + 1) are
                // inside the plane (ow <= w); the right taps read columns
                // ow0 + 1..ow0 + 1 + right <= w.
                unsafe {
                    let a = load_len(s, top.add(ow0), n, 0.0);
                    let b = load_len(s, top.add(ow0 + 1), right, low);
                    let mut m = combine_lanes::<S, true>(s, a, b);
                    if let Some(row) = below {
                        let c = load_len(s, row.add(ow0), n, 0.0);
                        let d = load_len(s, row.add(ow0 + 1), right, low);
                        let cd = combine_lanes::<S, true>(s, c, d);
                        m = combine_lanes::<S, true>(s, m, cd);
                    }
                    store_len(s, out.add(ow0), n, m);
                }
                ow0 += w;
            }
        }
    }
}

/// Folds every offset of `offs` into `dst` by `ops` with `combine`, in
/// groups of at most [`FOLD_TAPS`].
#[inline(always)]
fn fold_all(
    ops: impl RowOps,
    combine: Combine,
    dst: &mut [f32],
    base: &[f32],
    offs: impl Iterator<Item = usize>,
) {
    let mut group = [0usize; FOLD_TAPS];
    let (mut n, mut init) = (0, true);
    for off in offs {
        group[n] = off;
        n += 1;
        if n == FOLD_TAPS {
            ops.fold(combine, dst, base, &group, init);
            (n, init) = (0, false);
        }
    }
    if n > 0 {
        ops.fold(combine, dst, base, &group[..n], init);
    }
}

/// The separable plane loop both pools share (see [`max`]): input rows are
/// staged by phase with `fill` in the padding and past the input, folded
/// along W into the ring by `fold`, and each output row is the fold of its
/// window's ring rows (`ops` with `combine`), then handed to
/// `finish`. A row whose window holds no input row is `fill` before
/// `finish`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pool_body(
    g: &Geom,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
    fill: f32,
    ops: impl RowOps,
    combine: Combine,
    finish: impl RowFinish,
) {
    let p = Plane::of(g);
    let lay = RowLayout::of(&p);
    let (owr, sw, dw) = (lay.owr, p.s[1], p.d[1]);
    let (stage, ring) = scratch.split_at_mut(sw * lay.phase);
    let ring = &mut ring[..lay.span * owr];
    // Padding and the columns past the input stay `fill` for every row (a
    // -inf tap never changes a running maximum, a zero never changes a
    // sum); only the input columns are rewritten per row. Padded column j
    // lives in phase j % s at j / s.
    stage.fill(fill);
    let staged = |j: usize| (j % sw) * lay.phase + j / sw;
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        // Input rows `done..next` are in the ring (slot h % span).
        let (mut done, mut next) = (0, 0);
        for oh in 0..p.oh {
            let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
            let (hlo, hhi) = valid_taps(hs, p.k[0], p.d[0], p.h);
            let orow = &mut yp[oh * p.ow..(oh + 1) * p.ow];
            if hhi <= hlo {
                orow.fill(fill);
                finish.finish(oh, orow);
                continue;
            }
            let first = (hs + (hlo * p.d[0]) as isize) as usize;
            let last = (hs + ((hhi - 1) * p.d[0]) as isize) as usize;
            // Windows move down, but a dilated window clipped at the top
            // can start above the previous one: then restart the run.
            if first < done || first > next {
                (done, next) = (first, first);
            }
            for h in next..=last {
                let row = &xp[h * p.w..(h + 1) * p.w];
                if sw == 1 {
                    stage[p.pad0[1]..p.pad0[1] + p.w].copy_from_slice(row);
                } else if sw == 2 {
                    // Even input columns into one phase, odd into the other.
                    ops.split2(row, stage, staged(p.pad0[1]), staged(p.pad0[1] + 1));
                } else {
                    // Phase by phase: the columns of one phase are every
                    // `sw`-th input column and land side by side (no
                    // division per element).
                    for ph in 0..sw {
                        let c0 = (ph + sw - p.pad0[1] % sw) % sw;
                        if c0 >= p.w {
                            continue;
                        }
                        let at = staged(p.pad0[1] + c0);
                        let cols = row[c0..].iter().step_by(sw);
                        for (d, &v) in stage[at..].iter_mut().zip(cols) {
                            *d = v;
                        }
                    }
                }
                // Output column t, tap kj reads padded column t·s + kj·d.
                let pooled = &mut ring[(h % lay.span) * owr..][..owr];
                let taps = (0..p.k[1]).map(|kj| staged(kj * dw));
                fold_all(ops, combine, pooled, stage, taps);
            }
            // At most `span` rows are kept, so their slots are distinct.
            next = next.max(last + 1);
            done = done.max(next.saturating_sub(lay.span));
            let slot = |ki: usize| ((hs + (ki * p.d[0]) as isize) as usize % lay.span) * owr;
            fold_all(ops, combine, orow, ring, (hlo..hhi).map(slot));
            finish.finish(oh, orow);
        }
    }
}

/// Floats of scratch [`avg`] needs: [`max`]'s rows plus one row of
/// divisor factors.
pub(super) fn avg_scratch_len(g: &Geom) -> Option<usize> {
    let (lay, len) = RowLayout::checked(&Plane::of(g))?;
    len.checked_add(lay.owr)
}

/// Average pool (unit dilations) of every `(n, c)` plane, with the same
/// separable loop as [`max`]: sums along W into the ring, sums of the
/// window's ring rows, then one division per output by the taps counted
/// (inside `X`, or inside the padded input with `include_pad`). Each output
/// sums each of its window's rows left to right, then those row sums top to
/// bottom. Whole
/// planes are split over the threads when the input is large enough (each
/// plane is computed the same way whatever the split). `scratch` holds
/// [`avg_scratch_len`] floats.
pub(super) fn avg(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], include_pad: bool) {
    // The caller sized `scratch` to [`avg_scratch_len`], which was `Some`.
    let len = scratch.len();
    by_planes(g, x, y, scratch, len, x.len(), &|x, y, s| {
        avg_planes(g, x, y, s, include_pad)
    });
}

/// [`avg`] on the caller's thread, over whole planes of `x` and `y`: on
/// the best vector backend, else the portable loops.
fn avg_planes(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], include_pad: bool) {
    let kernel = AvgPlanes {
        g,
        x,
        y: &mut *y,
        scratch: &mut *scratch,
        include_pad,
    };
    if dispatch(kernel).is_err() {
        avg_body(g, x, y, scratch, include_pad, Portable)
    }
}

/// [`avg_planes`]' arguments, run on a vector backend.
struct AvgPlanes<'a> {
    g: &'a Geom,
    x: &'a [f32],
    y: &'a mut [f32],
    scratch: &'a mut [f32],
    include_pad: bool,
}

impl SimdKernel for AvgPlanes<'_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let AvgPlanes {
            g,
            x,
            y,
            scratch,
            include_pad,
        } = self;
        avg_body(g, x, y, scratch, include_pad, Lanes(s))
    }
}

/// Taps of a window along one axis that the divisor counts: those inside
/// the input, or with `include_pad` those inside the explicitly padded
/// extent `[-pad0, len + pad1)` (not the positions `ceil_mode` adds).
#[inline(always)]
fn counted_taps(start: isize, k: usize, len: usize, pad1: usize, include_pad: bool) -> usize {
    if include_pad {
        ((len + pad1) as isize - start).clamp(0, k as isize) as usize
    } else {
        let (lo, hi) = valid_taps(start, k, 1, len);
        hi - lo
    }
}

#[inline(always)]
fn avg_body(
    g: &Geom,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
    include_pad: bool,
    ops: impl RowOps,
) {
    let p = Plane::of(g);
    let (cols, rows) = scratch.split_at_mut(RowLayout::of(&p).owr);
    // The divisor of output (oh, ow) is the product of the taps counted
    // along H and along W (exact in f32 for any real window).
    let cols = &mut cols[..p.ow];
    for (ow, c) in cols.iter_mut().enumerate() {
        let ws = (ow * p.s[1]) as isize - p.pad0[1] as isize;
        *c = counted_taps(ws, p.k[1], p.w, p.pad1[1], include_pad) as f32;
    }
    let divide = Divide {
        p: &p,
        cols: &*cols,
        include_pad,
    };
    pool_body(g, x, y, rows, 0.0, ops, Combine::Add, divide);
}

/// What the pool loop does to each finished output row: a trait rather
/// than a closure, so that its loop is compiled for the backend running
/// the pool (see `simd::vector`).
trait RowFinish: Copy {
    /// Finishes output row `oh`.
    fn finish(self, oh: usize, row: &mut [f32]);
}

/// Nothing (a max pool's rows are final).
#[derive(Clone, Copy)]
struct Keep;

impl RowFinish for Keep {
    #[inline(always)]
    fn finish(self, _oh: usize, _row: &mut [f32]) {}
}

/// An average pool's division by the taps each output counted.
#[derive(Clone, Copy)]
struct Divide<'a> {
    p: &'a Plane,
    /// Taps counted along W, per output column.
    cols: &'a [f32],
    include_pad: bool,
}

impl RowFinish for Divide<'_> {
    #[inline(always)]
    fn finish(self, oh: usize, row: &mut [f32]) {
        let p = self.p;
        let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
        let rows = counted_taps(hs, p.k[0], p.h, p.pad1[0], self.include_pad) as f32;
        for (o, &c) in row.iter_mut().zip(self.cols) {
            *o /= rows * c;
        }
    }
}
