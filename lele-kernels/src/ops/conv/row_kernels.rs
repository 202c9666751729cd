//! Row kernels of the plane-at-a-time convolution paths, written once over
//! [`Simd`]: a depthwise output row summed over its taps from a staged
//! plane, and the even columns of a row (stride-2 staging).
use crate::simd::{Isa, Simd, SimdKernel, dispatch_on};

/// Vectors of one depthwise chunk (a register block of outputs).
const CHUNK: usize = 8;

/// `out[j] += Σ_taps w[t] · src[offs[t] + j]` for `j` in `0..out.len()`,
/// on `isa`; `false` (nothing done) when `isa` has no vectors.
///
/// # Safety
/// `src[offs[t] + j]` is readable for every tap `t` and every
/// `j < out.len()`.
pub(super) unsafe fn depthwise_row(
    isa: Isa,
    src: *const f32,
    offs: &[usize],
    w: &[f32],
    out: &mut [f32],
) -> bool {
    dispatch_on(isa, DepthwiseRow { src, offs, w, out }).is_ok()
}

/// [`depthwise_row`]'s arguments (made only there, under its contract).
struct DepthwiseRow<'a> {
    src: *const f32,
    offs: &'a [usize],
    w: &'a [f32],
    out: &'a mut [f32],
}

impl SimdKernel for DepthwiseRow<'_> {
    type Output = ();

    /// [`CHUNK`] vectors of outputs at a time in registers; the last
    /// chunk has as many vectors as the columns left, its last one partial
    /// (no local copy, nothing read past the row).
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let DepthwiseRow { src, offs, w, out } = self;
        let (n, lanes) = (out.len(), S::LANES);
        let o = out.as_mut_ptr();
        let step = CHUNK * lanes;
        let mut j = 0;
        while j + step <= n {
            // SAFETY: columns j..j + step of `out`; `src` as
            // `depthwise_row`'s contract.
            unsafe { chunk::<S, CHUNK>(s, src.add(j), offs, w, o.add(j), lanes) };
            j += step;
        }
        let r = n - j;
        if r == 0 {
            return;
        }
        // Lanes of the last vector that are columns.
        let last = match r % lanes {
            0 => lanes,
            t => t,
        };
        // SAFETY: columns j..n of `out`, the last vector limited to them;
        // `src` as the contract.
        unsafe {
            let (sp, op) = (src.add(j), o.add(j));
            match r.div_ceil(lanes) {
                1 => chunk::<S, 1>(s, sp, offs, w, op, last),
                2 => chunk::<S, 2>(s, sp, offs, w, op, last),
                3 => chunk::<S, 3>(s, sp, offs, w, op, last),
                4 => chunk::<S, 4>(s, sp, offs, w, op, last),
                5 => chunk::<S, 5>(s, sp, offs, w, op, last),
                6 => chunk::<S, 6>(s, sp, offs, w, op, last),
                7 => chunk::<S, 7>(s, sp, offs, w, op, last),
                _ => chunk::<S, 8>(s, sp, offs, w, op, last),
            }
        }
    }
}

/// `o[j] += Σ_taps w[t] · src[offs[t] + j]` for `j < LANES·(N − 1) +
/// last`. When the sums are few (at most 32 columns, and twice the sums
/// fit a quarter of the registers), even and odd taps go to separate
/// accumulators: two dependency chains side by side.
///
/// # Safety
/// `o` holds `LANES·(N − 1) + last` floats and `src + offs[t]` as many for
/// every tap; `last ≤ LANES`.
#[inline(always)]
unsafe fn chunk<S: Simd, const N: usize>(
    s: S,
    src: *const f32,
    offs: &[usize],
    w: &[f32],
    o: *mut f32,
    last: usize,
) {
    let lanes = S::LANES;
    let whole = last == lanes;
    // (A function, not a closure: a closure would not be compiled with the
    // backend's target features, so the intrinsics in it would not inline.)
    let load = load_vector::<S, N>;
    let mut acc = [s.splat(0.0); N];
    for (c, a) in acc.iter_mut().enumerate() {
        // SAFETY: the caller's contract.
        *a = unsafe { load(s, o, c, last) };
    }
    // SAFETY (the offsets): the caller's contract.
    if N * lanes <= 32 && 4 * N <= S::REGISTERS {
        let mut odd = [s.splat(0.0); N];
        let mut taps = offs.iter().zip(w);
        while let Some((&off0, &w0)) = taps.next() {
            let (b0, w0) = (src.wrapping_add(off0), s.splat(w0));
            for (c, a) in acc.iter_mut().enumerate() {
                *a = s.mul_add_approx(w0, unsafe { load(s, b0, c, last) }, *a);
            }
            if let Some((&off1, &w1)) = taps.next() {
                let (b1, w1) = (src.wrapping_add(off1), s.splat(w1));
                for (c, a) in odd.iter_mut().enumerate() {
                    *a = s.mul_add_approx(w1, unsafe { load(s, b1, c, last) }, *a);
                }
            }
        }
        for (a, &b) in acc.iter_mut().zip(&odd) {
            *a = s.add(*a, b);
        }
    } else {
        for (&off, &wt) in offs.iter().zip(w) {
            let (b, wv) = (src.wrapping_add(off), s.splat(wt));
            for (c, a) in acc.iter_mut().enumerate() {
                *a = s.mul_add_approx(wv, unsafe { load(s, b, c, last) }, *a);
            }
        }
    }
    for (c, a) in acc.iter().enumerate() {
        // SAFETY: as the loads of `o`.
        unsafe {
            if c + 1 < N || whole {
                s.store(o.add(c * lanes), *a);
            } else {
                s.store_partial(o.add(c * lanes), last, *a);
            }
        }
    }
}

/// Vector `c` of the `N` at `p`, the last one limited to `last` lanes
/// (zeros past them).
///
/// # Safety
/// `p` is readable for `LANES·(N − 1) + last` floats.
#[inline(always)]
unsafe fn load_vector<S: Simd, const N: usize>(
    s: S,
    p: *const f32,
    c: usize,
    last: usize,
) -> S::F32 {
    // SAFETY: the caller's contract.
    unsafe {
        if c + 1 < N || last == S::LANES {
            s.load(p.add(c * S::LANES))
        } else {
            s.load_partial(p.add(c * S::LANES), last, 0.0)
        }
    }
}

/// `dst[t] = src[2t]` for every `t` on `isa`, a vector at a time from two
/// (the even lanes of both); `false` (nothing done) when `isa` has no
/// vectors. `src` holds at least `2·dst.len() − 1` floats (else the
/// columns past it are left alone).
pub(super) fn evens(isa: Isa, src: &[f32], dst: &mut [f32]) -> bool {
    dispatch_on(isa, Evens { src, dst }).is_ok()
}

/// [`evens`]'s arguments.
struct Evens<'a> {
    src: &'a [f32],
    dst: &'a mut [f32],
}

impl SimdKernel for Evens<'_> {
    type Output = ();

    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let Evens { src, dst } = self;
        let lanes = S::LANES;
        // Whole vectors while all their inputs are inside `src`.
        let whole = (src.len() / (2 * lanes)).min(dst.len() / lanes);
        for (i, d) in dst[..lanes * whole].chunks_exact_mut(lanes).enumerate() {
            // SAFETY: inputs 2·LANES·i .. 2·LANES·(i + 1) are inside `src`
            // (i < whole), and `d` holds LANES floats.
            unsafe {
                let lo = s.load(src.as_ptr().add(2 * lanes * i));
                let hi = s.load(src.as_ptr().add(2 * lanes * i + lanes));
                s.store(d.as_mut_ptr(), s.unzip(lo, hi).0);
            }
        }
        for (t, d) in dst.iter_mut().enumerate().skip(lanes * whole) {
            if let Some(&v) = src.get(2 * t) {
                *d = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::runnable_isas;
    use alloc::vec::Vec;

    /// The depthwise row on every vector ISA against a scalar sum over
    /// every length 0..300 (all chunk sizes and tails), with 9 and 49 taps.
    #[test]
    fn depthwise_rows_match_scalar_over_lengths() {
        let val = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.013;
        let src: Vec<f32> = (0..4096).map(val).collect();
        let mut ran = 0;
        for isa in runnable_isas() {
            for taps in [9usize, 49] {
                let offs: Vec<usize> = (0..taps).map(|t| (t * 37) % 200).collect();
                let w: Vec<f32> = (0..taps).map(|t| val(t + 11)).collect();
                for n in 0..300 {
                    let init: Vec<f32> = (0..n).map(|j| val(j + 5)).collect();
                    let mut got = init.clone();
                    // SAFETY: every offset plus n stays inside `src`
                    // (200 + 300 < 4096).
                    if !unsafe { depthwise_row(isa, src.as_ptr(), &offs, &w, &mut got) } {
                        continue;
                    }
                    ran += 1;
                    for (j, (&g, &i0)) in got.iter().zip(&init).enumerate() {
                        let sum: f64 = offs
                            .iter()
                            .zip(&w)
                            .map(|(&o, &wt)| wt as f64 * src[o + j] as f64)
                            .sum();
                        let want = i0 as f64 + sum;
                        assert!(
                            (g as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{isa:?} taps {taps} n {n} column {j}: {g} vs {want}"
                        );
                    }
                }
            }
        }
        assert!(ran > 0, "the row kernel ran on no backend");
    }

    /// The even-column copy on every vector ISA against the plain loop
    /// over lengths and offsets, each from a source of exactly `2n − 1`.
    #[test]
    fn even_copies_match_the_loop() {
        let pool: Vec<f32> = (0..400).map(|i| i as f32 * 0.25 - 3.0).collect();
        let mut ran = 0;
        for isa in runnable_isas() {
            for n in 0..70 {
                for offset in [0, 1, 5] {
                    let need = if n == 0 { 0 } else { 2 * n - 1 };
                    let src = &pool[offset..offset + need];
                    let want: Vec<f32> = (0..n).map(|t| src[2 * t]).collect();
                    let mut dst = alloc::vec![f32::NAN; n];
                    if evens(isa, src, &mut dst) {
                        ran += 1;
                        assert_eq!(dst, want, "{isa:?} n {n} offset {offset}");
                    }
                }
            }
        }
        assert!(ran > 0, "the even copy ran on no backend");
    }
}
