//! Row folds of the float32 plane pools: `dst[t] = dst[t] ⊕ base[off + t]`
//! for a few offsets, where `⊕` is the running maximum (NaN sticks) or the
//! running sum. Also the split of a stride-2 row
//! into its two phases. The vector forms are written once over the SIMD
//! layer ([`Lanes`]); [`Portable`] is the plain loop.

use crate::simd::Simd;

/// Taps one fold call takes (more are folded in groups).
pub(super) const FOLD_TAPS: usize = 8;

/// The running maximum `m` after seeing `v` (a NaN sticks).
#[inline(always)]
pub(super) fn take_max(m: f32, v: f32) -> f32 {
    if v > m || v.is_nan() { v } else { m }
}

/// `dst[t]` = `combine` folded over `base[off + t]` for each `off` in
/// `offs` (at most [`FOLD_TAPS`]), in order, starting from the first tap
/// (`init`) or from `dst[t]` itself. Each `off + dst.len()` is within
/// `base`.
#[inline(always)]
fn fold_scalar(
    dst: &mut [f32],
    base: &[f32],
    offs: &[usize],
    init: bool,
    combine: impl Fn(f32, f32) -> f32,
) {
    let (first, rest) = match (init, offs.split_first()) {
        (true, Some((&o, rest))) => (Some(o), rest),
        _ => (None, offs),
    };
    for (t, d) in dst.iter_mut().enumerate() {
        let mut m = first.map_or(*d, |o| base[o + t]);
        for &o in rest {
            m = combine(m, base[o + t]);
        }
        *d = m;
    }
}

/// [`fold_scalar`] with the running maximum.
#[inline(always)]
pub(super) fn fold_max(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    fold_scalar(dst, base, offs, init, take_max)
}

/// [`fold_scalar`] with the running sum.
#[inline(always)]
pub(super) fn fold_add(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    fold_scalar(dst, base, offs, init, |m, v| m + v)
}

/// `stage[e + i] = row[2i]` and `stage[o + i] = row[2i + 1]`: a stride-2
/// row split into its two phases (the two ranges do not overlap).
#[inline(always)]
pub(super) fn deinterleave(row: &[f32], stage: &mut [f32], e: usize, o: usize) {
    for (i, pair) in row.chunks(2).enumerate() {
        stage[e + i] = pair[0];
        if let Some(&v) = pair.get(1) {
            stage[o + i] = v;
        }
    }
}

/// How a pool combines its taps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Combine {
    /// The running maximum (a NaN sticks).
    Max,
    /// The running sum.
    Add,
}

/// The row operations of the pool loops: folds and the stride-2 split.
/// A trait rather than closures, so that on a vector backend they land
/// inside its entry point (see `simd::vector`).
pub(super) trait RowOps: Copy {
    /// [`fold_scalar`] with `combine`.
    fn fold(self, combine: Combine, dst: &mut [f32], base: &[f32], offs: &[usize], init: bool);
    /// [`deinterleave`].
    fn split2(self, row: &[f32], stage: &mut [f32], e: usize, o: usize);
}

/// The portable row operations.
#[derive(Clone, Copy)]
pub(super) struct Portable;

impl RowOps for Portable {
    #[inline(always)]
    fn fold(self, combine: Combine, dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
        match combine {
            Combine::Max => fold_max(dst, base, offs, init),
            Combine::Add => fold_add(dst, base, offs, init),
        }
    }
    #[inline(always)]
    fn split2(self, row: &[f32], stage: &mut [f32], e: usize, o: usize) {
        deinterleave(row, stage, e, o)
    }
}

/// The row operations on vector backend `S`.
#[derive(Clone, Copy)]
pub(super) struct Lanes<S>(pub(super) S);

impl<S: Simd> RowOps for Lanes<S> {
    #[inline(always)]
    fn fold(self, combine: Combine, dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
        match combine {
            Combine::Max => fold_lanes::<S, true>(self.0, dst, base, offs, init),
            Combine::Add => fold_lanes::<S, false>(self.0, dst, base, offs, init),
        }
    }
    #[inline(always)]
    fn split2(self, row: &[f32], stage: &mut [f32], e: usize, o: usize) {
        deinterleave_lanes(self.0, row, stage, e, o)
    }
}

/// The running maximum of vectors (`MAX`: a NaN tap replaces it; `max`
/// keeps the running value on ties and when either is NaN) or their sum.
#[inline(always)]
pub(super) fn combine_lanes<S: Simd, const MAX: bool>(s: S, m: S::F32, v: S::F32) -> S::F32 {
    if MAX {
        s.select(s.unordered(v, v), v, s.max(v, m))
    } else {
        s.add(m, v)
    }
}

/// [`fold_scalar`] a vector at a time, the last partial (the same
/// operations on each element in the same order, so the same results).
#[inline(always)]
fn fold_lanes<S: Simd, const MAX: bool>(
    s: S,
    dst: &mut [f32],
    base: &[f32],
    offs: &[usize],
    init: bool,
) {
    let n = dst.len();
    if offs.iter().any(|&o| o + n > base.len()) {
        // Outside the contract; the checked scalar loop reports it.
        return if MAX {
            fold_max(dst, base, offs, init)
        } else {
            fold_add(dst, base, offs, init)
        };
    }
    let (first, rest) = match (init, offs.split_first()) {
        (true, Some((&o, rest))) => (Some(o), rest),
        _ => (None, offs),
    };
    let (w, bp, dp) = (S::LANES, base.as_ptr(), dst.as_mut_ptr());
    let mut t = 0;
    while t < n {
        let len = (n - t).min(w);
        // SAFETY: columns t..t + len < n of `dst` and of each tap's row
        // (every off + n is within `base`, checked above).
        unsafe {
            let mut m = match first {
                Some(o) => load_len(s, bp.add(o + t), len, 0.0),
                None => load_len(s, dp.add(t), len, 0.0),
            };
            for &o in rest {
                m = combine_lanes::<S, MAX>(s, m, load_len(s, bp.add(o + t), len, 0.0));
            }
            store_len(s, dp.add(t), len, m);
        }
        t += w;
    }
}

/// [`deinterleave`] two vectors at a time ([`Simd::unzip`]), the last
/// < 2·LANES columns through partial loads and stores.
#[inline(always)]
fn deinterleave_lanes<S: Simd>(s: S, row: &[f32], stage: &mut [f32], e: usize, o: usize) {
    let n = row.len();
    let (evens, odds) = (n.div_ceil(2), n / 2);
    if e + evens > stage.len() || o + odds > stage.len() {
        // Outside the contract; the checked scalar loop reports it.
        return deinterleave(row, stage, e, o);
    }
    let w = S::LANES;
    let (src, dst) = (row.as_ptr(), stage.as_mut_ptr());
    let mut i = 0;
    while i + 2 * w <= n {
        // SAFETY: columns i..i + 2w are in `row`; outputs i/2..i/2 + w of
        // both phases are in `stage` (checked above).
        unsafe {
            let (ev, od) = s.unzip(s.load(src.add(i)), s.load(src.add(i + w)));
            s.store(dst.add(e + i / 2), ev);
            s.store(dst.add(o + i / 2), od);
        }
        i += 2 * w;
    }
    let rest = n - i;
    if rest > 0 {
        let (la, lb) = (rest.min(w), rest.saturating_sub(w));
        // SAFETY: columns i..n are in `row` (the partial loads read only
        // those); outputs up to the evens' and odds' counts are in `stage`
        // (checked above).
        unsafe {
            let a = load_len(s, src.add(i), la, 0.0);
            let b = s.load_partial(src.add(i + w), lb, 0.0);
            let (ev, od) = s.unzip(a, b);
            s.store_partial(dst.add(e + i / 2), rest.div_ceil(2), ev);
            s.store_partial(dst.add(o + i / 2), rest / 2, od);
        }
    }
}

/// `len <= LANES` floats from `p` (the rest `fill`): a whole vector when
/// `len` is one.
///
/// # Safety
/// `p` is readable for `len` floats.
#[inline(always)]
pub(super) unsafe fn load_len<S: Simd>(s: S, p: *const f32, len: usize, fill: f32) -> S::F32 {
    // SAFETY: the caller's contract.
    unsafe {
        if len == S::LANES {
            s.load(p)
        } else {
            s.load_partial(p, len, fill)
        }
    }
}

/// Stores the first `len <= LANES` lanes of `v` at `p`.
///
/// # Safety
/// `p` is writable for `len` floats.
#[inline(always)]
pub(super) unsafe fn store_len<S: Simd>(s: S, p: *mut f32, len: usize, v: S::F32) {
    // SAFETY: the caller's contract.
    unsafe {
        if len == S::LANES {
            s.store(p, v)
        } else {
            s.store_partial(p, len, v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{Isa, SimdKernel, dispatch_on, runnable_isas};
    use alloc::vec;
    use alloc::vec::Vec;

    /// Same bits, or both NaN.
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// One fold or split on a given backend.
    enum Call<'a> {
        Fold(Combine, &'a mut [f32], &'a [f32], &'a [usize], bool),
        Split(&'a [f32], &'a mut [f32], usize, usize),
    }

    impl SimdKernel for Call<'_> {
        type Output = ();
        fn run<S: Simd>(self, s: S) {
            match self {
                Call::Fold(c, d, b, o, i) => Lanes(s).fold(c, d, b, o, i),
                Call::Split(r, st, e, o) => Lanes(s).split2(r, st, e, o),
            }
        }
    }

    /// `call` on `isa`: the portable code for [`Isa::Scalar`].
    fn on(isa: Isa, call: Call<'_>) {
        if isa == Isa::Scalar {
            match call {
                Call::Fold(c, d, b, o, i) => Portable.fold(c, d, b, o, i),
                Call::Split(r, st, e, o) => Portable.split2(r, st, e, o),
            }
        } else {
            assert!(dispatch_on(isa, call).is_ok(), "{isa:?}");
        }
    }

    #[test]
    fn folds_on_every_backend_match_the_sequential_definition_with_nans_and_tails() {
        // NaNs, infinities and signed zeros mixed with a spread of finite
        // values (fractions, so sums round).
        let val = |i: usize| -> f32 {
            match (i as u64).wrapping_mul(2654435761) % 17 {
                1 => f32::NAN,
                2 => f32::NEG_INFINITY,
                3 => f32::INFINITY,
                4 | 5 => 0.0,
                6 | 7 => -0.0,
                v => (v as f32 - 11.0) / 3.0,
            }
        };
        let base: Vec<f32> = (0..200).map(val).collect();
        type Step = fn(f32, f32) -> f32;
        let forms: [(Combine, Step); 2] = [(Combine::Max, take_max), (Combine::Add, |m, v| m + v)];
        for isa in runnable_isas() {
            for &(combine, step) in &forms {
                for n in 0..41 {
                    for taps in 1..=FOLD_TAPS {
                        for init in [true, false] {
                            let offs: Vec<usize> = (0..taps).map(|k| (k * 37 + n) % 150).collect();
                            let start: Vec<f32> = (0..n).map(|i| val(i + 1000)).collect();
                            let want: Vec<f32> = (0..n)
                                .map(|t| {
                                    let (mut m, from) = if init {
                                        (base[offs[0] + t], 1)
                                    } else {
                                        (start[t], 0)
                                    };
                                    for &o in &offs[from..] {
                                        m = step(m, base[o + t]);
                                    }
                                    m
                                })
                                .collect();
                            let mut got = start.clone();
                            on(isa, Call::Fold(combine, &mut got, &base, &offs, init));
                            for t in 0..n {
                                assert!(
                                    same(got[t], want[t]),
                                    "{isa:?} n {n} taps {taps} init {init} t {t}: {} vs {}",
                                    got[t],
                                    want[t]
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn deinterleave_on_every_backend_matches_scalar_over_every_tail() {
        for isa in runnable_isas() {
            for n in 0..100usize {
                let row: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
                // Phases placed at odd offsets with a guard between them.
                let (e, o) = (3, 3 + n.div_ceil(2) + 5);
                let len = o + n / 2 + 7;
                let mut want = vec![-1f32; len];
                deinterleave(&row, &mut want, e, o);
                let mut got = vec![-1f32; len];
                on(isa, Call::Split(&row, &mut got, e, o));
                assert_eq!(got, want, "{isa:?} n {n}");
                for (i, &v) in row.iter().enumerate() {
                    let at = if i % 2 == 0 { e + i / 2 } else { o + i / 2 };
                    assert_eq!(want[at], v, "n {n} column {i}");
                }
            }
        }
    }
}
