//! Depthwise convolution a vector of channels at a time (sixteen with
//! AVX-512, eight with AVX2, four with NEON and wasm simd128), written once
//! over [`crate::simd::Simd`] ([`block`]).
//!
//! The plane-at-a-time kernel ([`super::depthwise`]) vectorizes along a
//! row, so most taps read a vector that straddles two cache lines, and a
//! strided layer gathers every other float. Here a block of channel planes
//! is read row by row and transposed so that each input pixel's channels
//! are one aligned vector in a small ring of staged rows, zero padded at
//! both ends. Every tap of an output pixel is then one aligned load and one
//! FMA, whatever the kernel width, stride or dilation. A vector's worth of
//! output pixels is accumulated in registers at a time and transposed back
//! into the planes. The last block of a layer whose channel count is not a
//! multiple of the lanes runs with its missing lanes zero.
//!
//! It takes every depthwise layer it can (see [`Ring::new`]), whatever the
//! plane size. A 3×3 layer over more than 1 Mi input floats used to keep the
//! plane path with sixteen lanes, but the blocked kernel proved faster there
//! too, at stride 1 and 2, in cache and with caches swept first.

mod block;

use super::{Conv, ConvGeom};
use crate::simd::Isa;

/// The most channels per block (one AVX-512 vector); the ring is sized
/// for it, so it also fits the eight-lane AVX2 blocks.
const LANES: usize = 16;
/// Most input rows one output row reads ([`Ring::rows`]).
const MAX_RING_ROWS: usize = 64;
/// Most kernel taps.
const MAX_TAPS: usize = 128;

/// The ring of staged rows one block uses. It depends only on the shapes,
/// so the scratch planned on the build machine fits on every target.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ring {
    /// Staged rows held at once: the span of input rows one output row
    /// reads, so input row `r` lives in slot `r % rows`.
    rows: usize,
    /// Pixels per staged row: the left padding, the input row, and zeros
    /// up to the last column the last (whole) group of sixteen outputs
    /// reads.
    width: usize,
    taps: usize,
}

impl Ring {
    /// The ring for these shapes, or `None` when the blocked kernel does
    /// not take them (no outputs, too many taps or rows, or a ring larger
    /// than a worker's scratch).
    pub(super) fn new(conv: &Conv, g: &ConvGeom) -> Option<Ring> {
        let [_, sw] = conv.strides;
        let [dh, dw] = conv.dilations;
        let taps = g.kh * g.kw;
        if g.ohw() == 0 || taps == 0 || taps > MAX_TAPS {
            return None;
        }
        let rows = (g.kh - 1) * dh + 1;
        let reach = (g.ow.div_ceil(LANES) * LANES - 1) * sw + (g.kw - 1) * dw + 1;
        let ring = Ring {
            rows,
            width: reach.max(g.pl + g.x.w),
            taps,
        };
        (rows <= MAX_RING_ROWS && ring.scratch_len() <= crate::ops::gemm::MAX_SCRATCH)
            .then_some(ring)
    }

    /// Floats of scratch one block needs: the ring, the interleaved
    /// weights and bias, and room to align them all to 64 bytes (for
    /// sixteen lanes, which bounds eight).
    pub(super) fn scratch_len(&self) -> usize {
        self.rows * self.width * LANES + (self.taps + 1) * LANES + LANES
    }
}

/// The blocked kernel this CPU runs: its instruction set and lanes.
#[derive(Clone, Copy)]
pub(super) struct Blocked {
    isa: Isa,
    lanes: usize,
}

impl Blocked {
    /// The kernel for the best instruction set here, if it has vectors.
    pub(super) fn detect() -> Option<Blocked> {
        #[allow(unused_mut)]
        let mut isa = crate::simd::best_isa();
        #[cfg(all(test, feature = "std"))]
        if let Some(forced) = FORCE_ISA.with(|f| f.get()) {
            isa = forced;
        }
        let lanes = crate::simd::vector_lanes(isa)?;
        Some(Blocked { isa, lanes })
    }
}

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to run the kernel of an instruction set below the
    /// CPU's best (the AVX2 one on an AVX-512 CPU).
    pub(super) static FORCE_ISA: core::cell::Cell<Option<Isa>> = const { core::cell::Cell::new(None) };
}

/// The fused tail of one output row: `(plane, row, offset of the row in
/// its plane)`, planes counted over the whole output.
pub(super) type RowTail<'a> = &'a (dyn Fn(usize, &mut [f32], usize) + Sync);

/// One block of channels, the planes `p0..p0 + nch` of the output.
#[derive(Clone, Copy)]
pub(super) struct Block<'a> {
    /// First plane (batch item × channels + first channel).
    pub p0: usize,
    /// Channels in the block, `1..=lanes`.
    pub nch: usize,
    /// The block's input planes, `nch · H · W` floats.
    pub x: &'a [f32],
    /// The block's kernels, `nch · taps` floats.
    pub w: &'a [f32],
    /// The block's biases (`nch`), if any.
    pub bias: Option<&'a [f32]>,
}

/// The whole convolution with `kernel`: blocks of its lanes' worth of
/// channels (each batch item's channels counted from zero), split by rows
/// as well when threads would otherwise go idle. `own` is the caller's
/// scratch ([`Ring::scratch_len`] floats; workers use their own).
///
/// # Safety
/// `kernel` came from [`Blocked::detect`] on this CPU; `x`, `w`, `bias`
/// and `y` hold what the shapes `g` say (`bias` one per channel), `own` at
/// least [`Ring::scratch_len`] floats.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run(
    kernel: Blocked,
    conv: &Conv,
    g: &ConvGeom,
    ring: &Ring,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    own: &mut [f32],
    tail: Option<RowTail<'_>>,
) {
    let lanes = kernel.lanes;
    let per_item = g.m.div_ceil(lanes);
    let blocks = g.x.n * per_item;
    let (ihw, taps) = (g.x.h * g.x.w, ring.taps);
    let block = |b: usize| {
        let c0 = (b % per_item) * lanes;
        let nch = lanes.min(g.m - c0);
        let p0 = (b / per_item) * g.m + c0;
        Block {
            p0,
            nch,
            x: &x[p0 * ihw..][..nch * ihw],
            w: &w[c0 * taps..][..nch * taps],
            bias: bias.map(|b| &b[c0..c0 + nch]),
        }
    };
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        let work = g.x.n * g.m * g.ohw() * taps;
        // Enough tasks for two per thread: rows split when blocks are few.
        let strips = if threads > 1 && work >= 1 << 18 {
            (2 * threads).div_ceil(blocks).min(g.oh)
        } else {
            1
        };
        // With whole blocks per thread, one contiguous range of blocks
        // per task.
        let per = if threads > 1 && strips == 1 && work >= 1 << 18 {
            blocks.div_ceil(threads)
        } else {
            1
        };
        let shared = crate::threads::SharedMut::new(y);
        crate::threads::run(blocks.div_ceil(per) * strips, own, &|t, buf| {
            let (t, s) = (t / strips, t % strips);
            let rows = s * g.oh / strips..(s + 1) * g.oh / strips;
            for b in t * per..((t + 1) * per).min(blocks) {
                // SAFETY: the caller's contract (the kernel runs here); task
                // t alone writes these rows of its blocks' planes, and `run`
                // returns after every task. Workers' buffers hold
                // MAX_SCRATCH floats, at least the ring's (`Ring::new`).
                unsafe {
                    block::block_rows(
                        kernel.isa,
                        conv,
                        g,
                        ring,
                        block(b),
                        rows.clone(),
                        shared.as_ptr(),
                        buf,
                        tail,
                    );
                }
            }
        });
    }
    #[cfg(not(feature = "std"))]
    for b in 0..blocks {
        // SAFETY: the caller's contract; one block at a time.
        unsafe {
            block::block_rows(
                kernel.isa,
                conv,
                g,
                ring,
                block(b),
                0..g.oh,
                y.as_mut_ptr(),
                own,
                tail,
            )
        };
    }
}
