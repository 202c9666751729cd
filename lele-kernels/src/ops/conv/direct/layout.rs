//! How the direct path lays its input out for the tiles ([`Layout`]): read
//! in place or staged as phase planes, flat or by rows, whole or in bands,
//! and the order of an in-place segment's tiles.
#[cfg(all(test, feature = "std"))]
use super::{BAND_ROWS, ROW_MAJOR};
use super::{ConvGeom, TILE_N};

/// Most input channels of an in-place convolution whose segments run row
/// tile by row tile ([`Layout::row_major`]): 48 take 48 KiB of a
/// 256-column segment's input, which each row tile reads again. Row tile
/// by row tile beat column step by column step on 1×1 convolutions of 12
/// to 48 input channels at 160² and 320², and lost slightly at 80² with 48
/// or 96 input channels.
pub(super) const ROW_MAJOR_K_MAX: usize = 48;

/// Whether an in-place 1×1 convolution runs its segments row tile by row
/// tile ([`Layout::row_major`]): at most [`ROW_MAJOR_K_MAX`] input
/// channels and output rows that crowd L1's sets.
pub(super) fn row_major(g: &ConvGeom) -> bool {
    #[cfg(all(test, feature = "std"))]
    if let Some(forced) = ROW_MAJOR.with(|f| f.get()) {
        return forced;
    }
    g.cg <= ROW_MAJOR_K_MAX && crowds_l1(g.oh * g.ow, g.mg)
}

/// Whether `rows` rows `stride` floats apart, 32 floats of each (a wide
/// tile's columns: two or three cache lines), put more than 8 lines into
/// one of L1's 64 sets (two thirds of a 12-way, 48 KiB L1). A stride that
/// is a multiple of 1024 floats puts every row into the same sets: a lone
/// 4→64 1×1 convolution at 160² ran several times slower column step by
/// column step than at 160×161, and row tile by row tile recovered most
/// of the difference.
pub(super) fn crowds_l1(stride: usize, rows: usize) -> bool {
    const SETS: usize = 64;
    let mut lines = [0usize; SETS];
    for r in 0..rows {
        // Row r's first byte modulo 4096 (the sets repeat every 4 KiB),
        // without forming r·stride·4 (it may not fit a 32-bit usize).
        let start = (r % 1024) * (stride % 1024) % 1024 * 4;
        let (first, last) = (start / 64, (start + 4 * 2 * TILE_N - 1) / 64);
        for line in first..=last {
            lines[line % SETS] += 1;
            if lines[line % SETS] > 8 {
                return true;
            }
        }
    }
    false
}

/// Columns per segment when the input is read in place.
pub(super) const FLAT_SEGMENT: usize = 16 * TILE_N;
/// Floats of zeros after the staged planes: the last flat tile's lanes
/// past the output read up to 31 floats beyond the last plane.
pub(super) const STAGE_SLACK: usize = 2 * TILE_N;
/// Floats of staged input per band (see [`Layout::banded`]): about a
/// third of a 512 KiB L2, so the band stays there while its rows are
/// computed.
pub(super) const BAND_FLOATS: usize = 48 * 1024;

/// How the input is laid out for the tiles.
#[derive(Clone, Copy, Debug)]
pub(in crate::ops::conv) struct Layout {
    /// The input is read in place (1×1, stride 1, no padding).
    pub(in crate::ops::conv) in_place: bool,
    /// Read in place, and the wide tiles of a segment run row tile by row
    /// tile (each over all the segment's 32-column steps) instead of
    /// column step by column step: the output rows, a plane apart, crowd
    /// L1's sets ([`crowds_l1`]), so that a column step's tiles over every
    /// row each store lines into the same few sets, evicting lines still
    /// waiting for their stores; row by row, a tile's next step stores into
    /// the next sets. Only over few input channels ([`ROW_MAJOR_K_MAX`]),
    /// whose segment input each row tile then reads again from L1.
    pub(super) row_major: bool,
    /// Tiles run over the staged phase rows back to back, each 16
    /// consecutive staged positions, the padding columns between output
    /// rows computed and dropped: chosen when that wastes fewer lanes than
    /// tiles over each output row (rows not a multiple of 16 wide: a
    /// 20-wide row fills 20 of 32 lanes row by row, 20 of 22 flat).
    pub(in crate::ops::conv) flat: bool,
    /// The strides `[sh, sw]`: the staged phase planes per channel.
    pub(super) phases: [usize; 2],
    /// Floats per staged channel (all its phase planes).
    pub(in crate::ops::conv) plane: usize,
    /// Floats per row of a phase plane: also the distance between the
    /// inputs of consecutive output rows.
    pub(in crate::ops::conv) phase_w: usize,
    /// Rows per phase plane (of one band).
    pub(super) phase_rows: usize,
    /// Padded input rows per band.
    pub(super) rows: usize,
    /// Padded input rows the whole output needs.
    pub(super) total_rows: usize,
    /// Output rows (segments) per staged band.
    pub(super) band: usize,
    /// Output segments and their width.
    pub(super) segments: usize,
    pub(super) seg_w: usize,
    /// Floats of `src` between the first inputs of consecutive segments
    /// (0 when in place: segments are then column ranges of one row).
    pub(super) seg_step: usize,
}

impl Layout {
    pub(in crate::ops::conv) fn new(
        strides: [usize; 2],
        dilations: [usize; 2],
        g: &ConvGeom,
    ) -> Self {
        let [sh, sw] = strides;
        let [dh, dw] = dilations;
        let in_place = g.kh == 1
            && g.kw == 1
            && strides == [1, 1]
            && g.pt == 0
            && g.pl == 0
            && g.oh == g.x.h
            && g.ow == g.x.w;
        if in_place {
            let ohw = g.oh * g.ow;
            return Layout {
                in_place,
                row_major: row_major(g),
                flat: false,
                phases: [1, 1],
                plane: g.x.h * g.x.w,
                phase_w: 0,
                phase_rows: 0,
                rows: 0,
                total_rows: 0,
                band: ohw.div_ceil(FLAT_SEGMENT),
                segments: ohw.div_ceil(FLAT_SEGMENT),
                seg_w: FLAT_SEGMENT,
                seg_step: 0,
            };
        }
        let rows = (g.oh - 1) * sh + (g.kh - 1) * dh + 1;
        let cols = (g.ow - 1) * sw + (g.kw - 1) * dw + 1;
        let phase_w = cols.div_ceil(sw);
        let phase_rows = rows.div_ceil(sh);
        Layout {
            in_place,
            row_major: false,
            flat: phase_w < g.ow.next_multiple_of(TILE_N),
            phases: strides,
            plane: sh * sw * phase_rows * phase_w,
            phase_w,
            phase_rows,
            rows,
            total_rows: rows,
            band: g.oh,
            segments: g.oh,
            seg_w: g.ow,
            seg_step: phase_w,
        }
    }

    /// Offset of tap `(c, ki, kj)` in the staged band: where the input of
    /// the band's first output (row and column 0) for that tap is.
    pub(in crate::ops::conv) fn tap(
        &self,
        c: usize,
        ki: usize,
        kj: usize,
        dilations: [usize; 2],
    ) -> usize {
        let [sh, sw] = self.phases;
        let (r, q) = (ki * dilations[0], kj * dilations[1]);
        let phase = (r % sh) * sw + q % sw;
        c * self.plane + phase * self.phase_rows * self.phase_w + (r / sh) * self.phase_w + q / sw
    }

    /// Floats per channel of a band of `rows` padded input rows.
    pub(super) fn plane_of(&self, rows: usize) -> usize {
        let [sh, sw] = self.phases;
        sh * sw * rows.div_ceil(sh) * self.phase_w
    }

    /// The layout staged in bands of output rows, each band's input rows
    /// (all channels) under [`BAND_FLOATS`] when a band of one row fits,
    /// else up to a worker's scratch: staging the whole input first left
    /// it in L3 or memory by the time the tiles read it (48 input streams
    /// for a 16-channel 3×3 convolution defeat the prefetchers). Whole when
    /// in place or when even one row is too big.
    pub(in crate::ops::conv) fn banded(
        self,
        strides: [usize; 2],
        dilations: [usize; 2],
        g: &ConvGeom,
    ) -> Self {
        if self.in_place || g.oh == 0 {
            return self;
        }
        let (sh, dh) = (strides[0], dilations[0]);
        let floats = |band: usize| g.cg * self.with_band(band, sh, dh, g).plane + STAGE_SLACK;
        // A worker's scratch (the same number with or without `std`, so
        // the build machine and the target agree on the layout).
        let limit = crate::ops::gemm::MAX_SCRATCH;
        #[cfg(all(test, feature = "std"))]
        if let Some(band) = BAND_ROWS.with(|f| f.get()) {
            return self.with_band(band.clamp(1, g.oh), sh, dh, g);
        }
        let band = if floats(1) > BAND_FLOATS.max(limit) {
            g.oh
        } else {
            // The largest band under the budget (at least one row).
            // One more output row: one more row in every phase plane.
            let per_row = g.cg * self.plane_of(sh);
            let spare = BAND_FLOATS.saturating_sub(floats(1));
            (1 + spare / per_row.max(1)).min(g.oh)
        };
        self.with_band(band, sh, dh, g)
    }

    /// The layout staged in bands of `band` output rows (row stride `sh`,
    /// row dilation `dh`).
    pub(super) fn with_band(self, band: usize, sh: usize, dh: usize, g: &ConvGeom) -> Self {
        let rows = (band - 1) * sh + (g.kh - 1) * dh + 1;
        Layout {
            rows,
            phase_rows: rows.div_ceil(sh),
            plane: self.plane_of(rows),
            band,
            ..self
        }
    }

    /// A banded layout with its bands evened out over `threads` (as many
    /// bands, rounded up to a multiple of the threads, of equal height):
    /// the largest bands under the budget can leave one thread a short
    /// band (20 rows in bands of 15: 15 and 5). Smaller bands stage less,
    /// so they fit where the planned ones do.
    pub(super) fn balanced(
        self,
        threads: usize,
        strides: [usize; 2],
        dilations: [usize; 2],
        g: &ConvGeom,
    ) -> Self {
        let bands = self.bands();
        if self.in_place || bands <= 1 || threads <= 1 {
            return self;
        }
        let band = g.oh.div_ceil(bands.next_multiple_of(threads));
        self.with_band(band, strides[0], dilations[0], g)
    }

    /// Bands of output rows (1 when staged whole or read in place).
    pub(super) fn bands(&self) -> usize {
        self.segments.div_ceil(self.band)
    }

    /// Floats of staged input (with slack for the last tile's overrun).
    pub(in crate::ops::conv) fn staged_len(&self, g: &ConvGeom) -> usize {
        if self.in_place {
            0
        } else {
            g.cg * self.plane + STAGE_SLACK
        }
    }
}
