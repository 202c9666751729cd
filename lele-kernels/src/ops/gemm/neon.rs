//! aarch64 NEON micro-kernels: a `6 × 16` tile (24 accumulators, four
//! vectors of a row of `B` and two of a column of `A`: 30 of the 32
//! vector registers), with variants over fewer rows and over the first
//! eight columns.
use core::arch::aarch64::*;

/// Rows of the NEON tile.
pub(super) const NEON_MR: usize = 6;
/// Columns of the NEON tile (one panel of a weight packed ahead of time).
pub(super) const NEON_NR: usize = 16;

/// NEON `6 × 16` micro-kernel (see [`MicroFn`](super::micro::MicroFn)).
///
/// # Safety
/// `a` holds `kc * 6` floats, `b` holds `kc` rows of 16 floats at stride
/// `ldb`, and the `6 × 16` tile at `c` (row stride `ldc`) is writable (and
/// readable when `beta != 0`). `_b_hi` is not read (16 columns are one
/// panel of a packed weight).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_neon(
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
    unsafe { tile::<NEON_MR, 4>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_neon`] over the first 8 columns of each row of `B`, writing
/// the first 8 columns of the tile (edge panels of at most 8 columns).
///
/// # Safety
/// As [`kernel_neon`], with rows of 8 floats of `B` read and a `6 × 8`
/// tile at `c`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_neon_half(
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
    unsafe { tile::<NEON_MR, 2>(kc, a, b, ldb, c, ldc, alpha, beta) }
}

/// [`kernel_neon`] over the first `h` (1 to 5) rows of the `A` panel
/// (still 6 floats per depth step), writing only those rows of the tile.
///
/// # Safety
/// As [`kernel_neon`], with an `h × 16` tile at `c`; `h < 6`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_neon_short(
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
            1 => tile::<1, 4>(kc, a, b, ldb, c, ldc, alpha, beta),
            2 => tile::<2, 4>(kc, a, b, ldb, c, ldc, alpha, beta),
            3 => tile::<3, 4>(kc, a, b, ldb, c, ldc, alpha, beta),
            4 => tile::<4, 4>(kc, a, b, ldb, c, ldc, alpha, beta),
            _ => tile::<5, 4>(kc, a, b, ldb, c, ldc, alpha, beta),
        }
    }
}

/// `H` rows (at most [`NEON_MR`]) by `V` vectors of 4 columns: the
/// accumulators stay in registers (the loops over them are unrolled), each
/// depth step loads the `A` column as one vector of rows 0–3 and one pair
/// of rows 4–5 and multiplies `B`'s vectors by their lanes.
///
/// # Safety
/// `a` holds `kc * 6` floats, `b` holds `kc` rows of `4 · V` floats at
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
    // SAFETY: NEON is part of the aarch64 base architecture; these only
    // produce register values.
    let zero = unsafe { vdupq_n_f32(0.0) };
    let mut acc = [[zero; V]; H];
    for p in 0..kc {
        // SAFETY: p < kc, so the reads (floats 6p..6p + 6 of A, p·ldb ..
        // p·ldb + 4V of B) stay inside the packed panels.
        unsafe {
            let ap = a.add(p * NEON_MR);
            let a_lo = vld1q_f32(ap);
            let a_hi = vld1_f32(ap.add(4));
            let bp = b.add(p * ldb);
            let mut bv = [zero; V];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = vld1q_f32(bp.add(4 * j));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                for (x, &bj) in row.iter_mut().zip(&bv) {
                    *x = match i {
                        0 => vfmaq_laneq_f32::<0>(*x, bj, a_lo),
                        1 => vfmaq_laneq_f32::<1>(*x, bj, a_lo),
                        2 => vfmaq_laneq_f32::<2>(*x, bj, a_lo),
                        3 => vfmaq_laneq_f32::<3>(*x, bj, a_lo),
                        4 => vfmaq_lane_f32::<0>(*x, bj, a_hi),
                        _ => vfmaq_lane_f32::<1>(*x, bj, a_hi),
                    };
                }
            }
        }
    }
    // alpha·AB + beta·C rounded as the portable kernel (and the driver's
    // edge tiles) round it: a product, a product and a sum.
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: (i, 4j..4j + 4) is inside the caller's tile.
            unsafe {
                let p = c.add(i * ldc + 4 * j);
                let r = vmulq_n_f32(v, alpha);
                let r = if beta == 0.0 {
                    r
                } else {
                    vaddq_f32(r, vmulq_n_f32(vld1q_f32(p), beta))
                };
                vst1q_f32(p, r);
            }
        }
    }
}
