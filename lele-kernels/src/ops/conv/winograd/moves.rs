//! The short copies, zero fills and phase splits of the Winograd
//! transforms, whole vectors where the compiler would call
//! `memcpy`/`memset`.
use super::RUN;
use crate::simd::Simd;

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

/// The data movement of the transforms: short copies, zero fills and
/// the column-phase split, with vectors ([`Vectors`]) or without
/// ([`Portable`]).
pub(super) trait Moves: Copy {
    /// `dst.copy_from_slice(src)` over their common length.
    fn copy(self, dst: &mut [f32], src: &[f32]);
    /// `dst.fill(0.0)`.
    fn zero(self, dst: &mut [f32]);
    /// `ph[k][u] = src[4u + k]` for `u < n` (`src` holds at least `4n`
    /// floats; `n` at most `RUN + 1`).
    fn split_phases(self, src: &[f32], ph: &mut [[f32; RUN + 1]; 4], n: usize);
}

/// [`Moves`] in plain Rust (no vector instruction set).
#[derive(Clone, Copy)]
pub(super) struct Portable;

impl Moves for Portable {
    #[inline(always)]
    fn copy(self, dst: &mut [f32], src: &[f32]) {
        copy_short(dst, src)
    }
    #[inline(always)]
    fn zero(self, dst: &mut [f32]) {
        dst.fill(0.0)
    }
    #[inline(always)]
    fn split_phases(self, src: &[f32], ph: &mut [[f32; RUN + 1]; 4], n: usize) {
        split_rest(src, ph, 0, n)
    }
}

/// `ph[k][u] = src[4u + k]` for `u` in `from..n` (bounded by `src`).
#[inline(always)]
fn split_rest(src: &[f32], ph: &mut [[f32; RUN + 1]; 4], from: usize, n: usize) {
    let n = n.min(src.len() / 4).min(RUN + 1);
    for u in from..n {
        for (k, p) in ph.iter_mut().enumerate() {
            p[u] = src[4 * u + k];
        }
    }
}

/// [`Moves`] with the vectors of `S`. Copies and fills: whole vectors and
/// one partial vector where partial moves are single instructions
/// (AVX-512), else [`copy_short`]'s fixed pieces and `fill` (a call to
/// `memcpy` per short copy was a large share of a small convolution's
/// time; masked stores are slow on AMD and emulated elsewhere).
#[derive(Clone, Copy)]
pub(super) struct Vectors<S>(pub(super) S);

impl<S: Simd> Moves for Vectors<S> {
    #[inline(always)]
    fn copy(self, dst: &mut [f32], src: &[f32]) {
        if !S::MASKED_LOADS {
            // Fixed pieces, compiled for this backend's vectors.
            return copy_short(dst, src);
        }
        let (s, l) = (self.0, S::LANES);
        let n = dst.len().min(src.len());
        let mut i = 0;
        while i + l <= n {
            // SAFETY: both hold `i + LANES <= n` floats.
            unsafe { s.store(dst.as_mut_ptr().add(i), s.load(src.as_ptr().add(i))) };
            i += l;
        }
        if i < n {
            // SAFETY: both hold the `n - i < LANES` floats moved.
            unsafe {
                let v = s.load_partial(src.as_ptr().add(i), n - i, 0.0);
                s.store_partial(dst.as_mut_ptr().add(i), n - i, v);
            }
        }
    }

    #[inline(always)]
    fn zero(self, dst: &mut [f32]) {
        if !S::MASKED_LOADS {
            return dst.fill(0.0);
        }
        let (s, l) = (self.0, S::LANES);
        let n = dst.len();
        let zero = s.splat(0.0);
        let mut i = 0;
        while i + l <= n {
            // SAFETY: `dst` holds `i + LANES <= n` floats.
            unsafe { s.store(dst.as_mut_ptr().add(i), zero) };
            i += l;
        }
        if i < n {
            // SAFETY: only the `n - i` floats left are written.
            unsafe { s.store_partial(dst.as_mut_ptr().add(i), n - i, zero) };
        }
    }

    /// `LANES` values of `u` at a time: two rounds of [`Simd::unzip`]
    /// (even and odd columns, then each again) over four vectors.
    #[inline(always)]
    fn split_phases(self, src: &[f32], ph: &mut [[f32; RUN + 1]; 4], n: usize) {
        let (s, l) = (self.0, S::LANES);
        let n = n.min(src.len() / 4).min(RUN + 1);
        let mut u = 0;
        while u + l <= n {
            // SAFETY: floats 4u..4u + 4·LANES are inside `src` (4n <=
            // src.len()), and each phase row holds u + LANES <= n <= RUN + 1
            // floats.
            unsafe {
                let p = src.as_ptr().add(4 * u);
                let a = [
                    s.load(p),
                    s.load(p.add(l)),
                    s.load(p.add(2 * l)),
                    s.load(p.add(3 * l)),
                ];
                // Phases 0 and 2 interleaved, and 1 and 3.
                let (e01, o01) = s.unzip(a[0], a[1]);
                let (e23, o23) = s.unzip(a[2], a[3]);
                let (p0, p2) = s.unzip(e01, e23);
                let (p1, p3) = s.unzip(o01, o23);
                for (row, v) in ph.iter_mut().zip([p0, p1, p2, p3]) {
                    s.store(row.as_mut_ptr().add(u), v);
                }
            }
            u += l;
        }
        split_rest(src, ph, u, n);
    }
}
