//! Dot-product kernels for a few rows of `A` against columns of `B` stored
//! contiguously (a Linear layer's transposed weight, an LSTM step, a
//! convolution over a handful of frames), AVX2+FMA and AVX-512.
use core::arch::x86_64::*;

/// Sum of the eight lanes.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: only register operations (the caller enabled AVX).
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// `R` rows of A (stride `lda`) against `N` columns of B stored
/// contiguously (stride `ldb`), `k` deep: `R·N` accumulators of eight lanes.
///
/// # Safety
/// AVX2+FMA; `a` addresses `R` rows of `k` floats at stride `lda`, `b`
/// addresses `N` columns of `k` floats at stride `ldb`, `c` addresses an
/// `R × N` tile at row stride `ldc`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_tile<const R: usize, const N: usize>(
    k: usize,
    alpha: f32,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    beta: f32,
    c: *mut f32,
    ldc: usize,
) {
    // SAFETY: register-only intrinsic (the caller enabled AVX).
    let mut acc = [[unsafe { _mm256_setzero_ps() }; N]; R];
    let full = k - k % 8;
    let mut p = 0;
    while p < full {
        // SAFETY: p + 8 <= k, inside every row of A and column of B.
        unsafe {
            let av: [__m256; R] = core::array::from_fn(|i| _mm256_loadu_ps(a.add(i * lda + p)));
            for j in 0..N {
                let bv = _mm256_loadu_ps(b.add(j * ldb + p));
                for (row, &ai) in acc.iter_mut().zip(&av) {
                    row[j] = _mm256_fmadd_ps(ai, bv, row[j]);
                }
            }
        }
        p += 8;
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, &lanes) in row.iter().enumerate() {
            // SAFETY: lanes are summed in registers; the tail indices stay
            // below k; (i, j) is inside the C tile.
            unsafe {
                let mut dot = hsum(lanes);
                for q in full..k {
                    dot += *a.add(i * lda + q) * *b.add(j * ldb + q);
                }
                let out = c.add(i * ldc + j);
                *out = if beta == 0.0 {
                    alpha * dot
                } else {
                    alpha * dot + beta * *out
                };
            }
        }
    }
}

/// `C = alpha·A·B + beta·C` (`m × n`) with A's rows and B's columns
/// contiguous: tiles of 2 rows × 4 columns of dot products, no packing.
///
/// # Safety
/// AVX2+FMA; `a` holds `m` rows of `k` at stride `lda`, `bt` holds `n`
/// columns of `k` at stride `ldb`, `c` holds `m` rows of `n` at stride
/// `ldc` (the caller checked the slice lengths).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn dot_columns_avx2(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: *const f32,
    lda: usize,
    bt: *const f32,
    ldb: usize,
    beta: f32,
    c: *mut f32,
    ldc: usize,
) {
    let mut j = 0;
    while j < n {
        let cols = (n - j).min(4);
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(2);
            // SAFETY: rows i..i + rows and columns j..j + cols are inside
            // A, B and C (caller's contract).
            unsafe {
                let (ap, bp, cp) = (a.add(i * lda), bt.add(j * ldb), c.add(i * ldc + j));
                match (rows, cols) {
                    (2, 4) => dot_tile::<2, 4>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (2, 3) => dot_tile::<2, 3>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (2, 2) => dot_tile::<2, 2>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (2, _) => dot_tile::<2, 1>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (_, 4) => dot_tile::<1, 4>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (_, 3) => dot_tile::<1, 3>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    (_, 2) => dot_tile::<1, 2>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                    _ => dot_tile::<1, 1>(k, alpha, ap, lda, bp, ldb, beta, cp, ldc),
                }
            }
            i += rows;
        }
        j += cols;
    }
}

/// One sixteen-deep step of [`dot_tile512`] at depth `p`, lanes `mask`.
///
/// # Safety
/// AVX-512F; the lanes `mask` selects from `p` are inside every row of A
/// and column of B (masked-off lanes are neither read nor faulted on).
#[inline(always)]
unsafe fn dot_step512<const R: usize, const N: usize>(
    acc: &mut [[__m512; N]; R],
    p: usize,
    mask: __mmask16,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        // A loop, not `array::from_fn`: a closure would not inherit the
        // caller's target features, so its intrinsics would not inline.
        let mut av = [_mm512_setzero_ps(); R];
        for (i, v) in av.iter_mut().enumerate() {
            *v = _mm512_maskz_loadu_ps(mask, a.add(i * lda + p));
        }
        for j in 0..N {
            let bv = _mm512_maskz_loadu_ps(mask, b.add(j * ldb + p));
            for (row, &ai) in acc.iter_mut().zip(&av) {
                row[j] = _mm512_fmadd_ps(ai, bv, row[j]);
            }
        }
    }
}

/// The AVX-512 form of [`dot_tile`]: `R·N` accumulators of sixteen lanes;
/// the last `k % 16` elements go through masked loads (masked-off lanes
/// are neither read nor faulted on) instead of a scalar tail. When `pf` is
/// not null it addresses the next `N` columns of B (stride `ldb`): each
/// step prefetches one line of them, column `(step + rot) % N`, so the
/// row blocks that re-read this tile's columns from L1 bring the next
/// ones in from memory meanwhile.
///
/// # Safety
/// AVX-512F; otherwise as [`dot_tile`] (`pf` is only prefetched, which
/// never faults).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_tile512<const R: usize, const N: usize>(
    k: usize,
    alpha: f32,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    beta: f32,
    c: *mut f32,
    ldc: usize,
    pf: *const f32,
    rot: usize,
) {
    // SAFETY: register-only intrinsic (the caller enabled AVX-512F).
    let mut acc = [[unsafe { _mm512_setzero_ps() }; N]; R];
    let full = k - k % 16;
    let mut p = 0;
    let mut step = rot;
    while p < full {
        if !pf.is_null() {
            let line = pf.wrapping_add((step % N) * ldb + p);
            // SAFETY: a prefetch is only a hint; it never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(line as *const i8) };
            step += 1;
        }
        // SAFETY: p + 16 <= k (caller's contract for the rest).
        unsafe { dot_step512(&mut acc, p, !0, a, lda, b, ldb) };
        p += 16;
    }
    if p < k {
        // SAFETY: the mask keeps the lanes below k.
        unsafe {
            dot_step512(
                &mut acc,
                p,
                ((1u32 << (k - p)) - 1) as __mmask16,
                a,
                lda,
                b,
                ldb,
            )
        };
    }
    for (i, row) in acc.iter().enumerate() {
        let mut dots = [0f32; N];
        if N == 4 {
            // SAFETY: register-only intrinsics; `dots` holds 4 floats.
            unsafe { _mm_storeu_ps(dots.as_mut_ptr(), sum4(row[0], row[1], row[2], row[3])) };
        } else {
            for (d, &lanes) in dots.iter_mut().zip(row) {
                // SAFETY: a register-only intrinsic (AVX-512F, the
                // caller's contract).
                *d = unsafe { _mm512_reduce_add_ps(lanes) };
            }
        }
        for (j, &dot) in dots.iter().enumerate() {
            // SAFETY: (i, j) is inside the C tile; the sum is in registers.
            unsafe {
                let out = c.add(i * ldc + j);
                *out = if beta == 0.0 {
                    alpha * dot
                } else {
                    alpha * dot + beta * *out
                };
            }
        }
    }
}

/// The lane sums of four vectors, `[Σa, Σb, Σc, Σd]`, in one tree: pairs
/// interleaved and added within each 128-bit lane (each lane then holds a
/// partial sum of every vector), then the four lanes added; 13
/// instructions where four separate reductions take about 32 (a
/// convolution over four frames reduces a row of four dots per 4×4 tile).
#[inline]
#[target_feature(enable = "avx512f")]
fn sum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    let ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    let cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
    let s = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd)),
    );
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s)));
    let s = _mm256_add_ps(_mm512_castps512_ps256(s), hi);
    _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s))
}

/// [`dot_columns_avx2`] with AVX-512 tiles: eight columns per pass for a
/// single row (a GEMV against a transposed weight: an LSTM step, a Linear
/// layer at batch 1), else 4 rows × 4 columns (half the loads per
/// multiply-add of the AVX2 tile). With several row blocks, the blocks
/// after the first prefetch the next columns (see [`dot_tile512`]).
///
/// # Safety
/// AVX-512F; otherwise as [`dot_columns_avx2`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn dot_columns_avx512(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: *const f32,
    lda: usize,
    bt: *const f32,
    ldb: usize,
    beta: f32,
    c: *mut f32,
    ldc: usize,
) {
    let wide = if m == 1 { 8 } else { 4 };
    let mut j = 0;
    while j < n {
        let cols = match n - j {
            r if r >= wide => wide,
            r if r >= 4 => 4,
            r if r >= 2 => 2,
            _ => 1,
        };
        let mut i = 0;
        let mut block = 0usize;
        while i < m {
            let rows = match m - i {
                r if r >= 4 => 4,
                r if r >= 2 => 2,
                _ => 1,
            };
            // The first row block streams this tile's columns in; the
            // others find them in L1 and fetch the next ones.
            let pf = if block > 0 && j + cols < n {
                bt.wrapping_add((j + cols) * ldb)
            } else {
                core::ptr::null()
            };
            // SAFETY: rows i..i + rows and columns j..j + cols are inside
            // A, B and C (caller's contract).
            unsafe {
                let (ap, bp, cp) = (a.add(i * lda), bt.add(j * ldb), c.add(i * ldc + j));
                macro_rules! tile {
                    ($r:literal, $n:literal) => {
                        dot_tile512::<$r, $n>(
                            k,
                            alpha,
                            ap,
                            lda,
                            bp,
                            ldb,
                            beta,
                            cp,
                            ldc,
                            pf,
                            block.saturating_sub(1),
                        )
                    };
                }
                match (rows, cols) {
                    (4, 4) => tile!(4, 4),
                    (4, 2) => tile!(4, 2),
                    (4, _) => tile!(4, 1),
                    (2, 4) => tile!(2, 4),
                    (2, 2) => tile!(2, 2),
                    (2, _) => tile!(2, 1),
                    (_, 8) => tile!(1, 8),
                    (_, 4) => tile!(1, 4),
                    (_, 2) => tile!(1, 2),
                    _ => tile!(1, 1),
                }
            }
            i += rows;
            block += 1;
        }
        j += cols;
    }
}
