//! A register tile that reads `B` in place, without packing (AVX2+FMA):
//! row `p` of `B` through an offset table, `A` broadcast from any strides.
//! The direct convolution (`ops/conv/direct.rs`) fills the table with its
//! taps.
//!
//! Tried and measured for plain GEMM with few rows and a row-major `B`
//! (`kernel_bench`): 40×18710×120 2.75 → 2.58 ms, but 32×25600×144 4.3 →
//! 6.0 ms and 64×6400×128 1.40 → 1.50 ms, so GEMM keeps packing.

/// Rows per register tile.
pub(crate) const TILE_M: usize = 6;
/// Columns per register tile.
pub(crate) const TILE_N: usize = 16;

/// `C += A·B` for one `h × 16` tile (`1 ≤ h ≤ 6`): element `(i, p)` of `A`
/// at `a[i·a_rs + p·a_cs]`, row `p` of `B` the 16 floats at `x + offs[p]`,
/// `C` at `c` with row stride `ldc`. With `prefetch`, every tap's cache
/// line two tiles to the right is fetched meanwhile (worth it once per
/// column of tiles when `B` streams from beyond L2: the staged input of a
/// convolution with few taps). Only reached on CPUs with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `A` holds `h × k` elements at those
/// strides, `offs` holds `k` offsets, `x + offs[p] .. + 16` is readable for
/// every `p`, and the tile (`h` rows of 16 floats at stride `ldc`) is
/// writable.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile(
    h: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
    prefetch: bool,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract.
    unsafe {
        use super::x86::rows_tile_avx2 as t;
        match (h, prefetch) {
            (1, false) => t::<1, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (2, false) => t::<2, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (3, false) => t::<3, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (4, false) => t::<4, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (5, false) => t::<5, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (_, false) => t::<TILE_M, false>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (1, true) => t::<1, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (2, true) => t::<2, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (3, true) => t::<3, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (4, true) => t::<4, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (5, true) => t::<5, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
            (_, true) => t::<TILE_M, true>(k, a, a_rs, a_cs, x, offs, c, ldc),
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (h, k, a, a_rs, a_cs, x, offs, c, ldc, prefetch);
}
