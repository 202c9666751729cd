//! Micro-kernel selection (per ISA, see [`crate::simd`]) and the portable
//! scalar micro-kernel.
use crate::simd::Isa;

#[cfg(target_arch = "aarch64")]
use super::neon;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::wasm;
#[cfg(target_arch = "x86_64")]
use super::x86;

/// A micro-kernel: multiplies a packed `MR × kc` panel of `A` by a packed
/// `kc × NR` panel of `B` and stores `alpha·AB + beta·C` into the full tile
/// at `c` (row stride `ldc`); `beta == 0` never reads `C`.
///
/// `B`'s rows are `ldb` floats apart (`NR` when packed per call, the
/// panel width inside a weight packed ahead of time). A kernel wider than
/// 16 columns finds columns 16.. of a row `b_hi` floats after its column 0:
/// 16 when packed per call, the next panel inside a packed weight
/// (kernels of at most 16 columns do not read it).
pub(super) type MicroFn =
    unsafe fn(usize, *const f32, *const f32, usize, usize, *mut f32, usize, f32, f32);

/// A [`MicroFn`] that also prefetches the next row tile's `A` panel (the
/// last argument) into L2 as it runs.
pub(super) type NextAFn =
    unsafe fn(usize, *const f32, *const f32, usize, usize, *mut f32, usize, f32, f32, *const f32);

/// A [`MicroFn`] over only the first `h` (the first argument, below `MR`)
/// rows of the `A` panel, writing only those rows of the tile.
type ShortFn =
    unsafe fn(usize, usize, *const f32, *const f32, usize, usize, *mut f32, usize, f32, f32);

#[derive(Clone, Copy)]
pub(super) struct Micro {
    pub(super) mr: usize,
    pub(super) nr: usize,
    pub(super) f: MicroFn,
    /// The same product over only the first `nr / 2` columns of each
    /// packed row (for edge panels with that few columns), when the ISA has
    /// one.
    pub(super) half: Option<MicroFn>,
    /// `f` for the first row tile over a micro-panel of a weight packed
    /// ahead of time (which streams it from memory), where the ISA has a
    /// variant for that.
    pub(super) first: MicroFn,
    /// `f` for the row tiles after the first over a micro-panel, which
    /// find it in L1 (no prefetching), where the ISA has a variant for that.
    pub(super) in_l1: MicroFn,
    /// `f` for a tile of fewer than `mr` rows, full width, where the ISA
    /// has one (else such tiles go through a padded stack tile).
    pub(super) short: Option<ShortFn>,
    /// `f` and `in_l1` fetching the next row tile's `A` panel into L2 as
    /// they run, where the ISA has them (else the caller prefetches the
    /// panel before).
    pub(super) next_a: Option<(NextAFn, NextAFn)>,
    /// `f` for the first row tile over a micro-panel of a `B` read in place,
    /// fetching the next micro-panel into L2 as it runs, where the ISA has
    /// it.
    pub(super) next_b: Option<MicroFn>,
    /// `next_b` that also fetches the next row tile's `A` panel (as
    /// `next_a`'s first), where the ISA has it.
    pub(super) next_ab: Option<NextAFn>,
}

pub(super) fn micro_for(isa: Isa) -> Micro {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Micro {
            mr: x86::AVX2_MR,
            nr: x86::AVX2_NR,
            f: x86::kernel_avx2,
            half: None,
            first: x86::kernel_avx2_stream,
            in_l1: x86::kernel_avx2,
            short: Some(x86::kernel_avx2_short),
            next_a: None,
            next_b: Some(x86::kernel_avx2_next_b),
            next_ab: None,
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Micro {
            mr: x86::AVX512_MR,
            nr: x86::AVX512_NR,
            f: x86::kernel_avx512,
            half: Some(x86::kernel_avx512_half),
            first: x86::kernel_avx512_stream,
            in_l1: x86::kernel_avx512_in_l1,
            short: None,
            next_a: Some((x86::kernel_avx512_next_a, x86::kernel_avx512_next_a_in_l1)),
            next_b: Some(x86::kernel_avx512_next_b),
            next_ab: Some(x86::kernel_avx512_next_ab),
        },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => Micro {
            mr: neon::NEON_MR,
            nr: neon::NEON_NR,
            f: neon::kernel_neon,
            half: Some(neon::kernel_neon_half),
            first: neon::kernel_neon,
            in_l1: neon::kernel_neon,
            short: Some(neon::kernel_neon_short),
            next_a: None,
            next_b: None,
            next_ab: None,
        },
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => Micro {
            mr: wasm::SIMD128_MR,
            nr: wasm::SIMD128_NR,
            f: wasm::kernel_simd128,
            half: Some(wasm::kernel_simd128_half),
            first: wasm::kernel_simd128,
            in_l1: wasm::kernel_simd128,
            short: Some(wasm::kernel_simd128_short),
            next_a: None,
            next_b: None,
            next_ab: None,
        },
        _ => Micro {
            mr: SCALAR_MR,
            nr: SCALAR_NR,
            f: kernel_scalar,
            half: None,
            first: kernel_scalar,
            in_l1: kernel_scalar,
            short: None,
            next_a: None,
            next_b: None,
            next_ab: None,
        },
    }
}

const SCALAR_MR: usize = 4;
const SCALAR_NR: usize = 8;

/// Portable micro-kernel.
///
/// # Safety
/// `a` holds `kc * 4` floats, `b` holds `kc` rows of 8 floats at stride
/// `ldb >= 8`, and the `4 × 8` tile at `c` with row stride `ldc` is
/// writable (and readable when `beta != 0`); `_b_hi` is not read.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_scalar(
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
    // B's last row ends NR floats after its start.
    let b_len = match kc {
        0 => 0,
        _ => (kc - 1) * ldb + SCALAR_NR,
    };
    // SAFETY: the caller guarantees the packed panel lengths.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(a, kc * SCALAR_MR),
            core::slice::from_raw_parts(b, b_len),
        )
    };
    let mut acc = [[0f32; SCALAR_NR]; SCALAR_MR];
    for (p, ap) in a.chunks_exact(SCALAR_MR).enumerate() {
        let bp = &b[p * ldb..p * ldb + SCALAR_NR];
        for (row, &av) in acc.iter_mut().zip(ap) {
            for (x, &bv) in row.iter_mut().zip(bp) {
                *x += av * bv;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: (i, j) is inside the tile the caller vouched for.
            unsafe {
                let p = c.add(i * ldc + j);
                *p = if beta == 0.0 {
                    alpha * v
                } else {
                    alpha * v + beta * *p
                };
            }
        }
    }
}
