//! The short copies and zero fills of the Winograd transforms, whole
//! vectors where the compiler would call `memcpy`/`memset`.

/// `dst.copy_from_slice(src)` for the short copies of the transforms, in
/// fixed-size pieces the compiler turns into vector moves (a call to
/// `memmove` per run cost a quarter of a 64-channel convolution's time).
#[inline(always)]
pub(super) fn copy_short(dst: &mut [f32], src: &[f32]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let (d16, dst) = dst.as_chunks_mut::<16>();
    let (s16, src) = src.as_chunks::<16>();
    for (a, b) in d16.iter_mut().zip(s16) {
        *a = *b;
    }
    let (d8, dst) = dst.as_chunks_mut::<8>();
    let (s8, src) = src.as_chunks::<8>();
    for (a, b) in d8.iter_mut().zip(s8) {
        *a = *b;
    }
    let (d4, dst) = dst.as_chunks_mut::<4>();
    let (s4, src) = src.as_chunks::<4>();
    for (a, b) in d4.iter_mut().zip(s4) {
        *a = *b;
    }
    // Element by element: a loop here compiles to a call to `memcpy`.
    match (dst, src) {
        ([a, b, c], [x, y, z]) => (*a, *b, *c) = (*x, *y, *z),
        ([a, b], [x, y]) => (*a, *b) = (*x, *y),
        ([a], [x]) => *a = *x,
        _ => {}
    }
}

/// [`copy_short`] with AVX-512: whole vectors, then one masked vector
/// (the short copies of the input transform were a large share of a
/// small convolution's time, most of it in `memcpy` and `memset` calls).
///
/// # Safety
/// AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn copy_avx512(dst: &mut [f32], src: &[f32]) {
    use core::arch::x86_64::*;
    let n = dst.len().min(src.len());
    if n == 16 {
        // One whole vector, stored plainly: where the caller's lengths are
        // at most 16 (copies into `V`, a panel at a time) the loop below
        // compiled to masked moves only, and masked stores are slow on
        // AMD.
        // SAFETY: both hold 16 floats.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), _mm512_loadu_ps(src.as_ptr())) };
        return;
    }
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: both hold `i + 16 <= n` floats.
        unsafe {
            let v = _mm512_loadu_ps(src.as_ptr().add(i));
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), v);
        }
        i += 16;
    }
    if i < n {
        let mask: __mmask16 = (1u16 << (n - i)) - 1;
        // SAFETY: the masked lanes are the `n - i` floats both still hold;
        // masked-off lanes are neither read nor written.
        unsafe {
            let v = _mm512_maskz_loadu_ps(mask, src.as_ptr().add(i));
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(i), mask, v);
        }
    }
}

/// `dst.fill(0.0)` with AVX-512 (as [`copy_avx512`]).
///
/// # Safety
/// AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn zero_avx512(dst: &mut [f32]) {
    use core::arch::x86_64::*;
    let n = dst.len();
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `dst` holds `i + 16 <= n` floats.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_setzero_ps()) };
        i += 16;
    }
    if i < n {
        let mask: __mmask16 = (1u16 << (n - i)) - 1;
        // SAFETY: only the `n - i` floats left are written.
        unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr().add(i), mask, _mm512_setzero_ps()) };
    }
}

/// The short copies and fills of the input transform: AVX-512 ones when
/// `AVX512` (the caller detected it), else [`copy_short`] and `fill`.
#[derive(Clone, Copy)]
pub(super) struct Moves<const AVX512: bool>;

impl<const AVX512: bool> Moves<AVX512> {
    #[inline(always)]
    pub(super) fn copy(self, dst: &mut [f32], src: &[f32]) {
        #[cfg(target_arch = "x86_64")]
        if AVX512 {
            // SAFETY: `Moves::<true>` is only made where AVX-512F was
            // detected (`input_avx512`).
            return unsafe { copy_avx512(dst, src) };
        }
        copy_short(dst, src)
    }

    #[inline(always)]
    pub(super) fn zero(self, dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if AVX512 {
            // SAFETY: as in `copy`.
            return unsafe { zero_avx512(dst) };
        }
        dst.fill(0.0)
    }
}
