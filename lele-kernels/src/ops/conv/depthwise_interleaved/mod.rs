//! Depthwise convolution a vector of channels at a time: sixteen with
//! AVX-512 ([`avx512`]), eight with AVX2 ([`avx2`]).
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
//! plane path with sixteen lanes; on the 2-core Zen 4 machine
//! (`kernel_bench --fastest`, 64 channels of 160×160, alternated runs)
//! blocked takes 0.85–0.87 ms against the plane path's 0.98–1.58 at
//! stride 1 (caches swept first: 0.93–1.02 against 1.73–2.50) and
//! 0.47 against 0.49–0.51 at stride 2 (swept: 0.52–0.56 against
//! 1.15–1.20).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use super::{Conv, ConvGeom};

/// The most channels per block (one AVX-512 vector); the ring is sized
/// for it, so it also fits the eight-lane AVX2 blocks.
const LANES: usize = 16;
/// Most input rows one output row reads ([`Ring::rows`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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

/// The blocked kernel this CPU runs: its lanes and its block function.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Blocked {
    lanes: usize,
    block_rows: BlockRows,
}

/// One block's output rows (see [`avx512::block_rows`]).
#[cfg(target_arch = "x86_64")]
type BlockRows = unsafe fn(
    &Conv,
    &ConvGeom,
    &Ring,
    Block<'_>,
    core::ops::Range<usize>,
    *mut f32,
    &mut [f32],
    Option<RowTail<'_>>,
);

#[cfg(target_arch = "x86_64")]
impl Blocked {
    /// The kernel for the best instruction set here, if any.
    pub(super) fn detect() -> Option<Blocked> {
        use crate::ops::gemm::{Isa, best_isa};
        #[cfg(all(test, feature = "std"))]
        if LANES8.with(|f| f.get()) && best_isa() != Isa::Scalar {
            return Some(Self::AVX2);
        }
        match best_isa() {
            Isa::Avx512 => Some(Blocked {
                lanes: 16,
                block_rows: avx512::block_rows,
            }),
            Isa::Avx2 => Some(Self::AVX2),
            _ => None,
        }
    }

    /// The eight-lane AVX2 kernel.
    const AVX2: Blocked = Blocked {
        lanes: 8,
        block_rows: avx2::block_rows,
    };
}

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to run the eight-lane AVX2 kernel on an AVX-512 CPU.
    pub(super) static LANES8: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
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
#[cfg(target_arch = "x86_64")]
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
                    (kernel.block_rows)(
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
        unsafe { (kernel.block_rows)(conv, g, ring, block(b), 0..g.oh, y.as_mut_ptr(), own, tail) };
    }
}

/// What a block kernel computes per output row, handed to it by
/// [`walk_rows`]: the staged input row of each kernel row inside the
/// image, the interleaved weights from the first of those rows on (`kw`
/// vectors of `lanes` per kernel row) and the bias vector, all aligned to
/// a vector.
#[cfg(target_arch = "x86_64")]
pub(super) struct RowInputs<'r> {
    pub src: &'r [*const f32],
    pub wt: &'r [f32],
    pub bias: &'r [f32],
}

/// The part of a block kernel that does not depend on its lanes: carves
/// `buf` (aligned to one `lanes`-float vector) into the ring, the block's
/// weights interleaved `lanes` wide and its bias (zero lanes past its
/// channels); then for each output row of `rows` stages the input rows it
/// reads that the ring does not hold yet (`stage(r, dst)` writes input row
/// `r` interleaved into `dst`), computes the row (`row(oh, inputs)`, given
/// only the kernel rows inside the image and their weights) and runs the
/// fused tail on each of its planes.
///
/// # Safety
/// `y` addresses the whole output and no one else accesses these rows of
/// these planes meanwhile; `row` writes only row `oh` of the block's
/// planes; `buf` holds [`Ring::scratch_len`] floats; `lanes` ≤ 16.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn walk_rows(
    conv: &Conv,
    g: &ConvGeom,
    ring: &Ring,
    block: Block<'_>,
    rows: core::ops::Range<usize>,
    y: *mut f32,
    buf: &mut [f32],
    tail: Option<RowTail<'_>>,
    lanes: usize,
    mut stage: impl FnMut(usize, &mut [f32]),
    mut row: impl FnMut(usize, RowInputs<'_>),
) {
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
    // padding around them is zeroed here (the whole ring was 2.6% of
    // PP-OCR cls's time: a ring per 16-channel block over small planes).
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
        // The kernel rows whose input row lies inside the image: one run
        // (the padding is above and below), the only ones computed. Taps
        // over the padding would add zero products (PP-OCRv4 rec's 5×5
        // layers over 3-row planes: two rows of five in every output row).
        let input_row = |ki: usize| (oh * sh + ki * dh).checked_sub(g.pt).filter(|&r| r < ih);
        let first = (0..g.kh)
            .find(|&ki| input_row(ki).is_some())
            .unwrap_or(g.kh);
        let end = (first..g.kh)
            .find(|&ki| input_row(ki).is_none())
            .unwrap_or(g.kh);
        // Each of them staged if it is not yet.
        for (ki, p) in src.iter_mut().enumerate().take(end).skip(first) {
            let Some(r) = input_row(ki) else { continue };
            let slot = r % ring.rows;
            let dst = &mut ring_buf[slot * row_len..][..row_len];
            if held[slot] != r {
                stage(r, dst);
                held[slot] = r;
            }
            *p = dst.as_ptr();
        }
        row(
            oh,
            RowInputs {
                src: &src[first..end],
                wt: &wt[first * g.kw * lanes..],
                bias,
            },
        );
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
