//! The eight-lane (AVX2) block kernel: eight channels per vector, eight
//! output pixels accumulated at a time (sixteen 256-bit registers: four
//! pixels' sums and a kernel row's inputs at once at stride 1).

use core::arch::x86_64::*;

use super::{Block, Ring, RowInputs, RowTail, walk_rows};
use crate::ops::conv::{Conv, ConvGeom};
use crate::ops::gemm::x86::transpose8x8;

/// Channels per block, and output pixels accumulated at a time: one AVX2
/// vector.
const LANES: usize = 8;

/// The first `n` lanes set (`n ≤ 8`), for masked loads and stores.
#[inline]
#[target_feature(enable = "avx2")]
fn first_lanes(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Output rows `rows` of `block`, written to `y` (the whole output, planes
/// of `oh · ow` floats), each row's fused tail applied once it is written.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `y` addresses the whole output and no
/// one else accesses these rows of these planes meanwhile; `buf` holds
/// [`Ring::scratch_len`] floats; `block` holds what its fields say, with
/// at most eight channels.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block_rows(
    conv: &Conv,
    g: &ConvGeom,
    ring: &Ring,
    block: Block<'_>,
    rows: core::ops::Range<usize>,
    y: *mut f32,
    buf: &mut [f32],
    tail: Option<RowTail<'_>>,
) {
    let [_, sw] = conv.strides;
    let [_, dw] = conv.dilations;
    let (ih, iw, ohw) = (g.x.h, g.x.w, g.ohw());
    let stage = |r: usize, dst: &mut [f32]| {
        // SAFETY: AVX2 and FMA (this function's contract); the block holds
        // nch planes of ih·iw floats, r < ih; `dst` is a vector-aligned
        // staged row of `ring.width` pixels.
        unsafe { stage_row(block, r, iw, ih * iw, g.pl, dst) };
    };
    let row = |oh: usize, inputs: RowInputs<'_>| {
        for ow0 in (0..g.ow).step_by(LANES) {
            // SAFETY: AVX2 and FMA. `bias` and every weight vector are
            // 32-byte aligned (8 floats at an aligned start). Pixel
            // `(ow0 + p)·sw + kj·dw` of a staged row is below
            // `ring.width` for p < 8 (the width covers the last whole
            // group of sixteen outputs), and each row starts aligned.
            unsafe {
                let b = _mm256_load_ps(inputs.bias.as_ptr());
                let rows = inputs.src;
                let w = inputs.wt.as_ptr();
                let mut acc = match (sw, dw, g.kw) {
                    (1, 1, 1) => group_unit::<1>(rows, w, ow0, b),
                    (1, 1, 2) => group_unit::<2>(rows, w, ow0, b),
                    (1, 1, 3) => group_unit::<3>(rows, w, ow0, b),
                    (1, 1, 4) => group_unit::<4>(rows, w, ow0, b),
                    (1, 1, 5) => group_unit::<5>(rows, w, ow0, b),
                    (1, 1, 6) => group_unit::<6>(rows, w, ow0, b),
                    (1, 1, 7) => group_unit::<7>(rows, w, ow0, b),
                    _ => group_any(rows, w, g.kw, sw, dw, ow0, b),
                };
                transpose8x8(&mut acc);
                let n = LANES.min(g.ow - ow0);
                let whole = n == LANES;
                let mask = first_lanes(n);
                for (l, a) in acc.iter().take(block.nch).enumerate() {
                    let at = (block.p0 + l) * ohw + oh * g.ow + ow0;
                    if whole {
                        _mm256_storeu_ps(y.add(at), *a);
                    } else {
                        _mm256_maskstore_ps(y.add(at), mask, *a);
                    }
                    // This block writes eight planes at once: fetch the
                    // next row's lines ahead of its stores.
                    _mm_prefetch::<_MM_HINT_T1>(y.wrapping_add(at + g.ow).cast());
                }
            }
        }
    };
    // SAFETY: the caller's contract; `row` writes row oh of the block's
    // planes only.
    unsafe { walk_rows(conv, g, ring, block, rows, y, buf, tail, LANES, stage, row) };
}

/// Eight output pixels from `ow0` on: `acc[p]` is pixel `ow0 + p`'s eight
/// channels, the bias `b` plus every tap (kernel rows `rows`, taps in
/// order), each tap of each pixel one load.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `rows` are 32-byte aligned staged rows
/// that hold pixel `(ow0 + 7)·sw + (kw − 1)·dw`, `w` the aligned
/// interleaved weights of `rows.len() · kw` taps.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_any(
    rows: &[*const f32],
    w: *const f32,
    kw: usize,
    sw: usize,
    dw: usize,
    ow0: usize,
    b: __m256,
) -> [__m256; LANES] {
    let mut acc = [b; LANES];
    for (ki, &row) in rows.iter().enumerate() {
        for kj in 0..kw {
            // SAFETY: the caller's contract.
            unsafe {
                let wv = _mm256_load_ps(w.add((ki * kw + kj) * LANES));
                let s = row.add((ow0 * sw + kj * dw) * LANES);
                for (p, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(wv, _mm256_load_ps(s.add(p * sw * LANES)), *a);
                }
            }
        }
    }
    acc
}

/// [`group_any`] for stride 1, dilation 1 and a `KW`-wide kernel: a
/// kernel row's `KW` weights stay in registers while its `8 + KW − 1`
/// input pixels are loaded once each and added into every sum that reads
/// them (8 sums + `KW` weights + 1 input ≤ 16 registers). Each sum still
/// takes its taps in order.
///
/// # Safety
/// As [`group_any`] with `sw = dw = 1`, `kw = KW ≤ 7`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_unit<const KW: usize>(
    rows: &[*const f32],
    w: *const f32,
    ow0: usize,
    b: __m256,
) -> [__m256; LANES] {
    let mut acc = [b; LANES];
    for (ki, &row) in rows.iter().enumerate() {
        // SAFETY: the caller's contract: weights of kernel row ki, pixels
        // up to ow0 + 7 + KW − 1.
        unsafe {
            let mut wv = [_mm256_setzero_ps(); KW];
            for (kj, v) in wv.iter_mut().enumerate() {
                *v = _mm256_load_ps(w.add((ki * KW + kj) * LANES));
            }
            let s = row.add(ow0 * LANES);
            for j in 0..LANES + KW - 1 {
                let xv = _mm256_load_ps(s.add(j * LANES));
                // Pixel j is tap kj of output j − kj.
                for (kj, &wk) in wv.iter().enumerate() {
                    if let Some(a) = j.checked_sub(kj).and_then(|p| acc.get_mut(p)) {
                        *a = _mm256_fmadd_ps(wk, xv, *a);
                    }
                }
            }
        }
    }
    acc
}

/// Input row `r` of the block's planes, interleaved into `dst`: pixel
/// `pl + j` is input column `j`'s eight channels (lanes past the block's
/// channels zero). The pixels outside the row are left as they are (zero).
///
/// # Safety
/// The CPU supports AVX2; `block.x` holds `nch ≤ 8` planes of `plane`
/// floats with rows of `iw` and `r` is one of those rows; `dst` is 32-byte
/// aligned and holds at least `(pl + iw) · 8` floats.
#[target_feature(enable = "avx2")]
unsafe fn stage_row(
    block: Block<'_>,
    r: usize,
    iw: usize,
    plane: usize,
    pl: usize,
    dst: &mut [f32],
) {
    debug_assert!(dst.len() >= (pl + iw) * LANES);
    for j0 in (0..iw).step_by(LANES) {
        let n = LANES.min(iw - j0);
        let mask = first_lanes(n);
        // SAFETY: AVX2; row r of plane l has columns j0..j0 + n (the rest
        // masked off, and a masked-off lane never faults); pixel
        // pl + j0 + p < pl + iw is inside `dst`, whose rows of 8 floats
        // stay 32-byte aligned.
        unsafe {
            let mut v = [_mm256_setzero_ps(); LANES];
            for (l, v) in v.iter_mut().enumerate().take(block.nch) {
                let s = block.x.as_ptr().add(l * plane + r * iw + j0);
                *v = if n == LANES {
                    _mm256_loadu_ps(s)
                } else {
                    _mm256_maskload_ps(s, mask)
                };
                // The next row of this plane is staged next: fetch it now
                // (eight planes are read at once).
                if j0 % 16 == 0 {
                    _mm_prefetch::<_MM_HINT_T1>(s.wrapping_add(iw).cast());
                }
            }
            transpose8x8(&mut v);
            let d = dst.as_mut_ptr().add((pl + j0) * LANES);
            for (p, v) in v.iter().take(n).enumerate() {
                _mm256_store_ps(d.add(p * LANES), *v);
            }
        }
    }
}
