//! AVX2+FMA and AVX-512 micro-kernels.
use core::arch::x86_64::*;

pub const AVX2_MR: usize = 6;
pub const AVX2_NR: usize = 16;
pub const AVX512_MR: usize = 8;
pub const AVX512_NR: usize = 32;

/// AVX2+FMA `6 × 16` micro-kernel.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `a` holds `kc * 6` floats, `b` holds
/// `kc` rows of 16 floats at stride `ldb`, and the `6 × 16` tile at `c`
/// (row stride `ldc`) is valid. `_b_hi` is unused (16 columns are one
/// panel of a packed weight).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx2(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    _b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe { kernel_avx2_rows::<AVX2_MR, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_avx2`] for the first row tile over a micro-panel of a weight
/// packed ahead of time, which comes from memory: B is prefetched 48 rows
/// ahead (as [`kernel_avx512_stream`]), far enough to hide memory latency
/// on a large weight read once per product, such as a sequence model's
/// output layer or its LSTM's input product.
///
/// # Safety
/// As [`kernel_avx2`].
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx2_stream(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    _b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe { kernel_avx2_rows::<AVX2_MR, 48, false>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_avx2`] for the first row tile over a micro-panel of a `B`
/// read in place, fetching the next micro-panel (the 16 columns after its
/// own) into L2 as it goes, as [`kernel_avx512_next_b`] does.
///
/// # Safety
/// As [`kernel_avx2`]; the columns after the tile's are only prefetched,
/// never read.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx2_next_b(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    _b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe { kernel_avx2_rows::<AVX2_MR, 0, true>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_avx2`] for the first `h < 6` rows of the panel only: a last
/// row tile of a block computes and writes just its rows, instead of a
/// whole tile of which the rest is padding (a sequence model's 20-row
/// output layer is 6 + 6 + 6 + 2 rows, not 24, and the padding rows
/// cost it a noticeable share of its time).
///
/// # Safety
/// As [`kernel_avx2`], with the `h × 16` tile at `c` valid.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx2_short(
    h: usize,
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    _b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY (every arm): the caller's contract; AVX2 and FMA are there.
    unsafe {
        match h {
            1 => kernel_avx2_rows::<1, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
            2 => kernel_avx2_rows::<2, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
            3 => kernel_avx2_rows::<3, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
            4 => kernel_avx2_rows::<4, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
            5 => kernel_avx2_rows::<5, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
            _ => kernel_avx2_rows::<AVX2_MR, 0, false>(kc, a, b, ldb, c, ldc, alpha, beta),
        }
    }
}

/// The first `H` rows of the `6 × 16` product: `a` a panel of 6-float
/// columns, of which rows `0..H` are read; B prefetched `AHEAD` rows ahead
/// (none when it is 0) and, with `NEXT_B`, row `p` of the next micro-panel
/// of a B read in place into L2 at each step `p`.
///
/// # Safety
/// As [`kernel_avx2`], with the `H × 16` tile at `c` valid.
#[inline]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2_rows<const H: usize, const AHEAD: usize, const NEXT_B: bool>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; H];
    for p in 0..kc {
        // SAFETY: p < kc, so these reads stay inside the packed panels.
        unsafe {
            if AHEAD > 0 {
                // A prefetch never faults, wherever it points.
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((p + AHEAD) * ldb) as *const i8);
            }
            if NEXT_B {
                // Row p of the next micro-panel of a B read in place (the
                // 16 columns after this one's), into L2.
                _mm_prefetch::<_MM_HINT_T1>(b.wrapping_add(p * ldb + 16) as *const i8);
            }
            let b0 = _mm256_loadu_ps(b.add(p * ldb));
            let b1 = _mm256_loadu_ps(b.add(p * ldb + 8));
            let ap = a.add(p * AVX2_MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_set1_ps(*ap.add(i));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    let va = _mm256_set1_ps(alpha);
    let vb = _mm256_set1_ps(beta);
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // SAFETY: the tile (i, 8h..8h+8) is inside the caller's tile.
            unsafe {
                let p = c.add(i * ldc + 8 * h);
                let r = if beta == 0.0 {
                    _mm256_mul_ps(va, v)
                } else {
                    _mm256_fmadd_ps(vb, _mm256_loadu_ps(p), _mm256_mul_ps(va, v))
                };
                _mm256_storeu_ps(p, r);
            }
        }
    }
}

/// AVX-512 `8 × 32` micro-kernel.
///
/// # Safety
/// The CPU supports AVX-512F; `a` holds `kc * 8` floats, `b` holds `kc`
/// rows of 32 floats at stride `ldb` (columns 16..32 of a row `b_hi`
/// floats after its column 0), and the `8 × 32` tile at `c` (row stride
/// `ldc`) is valid.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 12, false, false>(
            kc,
            a,
            b,
            ldb,
            b_hi,
            c,
            ldc,
            alpha,
            beta,
            core::ptr::null(),
        )
    }
}

/// [`kernel_avx512`] without prefetching, for the row tiles after the
/// first over a micro-panel, which is in L1 by then: over an L1-resident
/// panel the prefetches only take issue slots, and the kernel runs
/// measurably faster without them.
///
/// # Safety
/// As [`kernel_avx512`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_in_l1(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 0, false, false>(
            kc,
            a,
            b,
            ldb,
            b_hi,
            c,
            ldc,
            alpha,
            beta,
            core::ptr::null(),
        )
    }
}

/// [`kernel_avx512`] that also fetches the next row tile's `A` panel
/// (`kc · 8` floats at `next_a`, only prefetched, never read) into L2 as
/// it goes, a step of it per step: for the first column pass over a
/// weight packed ahead of time, whose panels come from the last-level
/// cache.
///
/// # Safety
/// As [`kernel_avx512`] (`next_a` may point anywhere: it is only
/// prefetched).
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_next_a(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
    next_a: *const f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 12, true, false>(
            kc, a, b, ldb, b_hi, c, ldc, alpha, beta, next_a,
        )
    }
}

/// [`kernel_avx512`] for the first row tile over a micro-panel of a `B`
/// read in place (a 1×1 convolution's input), which also fetches the next
/// micro-panel (the 32 columns after its own, at the same row stride) into
/// L2 as it goes, a row of it per step: that input was just written, half
/// of it by the other core with two threads, and the hardware does not
/// fetch a panel whose rows are a whole input row apart (the models whose
/// 1×1 convolutions read their input in place gain; others are unchanged).
///
/// # Safety
/// As [`kernel_avx512`], with `b_hi` = 16 (a row's 32 columns
/// contiguous); the columns after them are only prefetched, never read.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_next_b(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 12, false, true>(
            kc,
            a,
            b,
            ldb,
            b_hi,
            c,
            ldc,
            alpha,
            beta,
            core::ptr::null(),
        )
    }
}

/// [`kernel_avx512_next_b`] that also fetches the next row tile's `A`
/// panel into L2, as [`kernel_avx512_next_a`] does.
///
/// # Safety
/// As [`kernel_avx512_next_b`] (`next_a` may point anywhere: it is only
/// prefetched).
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_next_ab(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
    next_a: *const f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 12, true, true>(kc, a, b, ldb, b_hi, c, ldc, alpha, beta, next_a)
    }
}

/// [`kernel_avx512_next_a`] for the row tiles after the first over a
/// micro-panel, which find it in L1 (no prefetching of `B`, as
/// [`kernel_avx512_in_l1`]).
///
/// # Safety
/// As [`kernel_avx512_next_a`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_next_a_in_l1(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
    next_a: *const f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 0, true, false>(kc, a, b, ldb, b_hi, c, ldc, alpha, beta, next_a)
    }
}

/// [`kernel_avx512`] for the first row tile over a micro-panel of a weight
/// packed ahead of time, which comes from memory: B is prefetched 48 rows
/// ahead (3 KiB per 16-column run) instead of 12, far enough to cover
/// memory latency (with the next panel's start fetched by
/// [`super::blocks`]). Later row tiles find B in L1.
///
/// # Safety
/// As [`kernel_avx512`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_stream(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<2, 48, false, false>(
            kc,
            a,
            b,
            ldb,
            b_hi,
            c,
            ldc,
            alpha,
            beta,
            core::ptr::null(),
        )
    }
}

/// AVX-512 `8 × 16` micro-kernel: [`kernel_avx512`] over the first 16
/// columns of each packed row (an edge panel with at most 16 columns left
/// costs half the full tile).
///
/// # Safety
/// The CPU supports AVX-512F; `a` holds `kc * 8` floats, `b` holds `kc`
/// rows of at least 16 floats at stride `ldb`, and the `8 × 16` tile at `c`
/// (row stride `ldc`) is valid (`b_hi` is not read).
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_avx512_half(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        kernel_avx512_vectors::<1, 12, false, false>(
            kc,
            a,
            b,
            ldb,
            b_hi,
            c,
            ldc,
            alpha,
            beta,
            core::ptr::null(),
        )
    }
}

/// The AVX-512 micro-kernel over `V` vectors (16·V columns) of each packed
/// row of B, prefetching B `AHEAD` rows ahead (none when it is 0) and, with
/// `NEXT_A`, step `p` of the `A` panel at `next_a` into L2 at each step `p`
/// (`next_a` is not read otherwise) and, with `NEXT_B`, row `p` of the
/// next micro-panel of a B read in place (its 16·V columns contiguous) into
/// L2: [`kernel_avx512`] (`V = 2`), [`kernel_avx512_stream`] (the same,
/// further ahead), [`kernel_avx512_in_l1`] (the same, no prefetching),
/// [`kernel_avx512_next_a`] and [`kernel_avx512_next_a_in_l1`] (those two
/// with `NEXT_A`), [`kernel_avx512_next_b`] and [`kernel_avx512_next_ab`]
/// (with `NEXT_B`) and [`kernel_avx512_half`] (`V = 1`). They stay
/// separate functions taking this one inlined: the generic instantiations
/// taken directly as function pointers ran slower on prepacked products.
///
/// # Safety
/// As [`kernel_avx512`], over 16·V columns.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512_vectors<
    const V: usize,
    const AHEAD: usize,
    const NEXT_A: bool,
    const NEXT_B: bool,
>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
    next_a: *const f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; AVX512_MR];
    for p in 0..kc {
        // SAFETY: p < kc, so these reads stay inside the packed panels.
        unsafe {
            if NEXT_B {
                // Row p of the next micro-panel of a B read in place (the
                // 16·V columns after this one's), into L2.
                for h in 0..V {
                    let next = b.wrapping_add(p * ldb + (V + h) * 16);
                    _mm_prefetch::<_MM_HINT_T1>(next as *const i8);
                }
            }
            if NEXT_A {
                // Step p of the next A panel, into L2 (a line holds two
                // steps): spread over the product instead of issued at
                // once before it, where a burst of 128 prefetches filled
                // the miss buffers and stalled the core until most of them
                // returned.
                _mm_prefetch::<_MM_HINT_T1>(next_a.wrapping_add(p * AVX512_MR) as *const i8);
            }
            let row_b = b.add(p * ldb);
            let mut bv = [_mm512_setzero_ps(); V];
            for (h, v) in bv.iter_mut().enumerate() {
                // B `AHEAD` rows ahead (none for a panel already in L1:
                // the prefetches would only take issue slots from the
                // FMAs there).
                if AHEAD > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(
                        b.wrapping_add((p + AHEAD) * ldb + h * b_hi) as *const i8
                    );
                }
                *v = _mm512_loadu_ps(row_b.add(h * b_hi));
            }
            let ap = a.add(p * AVX512_MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                for (r, &v) in row.iter_mut().zip(&bv) {
                    *r = _mm512_fmadd_ps(av, v, *r);
                }
            }
        }
    }
    let va = _mm512_set1_ps(alpha);
    let vb = _mm512_set1_ps(beta);
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // SAFETY: the tile (i, 16h..16h+16) is inside the caller's tile.
            unsafe {
                let p = c.add(i * ldc + 16 * h);
                let r = if beta == 0.0 {
                    _mm512_mul_ps(va, v)
                } else {
                    _mm512_fmadd_ps(vb, _mm512_loadu_ps(p), _mm512_mul_ps(va, v))
                };
                _mm512_storeu_ps(p, r);
            }
        }
    }
}

/// `C = init + A·B` for one `R × 16` tile (`R ≤ 16`) without packed `B`, the
/// AVX-512 form of [`rows_tile_avx2`] (same arguments): one 16-lane
/// accumulator per row, one `B` vector per step and each weight broadcast
/// straight from memory into its multiply-add, so a step issues `R`
/// multiply-adds for one load and one offset where the AVX2 tile issues
/// two per load.
///
/// # Safety
/// The CPU supports AVX-512F; otherwise as [`rows_tile_avx2`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_tile_avx512<const R: usize, const PREFETCH: bool>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
    init: *const f32,
    relu: bool,
) {
    let mut acc = [_mm512_setzero_ps(); R];
    for (i, row) in acc.iter_mut().enumerate() {
        // SAFETY: i < R, inside `init`.
        *row = _mm512_set1_ps(unsafe { *init.add(i) });
    }
    for p in 0..k {
        // SAFETY: p < k: the offset, the 16 inputs it points at and the R
        // weights are inside the caller's buffers.
        unsafe {
            let b = x.add(*offs.add(p) as usize);
            if PREFETCH {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(2 * 16) as *const i8);
            }
            let bv = _mm512_loadu_ps(b);
            let ap = a.add(p * a_cs);
            for (i, row) in acc.iter_mut().enumerate() {
                *row = _mm512_fmadd_ps(_mm512_set1_ps(*ap.add(i * a_rs)), bv, *row);
            }
        }
    }
    let zero = _mm512_setzero_ps();
    for (i, &v) in acc.iter().enumerate() {
        // `max(0, v)` returns its second operand for a NaN or a zero of
        // either sign: the `Relu` kernel's `if v < 0 { 0 } else { v }`.
        let v = if relu { _mm512_max_ps(zero, v) } else { v };
        // SAFETY: row i of the caller's tile.
        unsafe { _mm512_storeu_ps(c.add(i * ldc), v) };
    }
}

/// [`rows_tile_avx512`] over 32 columns: `R × 32` (`R ≤ 8`), two `B`
/// vectors per step, so a step issues `2R` multiply-adds for `R`
/// broadcasts and two loads (16 multiply-adds for 10 loads at `R = 8`,
/// where the 16 × 16 tile issues 16 for 17). Same arguments; row `p` of
/// `B` is the 32 floats at `x + offs[p]`, prefetched 64 floats ahead. A
/// null `init` starts each row from the tile's current contents.
///
/// # Safety
/// As [`rows_tile_avx512`], with 32 readable floats per offset and 32
/// writable per row of the tile (also readable when `init` is null).
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_tile_wide_avx512<const R: usize, const PREFETCH: bool>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
    init: *const f32,
    relu: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for (i, row) in acc.iter_mut().enumerate() {
        *row = if init.is_null() {
            // SAFETY: row i of the caller's tile (32 floats).
            unsafe {
                [
                    _mm512_loadu_ps(c.add(i * ldc)),
                    _mm512_loadu_ps(c.add(i * ldc + 16)),
                ]
            }
        } else {
            // SAFETY: i < R, inside `init`.
            let v = _mm512_set1_ps(unsafe { *init.add(i) });
            [v, v]
        };
    }
    for p in 0..k {
        // SAFETY: p < k: the offset, the 32 inputs it points at and the R
        // weights are inside the caller's buffers.
        unsafe {
            let b = x.add(*offs.add(p) as usize);
            if PREFETCH {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(64) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(80) as *const i8);
            }
            let b0 = _mm512_loadu_ps(b);
            let b1 = _mm512_loadu_ps(b.add(16));
            let ap = a.add(p * a_cs);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i * a_rs));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    let zero = _mm512_setzero_ps();
    for (i, row) in acc.iter().enumerate() {
        // As in `rows_tile_avx512`: the `Relu` kernel's result.
        let row = match relu {
            true => [_mm512_max_ps(zero, row[0]), _mm512_max_ps(zero, row[1])],
            false => *row,
        };
        // SAFETY: row i of the caller's tile (32 floats).
        unsafe {
            _mm512_storeu_ps(c.add(i * ldc), row[0]);
            _mm512_storeu_ps(c.add(i * ldc + 16), row[1]);
        }
    }
}

/// `C = init + A·B` for one `R × 16` tile (`R ≤ 6`) without packed `B`:
/// element `(i, p)` of `A` is `a[i·a_rs + p·a_cs]`, row `p` of `B` is the
/// 16 floats at `x + offs[p]`, `init[i]` starts every element of row `i`
/// (a bias), and `C` starts at `c` with row stride `ldc` (written, not
/// read), with `relu` each sum's `Relu` (negatives to zero, NaN kept)
/// instead of the sum itself. Twelve accumulators, two `B` vectors and a broadcast fill the 16
/// registers.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `A` holds `R × k` elements at those
/// strides, `offs` holds `k` offsets, `x + offs[p] .. + 16` is readable for
/// every `p`, `init` holds `R` floats, and the tile (`R` rows of 16 floats
/// at stride `ldc`) is writable.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_tile_avx2<const R: usize, const PREFETCH: bool>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
    init: *const f32,
    relu: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for (i, row) in acc.iter_mut().enumerate() {
        // SAFETY: i < R, inside `init`.
        let v = _mm256_broadcast_ss(unsafe { &*init.add(i) });
        *row = [v, v];
    }
    for p in 0..k {
        // SAFETY: p < k: the offset, the 16 inputs it points at and the R
        // weights are inside the caller's buffers.
        unsafe {
            let b = x.add(*offs.add(p) as usize);
            if PREFETCH {
                // The tile two to the right reads the next cache line of
                // this tap: fetch it now (a prefetch never faults).
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(2 * 16) as *const i8);
            }
            let bv = [_mm256_loadu_ps(b), _mm256_loadu_ps(b.add(8))];
            let ap = a.add(p * a_cs);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*ap.add(i * a_rs));
                row[0] = _mm256_fmadd_ps(av, bv[0], row[0]);
                row[1] = _mm256_fmadd_ps(av, bv[1], row[1]);
            }
        }
    }
    let zero = _mm256_setzero_ps();
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // As in `rows_tile_avx512`: the `Relu` kernel's result.
            let v = if relu { _mm256_max_ps(zero, v) } else { v };
            // SAFETY: element (i, 8h..8h + 8) of the caller's tile.
            unsafe { _mm256_storeu_ps(c.add(i * ldc + 8 * h), v) };
        }
    }
}

/// Packs eight rows (`rows[i]`, `8·blocks` floats each readable) into an
/// interleaved panel (`panel[p·step + i] = rows[i][p]`, `p < 8·blocks`;
/// `step` 8 for an 8-row panel, more when the rows are part of a taller
/// one), one 8 × 8 block at a time: eight loads, a register transpose,
/// eight stores (where the portable loop moves every float on its own). The
/// same columns of the rows three panels on (`24·rs` floats further) are
/// prefetched as it goes: a weight streams from memory once per call,
/// eight rows at a time, more streams than the hardware prefetchers
/// follow (three panels ahead left less of the packing's time than one).
///
/// # Safety
/// The CPU supports AVX; `step >= 8`; every `rows[i]` holds at least
/// `8·blocks` floats and `panel` at least `(8·blocks − 1)·step + 8`.
#[target_feature(enable = "avx")]
pub(crate) unsafe fn pack_a8_avx(
    rows: &[&[f32]; 8],
    rs: usize,
    blocks: usize,
    panel: &mut [f32],
    step: usize,
) {
    for b in 0..blocks {
        // SAFETY: columns 8b..8b + 8 of every row and panel floats
        // (8b + q)·step..+ 8 for q < 8 are inside the buffers (the
        // caller's contract); a prefetch never faults.
        unsafe {
            if b % 2 == 0 {
                for row in rows {
                    let ahead = row.as_ptr().wrapping_add(24 * rs + 8 * b);
                    _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                }
            }
            let mut cols = rows.map(|row| _mm256_loadu_ps(row.as_ptr().add(8 * b)));
            crate::simd::transpose8x8(&mut cols);
            let dst = panel.as_mut_ptr().add(8 * b * step);
            for (q, col) in cols.into_iter().enumerate() {
                _mm256_storeu_ps(dst.add(q * step), col);
            }
        }
    }
}
