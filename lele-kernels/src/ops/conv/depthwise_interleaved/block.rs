//! One block of channels, written once over [`Simd`]: `LANES` channels
//! per vector and `LANES` output pixels accumulated at a time, so that one
//! square transpose turns the pixels' channel vectors back into rows of
//! the channel planes.
//!
//! The stride-1 kernels keep what fits the register file: with 32
//! registers (AVX-512, NEON) a kernel row's inputs for eight pixels are
//! loaded once and reused by every tap; with 16 (AVX2, wasm) the row's
//! weights stay instead while its inputs stream past.

use super::{Block, MAX_RING_ROWS, MAX_TAPS, Ring, RowTail};
use crate::ops::conv::{Conv, ConvGeom};
use crate::simd::{Isa, Simd, SimdKernel, dispatch_on};

/// Output rows `rows` of `block`, written to `y` (the whole output, planes
/// of `oh · ow` floats), each row's fused tail applied once it is written,
/// on `isa`.
///
/// # Safety
/// `isa` runs here and has vectors ([`super::Blocked::detect`]); `y`
/// addresses the whole output and no one else accesses these rows of these
/// planes meanwhile; `buf` holds [`Ring::scratch_len`] floats; `block`
/// holds what its fields say, with at most `lanes(isa)` channels.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn block_rows(
    isa: Isa,
    conv: &Conv,
    g: &ConvGeom,
    ring: &Ring,
    block: Block<'_>,
    rows: core::ops::Range<usize>,
    y: *mut f32,
    buf: &mut [f32],
    tail: Option<RowTail<'_>>,
) {
    let kernel = BlockRows {
        conv,
        g,
        ring,
        block,
        rows,
        y,
        buf,
        tail,
    };
    // The caller's contract says `isa` runs, so this never hands the
    // kernel back.
    let ran = dispatch_on(isa, kernel).is_ok();
    debug_assert!(ran, "the blocked depthwise kernel needs a vector ISA");
}

/// [`block_rows`]'s arguments, run on a backend. Made only there, under
/// its contract.
struct BlockRows<'a, 'b> {
    conv: &'a Conv,
    g: &'a ConvGeom,
    ring: &'a Ring,
    block: Block<'a>,
    rows: core::ops::Range<usize>,
    y: *mut f32,
    buf: &'b mut [f32],
    tail: Option<RowTail<'a>>,
}

impl SimdKernel for BlockRows<'_, '_> {
    type Output = ();

    /// Carves the buffer (aligned to a vector) into the ring, the block's
    /// weights interleaved `LANES` wide and its bias (zero lanes past its
    /// channels); then for each output row stages the input rows it reads
    /// that the ring does not hold yet, computes the row from the kernel
    /// rows inside the image only, and runs the fused tail on each plane.
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let BlockRows {
            conv,
            g,
            ring,
            block,
            rows,
            y,
            buf,
            tail,
        } = self;
        let lanes = S::LANES;
        let [sh, _] = conv.strides;
        let [dh, _] = conv.dilations;
        let (ih, ohw) = (g.x.h, g.ohw());
        let row_len = ring.width * lanes;
        let start = buf.as_ptr().align_offset(4 * lanes);
        let buf = &mut buf[start..];
        let (ring_buf, rest) = buf.split_at_mut(ring.rows * row_len);
        let (wt, rest) = rest.split_at_mut(ring.taps * lanes);
        let bias = &mut rest[..lanes];
        // Staging writes every lane of pixels `pl..pl + iw` of a row; the
        // padding around them is zeroed here (zeroing the whole ring was a
        // visible share of a small classifier's time: a ring per 16-channel
        // block over small planes).
        let (pad_l, pad_r) = (g.pl * lanes, ((g.pl + g.x.w) * lanes).min(row_len));
        for slot in ring_buf.chunks_exact_mut(row_len) {
            slot[..pad_l.min(row_len)].fill(0.0);
            slot[pad_r..].fill(0.0);
        }
        for (t, vector) in wt.chunks_exact_mut(lanes).enumerate() {
            for (l, v) in vector.iter_mut().enumerate() {
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
            // The kernel rows whose input row lies inside the image: one
            // run (the padding is above and below), the only ones
            // computed. Taps over the padding would add zero products
            // (PP-OCRv4 rec's 5×5 layers over 3-row planes: two rows of
            // five in every output row).
            let mut first = g.kh;
            let mut end = g.kh;
            for ki in 0..g.kh {
                let inside = (oh * sh + ki * dh)
                    .checked_sub(g.pt)
                    .is_some_and(|r| r < ih);
                if inside && first == g.kh {
                    first = ki;
                } else if !inside && first < g.kh {
                    end = ki;
                    break;
                }
            }
            // Each of them staged if it is not yet.
            for (ki, p) in src.iter_mut().enumerate().take(end).skip(first) {
                let r = oh * sh + ki * dh - g.pt;
                let slot = r % ring.rows;
                let dst = &mut ring_buf[slot * row_len..][..row_len];
                if held[slot] != r {
                    // SAFETY: the block holds nch planes of ih·iw floats
                    // and r < ih; `dst` is a vector-aligned staged row of
                    // `ring.width` pixels.
                    unsafe { stage_row(s, block, r, g.x.w, ih * g.x.w, g.pl, dst) };
                    held[slot] = r;
                }
                *p = dst.as_ptr();
            }
            // SAFETY: this call owns row `oh` of the block's planes (the
            // contract of `block_rows`); the staged rows and weights are
            // those of kernel rows `first..end`.
            unsafe {
                output_row(
                    s,
                    conv,
                    g,
                    block,
                    oh,
                    &src[first..end],
                    &wt[first * g.kw * lanes..],
                    bias,
                    y,
                )
            };
            if let Some(tail) = tail {
                for l in 0..block.nch {
                    let plane = block.p0 + l;
                    // SAFETY: row oh of this plane belongs to this call
                    // (the caller's contract) and was just written.
                    let seg = unsafe {
                        core::slice::from_raw_parts_mut(y.add(plane * ohw + oh * g.ow), g.ow)
                    };
                    tail(plane, seg, oh * g.ow);
                }
            }
        }
    }
}

/// Output row `oh` of the block's planes: groups of `LANES` pixels, each
/// the bias plus every tap of the kernel rows staged in `rows` (weights
/// `wt` from the first of them on), transposed back into the planes.
///
/// # Safety
/// `y` addresses the whole output and the caller owns row `oh` of the
/// block's planes; `rows` are vector-aligned staged rows, each `ring.width`
/// pixels (which covers the last whole group of sixteen outputs); `wt`
/// holds `rows.len() · kw` weight vectors and `bias` one vector.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn output_row<S: Simd>(
    s: S,
    conv: &Conv,
    g: &ConvGeom,
    block: Block<'_>,
    oh: usize,
    rows: &[*const f32],
    wt: &[f32],
    bias: &[f32],
    y: *mut f32,
) {
    let lanes = S::LANES;
    let [_, sw] = conv.strides;
    let [_, dw] = conv.dilations;
    let ohw = g.ohw();
    let w = wt.as_ptr();
    for ow0 in (0..g.ow).step_by(lanes) {
        // SAFETY: the caller's contract; pixel `(ow0 + p)·sw + kj·dw` of a
        // staged row is below `ring.width` for p < LANES.
        unsafe {
            let b = s.load(bias.as_ptr());
            let mut acc = match (sw, dw, g.kw) {
                (1, 1, 1) => group_unit::<S, 1>(s, rows, w, ow0, b),
                (1, 1, 2) => group_unit::<S, 2>(s, rows, w, ow0, b),
                (1, 1, 3) => group_unit::<S, 3>(s, rows, w, ow0, b),
                (1, 1, 4) => group_unit::<S, 4>(s, rows, w, ow0, b),
                (1, 1, 5) => group_unit::<S, 5>(s, rows, w, ow0, b),
                (1, 1, 6) => group_unit::<S, 6>(s, rows, w, ow0, b),
                (1, 1, 7) => group_unit::<S, 7>(s, rows, w, ow0, b),
                _ => group_any(s, rows, w, g.kw, sw, dw, ow0, b),
            };
            s.transpose_square(&mut acc);
            let n = lanes.min(g.ow - ow0);
            // Over all the lanes (a constant), skipping those past the
            // block: a loop bound of `nch` would index the sums at run
            // time and keep them in memory instead of registers.
            for (l, a) in acc.iter().take(lanes).enumerate() {
                if l >= block.nch {
                    continue;
                }
                let at = (block.p0 + l) * ohw + oh * g.ow + ow0;
                // A plain store for whole vectors: masked stores are slow
                // on AMD.
                if n == lanes {
                    s.store(y.add(at), *a);
                } else {
                    s.store_partial(y.add(at), n, *a);
                }
                // This block writes a vector's worth of planes at once:
                // fetch the next row's lines ahead of its stores.
                s.prefetch(y.wrapping_add(at + g.ow));
            }
        }
    }
}

/// `LANES` output pixels from `ow0` on: `acc[p]` is pixel `ow0 + p`'s
/// channels, the bias `b` plus every tap (kernel rows `rows`, taps in
/// order), each tap of each pixel one load.
///
/// # Safety
/// `rows` are staged rows that hold pixel `(ow0 + LANES − 1)·sw + (kw −
/// 1)·dw`, `w` the interleaved weights of `rows.len() · kw` taps.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn group_any<S: Simd>(
    s: S,
    rows: &[*const f32],
    w: *const f32,
    kw: usize,
    sw: usize,
    dw: usize,
    ow0: usize,
    b: S::F32,
) -> [S::F32; 16] {
    let lanes = S::LANES;
    let mut acc = [b; 16];
    for (ki, &row) in rows.iter().enumerate() {
        for kj in 0..kw {
            // SAFETY: the caller's contract.
            unsafe {
                let wv = s.load(w.add((ki * kw + kj) * lanes));
                let src = row.add((ow0 * sw + kj * dw) * lanes);
                for (p, a) in acc.iter_mut().enumerate().take(lanes) {
                    *a = s.mul_add_approx(wv, s.load(src.add(p * sw * lanes)), *a);
                }
            }
        }
    }
    acc
}

/// [`group_any`] for stride 1, dilation 1 and a `KW`-wide kernel, where
/// neighbouring pixels share inputs: with 32 registers, eight pixels at a
/// time, whose `8 + KW − 1` inputs of a kernel row are loaded once and
/// feed every tap that reads them; with 16, the row's `KW` weights stay in
/// registers while its inputs stream past (`LANES` sums + `KW` weights + 1
/// input). Either way each sum takes its taps in order.
///
/// # Safety
/// As [`group_any`] with `sw = dw = 1`, `kw = KW ≤ 7`.
#[inline(always)]
unsafe fn group_unit<S: Simd, const KW: usize>(
    s: S,
    rows: &[*const f32],
    w: *const f32,
    ow0: usize,
    b: S::F32,
) -> [S::F32; 16] {
    let lanes = S::LANES;
    let mut acc = [b; 16];
    if S::REGISTERS >= 32 {
        let part = lanes.min(8);
        for p0 in (0..lanes).step_by(part) {
            let mut a = [b; 8];
            for (ki, &row) in rows.iter().enumerate() {
                let mut x = [b; 8 + 6];
                // SAFETY: the caller's contract: pixels up to
                // ow0 + LANES − 1 + KW − 1.
                unsafe {
                    let src = row.add((ow0 + p0) * lanes);
                    for (j, x) in x.iter_mut().enumerate().take(part + KW - 1) {
                        *x = s.load(src.add(j * lanes));
                    }
                    for kj in 0..KW {
                        let wv = s.load(w.add((ki * KW + kj) * lanes));
                        for (p, a) in a.iter_mut().enumerate().take(part) {
                            *a = s.mul_add_approx(wv, x[p + kj], *a);
                        }
                    }
                }
            }
            acc[p0..p0 + part].copy_from_slice(&a[..part]);
        }
    } else {
        for (ki, &row) in rows.iter().enumerate() {
            // SAFETY: the caller's contract: weights of kernel row ki,
            // pixels up to ow0 + LANES − 1 + KW − 1.
            unsafe {
                let mut wv = [b; KW];
                for (kj, v) in wv.iter_mut().enumerate() {
                    *v = s.load(w.add((ki * KW + kj) * lanes));
                }
                let src = row.add(ow0 * lanes);
                for j in 0..lanes + KW - 1 {
                    let xv = s.load(src.add(j * lanes));
                    // Pixel j is tap kj of output j − kj.
                    for (kj, &wk) in wv.iter().enumerate() {
                        if let Some(p) = j.checked_sub(kj).filter(|&p| p < lanes) {
                            acc[p] = s.mul_add_approx(wk, xv, acc[p]);
                        }
                    }
                }
            }
        }
    }
    acc
}

/// Input row `r` of the block's planes, interleaved into `dst`: pixel
/// `pl + j` is input column `j`'s channels (lanes past the block's
/// channels zero). The pixels outside the row are left as they are (zero).
///
/// # Safety
/// `block.x` holds `nch ≤ LANES` planes of `plane` floats with rows of
/// `iw` and `r` is one of those rows; `dst` holds at least
/// `(pl + iw) · LANES` floats.
#[inline(always)]
unsafe fn stage_row<S: Simd>(
    s: S,
    block: Block<'_>,
    r: usize,
    iw: usize,
    plane: usize,
    pl: usize,
    dst: &mut [f32],
) {
    let lanes = S::LANES;
    debug_assert!(dst.len() >= (pl + iw) * lanes);
    let zero = s.splat(0.0);
    for j0 in (0..iw).step_by(lanes) {
        let n = lanes.min(iw - j0);
        // SAFETY: row r of plane l has columns j0..j0 + n; pixel
        // pl + j0 + p < pl + iw is inside `dst`.
        unsafe {
            let mut v = [zero; 16];
            // All the lanes, see `output_row`.
            for (l, v) in v.iter_mut().enumerate().take(lanes) {
                if l >= block.nch {
                    continue;
                }
                let at = block.x.as_ptr().add(l * plane + r * iw + j0);
                *v = if n == lanes {
                    s.load(at)
                } else {
                    s.load_partial(at, n, 0.0)
                };
                // The next row of this plane is staged next: fetch it now,
                // once per line (a vector's worth of planes is read at
                // once, more streams than the hardware prefetcher follows).
                if j0 % 16 == 0 {
                    s.prefetch(at.wrapping_add(iw));
                }
            }
            s.transpose_square(&mut v);
            let d = dst.as_mut_ptr().add((pl + j0) * lanes);
            for (p, v) in v.iter().take(lanes).enumerate() {
                if p < n {
                    s.store(d.add(p * lanes), *v);
                }
            }
        }
    }
}
