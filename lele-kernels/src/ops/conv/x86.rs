//! AVX2+FMA and AVX-512 row kernels of the depthwise convolution.
use core::arch::x86_64::*;

/// One output row of a depthwise convolution from a staged plane (see
/// `direct::Layout`): `out[j] += Σ_taps w[t] · src[offs[t] + j]` for `j`
/// in `0..out.len()`, 64 columns at a time in registers; the last partial
/// chunk goes through a local copy of `out`, rounded up to whole vectors.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `src[offs[t] + j]` is readable for
/// every tap `t` and every `j < out.len().next_multiple_of(8)`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn depthwise_row_avx2(
    src: *const f32,
    offs: &[usize],
    w: &[f32],
    out: &mut [f32],
) {
    let n = out.len();
    let mut j = 0;
    while j + 64 <= n {
        // SAFETY: columns j..j + 64 of `out`; the caller's contract for src.
        unsafe { depthwise_chunk::<8>(src.add(j), offs, w, out.as_mut_ptr().add(j)) };
        j += 64;
    }
    let r = n - j;
    if r == 0 {
        return;
    }
    let mut local = [0f32; 64];
    local[..r].copy_from_slice(&out[j..]);
    // SAFETY: `local` holds 64 floats; src is read up to column
    // j + r.next_multiple_of(8) <= n.next_multiple_of(8).
    unsafe {
        let (s, o) = (src.add(j), local.as_mut_ptr());
        match r.div_ceil(8) {
            1 => depthwise_chunk::<1>(s, offs, w, o),
            2 => depthwise_chunk::<2>(s, offs, w, o),
            3 => depthwise_chunk::<3>(s, offs, w, o),
            4 => depthwise_chunk::<4>(s, offs, w, o),
            5 => depthwise_chunk::<5>(s, offs, w, o),
            6 => depthwise_chunk::<6>(s, offs, w, o),
            7 => depthwise_chunk::<7>(s, offs, w, o),
            _ => depthwise_chunk::<8>(s, offs, w, o),
        }
    }
    out[j..].copy_from_slice(&local[..r]);
}

/// `o[j] += Σ_taps w[t] · src[offs[t] + j]` for `j < 8·N`. With four
/// vectors or fewer, even and odd taps go to separate accumulators so
/// two dependency chains run side by side.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `o` holds `8·N` floats and
/// `src + offs[t] .. + 8·N` is readable for every tap.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn depthwise_chunk<const N: usize>(src: *const f32, offs: &[usize], w: &[f32], o: *mut f32) {
    // SAFETY: the caller's contract.
    unsafe {
        let mut acc: [__m256; N] = core::array::from_fn(|c| _mm256_loadu_ps(o.add(8 * c)));
        if N <= 4 {
            let mut odd = [_mm256_setzero_ps(); N];
            let mut taps = offs.iter().zip(w);
            while let Some((&off0, &w0)) = taps.next() {
                let (b0, w0) = (src.add(off0), _mm256_set1_ps(w0));
                for (c, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(w0, _mm256_loadu_ps(b0.add(8 * c)), *a);
                }
                if let Some((&off1, &w1)) = taps.next() {
                    let (b1, w1) = (src.add(off1), _mm256_set1_ps(w1));
                    for (c, a) in odd.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(w1, _mm256_loadu_ps(b1.add(8 * c)), *a);
                    }
                }
            }
            for (a, &b) in acc.iter_mut().zip(&odd) {
                *a = _mm256_add_ps(*a, b);
            }
        } else {
            for (&off, &wt) in offs.iter().zip(w) {
                let (b, wv) = (src.add(off), _mm256_set1_ps(wt));
                for (c, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b.add(8 * c)), *a);
                }
            }
        }
        for (c, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(o.add(8 * c), *a);
        }
    }
}

/// [`depthwise_row_avx2`] with sixteen-lane vectors: 128 columns at a
/// time in registers, the last partial chunk through masked loads and
/// stores (no local copy).
///
/// # Safety
/// The CPU supports AVX-512F; `src[offs[t] + j]` is readable for every tap
/// `t` and every `j < out.len()`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_row_avx512(
    src: *const f32,
    offs: &[usize],
    w: &[f32],
    out: &mut [f32],
) {
    let n = out.len();
    let mut j = 0;
    while j + 128 <= n {
        // SAFETY: columns j..j + 128 of `out`; the caller's contract for src.
        unsafe { depthwise_chunk512::<8>(src.add(j), offs, w, out.as_mut_ptr().add(j), 0xFFFF) };
        j += 128;
    }
    let r = n - j;
    if r == 0 {
        return;
    }
    // Lanes of the last vector that are columns.
    let last = match r % 16 {
        0 => 0xFFFF,
        t => (1u16 << t) - 1,
    };
    // SAFETY: columns j..n of `out`, the last vector masked to them; src
    // as the caller's contract (masked lanes are not read).
    unsafe {
        let (s, o) = (src.add(j), out.as_mut_ptr().add(j));
        match r.div_ceil(16) {
            1 => depthwise_chunk512::<1>(s, offs, w, o, last),
            2 => depthwise_chunk512::<2>(s, offs, w, o, last),
            3 => depthwise_chunk512::<3>(s, offs, w, o, last),
            4 => depthwise_chunk512::<4>(s, offs, w, o, last),
            5 => depthwise_chunk512::<5>(s, offs, w, o, last),
            6 => depthwise_chunk512::<6>(s, offs, w, o, last),
            7 => depthwise_chunk512::<7>(s, offs, w, o, last),
            _ => depthwise_chunk512::<8>(s, offs, w, o, last),
        }
    }
}

/// `o[j] += Σ_taps w[t] · src[offs[t] + j]` for `j < 16·N`, the last
/// vector's lanes limited to `last`. With two vectors or fewer, even and
/// odd taps go to separate accumulators (two dependency chains).
///
/// # Safety
/// The CPU supports AVX-512F; `o` holds `16·(N - 1)` floats plus the
/// lanes of `last`, and `src + offs[t]` as many.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn depthwise_chunk512<const N: usize>(
    src: *const f32,
    offs: &[usize],
    w: &[f32],
    o: *mut f32,
    last: u16,
) {
    let mask = |c: usize| if c + 1 == N { last } else { 0xFFFF };
    // SAFETY: the caller's contract (every access masked to its lanes).
    unsafe {
        let mut acc = [_mm512_setzero_ps(); N];
        for (c, a) in acc.iter_mut().enumerate() {
            *a = _mm512_maskz_loadu_ps(mask(c), o.add(16 * c));
        }
        if N <= 2 {
            let mut odd = [_mm512_setzero_ps(); N];
            let mut taps = offs.iter().zip(w);
            while let Some((&off0, &w0)) = taps.next() {
                let (b0, w0) = (src.add(off0), _mm512_set1_ps(w0));
                for (c, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_maskz_loadu_ps(mask(c), b0.add(16 * c));
                    *a = _mm512_fmadd_ps(w0, x, *a);
                }
                if let Some((&off1, &w1)) = taps.next() {
                    let (b1, w1) = (src.add(off1), _mm512_set1_ps(w1));
                    for (c, a) in odd.iter_mut().enumerate() {
                        let x = _mm512_maskz_loadu_ps(mask(c), b1.add(16 * c));
                        *a = _mm512_fmadd_ps(w1, x, *a);
                    }
                }
            }
            for (a, &b) in acc.iter_mut().zip(&odd) {
                *a = _mm512_add_ps(*a, b);
            }
        } else {
            for (&off, &wt) in offs.iter().zip(w) {
                let (b, wv) = (src.add(off), _mm512_set1_ps(wt));
                for (c, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_maskz_loadu_ps(mask(c), b.add(16 * c));
                    *a = _mm512_fmadd_ps(wv, x, *a);
                }
            }
        }
        for (c, a) in acc.iter().enumerate() {
            _mm512_mask_storeu_ps(o.add(16 * c), mask(c), *a);
        }
    }
}

/// `dst[t] = src[2t]` eight outputs at a time: two loads, one shuffle
/// that takes the even lanes of each 128-bit half of both, and one
/// permute that puts the four 64-bit pieces in order.
///
/// # Safety
/// The CPU supports AVX2; `src` holds at least `2·dst.len() - 1` floats
/// (checked by the caller).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn evens_avx2(src: &[f32], dst: &mut [f32]) {
    // Whole vectors while all 16 inputs are inside `src`.
    let whole = (src.len() / 16).min(dst.len() / 8);
    for (i, d) in dst[..8 * whole].chunks_exact_mut(8).enumerate() {
        // SAFETY: inputs 16i..16i + 16 are inside `src` (i < whole), and
        // `d` holds 8 floats.
        unsafe {
            let lo = _mm256_loadu_ps(src.as_ptr().add(16 * i));
            let hi = _mm256_loadu_ps(src.as_ptr().add(16 * i + 8));
            // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then 64-bit pieces 0 2 1 3.
            let even = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
            let ordered = _mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(even));
            _mm256_storeu_ps(d.as_mut_ptr(), _mm256_castpd_ps(ordered));
        }
    }
    for (t, d) in dst.iter_mut().enumerate().skip(8 * whole) {
        *d = src[2 * t];
    }
}

/// `dst[t] = src[2t]` sixteen outputs at a time: two loads and one
/// two-source permute per vector (the even lanes of 32 inputs).
///
/// # Safety
/// The CPU supports AVX-512F; `src` holds at least `2·dst.len() - 1`
/// floats (checked by the caller).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn evens_avx512(src: &[f32], dst: &mut [f32]) {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    // Whole vectors while all 32 inputs are inside `src`.
    let whole = (src.len() / 32).min(dst.len() / 16);
    for (i, d) in dst[..16 * whole].chunks_exact_mut(16).enumerate() {
        // SAFETY: inputs 32i..32i + 32 are inside `src` (i < whole), and
        // `d` holds 16 floats.
        unsafe {
            let lo = _mm512_loadu_ps(src.as_ptr().add(32 * i));
            let hi = _mm512_loadu_ps(src.as_ptr().add(32 * i + 16));
            _mm512_storeu_ps(d.as_mut_ptr(), _mm512_permutex2var_ps(lo, even, hi));
        }
    }
    for (t, d) in dst.iter_mut().enumerate().skip(16 * whole) {
        *d = src[2 * t];
    }
}
