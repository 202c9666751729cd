//! Direct convolution for few output channels (AVX2+FMA).
//!
//! With few output channels each im2col panel the GEMM packs is used by
//! only a few rows of weights, so packing costs as much as the
//! arithmetic. Here the `B` operand is never packed: the input is staged
//! once — zero padded and, for strides `sh × sw`, split into `sh·sw`
//! phase planes (padded row `r`, column `q` goes to plane `(r % sh, q %
//! sw)`, row `r / sh`, column `q / sw`) — so that for every tap `(c, ki,
//! kj)` the inputs of 16 consecutive outputs of one output row are 16
//! consecutive floats of the staged buffer, and consecutive output rows
//! are one phase row apart whatever the stride. A table of per-tap offsets then lets a register tile read
//! them straight from there: 6 × 16 with AVX2; with AVX-512 8 × 32 (two
//! input vectors per tap) along output rows, or 16 × 16 over flat tiles
//! (`walk.rs` holds those walks). A 1×1 convolution with
//! stride 1 and no padding reads its input in place (no staging).
//!
//! Output columns are processed in segments (an output row, or 256
//! columns of the flattened plane in place), which are also the unit of
//! the fused epilogue and of the split across threads. At stride 1, when
//! output rows are not a multiple of 16 wide, the tiles instead run over
//! the staged rows back to back ([`Layout::flat`]). Every tile starts from
//! the bias in registers and stores its result: the output is never read.
use super::ConvGeom;
use crate::error::KernelError;
use crate::ops::gemm::Epilogue;

use crate::ops::gemm::rows::{AVX2_TILE_M, TILE_M, TILE_N, WIDE_M};

mod layout;
mod stage;
mod walk;

pub(super) use layout::Layout;
use layout::{BAND_FLOATS, STAGE_SLACK};
pub(super) use stage::stage;
use stage::stage_channels;

/// Rows per register tile for layout `l`, unless a test asked for another
/// tile kind: with AVX-512, 8 (the wide tile, 8 × 32) over output rows and
/// 16 (16 × 16) over flat tiles; else the CPU's (see
/// [`crate::ops::gemm::rows::tile_rows`]). Rows of 80 to 240 outputs gain
/// with the wide tile, while flat tiles over 20-wide rows lose with it
/// (they are mostly split between two rows).
fn tile_rows(l: &Layout) -> usize {
    #[cfg(all(test, feature = "std"))]
    if let Some(tm) = TILE_ROWS.with(|f| f.get()) {
        return tm;
    }
    match crate::ops::gemm::rows::tile_rows() {
        TILE_M if !l.flat => WIDE_M,
        tm => tm,
    }
}
/// Convolutions with at most this many output channels per group run
/// directly (see [`eligible`]) when their kernel is 1×1 over fewer than
/// [`DIRECT_1X1_DEEP`] input channels per group ...
const DIRECT_M_MAX: usize = 128;
/// ... this many when it is 1×1 over more ...
const DIRECT_DEEP_M_MAX: usize = 64;
/// ... and this many when it is larger.
const DIRECT_KXK_M_MAX: usize = 64;
/// Input channels per group from which a 1×1 convolution counts as deep.
const DIRECT_1X1_DEEP: usize = 128;

/// Most output channels per group the direct path takes for a `kh × kw`
/// kernel over `cg` input channels per group. Above 64 channels a larger
/// kernel runs faster as the im2col GEMM on Sapphire Rapids, in cache and
/// with caches flushed (64→128 and 128→128 3×3 s2, 128→128 and 96→96
/// 3×3), though on Zen 4 the direct path still won 128→128 3×3 narrowly.
/// A 1×1 kernel keeps the direct path up to 128 channels over fewer than
/// 128 input channels (32→32 at 160², 96→48 at 120²), and up to 64 over
/// more, where the GEMM, reading its right-hand side in place, wins
/// (192→96 at 12×80, 256→128 and 128→128 at 40²).
pub(super) fn direct_m_max(kh: usize, kw: usize, cg: usize) -> usize {
    if kh * kw > 1 {
        DIRECT_KXK_M_MAX
    } else if cg >= DIRECT_1X1_DEEP {
        DIRECT_DEEP_M_MAX
    } else {
        DIRECT_M_MAX
    }
}

/// Whether the shapes suit the direct path (on any machine): it can run
/// them, and it is measured faster than the im2col GEMM for them: up to
/// 128 output channels, 3×3 and 1×1, strided or not (with banded staging
/// over large inputs), while at 256 channels the GEMM wins. (Shallow
/// strided patches lost before the tile prefetched.) On Sapphire Rapids
/// the GEMM already wins above 64 channels for kernels larger than 1×1, so
/// those stop at 64 ([`direct_m_max`]).
pub(super) fn eligible(strides: [usize; 2], dilations: [usize; 2], g: &ConvGeom) -> bool {
    if g.ohw() == 0 || g.k() == 0 {
        return false;
    }
    let l = Layout::new(strides, dilations, g);
    if !worthwhile(g, &l) {
        return false;
    }
    // Offsets are u32.
    let span = if l.in_place {
        g.cg * l.plane
    } else {
        l.staged_len(g)
    };
    span < u32::MAX as usize
}

/// The measured part of [`eligible`] (tests can override it).
fn worthwhile(g: &ConvGeom, l: &Layout) -> bool {
    #[cfg(all(test, feature = "std"))]
    if let Some(forced) = FORCE.with(|f| f.get()) {
        return forced;
    }
    // Rows of 16-column tiles: narrow output rows would be mostly padding
    // (a voice detector's 1-D convolutions over 4 frames ran slower), while
    // the GEMM handles a few columns with dot products. A 1×1 stride-1
    // convolution read in place runs over the flat plane instead, and flat
    // tiles ([`Layout::flat`]) fill `ow` of every `phase_w` lanes.
    let rows_fill = g.ow >= 2 * TILE_N || 4 * g.ow.next_multiple_of(TILE_N) <= 5 * g.ow;
    let flat_fill = l.flat && 4 * l.phase_w <= 5 * g.ow;
    let plane_fill = (flat_fill || l.in_place) && g.ohw() >= 2 * TILE_N;
    g.mg <= direct_m_max(g.kh, g.kw, g.cg) && (rows_fill || plane_fill)
}

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to force the direct path on or off on their thread.
    pub(super) static FORCE: core::cell::Cell<Option<bool>> = const { core::cell::Cell::new(None) };
    /// Set by tests to run the 6-row (AVX2) tile on an AVX-512 CPU.
    pub(super) static TILE_ROWS: core::cell::Cell<Option<usize>> = const { core::cell::Cell::new(None) };
    /// Set by tests to force bands of this many output rows.
    pub(super) static BAND_ROWS: core::cell::Cell<Option<usize>> = const { core::cell::Cell::new(None) };
    /// Set by tests to force the order of an in-place segment's tiles.
    pub(super) static ROW_MAJOR: core::cell::Cell<Option<bool>> = const { core::cell::Cell::new(None) };
}

/// Whether the direct path runs this convolution here (eligible, and the
/// CPU has AVX2+FMA).
pub(super) fn applies(strides: [usize; 2], dilations: [usize; 2], g: &ConvGeom) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::gemm::{Isa, best_isa};
        matches!(best_isa(), Isa::Avx2 | Isa::Avx512) && eligible(strides, dilations, g)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (strides, dilations, g);
        false
    }
}

/// Bytes of scratch [`run_group`] needs.
pub(super) fn scratch_bytes(strides: [usize; 2], dilations: [usize; 2], g: &ConvGeom) -> usize {
    let l = Layout::new(strides, dilations, g).banded(strides, dilations, g);
    let k = g.k();
    // A band's size is not monotonic in the input size (the rows per band
    // are rounded down), so the full band budget is reserved: planned at
    // the largest input, the staging still fits at smaller ones.
    let staged = if l.in_place {
        0
    } else {
        l.staged_len(g).max(BAND_FLOATS + STAGE_SLACK)
    };
    let floats = weight_rows(g.mg) * k + staged + if l.in_place { k * TILE_N } else { 0 };
    let offsets = if l.in_place { 2 * k } else { k };
    4 * (floats + offsets)
}

/// Rows of packed weights reserved for `mg` output channels: enough for
/// whole panels of either tile height (the scratch is sized on the build
/// machine, the tile picked on the target).
fn weight_rows(mg: usize) -> usize {
    mg.next_multiple_of(AVX2_TILE_M)
        .max(mg.next_multiple_of(TILE_M))
}

/// Splits the scratch into packed weights, staged input, last-tile panel
/// (floats) and the tap offsets (u32).
#[allow(clippy::type_complexity)]
fn carve<'s>(
    scratch: &'s mut [u8],
    l: &Layout,
    g: &ConvGeom,
) -> Result<(&'s mut [f32], &'s mut [f32], &'s mut [f32], &'s mut [u32]), KernelError> {
    const OP: &str = "Conv";
    let k = g.k();
    let na = weight_rows(g.mg) * k;
    let ns = l.staged_len(g);
    let np = if l.in_place { k * TILE_N } else { 0 };
    let no = if l.in_place { 2 * k } else { k };
    let bytes = scratch
        .get_mut(..4 * (na + ns + np + no))
        .ok_or(KernelError::Buffer { op: OP })?;
    let (fb, ob) = bytes.split_at_mut(4 * (na + ns + np));
    let floats: &mut [f32] =
        bytemuck::try_cast_slice_mut(fb).map_err(|_| KernelError::Buffer { op: OP })?;
    let offs: &mut [u32] =
        bytemuck::try_cast_slice_mut(ob).map_err(|_| KernelError::Buffer { op: OP })?;
    let (a, rest) = floats.split_at_mut(na);
    let (staged, panel) = rest.split_at_mut(ns);
    Ok((a, staged, panel, offs))
}

/// One group of a convolution: `yg` (`mg × ohw`, only written) = `bias`
/// (`mg` floats, or zeros) + `wg` (`mg × k`) convolved with `xg`, with
/// `relu` clamped by the tiles as they store it (the `Relu` kernel's
/// result, no pass over the output), then the epilogue on each finished
/// segment of each row, or once on all of `yg` when a segment is a whole
/// row (so it must not depend on the channel: see [`Job::finish`]). Only
/// called when [`applies`] said so.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_group(
    strides: [usize; 2],
    dilations: [usize; 2],
    g: &ConvGeom,
    xg: &[f32],
    wg: &[f32],
    bias: Option<&[f32]>,
    yg: &mut [f32],
    scratch: &mut [u8],
    relu: bool,
    epilogue: Option<Epilogue<'_>>,
) -> Result<(), KernelError> {
    const OP: &str = "Conv";
    let (k, mg, ohw) = (g.k(), g.mg, g.ohw());
    let l = Layout::new(strides, dilations, g).banded(strides, dilations, g);
    let threads = {
        #[cfg(feature = "std")]
        {
            crate::threads::num_threads()
        }
        #[cfg(not(feature = "std"))]
        {
            1
        }
    };
    let parallel = threads > 1 && l.segments >= 2 && mg * ohw * k >= 1 << 18;
    let l = if parallel {
        l.balanced(threads, strides, dilations, g)
    } else {
        l
    };
    if wg.len() < mg * k
        || yg.len() < mg * ohw
        || xg.len() < g.cg * g.x.h * g.x.w
        || bias.is_some_and(|b| b.len() < mg)
    {
        return Err(KernelError::Buffer { op: OP });
    }
    let (a, staged, panel, offs) = carve(scratch, &l, g)?;
    // Weights in panels of the tile's rows (`a[t·k·tm + p·tm + i]`), zero
    // rows past mg.
    let tm = tile_rows(&l);
    let a = a
        .get_mut(..mg.next_multiple_of(tm) * k)
        .ok_or(KernelError::Buffer { op: OP })?;
    crate::ops::gemm::pack_row_panels(wg, mg, k, tm, a);
    let (taps, ident) = offs.split_at_mut(k);
    if l.in_place {
        for (p, o) in taps.iter_mut().enumerate() {
            *o = (p * l.plane) as u32;
        }
        for (p, o) in ident.iter_mut().enumerate() {
            *o = (p * TILE_N) as u32;
        }
    } else {
        for (p, o) in taps.iter_mut().enumerate() {
            let (c, ki, kj) = (p / (g.kh * g.kw), (p / g.kw) % g.kh, p % g.kw);
            *o = l.tap(c, ki, kj, dilations) as u32;
        }
    }
    let job = Job {
        g,
        l: &l,
        tm,
        a,
        taps,
        ident,
        bias,
        relu,
        epilogue,
    };
    let bands = l.bands();
    if bands > 1 {
        // Each band staged into the task's own buffer, then its rows.
        let len = l.staged_len(g);
        let one = |b: usize, buf: &mut [f32], y: *mut f32| -> Result<(), KernelError> {
            let buf = buf.get_mut(..len).ok_or(KernelError::Buffer { op: OP })?;
            stage(strides, g, &l, xg, buf, b)?;
            let rows = b * l.band..((b + 1) * l.band).min(l.segments);
            // SAFETY: the caller gives `y` (all of `yg`) to this band's
            // rows only; `buf` holds the band; the panel is never used
            // when the input is staged.
            unsafe { job.segments(buf, b * l.band, rows, y, core::ptr::null_mut()) };
            Ok(())
        };
        #[cfg(feature = "std")]
        if parallel {
            let failed = core::sync::atomic::AtomicBool::new(false);
            let shared = crate::threads::SharedMut::new(yg);
            crate::threads::run(bands, staged, &|b, buf| {
                // Task b writes only the output columns of band b's rows
                // (in every row of `yg`); `run` returns after every task.
                if one(b, buf, shared.as_ptr()).is_err() {
                    failed.store(true, core::sync::atomic::Ordering::Relaxed);
                }
            });
            return if failed.into_inner() {
                Err(KernelError::Buffer { op: OP })
            } else {
                Ok(())
            };
        }
        let y = yg.as_mut_ptr();
        for b in 0..bands {
            one(b, staged, y)?;
        }
        return Ok(());
    }
    let src: &[f32] = if l.in_place {
        xg
    } else {
        #[cfg(feature = "std")]
        if parallel && g.cg >= threads {
            // Staged a run of input channels per thread first (one core
            // copying PP-OCRv6 rec's 48×24×160 stem input kept the other
            // waiting), then the segments below.
            let per = g.cg.div_ceil(threads);
            let total = staged.len();
            let parts = crate::threads::SharedMut::new(staged);
            let failed = core::sync::atomic::AtomicBool::new(false);
            crate::threads::run(g.cg.div_ceil(per), &mut [], &|t, _| {
                let channels = t * per..((t + 1) * per).min(g.cg);
                let start = channels.start * l.plane;
                let len = if channels.end == g.cg {
                    total - start
                } else {
                    channels.len() * l.plane
                };
                // SAFETY: task t alone writes its channels' planes (the
                // last task also the slack after them), disjoint ranges
                // of the staged buffer; `run` returns after every task.
                let part = unsafe { parts.range(start, len) };
                if stage_channels(strides, g, &l, xg, part, 0, channels).is_err() {
                    failed.store(true, core::sync::atomic::Ordering::Relaxed);
                }
            });
            if failed.into_inner() {
                return Err(KernelError::Buffer { op: OP });
            }
        } else {
            stage(strides, g, &l, xg, staged, 0)?;
        }
        #[cfg(not(feature = "std"))]
        stage(strides, g, &l, xg, staged, 0)?;
        staged
    };
    #[cfg(feature = "std")]
    if parallel {
        // A few segments per thread, so an uneven split evens out. The
        // last-tile panel is used only by the task holding the last
        // segment.
        let per = l.segments.div_ceil(2 * threads);
        let shared = crate::threads::SharedMut::new(yg);
        let panel = crate::threads::SharedMut::new(panel);
        crate::threads::run(l.segments.div_ceil(per), &mut [], &|t, _| {
            let range = t * per..((t + 1) * per).min(l.segments);
            // SAFETY: task t writes only the output columns of its own
            // segments (in every row of `yg`), the panel only when it
            // holds the last segment, and `run` returns after every task.
            unsafe { job.segments(src, 0, range, shared.as_ptr(), panel.as_ptr()) };
        });
        return Ok(());
    }
    // SAFETY: one task owns all of `yg` and `panel`.
    unsafe { job.segments(src, 0, 0..l.segments, yg.as_mut_ptr(), panel.as_mut_ptr()) };
    Ok(())
}

/// Everything a task needs to compute segments.
struct Job<'j> {
    g: &'j ConvGeom,
    l: &'j Layout,
    /// Rows per register tile (see [`tile_rows`]).
    tm: usize,
    a: &'j [f32],
    taps: &'j [u32],
    ident: &'j [u32],
    /// The group's bias (`mg` floats), or none.
    bias: Option<&'j [f32]>,
    /// The tiles store each sum's `Relu`.
    relu: bool,
    epilogue: Option<Epilogue<'j>>,
}

/// Start of every output row of a convolution without bias.
const ZEROS: [f32; TILE_M] = [0.0; TILE_M];

impl Job<'_> {
    /// The start values of the rows of tile `t` (its bias, or zeros).
    fn init(&self, t: usize) -> *const f32 {
        match self.bias {
            Some(b) => b[t * self.tm..].as_ptr(),
            None => ZEROS.as_ptr(),
        }
    }

    /// Computes the output segments in `range` into `y` (`mg × ohw`),
    /// reading `src` (the input in place, or the staged band that starts
    /// at segment `first`).
    ///
    /// # Safety
    /// `y` holds `mg × ohw` floats and no one else touches the columns of
    /// these segments meanwhile; `src` is the staged band holding these
    /// segments' inputs (or the input in place); `panel` holds `k × TILE_N`
    /// floats when the input is in place and the range holds the last
    /// segment, and no one else uses it meanwhile.
    unsafe fn segments(
        &self,
        src: &[f32],
        first: usize,
        range: core::ops::Range<usize>,
        y: *mut f32,
        panel: *mut f32,
    ) {
        let (g, l) = (self.g, self.l);
        if l.flat {
            // SAFETY: the caller's contract.
            return unsafe { self.flat_segments(src, first, range, y) };
        }
        let (k, mg, ohw) = (g.k(), g.mg, g.ohw());
        for s in range {
            let col0 = s * l.seg_w;
            let width = l.seg_w.min(ohw - col0);
            // Offset of this segment's first input column in `src`.
            let base = if l.in_place {
                col0
            } else {
                (s - first) * l.seg_step
            };
            let mut j0 = 0;
            if l.row_major && self.wide() {
                // Row tile by row tile over the segment's whole 32-column
                // steps (see `Layout::row_major`), then the rest below.
                let wide_cols = width / (2 * TILE_N) * (2 * TILE_N);
                for t in 0..mg.div_ceil(self.tm) {
                    for j in (0..wide_cols).step_by(2 * TILE_N) {
                        // SAFETY: read in place (`row_major` implies it):
                        // every tap plus col0 + j + 32 <= col0 + width <=
                        // ohw, the plane, stays inside `src`; the tile's
                        // columns are this segment's, ours.
                        unsafe {
                            self.wide_tiles(src.as_ptr().add(base + j), y.add(col0 + j), t..t + 1)
                        };
                    }
                }
                j0 = wide_cols;
            }
            while j0 < width {
                // 32 columns at a time with the wide AVX-512 tile while
                // they fit (read in place, only inside the plane).
                if self.wide()
                    && width - j0 >= 2 * TILE_N
                    && !(l.in_place && base + j0 + 2 * TILE_N > l.plane)
                {
                    // SAFETY: as for the 16-column tiles below, over 32
                    // columns: every tap plus base + j0 + 32 stays inside
                    // `src` (a staged row's columns, or checked just above).
                    unsafe {
                        self.wide_tiles(
                            src.as_ptr().add(base + j0),
                            y.add(col0 + j0),
                            0..mg.div_ceil(self.tm),
                        )
                    };
                    j0 += 2 * TILE_N;
                    continue;
                }
                let w = TILE_N.min(width - j0);
                // The in-place input has no slack after its last column
                // (the last tap reads the last plane).
                let overruns = l.in_place && base + j0 + TILE_N > l.plane;
                let (bsrc, boffs): (*const f32, &[u32]) = if overruns {
                    // SAFETY: `panel` holds k·TILE_N floats, exclusively
                    // ours (the caller's contract: this is the last segment).
                    let pan = unsafe { core::slice::from_raw_parts_mut(panel, k * TILE_N) };
                    for (p, row) in pan.chunks_exact_mut(TILE_N).enumerate() {
                        let start = self.taps[p] as usize + base + j0;
                        row[..w].copy_from_slice(&src[start..start + w]);
                        row[w..].fill(0.0);
                    }
                    (panel as *const f32, self.ident)
                } else {
                    // SAFETY: every tap plus base + j0 + TILE_N stays inside
                    // `src` (the staged slack, or checked just above).
                    (unsafe { src.as_ptr().add(base + j0) }, self.taps)
                };
                let tm = self.tm;
                for t in 0..mg.div_ceil(tm) {
                    let h = tm.min(mg - t * tm);
                    let ap = &self.a[t * k * tm..][..k * tm];
                    let c0 = t * tm * ohw + col0 + j0;
                    if w == TILE_N {
                        // SAFETY: the h × 16 tile at c0 (row stride ohw) is
                        // inside `y` and in this task's columns; every tap
                        // reads TILE_N floats inside `src` (see above).
                        unsafe {
                            tile(
                                tm,
                                h,
                                k,
                                ap.as_ptr(),
                                bsrc,
                                boffs.as_ptr(),
                                y.add(c0),
                                ohw,
                                self.init(t),
                                self.relu,
                                t == 0,
                            )
                        };
                    } else {
                        let mut part = [0f32; TILE_M * TILE_N];
                        // SAFETY: as above, into the local tile.
                        unsafe {
                            tile(
                                tm,
                                h,
                                k,
                                ap.as_ptr(),
                                bsrc,
                                boffs.as_ptr(),
                                part.as_mut_ptr(),
                                TILE_N,
                                self.init(t),
                                self.relu,
                                false,
                            )
                        };
                        for i in 0..h {
                            // SAFETY: row t·tm + i, columns c0..c0 + w:
                            // inside `y`, in this task's columns.
                            let dst =
                                unsafe { core::slice::from_raw_parts_mut(y.add(c0 + i * ohw), w) };
                            for (d, &v) in dst.iter_mut().zip(&part[i * TILE_N..]) {
                                *d = v;
                            }
                        }
                    }
                }
                j0 += TILE_N;
            }
            // SAFETY: this segment's columns of every row: finished, ours.
            unsafe { self.finish(y, col0, width) };
        }
    }

    /// The epilogue over columns `col0..col0 + width` of every output row
    /// (channel) of `y` (`mg × ohw`): once over all of `y` when that is
    /// every column (the rows are then one run; the epilogue does not
    /// depend on the channel, the bias being in the tiles), else row by
    /// row (a call per row was a noticeable share of a small classifier
    /// whose late planes are a few dozen outputs).
    ///
    /// # Safety
    /// Those columns of every row are finished and no one else touches
    /// them meanwhile.
    pub(super) unsafe fn finish(&self, y: *mut f32, col0: usize, width: usize) {
        let Some(f) = self.epilogue else { return };
        let (mg, ohw) = (self.g.mg, self.g.ohw());
        if width == ohw {
            // SAFETY: all of `y` (mg × ohw floats), ours (the caller's
            // contract).
            return f(unsafe { core::slice::from_raw_parts_mut(y, mg * ohw) }, 0);
        }
        for m in 0..mg {
            let at = m * ohw + col0;
            // SAFETY: row m, these columns (the caller's contract).
            f(
                unsafe { core::slice::from_raw_parts_mut(y.add(at), width) },
                at,
            );
        }
    }
}

/// The register tile of `h` rows over packed weights (`k` steps of `tm`
/// floats), started from `init` (`h` floats) and stored (its `Relu` with
/// `relu`), prefetching on request (the first row of tiles of a column
/// does); only reached when [`applies`].
///
/// # Safety
/// As [`crate::ops::gemm::rows::tile`].
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    tm: usize,
    h: usize,
    k: usize,
    a: *const f32,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
    init: *const f32,
    relu: bool,
    prefetch: bool,
) {
    // SAFETY: the caller's contract.
    unsafe {
        crate::ops::gemm::rows::tile(tm, h, k, a, 1, tm, x, offs, c, ldc, init, relu, prefetch)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests;
