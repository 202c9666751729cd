//! The eight-lane (AVX2) block kernel: eight channels per vector, eight
//! output pixels accumulated at a time (sixteen 256-bit registers: four
//! pixels' sums and a kernel row's inputs at once at stride 1).

use core::arch::x86_64::*;

use super::{Block, MAX_RING_ROWS, MAX_TAPS, Ring, RowTail};
use crate::ops::conv::{Conv, ConvGeom};

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
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw, ohw) = (g.x.h, g.x.w, g.ohw());
    debug_assert!(block.nch <= LANES);
    let row_len = ring.width * LANES;
    // 32-byte aligned storage: the ring, the zero row, weights, bias
    // (the ring was sized for sixteen lanes, so eight fit).
    let start = buf.as_ptr().align_offset(32);
    let buf = &mut buf[start..];
    let (ring_buf, rest) = buf.split_at_mut(ring.rows * row_len);
    let (zero_row, rest) = rest.split_at_mut(row_len);
    let (wt, rest) = rest.split_at_mut(ring.taps * LANES);
    let bias = &mut rest[..LANES];
    ring_buf.fill(0.0);
    zero_row.fill(0.0);
    for (t, lanes) in wt.chunks_exact_mut(LANES).enumerate() {
        for (l, v) in lanes.iter_mut().enumerate() {
            *v = if l < block.nch {
                block.w[l * ring.taps + t]
            } else {
                0.0
            };
        }
    }
    for (l, v) in bias.iter_mut().enumerate() {
        *v = match block.bias {
            Some(b) if l < block.nch => b[l],
            _ => 0.0,
        };
    }
    // Which input row each ring slot holds (none yet).
    let mut held = [usize::MAX; MAX_RING_ROWS];
    let mut src = [core::ptr::null::<f32>(); MAX_TAPS];
    for oh in rows {
        // The input row of each kernel row, staged if it is not yet.
        for (ki, row) in src.iter_mut().enumerate().take(g.kh) {
            let r = (oh * sh + ki * dh).checked_sub(g.pt).filter(|&r| r < ih);
            *row = match r {
                Some(r) => {
                    let slot = r % ring.rows;
                    let dst = &mut ring_buf[slot * row_len..][..row_len];
                    if held[slot] != r {
                        // SAFETY: AVX2 (this function's contract); the
                        // block holds nch planes of ih·iw floats, r < ih.
                        unsafe { stage_row(block, r, iw, ih * iw, g.pl, dst) };
                        held[slot] = r;
                    }
                    dst.as_ptr()
                }
                None => zero_row.as_ptr(),
            };
        }
        for ow0 in (0..g.ow).step_by(LANES) {
            // SAFETY: AVX2 and FMA. `bias` and every weight vector are
            // 32-byte aligned (8 floats at an aligned start). Pixel
            // `(ow0 + p)·sw + kj·dw` of a staged row is below
            // `ring.width` for p < 8 (the width covers the last whole
            // group of sixteen outputs, so of eight), and each row starts
            // aligned.
            unsafe {
                let b = _mm256_load_ps(bias.as_ptr());
                let rows = &src[..g.kh];
                let w = wt.as_ptr();
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
                transpose8(&mut acc);
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
        if let Some(tail) = tail {
            for l in 0..block.nch {
                let plane = block.p0 + l;
                // SAFETY: row oh of this plane belongs to this call (the
                // caller's contract) and was just written.
                let seg = unsafe {
                    core::slice::from_raw_parts_mut(y.add(plane * ohw + oh * g.ow), g.ow)
                };
                tail(plane, seg, oh * g.ow);
            }
        }
    }
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
            transpose8(&mut v);
            let d = dst.as_mut_ptr().add((pl + j0) * LANES);
            for (p, v) in v.iter().take(n).enumerate() {
                _mm256_store_ps(d.add(p * LANES), *v);
            }
        }
    }
}

/// Transposes an 8×8 block held as eight row vectors: afterwards `v[c]`
/// holds what was column `c`.
///
/// Three rounds: 32-bit interleaves of row pairs, 64-bit shuffles of those
/// (each 128-bit half then holds a transposed 4×4 block), and the halves
/// exchanged.
#[inline]
#[target_feature(enable = "avx")]
fn transpose8(v: &mut [__m256; LANES]) {
    let t0 = _mm256_unpacklo_ps(v[0], v[1]);
    let t1 = _mm256_unpackhi_ps(v[0], v[1]);
    let t2 = _mm256_unpacklo_ps(v[2], v[3]);
    let t3 = _mm256_unpackhi_ps(v[2], v[3]);
    let t4 = _mm256_unpacklo_ps(v[4], v[5]);
    let t5 = _mm256_unpackhi_ps(v[4], v[5]);
    let t6 = _mm256_unpacklo_ps(v[6], v[7]);
    let t7 = _mm256_unpackhi_ps(v[6], v[7]);
    let q0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let q1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let q2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let q3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let q4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let q5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let q6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let q7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    v[0] = _mm256_permute2f128_ps::<0x20>(q0, q4);
    v[1] = _mm256_permute2f128_ps::<0x20>(q1, q5);
    v[2] = _mm256_permute2f128_ps::<0x20>(q2, q6);
    v[3] = _mm256_permute2f128_ps::<0x20>(q3, q7);
    v[4] = _mm256_permute2f128_ps::<0x31>(q0, q4);
    v[5] = _mm256_permute2f128_ps::<0x31>(q1, q5);
    v[6] = _mm256_permute2f128_ps::<0x31>(q2, q6);
    v[7] = _mm256_permute2f128_ps::<0x31>(q3, q7);
}
