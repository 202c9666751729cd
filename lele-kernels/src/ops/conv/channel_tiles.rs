//! Strided convolutions with output channels along the vector (AVX-512).
//!
//! The direct path ([`super::direct`]) and the im2col GEMM put output
//! pixels along the vector. At stride 2 that needs the input split into
//! phase planes (or packed as im2col panels) first, a copy of the whole
//! input per call, and rows narrower than the tile waste lanes (a 40-wide
//! output row fills 40 of 64). Here a register tile is 8 output pixels of
//! one row × 16 or 32 output channels, or 6 pixels × 48 channels: per tap
//! the weights of those channels are one to three vectors, and each
//! pixel's input is a single float broadcast from wherever the stride puts
//! it, so the input is read in place whatever the stride and row width.
//! The weight is laid out per call in blocks of up to 48 output channels,
//! tap by tap ([`weights_from_rows`], [`weights_from_panels`]: from a
//! row-major weight or one stored for the
//! GEMM by [`ConvPackedWeights`](super::ConvPackedWeights)), so a tap's
//! weights are one vector load per 16 channels.
//!
//! Taps whose input row lies in the padding are skipped for the whole
//! output row; output columns whose taps reach into the left or right
//! padding are computed one pixel at a time with bounds checks. The tile
//! is then transposed into the `N, C, H, W` output, and the fused tail runs
//! over each finished row segment of one channel.
use super::ConvGeom;
#[cfg(target_arch = "x86_64")]
use crate::ops::gemm::Epilogue;

/// Fewest taps per output taken: below, the transposing store and the
/// partial sums weigh too much (16→32 3×3 s2 at 320², 144 taps, ran
/// slower here than on the direct path).
const MIN_TAPS: usize = 256;
/// Narrowest output row taken: tiles of 8 over rows of 20 leave a quarter
/// of their lanes idle (128→128 3×3 s2 at 40² ran slower here than as the
/// GEMM).
const MIN_ROW: usize = 32;

/// Output channels per vector.
pub(super) const LANES: usize = 16;
/// Output pixels per register tile, most.
const TILE_P: usize = 8;

/// Output pixels per register tile of `vectors` channel vectors: 8, or 6
/// for three vectors (24 accumulators left the compiler short of
/// registers: it kept the broadcasts that neighbouring pixels share at
/// stride 2 and spilled, slowing a 96→48 3×3 s2 layer markedly).
const fn pixels_per_tile(vectors: usize) -> usize {
    if vectors >= 3 { 6 } else { TILE_P }
}

/// Tiles per segment of an output row (their partial sums, 12 KiB at 48
/// channels, stay in L1 between channel chunks).
const SEGMENT_TILES: usize = 8;
/// Taps per channel chunk, about (its weights: 18 KiB at 48 channels).
const CHUNK_TAPS: usize = 96;

/// Whether this path may take a convolution (on a machine with AVX-512):
/// one group, no dilation, a stride above 1 (stride-1 convolutions have
/// Winograd, the direct path and the GEMM), horizontal stride at most 2,
/// output channels filling at least three quarters of whole vectors
/// ([`padded`]), and (unless a test forces it) rows
/// of at least [`MIN_ROW`] and at least [`MIN_TAPS`] taps.
pub(super) fn eligible(
    strides: [usize; 2],
    dilations: [usize; 2],
    group: usize,
    g: &ConvGeom,
) -> bool {
    #[cfg(all(test, feature = "std"))]
    let forced = FORCE.with(|f| f.get());
    #[cfg(not(all(test, feature = "std")))]
    let forced = false;
    group == 1
        && dilations == [1, 1]
        && strides != [1, 1]
        && (1..=2).contains(&strides[1])
        && g.mg > 0
        && 4 * g.mg >= 3 * padded(g.mg)
        && g.ow >= TILE_P
        && g.k() > 0
        && (forced || (g.ow >= MIN_ROW && g.k() >= MIN_TAPS))
}

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to keep this path off on their thread (to test the
    /// paths it would take over).
    pub(super) static OFF: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Set by tests to take shapes below the size thresholds.
    pub(super) static FORCE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether this machine runs a convolution here ([`eligible`] and
/// AVX-512).
pub(super) fn applies(
    strides: [usize; 2],
    dilations: [usize; 2],
    group: usize,
    g: &ConvGeom,
) -> bool {
    #[cfg(all(test, feature = "std"))]
    if OFF.with(|f| f.get()) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::gemm::{Isa, best_isa};
        matches!(best_isa(), Isa::Avx512) && eligible(strides, dilations, group, g)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (strides, dilations, group, g);
        false
    }
}

/// Most output channels per weight block (three vectors).
const BLOCK: usize = 3 * LANES;

/// Output channels the weight blocks hold for `m` channels: `m` rounded up
/// to whole vectors (the channels past `m` have zero weights and are
/// neither stored nor finished). [`eligible`] takes counts that fill at
/// least three quarters of those lanes: a 48→24 3×3 s2 layer at 240² runs
/// 24 channels in a 32-lane block, still faster than the direct path,
/// which stages the input as phase planes.
pub(super) fn padded(m: usize) -> usize {
    m.next_multiple_of(LANES)
}

/// Vectors in the weight block that starts `left` vectors before the end
/// of the output channels: two, except that an odd count starts with a
/// block of three (and a lone vector stays one). A one-vector block runs
/// 9 loads for 8 multiply-adds a tap, short of the multiply-add rate;
/// three vectors by 6 pixels are 18 accumulators fed by 9 loads (48
/// channels ran faster as one block of three than as a block of 32 and
/// one of 16). Even counts keep blocks of two: three-vector blocks
/// measured no better on 128- and 256-channel layers.
fn block_vectors(left: usize) -> usize {
    if left % 2 == 1 { left.min(3) } else { 2 }
}

/// The weight blocks of `m` output channels, padded to whole vectors
/// ([`padded`]): each block's first channel and its count of vectors.
fn blocks(m: usize) -> impl Iterator<Item = (usize, usize)> {
    let m = padded(m);
    let mut c0 = 0;
    core::iter::from_fn(move || {
        if c0 >= m {
            return None;
        }
        let vectors = block_vectors((m - c0) / LANES);
        let block = (c0, vectors);
        c0 += vectors * LANES;
        Some(block)
    })
}

/// Element `(i, t)` (channel `i`, tap `t`) of an `m × k` weight laid out in
/// blocks ([`blocks`]): a block starting at channel `c0` starts at `c0·k`
/// and holds its channels for each tap in turn.
#[cfg(test)]
fn block_index(m: usize, k: usize, i: usize, t: usize) -> usize {
    let (start, vectors) = blocks(m)
        .find(|&(c0, v)| (c0..c0 + v * LANES).contains(&i))
        .expect("channel inside the weight");
    start * k + t * vectors * LANES + (i - start)
}

/// Lays a row-major `m × k` weight out in blocks of [`padded`]`(m)`
/// channels (`dst` holds that many times `k`, the channels past `m` zero):
/// with AVX-512, sixteen channels by sixteen taps at a
/// time through a register transpose ([`x86::weights_from_rows`]; the
/// per-element copy was a noticeable share of a 96→48 3×3 s2 layer, before
/// its rows split over the threads), else [`weights_from_rows_copy`].
pub(super) fn weights_from_rows(w: &[f32], m: usize, k: usize, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::ops::gemm::best_isa() == crate::ops::gemm::Isa::Avx512
        && w.len() >= m * k
        && dst.len() >= padded(m) * k
    {
        // SAFETY: AVX-512F was detected; `w` holds m·k floats, `dst`
        // padded(m)·k.
        return unsafe { x86::weights_from_rows(w, m, k, dst) };
    }
    weights_from_rows_copy(w, m, k, dst);
}

/// [`weights_from_rows`] element by element: a transpose per block, done a
/// run of taps at a time so that the run's part of the block stays in L1
/// while every row of the block writes into it (row by row over the whole
/// depth, each row's writes evicted the last row's lines, a noticeable
/// share of a 96→48 3×3 s2 layer).
fn weights_from_rows_copy(w: &[f32], m: usize, k: usize, dst: &mut [f32]) {
    const TAPS: usize = 64;
    for (start, vectors) in blocks(m) {
        let width = vectors * LANES;
        let block = &mut dst[start * k..][..width * k];
        for t0 in (0..k).step_by(TAPS) {
            let t1 = (t0 + TAPS).min(k);
            for j in 0..width {
                if start + j >= m {
                    for t in t0..t1 {
                        block[t * width + j] = 0.0;
                    }
                    continue;
                }
                let row = &w[(start + j) * k..][t0..t1];
                for (t, &v) in (t0..t1).zip(row) {
                    block[t * width + j] = v;
                }
            }
        }
    }
}

/// Lays an `m × k` weight stored as [`PanelsA`](crate::ops::gemm::PanelsA)
/// out in blocks of [`padded`]`(m)` channels (`dst` holds that many times
/// `k`): each tap's 8 floats of a panel are 8 consecutive floats of the
/// tap in a block; past the panels (rows past `m` in the last panel are
/// zero already), zeros.
pub(super) fn weights_from_panels(panels: &[f32], m: usize, k: usize, dst: &mut [f32]) {
    use crate::ops::gemm::A_PANEL;
    for (start, vectors) in blocks(m) {
        let width = vectors * LANES;
        let block = &mut dst[start * k..][..width * k];
        // Blocks start at multiples of 16, so whole panels of 8 fill them;
        // the panel of channels `first..first + 8` starts at `first·k`.
        for first in (start..start + width).step_by(A_PANEL) {
            if first >= m {
                for rows in block.chunks_exact_mut(width) {
                    rows[first - start..][..A_PANEL].fill(0.0);
                }
                continue;
            }
            let panel = &panels[first * k..][..A_PANEL * k];
            for (t, rows) in panel.chunks_exact(A_PANEL).enumerate() {
                block[t * width + first - start..][..A_PANEL].copy_from_slice(rows);
            }
        }
    }
}

/// One image's convolution: `x` (`C, H, W`), the weight laid out in
/// blocks ([`padded`]`(mg) × k`, see [`weights_from_rows`]), the bias, the
/// output `y` (`mg, oh, ow`) and the fused tail (called with each channel's
/// finished row segment and its offset in `y`). The caller checked
/// [`applies`] and the buffer lengths.
#[cfg(target_arch = "x86_64")]
pub(super) fn run(
    strides: [usize; 2],
    g: &ConvGeom,
    x: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    tail: Option<Epilogue<'_>>,
) {
    let geo = Geo {
        c: g.cg,
        h: g.x.h,
        w: g.x.w,
        kh: g.kh,
        kw: g.kw,
        sh: strides[0],
        pt: g.pt,
        pl: g.pl,
        oh: g.oh,
        ow: g.ow,
        k: g.k(),
    };
    let ohw = g.oh * g.ow;
    // `out`: the start of `y`, whose length matches the geometry; `sums`:
    // the caller's buffer of partial sums (one per thread, zeroed once per
    // layer rather than per row and block: 8 KiB cleared per call was a
    // measurable cost on large strided layers).
    let row = |(c0, vectors): (usize, usize), oy: usize, out: *mut f32, sums: &mut PartialSums| {
        // SAFETY: AVX-512F was detected ([`applies`]); the lengths of `x`,
        // `weights` and `y` match the geometry (checked by the caller), and
        // each (block, row) pair writes only its own channels' row `oy`.
        unsafe {
            // Kernel widths 1 to 3 unrolled (much faster than a loop over
            // the taps of a row), others looped.
            macro_rules! widths {
                ($v:literal, $sw:literal) => {{
                    const P: usize = pixels_per_tile($v);
                    match g.kw {
                        3 => x86::block_row::<$v, P, $sw, 3>(
                            &geo, x, weights, bias, c0, g.mg, oy, out, sums,
                        ),
                        2 => x86::block_row::<$v, P, $sw, 2>(
                            &geo, x, weights, bias, c0, g.mg, oy, out, sums,
                        ),
                        1 => x86::block_row::<$v, P, $sw, 1>(
                            &geo, x, weights, bias, c0, g.mg, oy, out, sums,
                        ),
                        _ => x86::block_row::<$v, P, $sw, 0>(
                            &geo, x, weights, bias, c0, g.mg, oy, out, sums,
                        ),
                    }
                }};
            }
            match (vectors, strides[1]) {
                (3, 2) => widths!(3, 2),
                (3, _) => widths!(3, 1),
                (2, 2) => widths!(2, 2),
                (2, _) => widths!(2, 1),
                (_, 2) => widths!(1, 2),
                _ => widths!(1, 1),
            }
        }
        if let Some(tail) = tail {
            for c in c0..(c0 + vectors * LANES).min(g.mg) {
                let at = c * ohw + oy * g.ow;
                // SAFETY: this channel's row `oy` is inside `y` and belongs
                // to this call only.
                tail(
                    unsafe { core::slice::from_raw_parts_mut(out.add(at), g.ow) },
                    at,
                );
            }
        }
    };
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        if threads > 1 && g.oh >= 2 && g.mg * ohw * g.k() >= 1 << 18 {
            // One run of rows per thread, each over every block (four runs
            // per thread, claimed as they came, were markedly slower on a
            // 96→48 3×3 stride-2 layer in the model, and no faster on
            // larger ones).
            let per = g.oh.div_ceil(threads);
            let shared = crate::threads::SharedMut::new(y);
            crate::threads::run(g.oh.div_ceil(per), &mut [], &|t, _| {
                let mut sums = PartialSums::new();
                for oy in t * per..((t + 1) * per).min(g.oh) {
                    for block in blocks(g.mg) {
                        row(block, oy, shared.as_ptr(), &mut sums);
                    }
                }
            });
            return;
        }
    }
    let out = y.as_mut_ptr();
    let mut sums = PartialSums::new();
    for oy in 0..g.oh {
        for block in blocks(g.mg) {
            row(block, oy, out, &mut sums);
        }
    }
}

/// A row segment's partial sums between channel chunks (pixel-major, up
/// to [`SEGMENT_TILES`] tiles of [`TILE_P`] pixels × [`BLOCK`] channels).
#[cfg(target_arch = "x86_64")]
struct PartialSums([f32; SEGMENT_TILES * TILE_P * BLOCK]);

#[cfg(target_arch = "x86_64")]
impl PartialSums {
    fn new() -> Self {
        PartialSums([0.0; SEGMENT_TILES * TILE_P * BLOCK])
    }
}

/// The geometry the tiles need.
#[derive(Clone, Copy)]
struct Geo {
    c: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    pt: usize,
    pl: usize,
    oh: usize,
    ow: usize,
    /// Taps per output (`c · kh · kw`).
    k: usize,
}

impl Geo {
    /// The kernel rows whose input row is inside the image for output row
    /// `oy`.
    fn rows(&self, oy: usize) -> core::ops::Range<usize> {
        let top = oy * self.sh;
        let lo = self.pt.saturating_sub(top).min(self.kh);
        let hi = (self.h + self.pt).saturating_sub(top).min(self.kh);
        lo..hi.max(lo)
    }

    /// Output columns `lo..hi` whose every tap lies inside the input row.
    fn inner_cols(&self, sw: usize) -> core::ops::Range<usize> {
        let lo = self.pl.div_ceil(sw).min(self.ow);
        let hi = match (self.w + self.pl).checked_sub(self.kw) {
            Some(span) => (span / sw + 1).min(self.ow),
            None => 0,
        };
        lo..hi.max(lo)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHUNK_TAPS, Geo, LANES, SEGMENT_TILES};
    use core::arch::x86_64::*;

    /// The weight vector of channels `16v..16v + 16` of a block at tap `t`
    /// (`w` the block's weights, `16·V` floats per tap).
    ///
    /// # Safety
    /// AVX-512F; the block holds tap `t` (`t < k`) and `v < V`.
    #[inline(always)]
    unsafe fn weights<const V: usize>(w: *const f32, v: usize, t: usize) -> __m512 {
        // SAFETY: the caller guarantees the tap and vector exist.
        unsafe { _mm512_loadu_ps(w.add(t * V * LANES + v * LANES)) }
    }

    /// Output row `oy` of channels `c0..c0 + 16·V` (stride `SW` along the
    /// row, kernel width `KW`, or any when 0): tiles of `P` pixels over the
    /// inner columns (the last one overlapping its neighbour, computing the
    /// same values again), single pixels elsewhere. The tiles go in segments of [`SEGMENT_TILES`], each
    /// over the input channels in chunks of about [`CHUNK_TAPS`] taps, the
    /// partial sums kept in a pixel-major buffer between chunks: a chunk's
    /// weights stay in L1 while all tiles of the segment use them, and its
    /// input rows (one page apart per channel) fit the TLB.
    ///
    /// # Safety
    /// AVX-512F; `x` is `c × h × w`, `weights_in_blocks` the weight laid
    /// out in blocks with channels `c0..c0 + 16·V` one block, depth `k`,
    /// `bias` (if any) `mg` long, and `out` points at an output of
    /// `mg × oh × ow` floats whose channels `c0..(c0 + 16·V).min(mg)`, row
    /// `oy`, no other thread touches meanwhile (channels from `mg` on are
    /// computed from zero weights and not stored); `partial` holds
    /// anything (it is written before it is read).
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_row<
        const V: usize,
        const P: usize,
        const SW: usize,
        const KW: usize,
    >(
        geo: &Geo,
        x: &[f32],
        weights_in_blocks: &[f32],
        bias: Option<&[f32]>,
        c0: usize,
        mg: usize,
        oy: usize,
        out: *mut f32,
        partial: &mut super::PartialSums,
    ) {
        let w = weights_in_blocks.as_ptr().wrapping_add(c0 * geo.k);
        // The block's channels that exist.
        let real = (V * LANES).min(mg - c0);
        let mut init = [_mm512_setzero_ps(); V];
        if let Some(b) = bias {
            for (v, lane) in init.iter_mut().enumerate() {
                let n = real.saturating_sub(v * LANES).min(LANES);
                let mask = ((1u32 << n) - 1) as __mmask16;
                // SAFETY: the lanes `mask` keeps are channels below mg,
                // inside the bias (masked-off lanes are not read).
                *lane =
                    unsafe { _mm512_maskz_loadu_ps(mask, b.as_ptr().wrapping_add(c0 + v * LANES)) };
            }
        }
        let inner = geo.inner_cols(SW);
        let ohw = geo.oh * geo.ow;
        let dst = out.wrapping_add(c0 * ohw + oy * geo.ow);
        let per_channel = geo.kh * geo.kw;
        let chunk = (CHUNK_TAPS / per_channel).max(1);
        let sums = &mut partial.0;
        let tile_len = P * V * LANES;
        // SAFETY (all calls below): as this function's contract; tiles stay
        // inside the inner columns, single pixels check every tap.
        unsafe {
            let (columns, tiles) = if inner.len() >= P {
                (inner.clone(), inner.len().div_ceil(P))
            } else {
                (0..0, 0)
            };
            // Tile i starts here (the last one ends at the last inner column).
            let start = |i: usize| (columns.start + i * P).min(columns.end - P);
            for first in (0..tiles).step_by(SEGMENT_TILES) {
                let segment = first..(first + SEGMENT_TILES).min(tiles);
                for c_lo in (0..geo.c).step_by(chunk) {
                    let channels = c_lo..(c_lo + chunk).min(geo.c);
                    for i in segment.clone() {
                        let sum = &mut sums[(i - first) * tile_len..][..tile_len];
                        let from = if c_lo == 0 { None } else { Some(&*sum) };
                        let acc = pixels::<V, P, SW, KW>(
                            geo,
                            x,
                            w,
                            &init,
                            from,
                            channels.clone(),
                            oy,
                            start(i),
                        );
                        keep::<V, P>(&acc, sum);
                    }
                }
                for i in segment.clone() {
                    let sum = &sums[(i - first) * tile_len..][..tile_len];
                    store::<V>(sum, P, real, dst.wrapping_add(start(i)), ohw);
                }
            }
            // Without tiles `columns` is empty: every column goes singly.
            for ox in (0..columns.start).chain(columns.end..geo.ow) {
                pixel::<V>(geo, x, w, &init, oy, ox, SW, sums);
                store::<V>(sums, 1, real, dst.wrapping_add(ox), ohw);
            }
        }
    }

    /// [`super::weights_from_rows`] a 16×16 tile at a time: sixteen
    /// channels' rows of sixteen taps loaded (the last taps masked),
    /// transposed, and stored as sixteen taps' vectors of those channels.
    ///
    /// # Safety
    /// AVX-512F; `w` holds `m·k` floats and `dst` [`super::padded`]`(m)·k`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weights_from_rows(w: &[f32], m: usize, k: usize, dst: &mut [f32]) {
        for (start, vectors) in super::blocks(m) {
            let width = vectors * LANES;
            for v in 0..vectors {
                let c0 = start + v * LANES;
                for t0 in (0..k).step_by(LANES) {
                    let n = LANES.min(k - t0);
                    let mask = ((1u32 << n) - 1) as __mmask16;
                    let mut tile = [_mm512_setzero_ps(); LANES];
                    // Channels from m on (padding) stay zero.
                    for (r, row) in tile.iter_mut().enumerate().take(m.saturating_sub(c0)) {
                        // SAFETY: channel c0 + r < m, taps t0..t0 + n < k:
                        // inside `w` (masked lanes are not read).
                        *row = unsafe {
                            _mm512_maskz_loadu_ps(mask, w.as_ptr().add((c0 + r) * k + t0))
                        };
                    }
                    crate::simd::transpose16(&mut tile);
                    for (i, taps) in tile.iter().take(n).enumerate() {
                        // SAFETY: tap t0 + i < k of the block at start·k,
                        // its vector v: inside the padded(m)·k floats of
                        // `dst`.
                        unsafe {
                            _mm512_storeu_ps(
                                dst.as_mut_ptr()
                                    .add(start * k + (t0 + i) * width + v * LANES),
                                *taps,
                            )
                        };
                    }
                }
            }
        }
    }

    /// Stores a tile's accumulators into `sum` (pixel-major).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn keep<const V: usize, const P: usize>(acc: &[[__m512; V]; P], sum: &mut [f32]) {
        for (i, acc) in acc.iter().enumerate() {
            for (v, a) in acc.iter().enumerate() {
                let at = &mut sum[(i * V + v) * LANES..][..LANES];
                // SAFETY: `at` holds 16 floats.
                unsafe { _mm512_storeu_ps(at.as_mut_ptr(), *a) };
            }
        }
    }

    /// Writes `p` pixels × the first `channels` (at most `16·V`) channels
    /// of `tile` (pixel-major, `16·V` channels a pixel) to the
    /// channel-major output at `dst` (channel stride `ohw`).
    ///
    /// # Safety
    /// `dst + c·ohw + i` is writable for every channel `c < channels`,
    /// `i < p`.
    #[inline(always)]
    unsafe fn store<const V: usize>(
        tile: &[f32],
        p: usize,
        channels: usize,
        dst: *mut f32,
        ohw: usize,
    ) {
        for c in 0..channels.min(V * LANES) {
            for i in 0..p {
                // SAFETY: the caller guarantees the range.
                unsafe { *dst.add(c * ohw + i) = tile[i * V * LANES + c] };
            }
        }
    }

    /// The 8 pixels `x0..x0 + 8` of output row `oy` over the input
    /// channels `channels` (all taps inside the input), starting from the
    /// partial sums `from` (pixel-major) or, without them, from `init`.
    ///
    /// # Safety
    /// AVX-512F; the pixels are inner columns; `w` as in [`block_row`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pixels<const V: usize, const P: usize, const SW: usize, const KW: usize>(
        geo: &Geo,
        x: &[f32],
        w: *const f32,
        init: &[__m512; V],
        from: Option<&[f32]>,
        channels: core::ops::Range<usize>,
        oy: usize,
        x0: usize,
    ) -> [[__m512; V]; P] {
        let mut acc = [*init; P];
        if let Some(from) = from {
            for (i, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = &from[(i * V + v) * LANES..][..LANES];
                    // SAFETY: `at` holds 16 floats.
                    *a = unsafe { _mm512_loadu_ps(at.as_ptr()) };
                }
            }
        }
        let plane = geo.h * geo.w;
        // The input column of pixel x0's first tap (x0 is an inner column,
        // so it is inside the row).
        let col = x0 * SW - geo.pl;
        // The kernel width: `KW`, unless 0 (then looped over).
        let kw = if KW == 0 { geo.kw } else { KW };
        for ci in channels {
            for ky in geo.rows(oy) {
                let iy = oy * geo.sh + ky - geo.pt;
                let src = x[ci * plane + iy * geo.w + col..].as_ptr();
                let tap0 = (ci * geo.kh + ky) * kw;
                for kx in 0..kw {
                    let mut wv = [_mm512_setzero_ps(); V];
                    for (v, lane) in wv.iter_mut().enumerate() {
                        // SAFETY: the block has tap `tap0 + kx` and vector v.
                        *lane = unsafe { weights::<V>(w, v, tap0 + kx) };
                    }
                    for (i, acc) in acc.iter_mut().enumerate() {
                        // SAFETY: an inner column's taps are inside its row.
                        let b = _mm512_set1_ps(unsafe { *src.add(i * SW + kx) });
                        for v in 0..V {
                            acc[v] = _mm512_fmadd_ps(wv[v], b, acc[v]);
                        }
                    }
                }
            }
        }
        acc
    }

    /// Output pixel `ox` of row `oy` (stride `sw` along the row), taps
    /// outside the input skipped, into `tile[..16·V]`.
    ///
    /// # Safety
    /// AVX-512F; `w` as in [`block_row`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pixel<const V: usize>(
        geo: &Geo,
        x: &[f32],
        w: *const f32,
        init: &[__m512; V],
        oy: usize,
        ox: usize,
        sw: usize,
        tile: &mut [f32],
    ) {
        let mut acc = *init;
        let plane = geo.h * geo.w;
        for ci in 0..geo.c {
            for ky in geo.rows(oy) {
                let iy = oy * geo.sh + ky - geo.pt;
                let row = &x[ci * plane + iy * geo.w..][..geo.w];
                let tap0 = (ci * geo.kh + ky) * geo.kw;
                for kx in 0..geo.kw {
                    let Some(&value) = (ox * sw + kx)
                        .checked_sub(geo.pl)
                        .and_then(|ix| row.get(ix))
                    else {
                        continue;
                    };
                    let b = _mm512_set1_ps(value);
                    for (v, acc) in acc.iter_mut().enumerate() {
                        // SAFETY: the block has tap `tap0 + kx` and vector v.
                        let wv = unsafe { weights::<V>(w, v, tap0 + kx) };
                        *acc = _mm512_fmadd_ps(wv, b, *acc);
                    }
                }
            }
        }
        for (v, a) in acc.iter().enumerate() {
            // SAFETY: `tile` holds 48 floats or more.
            unsafe { _mm512_storeu_ps(tile.as_mut_ptr().add(v * LANES), *a) };
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests;
