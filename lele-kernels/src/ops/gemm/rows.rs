//! A register tile that reads `B` in place, without packing (AVX2+FMA):
//! row `p` of `B` through an offset table, `A` broadcast from any strides.
//! The direct convolution (`ops/conv/direct.rs`) fills the table with its
//! taps.
//!
//! Tried for plain GEMM with few rows and a row-major `B`: it won on
//! 40×18710×120 but lost on 32×25600×144 and 64×6400×128, so GEMM keeps
//! packing.

/// Calls `$kernel::<H, PREFETCH> $args` with the tile height `$height`
/// and `$prefetch` as constants: one match arm per height below `$full`,
/// `$full` for the rest.
#[cfg(target_arch = "x86_64")]
macro_rules! by_height {
    ($kernel:ident, $full:literal; $($h:literal)*; $height:expr, $prefetch:expr; $args:tt) => {
        match ($height, $prefetch) {
            $(($h, false) => $kernel::<$h, false> $args,
              ($h, true) => $kernel::<$h, true> $args,)*
            (_, false) => $kernel::<$full, false> $args,
            (_, true) => $kernel::<$full, true> $args,
        }
    };
}

/// Most rows of a register tile on any CPU (what buffers are sized for:
/// the build machine sizes them, the target picks the tile).
pub(crate) const TILE_M: usize = 16;
/// Rows of the AVX2 register tile.
pub(crate) const AVX2_TILE_M: usize = 6;
/// Columns per register tile.
pub(crate) const TILE_N: usize = 16;

/// Rows per register tile on this CPU: 16 with AVX-512 (one 16-lane
/// accumulator per row, 32 registers), 6 with AVX2 (two 8-lane
/// accumulators per row, 16 registers).
pub(crate) fn tile_rows() -> usize {
    #[cfg(target_arch = "x86_64")]
    if super::best_isa() == super::Isa::Avx512 {
        return TILE_M;
    }
    AVX2_TILE_M
}

/// `C = init + A·B` for one `h × 16` tile of a tile kind of `tm` rows
/// (`1 ≤ h ≤ tm`, `tm` [`TILE_M`] or [`WIDE_M`] for the AVX-512 tile,
/// else [`AVX2_TILE_M`]): element
/// `(i, p)` of `A` at `a[i·a_rs + p·a_cs]`, row `p` of `B` the 16 floats at
/// `x + offs[p]`, `init[i]` the start of row `i` (a bias), `C` at `c` with
/// row stride `ldc` (only written; with `relu`, each sum clamped as the
/// `Relu` kernel does: negatives to zero, NaN kept). With `prefetch`, every
/// tap's cache line two tiles to the right is fetched meanwhile (worth it
/// once per column of tiles when `B` streams from beyond L2: the staged
/// input of a convolution with few taps). Only reached on CPUs with
/// AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA, and AVX-512F when `tm` is [`TILE_M`] or
/// [`WIDE_M`]; `A`
/// holds `h × k` elements at those strides, `offs` holds `k` offsets, `x + offs[p] .. + 16` is readable for
/// every `p`, `init` holds `h` floats, and the tile (`h` rows of 16 floats
/// at stride `ldc`) is writable.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile(
    tm: usize,
    h: usize,
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
    prefetch: bool,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract.
    unsafe {
        use super::x86::{rows_tile_avx2, rows_tile_avx512};
        debug_assert!(h <= tm);
        if tm == TILE_M || tm == WIDE_M {
            by_height!(rows_tile_avx512, 16; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15;
                h, prefetch; (k, a, a_rs, a_cs, x, offs, c, ldc, init, relu))
        } else {
            by_height!(rows_tile_avx2, 6; 1 2 3 4 5; h, prefetch; (k, a, a_rs, a_cs, x, offs, c, ldc, init, relu))
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (
        tm, h, k, a, a_rs, a_cs, x, offs, c, ldc, init, relu, prefetch,
    );
}

/// Rows of the wide AVX-512 tile ([`tile_wide`]).
pub(crate) const WIDE_M: usize = 8;

/// [`tile`] over 32 columns with `h ≤ 8` rows (AVX-512 only): the same
/// arguments, with row `p` of `B` the 32 floats at `x + offs[p]` and 32
/// floats written per row; a null `init` starts from the tile's current
/// contents instead (a later pass over more taps adds to the first, so
/// only the last pass may ask for `relu`).
///
/// # Safety
/// The CPU supports AVX-512F; `1 ≤ h ≤ 8`; otherwise as [`tile`] with 32
/// columns.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile_wide(
    h: usize,
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
    prefetch: bool,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract.
    unsafe {
        use super::x86::rows_tile_wide_avx512 as wide;
        debug_assert!((1..=WIDE_M).contains(&h));
        by_height!(wide, 8; 1 2 3 4 5 6 7; h, prefetch; (k, a, a_rs, a_cs, x, offs, c, ldc, init, relu))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (h, k, a, a_rs, a_cs, x, offs, c, ldc, init, relu, prefetch);
}
