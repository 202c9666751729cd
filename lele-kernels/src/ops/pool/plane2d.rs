//! The float32 plane loops of 1-D and 2-D max and (undilated) average pools,
//! the shapes of real vision models. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]) and that the leading spatial slot is unused.
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

/// Layout of the max pool's scratch (in floats): the padded input row split
/// into `s[1]` phases, then a ring of horizontally pooled rows.
struct MaxLayout {
    /// Output columns rounded up to [`ROW_ALIGN`].
    owr: usize,
    /// Length of each phase of the staged row: the columns the windows
    /// read, and every input column (in floor mode up to one more per phase
    /// than any window reaches).
    phase: usize,
    /// Rows in the ring: the input rows one window spans.
    span: usize,
}

impl MaxLayout {
    fn of(p: &Plane) -> MaxLayout {
        let owr = p.ow.next_multiple_of(ROW_ALIGN);
        MaxLayout {
            owr,
            phase: owr + (p.k[1] - 1) * p.d[1] / p.s[1] + 1,
            span: (p.k[0] - 1) * p.d[0] + 1,
        }
    }

    fn len(&self, p: &Plane) -> usize {
        p.s[1] * self.phase + self.span * self.owr
    }
}

/// Floats of scratch [`max`] needs.
pub(super) fn max_scratch_len(g: &Geom) -> usize {
    let p = Plane::of(g);
    MaxLayout::of(&p).len(&p)
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
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        let (planes, len) = (g.planes(), max_scratch_len(g));
        let (ip, op) = (g.in_plane(), g.out_plane());
        if threads > 1
            && planes > 1
            && y.len() >= PARALLEL_MIN_OUTPUTS
            && len <= crate::threads::WORKER_SCRATCH
        {
            // Whole planes per task; each plane is computed the same way
            // whatever the split.
            let per = planes.div_ceil(threads);
            let tasks = planes.div_ceil(per);
            let ys = crate::threads::SharedMut::new(y);
            crate::threads::run(tasks, scratch, &|t, s| {
                let (p0, n) = (t * per, per.min(planes - t * per));
                // SAFETY: task t writes only planes p0..p0 + n of Y, which
                // no other task touches; `run` joins every task before `y`'s
                // borrow ends.
                let yt = unsafe { ys.range(p0 * op, n * op) };
                max_planes(g, &x[p0 * ip..(p0 + n) * ip], yt, &mut s[..len]);
            });
            return;
        }
    }
    max_planes(g, x, y, scratch)
}

/// Fewest outputs (inputs, for an average) worth splitting over threads.
#[cfg(feature = "std")]
const PARALLEL_MIN_OUTPUTS: usize = 1 << 14;

/// [`max`] on the caller's thread, over whole planes of `x` and `y`.
fn max_planes(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    match crate::ops::gemm::best_isa() {
        // SAFETY: AVX-512F was detected.
        crate::ops::gemm::Isa::Avx512 => return unsafe { max_avx512(g, x, y, scratch) },
        // SAFETY: AVX2 and FMA were detected.
        crate::ops::gemm::Isa::Avx2 => return unsafe { max_avx2(g, x, y, scratch) },
        crate::ops::gemm::Isa::Scalar => {}
    }
    max_body(g, x, y, scratch, fold_max, deinterleave)
}

/// [`max_body`] compiled with AVX-512: sixteen-lane folds whose last
/// partial vector is masked, and stride-2 rows split by permutes.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_avx512(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    max_body(
        g,
        x,
        y,
        scratch,
        // SAFETY (both): this function's own contract (AVX-512F).
        |d, b, o, i| unsafe { fold_max_avx512(d, b, o, i) },
        |r, s, e, o| unsafe { deinterleave_avx512(r, s, e, o) },
    )
}

/// [`max_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn max_avx2(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    // SAFETY: this function's own contract (AVX2).
    max_body(
        g,
        x,
        y,
        scratch,
        |d, b, o, i| unsafe { fold_max_avx2(d, b, o, i) },
        deinterleave,
    )
}

/// Taps one [`fold_max`] call takes (more are folded in groups).
const FOLD_TAPS: usize = 8;

/// Folds every offset of `offs` into `dst` through `fold` (one of
/// [`fold_max`]'s forms), in groups of at most [`FOLD_TAPS`].
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

#[inline(always)]
fn max_body(
    g: &Geom,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
    fold: impl Fn(&mut [f32], &[f32], &[usize], bool),
    split2: impl Fn(&[f32], &mut [f32], usize, usize),
) {
    let p = Plane::of(g);
    let lay = MaxLayout::of(&p);
    let (owr, sw, dw) = (lay.owr, p.s[1], p.d[1]);
    let (stage, ring) = scratch.split_at_mut(sw * lay.phase);
    let ring = &mut ring[..lay.span * owr];
    // Padding and the columns past the input stay -inf for every row (a
    // -inf tap never changes a running maximum); only the input columns
    // are rewritten per row. Padded column j lives in phase j % s at j / s.
    stage.fill(f32::NEG_INFINITY);
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
                orow.fill(f32::NEG_INFINITY);
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
        }
    }
}

/// The running maximum `m` after seeing `v` (a NaN sticks).
#[inline(always)]
fn take_max(m: f32, v: f32) -> f32 {
    if v > m || v.is_nan() { v } else { m }
}

/// `dst[t]` = the running maximum over `base[off + t]` for each `off` in
/// `offs` (at most [`FOLD_TAPS`]), in order, starting from the first tap
/// (`init`) or from `dst[t]` itself. Each `off + dst.len()` is within
/// `base`.
#[inline(always)]
fn fold_max(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    let (first, rest) = match (init, offs.split_first()) {
        (true, Some((&o, rest))) => (Some(o), rest),
        _ => (None, offs),
    };
    for (t, d) in dst.iter_mut().enumerate() {
        let mut m = first.map_or(*d, |o| base[o + t]);
        for &o in rest {
            m = take_max(m, base[o + t]);
        }
        *d = m;
    }
}

/// [`fold_max`] with 8-lane vectors, the running maximum kept in a register
/// over the group. `max` picks the running value on ties and when it is
/// NaN; a NaN tap is put back with a blend. (A select of the running value
/// written back to memory becomes a masked store, microcoded on AMD cores.)
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fold_max_avx2(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    let n = dst.len();
    if offs.iter().any(|&o| o + n > base.len()) {
        // Outside the contract; the checked scalar loop reports it.
        return fold_max(dst, base, offs, init);
    }
    let body = n - n % 8;
    let (first, rest) = match (init, offs.split_first()) {
        (true, Some((&o, rest))) => (Some(o), rest),
        _ => (None, offs),
    };
    for t in (0..body).step_by(8) {
        // SAFETY: t + 8 <= n, and every off + n is within `base` (checked
        // above).
        unsafe {
            let mut m = match first {
                Some(o) => _mm256_loadu_ps(base.as_ptr().add(o + t)),
                None => _mm256_loadu_ps(dst.as_ptr().add(t)),
            };
            for &o in rest {
                let v = _mm256_loadu_ps(base.as_ptr().add(o + t));
                m = _mm256_blendv_ps(_mm256_max_ps(v, m), v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            }
            _mm256_storeu_ps(dst.as_mut_ptr().add(t), m);
        }
    }
    fold_tail(dst, base, offs, init, body);
}

/// `stage[e + i] = row[2i]` and `stage[o + i] = row[2i + 1]`: a stride-2
/// row split into its two phases (the two ranges do not overlap).
#[inline(always)]
fn deinterleave(row: &[f32], stage: &mut [f32], e: usize, o: usize) {
    for (i, pair) in row.chunks(2).enumerate() {
        stage[e + i] = pair[0];
        if let Some(&v) = pair.get(1) {
            stage[o + i] = v;
        }
    }
}

/// [`deinterleave`] 32 columns at a time by two-source permutes, the last
/// < 32 through masked loads and stores.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn deinterleave_avx512(row: &[f32], stage: &mut [f32], e: usize, o: usize) {
    use core::arch::x86_64::*;
    let n = row.len();
    let (evens, odds) = (n.div_ceil(2), n / 2);
    if e + evens > stage.len() || o + odds > stage.len() {
        // Outside the contract; the checked scalar loop reports it.
        return deinterleave(row, stage, e, o);
    }
    let even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
    let (src, dst) = (row.as_ptr(), stage.as_mut_ptr());
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: columns i..i + 32 are in `row`; outputs i/2..i/2 + 16 are
        // within both phases (checked above).
        unsafe {
            let (a, b) = (
                _mm512_loadu_ps(src.add(i)),
                _mm512_loadu_ps(src.add(i + 16)),
            );
            _mm512_storeu_ps(dst.add(e + i / 2), _mm512_permutex2var_ps(a, even_idx, b));
            _mm512_storeu_ps(dst.add(o + i / 2), _mm512_permutex2var_ps(a, odd_idx, b));
        }
        i += 32;
    }
    let rest = n - i;
    if rest > 0 {
        let lanes = |k: usize| if k >= 16 { 0xffff } else { (1u16 << k) - 1 };
        let (ma, mb) = (lanes(rest), lanes(rest.saturating_sub(16)));
        // SAFETY: the masks select columns i..n only, and outputs up to the
        // evens' and odds' counts (checked above); masked-off lanes are not
        // accessed.
        unsafe {
            let a = _mm512_maskz_loadu_ps(ma, src.add(i));
            let b = _mm512_maskz_loadu_ps(mb, src.add(i + 16));
            let ev = _mm512_permutex2var_ps(a, even_idx, b);
            let od = _mm512_permutex2var_ps(a, odd_idx, b);
            _mm512_mask_storeu_ps(dst.add(e + i / 2), lanes(rest.div_ceil(2)), ev);
            _mm512_mask_storeu_ps(dst.add(o + i / 2), lanes(rest / 2), od);
        }
    }
}

/// [`fold_max`] with sixteen-lane vectors, the last partial vector masked
/// (no scalar tail); the same running maximum as [`fold_max_avx2`].
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fold_max_avx512(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    let n = dst.len();
    if offs.iter().any(|&o| o + n > base.len()) {
        // Outside the contract; the checked scalar loop reports it.
        return fold_max(dst, base, offs, init);
    }
    let (first, rest) = match (init, offs.split_first()) {
        (true, Some((&o, rest))) => (Some(o), rest),
        _ => (None, offs),
    };
    let (bp, dp) = (base.as_ptr(), dst.as_mut_ptr());
    let mut t = 0;
    while t < n {
        let mask: u16 = if n - t >= 16 {
            0xffff
        } else {
            (1u16 << (n - t)) - 1
        };
        // SAFETY: the mask selects columns t..min(t + 16, n) < n, and every
        // off + n is within `base` (checked above); masked-off lanes are
        // not accessed.
        unsafe {
            let mut m = match first {
                Some(o) => _mm512_maskz_loadu_ps(mask, bp.add(o + t)),
                None => _mm512_maskz_loadu_ps(mask, dp.add(t)),
            };
            for &o in rest {
                let v = _mm512_maskz_loadu_ps(mask, bp.add(o + t));
                // `max` keeps `m` on ties and when either is NaN; a NaN tap
                // then replaces it.
                let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                m = _mm512_mask_mov_ps(_mm512_max_ps(v, m), nan, v);
            }
            _mm512_mask_storeu_ps(dp.add(t), mask, m);
        }
        t += 16;
    }
}

/// [`fold_max`] of the columns from `from` on.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fold_tail(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool, from: usize) {
    let mut shifted = [0usize; FOLD_TAPS];
    for (s, &o) in shifted.iter_mut().zip(offs) {
        *s = o + from;
    }
    fold_max(&mut dst[from..], base, &shifted[..offs.len()], init);
}

/// Average pool (unit dilations) of every `(n, c)` plane, whole planes
/// split over the threads when the input is large enough (each plane is
/// computed the same way whatever the split).
pub(super) fn avg(g: &Geom, x: &[f32], y: &mut [f32], include_pad: bool) {
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        let (planes, ip, op) = (g.planes(), g.in_plane(), g.out_plane());
        if threads > 1 && planes > 1 && x.len() >= PARALLEL_MIN_OUTPUTS {
            let per = planes.div_ceil(threads);
            let ys = crate::threads::SharedMut::new(y);
            crate::threads::run(planes.div_ceil(per), &mut [], &|t, _| {
                let (p0, n) = (t * per, per.min(planes - t * per));
                // SAFETY: task t writes only planes p0..p0 + n of Y, which
                // no other task touches; `run` joins every task before `y`'s
                // borrow ends.
                let yt = unsafe { ys.range(p0 * op, n * op) };
                avg_planes(g, &x[p0 * ip..(p0 + n) * ip], yt, include_pad);
            });
            return;
        }
    }
    avg_planes(g, x, y, include_pad)
}

/// [`avg`] of the planes in `x` on the caller's thread.
fn avg_planes(g: &Geom, x: &[f32], y: &mut [f32], include_pad: bool) {
    let p = Plane::of(g);
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
            let (hlo, hhi) = valid_taps(hs, p.k[0], 1, p.h);
            // Taps inside the padded extent [-pad0, len + pad1).
            let hpad = ((p.h + p.pad1[0]) as isize - hs).clamp(0, p.k[0] as isize) as usize;
            for ow in 0..p.ow {
                let ws = (ow * p.s[1]) as isize - p.pad0[1] as isize;
                let (wlo, whi) = valid_taps(ws, p.k[1], 1, p.w);
                let mut sum = 0f32;
                for ki in hlo..hhi {
                    let h = (hs + ki as isize) as usize;
                    let row = &xp[h * p.w..(h + 1) * p.w];
                    let w0 = (ws + wlo as isize) as usize;
                    sum += row[w0..w0 + (whi - wlo)].iter().sum::<f32>();
                }
                let count = if include_pad {
                    let wpad = ((p.w + p.pad1[1]) as isize - ws).clamp(0, p.k[1] as isize) as usize;
                    hpad * wpad
                } else {
                    (hhi - hlo) * (whi - wlo)
                };
                yp[oh * p.ow + ow] = sum / count as f32;
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{
        FOLD_TAPS, deinterleave, deinterleave_avx512, fold_max, fold_max_avx2, fold_max_avx512,
        take_max,
    };
    use alloc::vec::Vec;

    /// Same bits, or both NaN.
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn vector_folds_match_scalar_and_sequential_max_with_nans_and_tails() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        let avx512 = std::is_x86_feature_detected!("avx512f");
        // NaNs, -inf and signed zeros mixed with a spread of finite values.
        let val = |i: usize| -> f32 {
            match (i * 2654435761) % 13 {
                1 => f32::NAN,
                2 => f32::NEG_INFINITY,
                3 | 4 => 0.0,
                5 | 6 => -0.0,
                v => v as f32 - 7.0,
            }
        };
        let base: Vec<f32> = (0..200).map(val).collect();
        for n in 0..41 {
            for taps in 1..=FOLD_TAPS {
                for init in [true, false] {
                    let offs: Vec<usize> = (0..taps).map(|k| (k * 37 + n) % 150).collect();
                    let start: Vec<f32> = (0..n).map(|i| val(i + 1000)).collect();
                    // The plain sequential definition.
                    let want: Vec<f32> = (0..n)
                        .map(|t| {
                            let (mut m, from) = if init {
                                (base[offs[0] + t], 1)
                            } else {
                                (start[t], 0)
                            };
                            for &o in &offs[from..] {
                                m = take_max(m, base[o + t]);
                            }
                            m
                        })
                        .collect();
                    let mut scalar = start.clone();
                    fold_max(&mut scalar, &base, &offs, init);
                    let (mut v2, mut v512) = (start.clone(), start.clone());
                    if avx2 {
                        // SAFETY: AVX2 was detected above.
                        unsafe { fold_max_avx2(&mut v2, &base, &offs, init) };
                    } else {
                        v2.clone_from(&want);
                    }
                    if avx512 {
                        // SAFETY: AVX-512F was detected above.
                        unsafe { fold_max_avx512(&mut v512, &base, &offs, init) };
                    } else {
                        v512.clone_from(&want);
                    }
                    for t in 0..n {
                        assert!(
                            same(scalar[t], want[t])
                                && same(v2[t], want[t])
                                && same(v512[t], want[t]),
                            "n {n} taps {taps} init {init} t {t}: {} {} {} vs {}",
                            scalar[t],
                            v2[t],
                            v512[t],
                            want[t]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn avx512_deinterleave_matches_scalar_over_every_tail() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        for n in 0..100usize {
            let row: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
            // Phases placed at odd offsets with a guard between them.
            let (e, o) = (3, 3 + n.div_ceil(2) + 5);
            let len = o + n / 2 + 7;
            let mut want = vec![-1f32; len];
            deinterleave(&row, &mut want, e, o);
            let mut got = vec![-1f32; len];
            // SAFETY: AVX-512F was detected above.
            unsafe { deinterleave_avx512(&row, &mut got, e, o) };
            assert_eq!(got, want, "n {n}");
            for (i, &v) in row.iter().enumerate() {
                let at = if i % 2 == 0 { e + i / 2 } else { o + i / 2 };
                assert_eq!(want[at], v, "n {n} column {i}");
            }
        }
    }
}
