//! The sixteen-lane (AVX-512) block kernel: sixteen channels per vector,
//! sixteen output pixels accumulated at a time.

use super::{Block, Ring, RowInputs, RowTail, walk_rows};
use crate::ops::conv::x86::transpose16;
use crate::ops::conv::{Conv, ConvGeom};

/// Channels per block, and output pixels accumulated at a time: one
/// AVX-512 vector.
const LANES: usize = 16;

/// Output rows `rows` of `block`, written to `y` (the whole output, planes
/// of `oh · ow` floats), each row's fused tail applied once it is written.
///
/// # Safety
/// The CPU supports AVX-512F; `y` addresses the whole output and no one
/// else accesses these rows of these planes meanwhile; `buf` holds
/// [`Ring::scratch_len`] floats; `block` holds what its fields say.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
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
    use core::arch::x86_64::*;
    let [_, sw] = conv.strides;
    let [_, dw] = conv.dilations;
    let (ih, iw, ohw) = (g.x.h, g.x.w, g.ohw());
    let stage = |r: usize, dst: &mut [f32]| {
        // SAFETY: AVX-512F (this function's contract); the block holds
        // nch planes of ih·iw floats, r < ih; `dst` is a vector-aligned
        // staged row of `ring.width` pixels.
        unsafe { stage_row(block, r, iw, ih * iw, g.pl, dst) };
    };
    let row = |oh: usize, inputs: RowInputs<'_>| {
        for ow0 in (0..g.ow).step_by(LANES) {
            // SAFETY: AVX-512F. `bias` and every weight vector are
            // 64-byte aligned (16 floats at an aligned start). Pixel
            // `(ow0 + p)·sw + kj·dw` of a staged row is below
            // `ring.width` for p < 16 (the width covers the last whole
            // group of sixteen outputs), and each row starts aligned.
            unsafe {
                let b = _mm512_load_ps(inputs.bias.as_ptr());
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
                transpose16(&mut acc);
                let n = LANES.min(g.ow - ow0);
                let mask = (((1u32) << n) - 1) as u16;
                for (l, a) in acc.iter().take(block.nch).enumerate() {
                    let at = (block.p0 + l) * ohw + oh * g.ow + ow0;
                    // A plain store for whole vectors: masked stores are
                    // slow on AMD (`kernel_bench`, Zen 4: 384 channels 3×3
                    // at 15² 0.051–0.055 → 0.047 ms, 480 channels 5×5 at
                    // 3×80 0.096 → 0.089).
                    if n == LANES {
                        _mm512_storeu_ps(y.add(at), *a);
                    } else {
                        _mm512_mask_storeu_ps(y.add(at), mask, *a);
                    }
                    // This block writes sixteen planes at once: fetch the
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

/// Sixteen output pixels from `ow0` on: `acc[p]` is pixel `ow0 + p`'s
/// sixteen channels, the bias `b` plus every tap (kernel rows `rows`, taps
/// in order), each tap of each pixel one load.
///
/// # Safety
/// The CPU supports AVX-512F; `rows` are 64-byte aligned staged rows that
/// hold pixel `(ow0 + 15)·sw + (kw − 1)·dw`, `w` the aligned interleaved
/// weights of `rows.len() · kw` taps.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn group_any(
    rows: &[*const f32],
    w: *const f32,
    kw: usize,
    sw: usize,
    dw: usize,
    ow0: usize,
    b: core::arch::x86_64::__m512,
) -> [core::arch::x86_64::__m512; LANES] {
    use core::arch::x86_64::*;
    let mut acc = [b; LANES];
    for (ki, &row) in rows.iter().enumerate() {
        for kj in 0..kw {
            // SAFETY: the caller's contract.
            unsafe {
                let wv = _mm512_load_ps(w.add((ki * kw + kj) * LANES));
                let s = row.add((ow0 * sw + kj * dw) * LANES);
                for (p, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(wv, _mm512_load_ps(s.add(p * sw * LANES)), *a);
                }
            }
        }
    }
    acc
}

/// [`group_any`] for stride 1, dilation 1 and a `KW`-wide kernel, eight
/// pixels at a time: the `8 + KW − 1` input pixels of a kernel row are
/// loaded once and feed every tap that reads them (a third of the loads
/// for 3×3, a seventh for 7×7). Same sums in the same order.
///
/// # Safety
/// As [`group_any`] with `sw = dw = 1`, `kw = KW ≤ 7`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn group_unit<const KW: usize>(
    rows: &[*const f32],
    w: *const f32,
    ow0: usize,
    b: core::arch::x86_64::__m512,
) -> [core::arch::x86_64::__m512; LANES] {
    use core::arch::x86_64::*;
    const HALF: usize = LANES / 2;
    let mut acc = [b; LANES];
    for (h, out) in acc.chunks_exact_mut(HALF).enumerate() {
        let mut a = [b; HALF];
        for (ki, &row) in rows.iter().enumerate() {
            let mut x = [_mm512_setzero_ps(); HALF + 6];
            // SAFETY: the caller's contract: pixels up to ow0 + 15 + KW − 1.
            unsafe {
                let s = row.add((ow0 + h * HALF) * LANES);
                for (j, x) in x.iter_mut().enumerate().take(HALF + KW - 1) {
                    *x = _mm512_load_ps(s.add(j * LANES));
                }
                for kj in 0..KW {
                    let wv = _mm512_load_ps(w.add((ki * KW + kj) * LANES));
                    for (p, a) in a.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(wv, x[p + kj], *a);
                    }
                }
            }
        }
        out.copy_from_slice(&a);
    }
    acc
}

/// Input row `r` of the block's planes, interleaved into `dst`: pixel
/// `pl + j` is input column `j`'s sixteen channels (lanes past the block's
/// channels zero). The pixels outside the row are left as they are (zero).
///
/// # Safety
/// The CPU supports AVX-512F; `block.x` holds `nch` planes of `plane`
/// floats with rows of `iw` and `r` is one of those rows; `dst` is 64-byte
/// aligned and holds at least `(pl + iw) · 16` floats.
#[target_feature(enable = "avx512f")]
unsafe fn stage_row(
    block: Block<'_>,
    r: usize,
    iw: usize,
    plane: usize,
    pl: usize,
    dst: &mut [f32],
) {
    use core::arch::x86_64::*;
    debug_assert!(dst.len() >= (pl + iw) * LANES);
    for j0 in (0..iw).step_by(LANES) {
        let n = LANES.min(iw - j0);
        let mask = (((1u32) << n) - 1) as u16;
        // SAFETY: AVX-512F; row r of plane l has columns j0..j0 + n (the
        // rest masked off); pixel pl + j0 + p < pl + iw is inside `dst`,
        // whose rows of 16 floats stay 64-byte aligned.
        unsafe {
            let mut v = [_mm512_setzero_ps(); LANES];
            for (l, v) in v.iter_mut().enumerate().take(block.nch) {
                let s = block.x.as_ptr().add(l * plane + r * iw + j0);
                *v = _mm512_maskz_loadu_ps(mask, s);
                // The next row of this plane is staged next: fetch it now
                // (sixteen planes are read at once, more streams than the
                // hardware prefetcher follows).
                _mm_prefetch::<_MM_HINT_T1>(s.wrapping_add(iw).cast());
            }
            transpose16(&mut v);
            let d = dst.as_mut_ptr().add((pl + j0) * LANES);
            for (p, v) in v.iter().take(n).enumerate() {
                _mm512_store_ps(d.add(p * LANES), *v);
            }
        }
    }
}
