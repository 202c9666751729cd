//! Row folds of the float32 plane pools: `dst[t] = dst[t] ⊕ base[off + t]`
//! for a few offsets, where `⊕` is the running maximum (NaN sticks) or the
//! running sum; scalar, AVX2 and AVX-512. Also the split of a stride-2 row
//! into its two phases.

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

/// [`fold_scalar`] with 8-lane vectors, the running value kept in a
/// register over the group, the last `n % 8` columns scalar.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fold_avx2(
    dst: &mut [f32],
    base: &[f32],
    offs: &[usize],
    init: bool,
    combine: impl Fn(
        core::arch::x86_64::__m256,
        core::arch::x86_64::__m256,
    ) -> core::arch::x86_64::__m256,
    combine_scalar: impl Fn(f32, f32) -> f32,
) {
    use core::arch::x86_64::*;
    let n = dst.len();
    if offs.iter().any(|&o| o + n > base.len()) {
        // Outside the contract; the checked scalar loop reports it.
        return fold_scalar(dst, base, offs, init, combine_scalar);
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
                m = combine(m, _mm256_loadu_ps(base.as_ptr().add(o + t)));
            }
            _mm256_storeu_ps(dst.as_mut_ptr().add(t), m);
        }
    }
    // The columns from `body` on, offsets shifted to them.
    let mut shifted = [0usize; FOLD_TAPS];
    for (s, &o) in shifted.iter_mut().zip(offs) {
        *s = o + body;
    }
    fold_scalar(
        &mut dst[body..],
        base,
        &shifted[..offs.len()],
        init,
        combine_scalar,
    );
}

/// [`fold_max`] with 8-lane vectors. `max` picks the running value on ties
/// and when it is NaN; a NaN tap is put back with a blend. (A select of the
/// running value written back to memory becomes a masked store, microcoded
/// on AMD cores.)
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn fold_max_avx2(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    let max = |m, v| _mm256_blendv_ps(_mm256_max_ps(v, m), v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
    // SAFETY: this function's own contract (AVX2).
    unsafe { fold_avx2(dst, base, offs, init, max, take_max) }
}

/// [`fold_add`] with 8-lane vectors (the same additions in the same order).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn fold_add_avx2(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    // SAFETY: this function's own contract (AVX2).
    unsafe {
        fold_avx2(
            dst,
            base,
            offs,
            init,
            |m, v| _mm256_add_ps(m, v),
            |m, v| m + v,
        )
    }
}

/// [`fold_scalar`] with sixteen-lane vectors, the last partial vector
/// masked (no scalar tail).
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fold_avx512(
    dst: &mut [f32],
    base: &[f32],
    offs: &[usize],
    init: bool,
    combine: impl Fn(
        core::arch::x86_64::__m512,
        core::arch::x86_64::__m512,
    ) -> core::arch::x86_64::__m512,
    combine_scalar: impl Fn(f32, f32) -> f32,
) {
    use core::arch::x86_64::*;
    let n = dst.len();
    if offs.iter().any(|&o| o + n > base.len()) {
        // Outside the contract; the checked scalar loop reports it.
        return fold_scalar(dst, base, offs, init, combine_scalar);
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
                m = combine(m, _mm512_maskz_loadu_ps(mask, bp.add(o + t)));
            }
            _mm512_mask_storeu_ps(dp.add(t), mask, m);
        }
        t += 16;
    }
}

/// [`fold_max`] with sixteen-lane vectors: `max` keeps the running value
/// on ties and when either is NaN; a NaN tap then replaces it.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn fold_max_avx512(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    let max = |m, v| {
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        _mm512_mask_mov_ps(_mm512_max_ps(v, m), nan, v)
    };
    // SAFETY: this function's own contract (AVX-512F).
    unsafe { fold_avx512(dst, base, offs, init, max, take_max) }
}

/// [`fold_add`] with sixteen-lane vectors (the same additions in the same
/// order).
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn fold_add_avx512(dst: &mut [f32], base: &[f32], offs: &[usize], init: bool) {
    use core::arch::x86_64::*;
    // SAFETY: this function's own contract (AVX-512F).
    unsafe {
        fold_avx512(
            dst,
            base,
            offs,
            init,
            |m, v| _mm512_add_ps(m, v),
            |m, v| m + v,
        )
    }
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

/// [`deinterleave`] 32 columns at a time by two-source permutes, the last
/// < 32 through masked loads and stores.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn deinterleave_avx512(row: &[f32], stage: &mut [f32], e: usize, o: usize) {
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Same bits, or both NaN.
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// A fold in its three forms, with its plain per-element definition.
    struct Forms {
        name: &'static str,
        scalar: fn(&mut [f32], &[f32], &[usize], bool),
        avx2: unsafe fn(&mut [f32], &[f32], &[usize], bool),
        avx512: unsafe fn(&mut [f32], &[f32], &[usize], bool),
        step: fn(f32, f32) -> f32,
    }

    #[test]
    fn vector_folds_match_scalar_and_the_sequential_definition_with_nans_and_tails() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        let avx512 = std::is_x86_feature_detected!("avx512f");
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
        let forms = [
            Forms {
                name: "max",
                scalar: fold_max,
                avx2: fold_max_avx2,
                avx512: fold_max_avx512,
                step: take_max,
            },
            Forms {
                name: "add",
                scalar: fold_add,
                avx2: fold_add_avx2,
                avx512: fold_add_avx512,
                step: |m, v| m + v,
            },
        ];
        for f in &forms {
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
                                    m = (f.step)(m, base[o + t]);
                                }
                                m
                            })
                            .collect();
                        let mut scalar = start.clone();
                        (f.scalar)(&mut scalar, &base, &offs, init);
                        let (mut v2, mut v512) = (start.clone(), start.clone());
                        if avx2 {
                            // SAFETY: AVX2 was detected above.
                            unsafe { (f.avx2)(&mut v2, &base, &offs, init) };
                        } else {
                            v2.clone_from(&want);
                        }
                        if avx512 {
                            // SAFETY: AVX-512F was detected above.
                            unsafe { (f.avx512)(&mut v512, &base, &offs, init) };
                        } else {
                            v512.clone_from(&want);
                        }
                        for t in 0..n {
                            assert!(
                                same(scalar[t], want[t])
                                    && same(v2[t], want[t])
                                    && same(v512[t], want[t]),
                                "{} n {n} taps {taps} init {init} t {t}: {} {} {} vs {}",
                                f.name,
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
