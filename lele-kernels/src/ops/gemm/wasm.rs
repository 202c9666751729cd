//! wasm32 simd128 micro-kernels: a `4 × 8` tile (8 accumulators, two
//! vectors of a row of `B` and a broadcast element of `A`: 11 registers,
//! so an engine on x86_64's 16 keeps them all), with variants over fewer
//! rows and over the first four columns. Baseline simd128 has no fused
//! multiply-add: each step is a product and a sum, or one relaxed
//! multiply-add in a module built with `relaxed-simd`.
use core::arch::wasm32::*;

/// Rows of the simd128 tile.
pub(super) const SIMD128_MR: usize = 4;
/// Columns of the simd128 tile.
pub(super) const SIMD128_NR: usize = 8;

/// simd128 `4 × 8` micro-kernel (see [`MicroFn`](super::micro::MicroFn)).
///
/// # Safety
/// `a` holds `kc * 4` floats, `b` holds `kc` rows of 8 floats at stride
/// `ldb`, and the `4 × 8` tile at `c` (row stride `ldc`) is writable (and
/// readable when `beta != 0`). `_b_hi` is not read.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_simd128(
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
    unsafe { tile::<SIMD128_MR, 2>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_simd128`] over the first 4 columns of each row of `B`,
/// writing the first 4 columns of the tile (edge panels of at most 4
/// columns).
///
/// # Safety
/// As [`kernel_simd128`], with rows of 4 floats of `B` read and a `4 × 4`
/// tile at `c`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_simd128_half(
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
    unsafe { tile::<SIMD128_MR, 1>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_simd128`] over the first `h` (1 to 3) rows of the `A` panel
/// (still 4 floats per depth step), writing only those rows of the tile.
///
/// # Safety
/// As [`kernel_simd128`], with an `h × 8` tile at `c`; `h < 4`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_simd128_short(
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
    // SAFETY: the caller's contract, for the rows each variant writes.
    unsafe {
        match h {
            1 => tile::<1, 2>(kc, a, b, ldb, c, ldc, alpha, beta),
            2 => tile::<2, 2>(kc, a, b, ldb, c, ldc, alpha, beta),
            _ => tile::<3, 2>(kc, a, b, ldb, c, ldc, alpha, beta),
        }
    }
}

/// `H` rows (at most [`SIMD128_MR`]) by `V` vectors of 4 columns, the
/// accumulators in locals (the loops over them are unrolled); each depth
/// step broadcasts `A`'s elements straight from memory.
///
/// # Safety
/// `a` holds `kc * 4` floats, `b` holds `kc` rows of `4 · V` floats at
/// stride `ldb`, and the `H × 4V` tile at `c` (row stride `ldc`) is
/// writable (and readable when `beta != 0`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const H: usize, const V: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    let zero = f32x4_splat(0.0);
    let mut acc = [[zero; V]; H];
    for p in 0..kc {
        // SAFETY: p < kc, so the reads (floats 4p..4p + H of A, p·ldb ..
        // p·ldb + 4V of B) stay inside the packed panels; wasm loads need
        // no alignment.
        unsafe {
            let ap = a.add(p * SIMD128_MR);
            let bp = b.add(p * ldb);
            let mut bv = [zero; V];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = v128_load(bp.add(4 * j).cast());
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let av = v128_load32_splat(ap.add(i).cast());
                for (x, &bj) in row.iter_mut().zip(&bv) {
                    *x = crate::simd::simd128_madd(av, bj, *x);
                }
            }
        }
    }
    // alpha·AB + beta·C rounded as the portable kernel rounds it.
    let (va, vb) = (f32x4_splat(alpha), f32x4_splat(beta));
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: (i, 4j..4j + 4) is inside the caller's tile.
            unsafe {
                let p = c.add(i * ldc + 4 * j).cast::<v128>();
                let r = f32x4_mul(v, va);
                let r = if beta == 0.0 {
                    r
                } else {
                    f32x4_add(r, f32x4_mul(v128_load(p), vb))
                };
                v128_store(p, r);
            }
        }
    }
}
