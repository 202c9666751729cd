//! The float32 plane loops of 1-D and 2-D max and (undilated) average pools,
//! the shapes of real vision models. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]) and that the leading spatial slot is unused.
use super::fold::{FOLD_TAPS, deinterleave, fold_add, fold_max};
#[cfg(target_arch = "x86_64")]
use super::fold::{
    deinterleave_avx512, fold_add_avx2, fold_add_avx512, fold_max_avx2, fold_max_avx512,
};
use super::{Geom, valid_taps};

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

/// [`max`] on the caller's thread, over whole planes of `x` and `y`.
fn max_planes(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    match crate::ops::gemm::best_isa() {
        crate::ops::gemm::Isa::Avx512 => {
            let p = Plane::of(g);
            if two_by_two(&p) {
                // SAFETY: AVX-512F was detected; the caller checked the
                // buffers against the geometry.
                return unsafe { max_2x2_avx512(&p, x, y) };
            }
            // SAFETY: AVX-512F was detected.
            return unsafe { max_avx512(g, x, y, scratch) };
        }
        // SAFETY: AVX2 and FMA were detected.
        crate::ops::gemm::Isa::Avx2 => return unsafe { max_avx2(g, x, y, scratch) },
        crate::ops::gemm::Isa::Scalar => {}
    }
    pool_body(
        g,
        x,
        y,
        scratch,
        f32::NEG_INFINITY,
        fold_max,
        deinterleave,
        |_, _| {},
    )
}

/// Whether a pool is a 2×2 window at stride 1 padded at most one row and
/// column at the end (PP-OCRv6 and PP-HGNet stems' `SAME_UPPER` max pool),
/// which [`max_2x2_avx512`] computes straight from the input rows.
#[cfg(target_arch = "x86_64")]
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

/// The max pool of [`two_by_two`] planes, sixteen outputs at a time: each
/// output is `(a ⊕ b) ⊕ (c ⊕ d)` of its window's taps `a b` over `c d`
/// (`⊕` the running maximum of the row folds, a tap in the padding −∞,
/// the bottom padded row left out), the values and order of [`max`]'s
/// separable loop, so the result is the same bit for bit.
///
/// # Safety
/// The CPU supports AVX-512F; `x` holds whole `h × w` planes and `y` as
/// many `oh × ow` planes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_2x2_avx512(p: &Plane, x: &[f32], y: &mut [f32]) {
    use core::arch::x86_64::*;
    let max = |m: __m512, v: __m512| {
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        _mm512_mask_mov_ps(_mm512_max_ps(v, m), nan, v)
    };
    let lanes = |n: usize| ((1u32 << n.min(16)) - 1) as __mmask16;
    let low = _mm512_set1_ps(f32::NEG_INFINITY);
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let top = xp[oh * p.w..].as_ptr();
            let below = (oh + 1 < p.h).then(|| xp[(oh + 1) * p.w..].as_ptr());
            let out = yp[oh * p.ow..].as_mut_ptr();
            for ow0 in (0..p.ow).step_by(16) {
                // Outputs ow0..ow0 + n; their right taps inside the row for
                // the first `right` of them (the last column's is padding).
                let n = (p.ow - ow0).min(16);
                let right = n.min(p.w - 1 - ow0);
                let (all, inside) = (lanes(n), lanes(right));
                // SAFETY: columns ow0..ow0 + n of row oh (and oh + 1) are
                // inside the plane (ow <= w); the right taps read columns
                // ow0 + 1..ow0 + 1 + right <= w; masked lanes are not read.
                unsafe {
                    let a = _mm512_maskz_loadu_ps(all, top.add(ow0));
                    let b = _mm512_mask_loadu_ps(low, inside, top.add(ow0 + 1));
                    let mut m = max(a, b);
                    if let Some(row) = below {
                        let c = _mm512_maskz_loadu_ps(all, row.add(ow0));
                        let d = _mm512_mask_loadu_ps(low, inside, row.add(ow0 + 1));
                        m = max(m, max(c, d));
                    }
                    _mm512_mask_storeu_ps(out.add(ow0), all, m);
                }
            }
        }
    }
}

/// [`pool_body`] compiled with AVX-512: sixteen-lane folds whose last
/// partial vector is masked, and stride-2 rows split by permutes.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_avx512(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    pool_body(
        g,
        x,
        y,
        scratch,
        f32::NEG_INFINITY,
        // SAFETY (both): this function's own contract (AVX-512F).
        |d, b, o, i| unsafe { fold_max_avx512(d, b, o, i) },
        |r, s, e, o| unsafe { deinterleave_avx512(r, s, e, o) },
        |_, _| {},
    )
}

/// [`pool_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn max_avx2(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    // SAFETY: this function's own contract (AVX2).
    pool_body(
        g,
        x,
        y,
        scratch,
        f32::NEG_INFINITY,
        |d, b, o, i| unsafe { fold_max_avx2(d, b, o, i) },
        deinterleave,
        |_, _| {},
    )
}

/// Folds every offset of `offs` into `dst` through `fold` (a form of
/// [`fold_max`] or [`fold_add`]), in groups of at most [`FOLD_TAPS`].
#[inline(always)]
fn fold_all(
    fold: impl Fn(&mut [f32], &[f32], &[usize], bool),
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
            fold(dst, base, &group, init);
            (n, init) = (0, false);
        }
    }
    if n > 0 {
        fold(dst, base, &group[..n], init);
    }
}

/// The separable plane loop both pools share (see [`max`]): input rows are
/// staged by phase with `fill` in the padding and past the input, folded
/// along W into the ring by `fold`, and each output row is the fold of its
/// window's ring rows, then handed to `finish(oh, row)`. A row whose
/// window holds no input row is `fill` before `finish`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pool_body(
    g: &Geom,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
    fill: f32,
    fold: impl Fn(&mut [f32], &[f32], &[usize], bool),
    split2: impl Fn(&[f32], &mut [f32], usize, usize),
    finish: impl Fn(usize, &mut [f32]),
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
                finish(oh, orow);
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
                    split2(row, stage, staged(p.pad0[1]), staged(p.pad0[1] + 1));
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
                fold_all(&fold, pooled, stage, (0..p.k[1]).map(|kj| staged(kj * dw)));
            }
            // At most `span` rows are kept, so their slots are distinct.
            next = next.max(last + 1);
            done = done.max(next.saturating_sub(lay.span));
            let slot = |ki: usize| ((hs + (ki * p.d[0]) as isize) as usize % lay.span) * owr;
            fold_all(&fold, orow, ring, (hlo..hhi).map(slot));
            finish(oh, orow);
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

/// [`avg`] on the caller's thread, over whole planes of `x` and `y`.
fn avg_planes(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], include_pad: bool) {
    #[cfg(target_arch = "x86_64")]
    match crate::ops::gemm::best_isa() {
        // SAFETY: AVX-512F was detected.
        crate::ops::gemm::Isa::Avx512 => {
            return unsafe { avg_avx512(g, x, y, scratch, include_pad) };
        }
        // SAFETY: AVX2 and FMA were detected.
        crate::ops::gemm::Isa::Avx2 => return unsafe { avg_avx2(g, x, y, scratch, include_pad) },
        crate::ops::gemm::Isa::Scalar => {}
    }
    avg_body(g, x, y, scratch, include_pad, fold_add, deinterleave)
}

/// [`avg_body`] compiled with AVX-512.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avg_avx512(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], include_pad: bool) {
    avg_body(
        g,
        x,
        y,
        scratch,
        include_pad,
        // SAFETY (both): this function's own contract (AVX-512F).
        |d, b, o, i| unsafe { fold_add_avx512(d, b, o, i) },
        |r, s, e, o| unsafe { deinterleave_avx512(r, s, e, o) },
    )
}

/// [`avg_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avg_avx2(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], include_pad: bool) {
    avg_body(
        g,
        x,
        y,
        scratch,
        include_pad,
        // SAFETY: this function's own contract (AVX2).
        |d, b, o, i| unsafe { fold_add_avx2(d, b, o, i) },
        deinterleave,
    )
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
    fold: impl Fn(&mut [f32], &[f32], &[usize], bool),
    split2: impl Fn(&[f32], &mut [f32], usize, usize),
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
    let cols = &*cols;
    pool_body(g, x, y, rows, 0.0, fold, split2, |oh, orow| {
        let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
        let rows = counted_taps(hs, p.k[0], p.h, p.pad1[0], include_pad) as f32;
        for (o, &c) in orow.iter_mut().zip(cols) {
            *o /= rows * c;
        }
    });
}
