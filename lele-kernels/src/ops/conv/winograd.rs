//! Winograd `F(2×2, 3×3)` and `F(4×4, 3×3)`: dense 3×3 convolutions of
//! stride and dilation one with 16 multiplications per 2×2 outputs (36 per
//! 4×4) and input channel instead of 36 (144).
//!
//! Each `t × t` output tile comes from the `(t + 2) × (t + 2)` input tile
//! `d` under it as `Aᵀ·[Σ_c U_c ⊙ (Bᵀ·d_c·B)]·A`, where `U = G·g·Gᵀ` is the
//! 3×3 kernel `g` transformed (Lavin and Gray's matrices). The weight
//! transform is done at build time ([`ConvWinograd::pack_for`], the tile
//! size from [`ConvWinograd::tile_for`]): one `M × C` matrix per position
//! `(ξ, ν)` of the transform (16 or 36), each in the GEMM's [`PanelsA`]
//! layout. A run takes the tiles in blocks of at most `T`:
//!
//! 1. the input transform writes one `C × T` matrix `V` per position
//!    straight in the GEMM's right-operand panel layout ([`Prepacked`]);
//! 2. the products `U(ξ,ν)·V(ξ,ν)` run through the blocked GEMM;
//! 3. the output transform adds the bias and applies the fused tail
//!    (activation, scalar affine, residual) while writing the outputs.
//!
//! A block's working set (`V` and the products) stays in L2, and blocks are
//! independent, so threads take whole blocks. The transforms are plain
//! loops over 16 or 32 tiles at a time, compiled inside the SIMD layer's
//! dispatch for each vector backend (the data movement over its vectors:
//! `moves.rs`).
//!
//! Rounding differs from the direct sum (the transforms add and subtract
//! inputs before the products), by a few units in the last place of the
//! inputs' magnitude; an infinite input gives NaN where the direct sum
//! would give an infinity.
use alloc::vec::Vec;

use super::{Conv, ConvGeom, Operands, infer_output, nchw};
use crate::error::KernelError;
use crate::kernel::{Kernel, input};
use crate::ops::gemm::prepacked::{PANEL, Prepacked, packed_len};
use crate::ops::gemm::{
    A_PANEL, MatRef, PanelsA, check_f32, pack_a_panels, panels_a_len, scratch_f32, sgemm_panels_a,
    sgemm_scratch_len,
};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

mod moves;
#[cfg(all(test, feature = "std"))]
mod tests;
mod tiles;

use crate::simd::{Simd, SimdKernel, dispatch};
use moves::{Moves, Portable, Vectors, copy_short};
use tiles::{
    kernel_transform, transform_inputs, transform_inputs4, transform_outputs, transform_outputs4,
};

/// Fewest input channels worth the transforms.
pub const MIN_CHANNELS: usize = 32;
/// Fewest input channels for 4×4 tiles ([`ConvWinograd::tile_for`]).
/// From 48 channels 4×4 tiles beat 2×2 ones on one thread, on two and with
/// AVX2. With AVX-512 fewer channels gain too, but with AVX2 they lose,
/// and the tile size is fixed when the weight is transformed, before the
/// machine is known.
pub const TILE4_MIN_CHANNELS: usize = 48;
/// Fewest outputs per plane for 4×4 tiles. Their transformed weight is
/// 36/16 of the 2×2 tiles' (four times the weight itself) and stays in the
/// process's memory, while the time it saves grows with the tiles each
/// weight serves: over small planes it costs more memory than it saves
/// time. With 4×4 tiles everywhere, a detector's 20² convolutions
/// (128→128, 256→64) held several MB of its peak memory for a small share
/// of its time; a 48→192 convolution at 16×40 still gains enough to keep
/// them.
pub const TILE4_MIN_AREA: usize = 512;
/// Most input or output channels taken (a block of one run needs about
/// `512·(C + M)` floats, which must fit a worker's scratch well before).
const MAX_CHANNELS: usize = 1 << 12;
/// Tiles per transform run: whole panels of the GEMM's right operand (a
/// run never straddles a panel), 32 so the transforms work on four AVX2
/// vectors at a time.
const RUN: usize = 32;
const _: () = assert!(RUN.is_multiple_of(PANEL));
/// Floats a staged input row holds: a segment's columns (up to four per
/// tile plus two) and a run of slack for lanes past its end.
const STAGE: usize = 4 * MAX_BLOCK + 4 * RUN + 2;
/// Floats of an output row of a segment, with a run of slack.
const OUT_ROW: usize = 4 * MAX_BLOCK + 4 * RUN;
/// Most transform positions (`F(4×4, 3×3)`'s 6×6).
const MAX_POS: usize = 36;

/// Positions of the transform (products per block) for output tiles of
/// `t × t`: `(t + 2)²`, 16 for `F(2×2, 3×3)` and 36 for `F(4×4, 3×3)`.
const fn positions(t: usize) -> usize {
    (t + 2) * (t + 2)
}

/// The output tile size of a transformed weight with `p` positions.
fn tile_of_positions(p: usize) -> Option<usize> {
    match p {
        16 => Some(2),
        36 => Some(4),
        _ => None,
    }
}
/// Floats of `V` and products a block aims to keep (L2-sized).
const BLOCK_FLOATS: usize = 1 << 17;
/// Floats added between the matrices of a block (one cache line).
const SKEW: usize = 16;
/// Most tiles per block.
const MAX_BLOCK: usize = 8 * RUN;
/// Fewest multiply-adds (of the products) split over threads.
const PARALLEL_MIN_MACS: usize = 1 << 21;

/// [`Conv`] computed by Winograd `F(2×2, 3×3)` or `F(4×4, 3×3)` from a
/// weight transformed by [`ConvWinograd::pack_for`]: a tensor `[16, M',
/// C]` or `[36, M', C]` (`M'` is `M` rounded up to whole panels) holding
/// the sixteen or 36 transformed `M × C` matrices; the first dim tells the
/// tile size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvWinograd {
    /// The convolution (one group, 3×3 kernel, unit strides and dilations).
    pub conv: Conv,
    /// Output channels.
    pub m: usize,
}
crate::to_rust_struct!(ops::conv::ConvWinograd { conv, m });

/// Tiles per block for `c` input and `m` output channels and tiles of
/// `t × t`: a multiple of [`RUN`] whose working set fits [`BLOCK_FLOATS`],
/// at least one run; with 4×4 tiles, whose 36 positions need more per
/// tile, half a run (one panel) where a whole run's block would not fit a
/// worker's scratch (128 input and output channels; blocks of half a run
/// where a run fits were slower).
fn block_tiles(c: usize, m: usize, t: usize) -> usize {
    let per_tile = positions(t) * (c + m);
    let tiles = (BLOCK_FLOATS / per_tile.max(1) / RUN * RUN).clamp(RUN, MAX_BLOCK);
    if t == 4 && tiles == RUN && block_len(c, m, RUN, t) > crate::ops::gemm::MAX_SCRATCH {
        return PANEL;
    }
    tiles
}

/// Floats one block of `tiles` tiles needs: `V`, the products and the
/// GEMM's own scratch.
fn block_len(c: usize, m: usize, tiles: usize, t: usize) -> usize {
    positions(t) * v_stride(c, tiles) + prod_len(m, tiles, t) + sgemm_scratch_len(m, tiles, c)
}

/// Floats between two of a block's sixteen `V` matrices: one cache line
/// more than a matrix, so the sixteen streams a transform writes (or reads)
/// do not all fall in the same L1 set (at 64 channels and 128 tiles they
/// were exactly 32 KiB apart).
fn v_stride(c: usize, tiles: usize) -> usize {
    packed_len(c, tiles) + SKEW
}

/// Floats between two of a block's sixteen products (see [`v_stride`]).
fn prod_stride(m: usize, tiles: usize) -> usize {
    m * tiles + SKEW
}

/// Floats of a block's sixteen `m × tiles` products, plus one run so the
/// output transform reads whole runs in place.
fn prod_len(m: usize, tiles: usize, t: usize) -> usize {
    positions(t) * prod_stride(m, tiles) + RUN
}

impl ConvWinograd {
    /// Whether a convolution with weight dims `dims` (`[M, C, kH, kW]`) runs
    /// this way: one group, a 3×3 kernel, unit strides and dilations, at
    /// least `MIN_CHANNELS` input channels, and a block small enough for
    /// a worker thread's scratch.
    pub fn applies(conv: &Conv, dims: &[usize]) -> bool {
        let &[m, c, 3, 3] = dims else { return false };
        conv.group == 1
            && (conv.kernel == [0, 0] || conv.kernel == [3, 3])
            && conv.strides == [1, 1]
            && conv.dilations == [1, 1]
            && m > 0
            && c >= MIN_CHANNELS
            // Far past what fits (and no arithmetic below can overflow).
            && c.max(m) <= MAX_CHANNELS
            && fits_scratch(c, m, 2)
    }

    /// The output tile size to transform the weight `dims` for, given the
    /// output plane (`oh·ow`) it is expected to see, if known: 4
    /// (`F(4×4, 3×3)`: 36 products per 16 outputs instead of 64, larger
    /// transforms) for at least `TILE4_MIN_CHANNELS` input channels,
    /// unless the plane is known to be smaller than `TILE4_MIN_AREA`, when
    /// its block fits a worker's scratch; else 2 (`F(2×2, 3×3)`).
    pub fn tile_for(dims: &[usize], out_area: Option<usize>) -> usize {
        match dims {
            &[m, c, 3, 3]
                if c >= TILE4_MIN_CHANNELS
                    && out_area.is_none_or(|area| area >= TILE4_MIN_AREA)
                    && c.max(m) <= MAX_CHANNELS
                    && fits_scratch(c, m, 4) =>
            {
                4
            }
            _ => 2,
        }
    }

    /// Dims of a `[M, C, 3, 3]` weight transformed for output tiles of
    /// `t × t` (2 or 4): `[(t + 2)², M rounded up to whole panels, C]`
    /// (`None` for other dims or tile sizes, or an `M` too large to round
    /// up).
    pub fn packed_dims_for(t: usize, dims: &[usize]) -> Option<[usize; 3]> {
        let &[m, c, 3, 3] = dims else { return None };
        if !matches!(t, 2 | 4) {
            return None;
        }
        Some([positions(t), m.checked_next_multiple_of(A_PANEL)?, c])
    }

    /// The transformed weight (see [`ConvWinograd`]) of `w` (`[M, C, 3, 3]`
    /// as `dims`, row-major) for output tiles of `t × t` (2 or 4), each
    /// matrix computed in f64 and rounded once; `None` when `w` does not
    /// match `dims`, they are not a 3×3 kernel's or `t` is neither.
    pub fn pack_for(t: usize, dims: &[usize], w: &[f32]) -> Option<Vec<f32>> {
        let [p, mp, c] = Self::packed_dims_for(t, dims)?;
        let m = dims[0];
        if m.max(c) > MAX_CHANNELS || w.len() != m * c * 9 {
            return None;
        }
        // u[k][i·c + j]: position k = (t + 2)·ξ + ν of output i, input j.
        let mut u = alloc::vec![alloc::vec![0f32; m * c]; p];
        for (ij, g) in w.chunks_exact(9).enumerate() {
            for (k, v) in kernel_transform(t, g).into_iter().take(p).enumerate() {
                u[k][ij] = v;
            }
        }
        let per = panels_a_len(m, c);
        debug_assert_eq!(per, mp * c);
        let mut out = alloc::vec![0f32; p * per];
        for (src, dst) in u.iter().zip(out.chunks_exact_mut(per.max(1))) {
            if !pack_a_panels(MatRef::row_major(src, c), m, c, dst) {
                return None;
            }
        }
        Some(out)
    }

    /// The geometry and the output tile size (from the weight's positions).
    fn geom(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(ConvGeom, usize), KernelError> {
        const OP: &str = "Conv";
        let xt = input(inputs, 0, OP)?;
        let wt = input(inputs, 1, OP)?;
        check_f32(xt, OP)?;
        check_f32(wt, OP)?;
        let x = nchw(&xt.shape, OP)?;
        let mp = self.m.checked_next_multiple_of(A_PANEL);
        let tile = match wt.shape.dims() {
            &[p, wm, wc] if Some(wm) == mp && wc == x.c && !x.one_d => tile_of_positions(p),
            _ => None,
        };
        let Some(t) = tile else {
            return Err(KernelError::Shape {
                op: OP,
                msg: "Winograd weight does not match the input channels",
            });
        };
        Ok((self.conv.geom_from(inputs, x, [3, 3], self.m, x.c)?, t))
    }
}

/// Whether a block for `c` input and `m` output channels and tiles of
/// `t × t` fits a worker's scratch.
fn fits_scratch(c: usize, m: usize, t: usize) -> bool {
    block_len(c, m, block_tiles(c, m, t), t) <= crate::ops::gemm::MAX_SCRATCH
}

/// The tiles of one tile row inside a block: `n` tiles of tile row `ty`
/// from tile column `tx`, at offset `u` in the block.
#[derive(Clone, Copy)]
struct Segment {
    u: usize,
    ty: usize,
    tx: usize,
    n: usize,
}

/// The segments of tiles `t0..t0 + tb` over a grid `tw` tiles wide.
fn segments(t0: usize, tb: usize, tw: usize) -> impl Iterator<Item = Segment> {
    let mut t = t0;
    core::iter::from_fn(move || {
        if t >= t0 + tb {
            return None;
        }
        let (ty, tx) = (t / tw, t % tw);
        let n = (tw - tx).min(t0 + tb - t);
        let seg = Segment {
            u: t - t0,
            ty,
            tx,
            n,
        };
        t += n;
        Some(seg)
    })
}

/// The pieces a segment is transformed in: `(offset in the segment,
/// length)`, at most [`RUN`] tiles each and, with `aligned`, never across a
/// panel of the block (the input transform writes panels).
fn pieces(s: Segment, aligned: bool) -> impl Iterator<Item = (usize, usize)> {
    let mut done = 0;
    core::iter::from_fn(move || {
        if done >= s.n {
            return None;
        }
        let room = if aligned {
            RUN - (s.u + done) % RUN
        } else {
            RUN
        };
        let piece = (done, room.min(s.n - done));
        done += piece.1;
        Some(piece)
    })
}

/// The shapes of a run: tile grid and block size.
#[derive(Clone, Copy)]
struct Plan {
    /// Output tile size (2 or 4).
    t: usize,
    /// Tiles per row, rows of tiles, tiles.
    tw: usize,
    th: usize,
    /// Tiles per block.
    block: usize,
}

impl Plan {
    /// The plan on `threads` threads: blocks as large as
    /// [`block_tiles`] allows, their count rounded up to a multiple of the
    /// threads when the work is worth splitting (or whole runs each, where
    /// that loads the busiest thread no more), all of one size but the
    /// last.
    fn new(g: &ConvGeom, threads: usize, t: usize) -> Self {
        let (tw, th) = (g.ow.div_ceil(t), g.oh.div_ceil(t));
        let tiles = (tw * th).max(1);
        let most = block_tiles(g.cg, g.m, t);
        let mut blocks = tiles.div_ceil(most);
        let macs = tiles
            .saturating_mul(positions(t) * g.cg)
            .saturating_mul(g.m);
        let mut block = tiles.div_ceil(blocks);
        if threads > 1 && macs >= PARALLEL_MIN_MACS {
            blocks = blocks.next_multiple_of(threads).min(tiles);
            block = tiles.div_ceil(blocks);
            // Tiles the busiest thread takes with blocks of `b`.
            let busiest = |b: usize| tiles.div_ceil(b).div_ceil(threads) * b;
            // Blocks of whole runs when they load the busiest thread no
            // more than the even split, whose blocks end in partial runs.
            if let Some(b) = (1..=most / RUN)
                .rev()
                .map(|h| h * RUN)
                .find(|&b| busiest(b) <= busiest(block))
            {
                block = b;
            }
        }
        Plan { t, tw, th, block }
    }

    fn blocks(&self) -> usize {
        self.tiles().div_ceil(self.block)
    }

    fn tiles(&self) -> usize {
        self.tw * self.th
    }
}

/// The fused tail of finished output segments (segment, offset in the
/// image's output).
type Tail<'a> = dyn Fn(&mut [f32], usize) + Sync + 'a;

/// The operands of one image, shared by every block.
struct Image<'a> {
    g: &'a ConvGeom,
    plan: Plan,
    x: &'a [f32],
    u: &'a [f32],
    bias: Option<&'a [f32]>,
    /// The fused tail, given a finished output segment and its offset in
    /// the image's output.
    tail: Option<&'a Tail<'a>>,
}

impl Image<'_> {
    /// Block `b`: `buf` is the task's scratch (at least [`block_len`]),
    /// `sink(at, seg)` stores a finished output segment at offset `at` of
    /// the image's output.
    fn block(
        &self,
        b: usize,
        buf: &mut [f32],
        sink: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), KernelError> {
        const OP: &str = "Conv";
        let (g, plan) = (self.g, self.plan);
        let (c, m) = (g.cg, g.m);
        let t0 = b * plan.block;
        let tb = plan.block.min(plan.tiles() - t0);
        let vlen = packed_len(c, tb);
        let (t, p) = (plan.t, positions(plan.t));
        let buf = buf
            .get_mut(..block_len(c, m, tb, t))
            .ok_or(KernelError::Buffer { op: OP })?;
        let (vs, ps) = (v_stride(c, tb), prod_stride(m, tb));
        let (v, rest) = buf.split_at_mut(p * vs);
        let (prod, gs) = rest.split_at_mut(prod_len(m, tb, t));
        input_transform(self, t0, tb, v);
        let ulen = panels_a_len(m, c);
        for k in 0..p {
            let a = PanelsA {
                data: &self.u[k * ulen..][..ulen],
            };
            let vb = Prepacked::new(&v[k * vs..][..vlen], c, tb)
                .ok_or(KernelError::Buffer { op: OP })?;
            let mk = &mut prod[k * ps..][..m * tb];
            sgemm_panels_a(m, tb, c, 1.0, a, &vb, 0.0, mk, tb, gs, None)?;
        }
        output_transform(self, t0, tb, prod, sink);
        Ok(())
    }
}

/// The input transform of tiles `t0..t0 + tb` into `v` ((t + 2)² `C × tb`
/// matrices in the [`Prepacked`] layout, [`v_stride`] apart).
fn input_transform(im: &Image<'_>, t0: usize, tb: usize, v: &mut [f32]) {
    /// The transform on a vector backend: its moves, and the loops the
    /// compiler vectorizes compiled for its instruction set.
    struct OnVectors<'a, 'b> {
        im: &'a Image<'b>,
        t0: usize,
        tb: usize,
        v: &'a mut [f32],
    }
    impl SimdKernel for OnVectors<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn run<S: Simd>(self, s: S) {
            input_with(Vectors(s), self.im, self.t0, self.tb, self.v)
        }
    }
    if let Err(k) = dispatch(OnVectors { im, t0, tb, v }) {
        input_with(Portable, k.im, k.t0, k.tb, k.v)
    }
}

#[inline(always)]
fn input_with<M: Moves>(moves: M, im: &Image<'_>, t0: usize, tb: usize, v: &mut [f32]) {
    match im.plan.t == 4 {
        true => input_body::<M, 4>(im, t0, tb, v, moves),
        false => input_body::<M, 2>(im, t0, tb, v, moves),
    }
}

#[inline(always)]
fn input_body<M: Moves, const T: usize>(
    im: &Image<'_>,
    t0: usize,
    tb: usize,
    v: &mut [f32],
    moves: M,
) {
    let g = im.g;
    let (c, ihw) = (g.cg, g.x.h * g.x.w);
    let (vs, p) = (v_stride(c, tb), positions(T));
    // The last panel's columns past `tb` are padding the GEMM reads (and
    // whose products it drops): zero them, as the layout requires, rather
    // than leave whatever the scratch held. Stale bits there can be
    // subnormal floats, and multiplying those stalls each vector for
    // microcode, which slowed a convolution severely.
    let (full, rem) = (tb / PANEL * PANEL, tb % PANEL);
    if rem > 0 {
        for k in 0..p {
            for ci in 0..c {
                moves.zero(&mut v[k * vs + full * c + ci * PANEL + rem..][..PANEL - rem]);
            }
        }
    }
    let mut rows = [[0f32; STAGE]; 6];
    let mut out = [[0f32; RUN]; MAX_POS];
    let mut down = [[[0f32; RUN + 1]; 4]; 6];
    let mut lines = [[0f32; 4 * RUN + 4]; 6];
    for ci in 0..c {
        let xc = &im.x[ci * ihw..][..ihw];
        for s in segments(t0, tb, im.plan.tw) {
            stage_rows::<M, T>(g, xc, s, &mut rows, moves);
            for (off, n) in pieces(s, true) {
                match (T, n <= RUN / 2) {
                    (4, true) => transform_inputs4::<M, { RUN / 2 }>(
                        moves,
                        &rows,
                        4 * off,
                        &mut lines,
                        &mut down,
                        &mut out,
                    ),
                    (4, false) => transform_inputs4::<M, RUN>(
                        moves,
                        &rows,
                        4 * off,
                        &mut lines,
                        &mut down,
                        &mut out,
                    ),
                    (_, true) => transform_inputs::<{ RUN / 2 }>(&rows, 2 * off, &mut out),
                    (_, false) => transform_inputs::<RUN>(&rows, 2 * off, &mut out),
                }
                // Tiles u..u + n, panel by panel (row ci of each).
                let mut done = 0;
                while done < n {
                    let u = s.u + off + done;
                    let len = (PANEL - u % PANEL).min(n - done);
                    let at = (u / PANEL) * PANEL * c + ci * PANEL + u % PANEL;
                    for (k, o) in out[..p].iter().enumerate() {
                        moves.copy(&mut v[k * vs + at..][..len], &o[done..done + len]);
                    }
                    done += len;
                }
            }
        }
    }
}

/// Copies the `T + 2` input rows under tile row `s.ty`, from the first
/// column under tile `s.tx` on (`T·s.n + 2` columns), into `rows` (zero
/// outside the input).
#[inline(always)]
fn stage_rows<M: Moves, const T: usize>(
    g: &ConvGeom,
    xc: &[f32],
    s: Segment,
    rows: &mut [[f32; STAGE]; 6],
    moves: M,
) {
    let (h, w) = (g.x.h, g.x.w);
    // Input column of staged column q: T·tx - pl + q.
    let (col0, len) = (T * s.tx, T * s.n + 2);
    let q_lo = g.pl.saturating_sub(col0).min(len);
    let q_hi = (w + g.pl).saturating_sub(col0).clamp(q_lo, len);
    for (i, row) in rows.iter_mut().take(T + 2).enumerate() {
        let row = &mut row[..len];
        let iy = T * s.ty + i;
        if iy < g.pt || iy - g.pt >= h {
            moves.zero(row);
            continue;
        }
        let src = &xc[(iy - g.pt) * w..][..w];
        moves.zero(&mut row[..q_lo]);
        moves.copy(
            &mut row[q_lo..q_hi],
            &src[(col0 + q_lo).saturating_sub(g.pl)..(col0 + q_hi).saturating_sub(g.pl)],
        );
        moves.zero(&mut row[q_hi..]);
    }
}

/// The output transform of the products of tiles `t0..t0 + tb` (`(t + 2)²`
/// `M × tb` matrices `prod`), each output segment passed to `sink`.
fn output_transform(
    im: &Image<'_>,
    t0: usize,
    tb: usize,
    prod: &[f32],
    sink: &mut dyn FnMut(usize, &[f32]),
) {
    /// The transform compiled for a vector backend's instruction set
    /// (its loops are written for the compiler to vectorize).
    struct OnVectors<'a, 'b> {
        im: &'a Image<'b>,
        t0: usize,
        tb: usize,
        prod: &'a [f32],
        sink: &'a mut dyn FnMut(usize, &[f32]),
    }
    impl SimdKernel for OnVectors<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn run<S: Simd>(self, _: S) {
            output_with(self.im, self.t0, self.tb, self.prod, self.sink)
        }
    }
    if let Err(k) = dispatch(OnVectors {
        im,
        t0,
        tb,
        prod,
        sink,
    }) {
        output_with(k.im, k.t0, k.tb, k.prod, k.sink)
    }
}

#[inline(always)]
fn output_with(
    im: &Image<'_>,
    t0: usize,
    tb: usize,
    prod: &[f32],
    sink: &mut dyn FnMut(usize, &[f32]),
) {
    match im.plan.t == 4 {
        true => output_body::<4>(im, t0, tb, prod, sink),
        false => output_body::<2>(im, t0, tb, prod, sink),
    }
}

/// A run of zeros standing for the positions a 2×2 tile's transform lacks.
static NO_RUN: [f32; RUN] = [0.0; RUN];

#[inline(always)]
fn output_body<const T: usize>(
    im: &Image<'_>,
    t0: usize,
    tb: usize,
    prod: &[f32],
    sink: &mut dyn FnMut(usize, &[f32]),
) {
    let g = im.g;
    let (m, ohw, ps, p) = (g.m, g.oh * g.ow, prod_stride(g.m, tb), positions(T));
    let mut out = [[0f32; OUT_ROW]; 4];
    let mut down = [[[0f32; RUN]; 6]; 4];
    for mi in 0..m {
        let bias = im.bias.map_or(0.0, |b| b[mi]);
        for s in segments(t0, tb, im.plan.tw) {
            for (off, n) in pieces(s, false) {
                // Whole runs (`prod` has one run of slack at the end);
                // lanes past `n` give outputs nobody keeps.
                let mut mv = [&NO_RUN; MAX_POS];
                for (k, run) in mv.iter_mut().take(p).enumerate() {
                    let at = k * ps + mi * tb + s.u + off;
                    *run = prod[at..at + RUN].try_into().unwrap_or(&NO_RUN);
                }
                match (T, n <= RUN / 2) {
                    (4, true) => {
                        transform_outputs4::<{ RUN / 2 }>(&mv, bias, &mut down, &mut out, 4 * off)
                    }
                    (4, false) => {
                        transform_outputs4::<RUN>(&mv, bias, &mut down, &mut out, 4 * off)
                    }
                    (_, true) => transform_outputs::<{ RUN / 2 }>(&mv, bias, &mut out, 2 * off),
                    (_, false) => transform_outputs::<RUN>(&mv, bias, &mut out, 2 * off),
                }
            }
            let col = T * s.tx;
            let len = (T * s.n).min(g.ow - col);
            for (a, row) in out.iter_mut().take(T).enumerate() {
                let oy = T * s.ty + a;
                if oy >= g.oh {
                    break;
                }
                let at = mi * ohw + oy * g.ow + col;
                let seg = &mut row[..len];
                if let Some(tail) = im.tail {
                    tail(seg, at);
                }
                sink(at, seg);
            }
        }
    }
}

impl Kernel for ConvWinograd {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        infer_output(&self.geom(inputs)?.0, inputs, outputs)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        // A whole block whatever the input size (the arena is planned at a
        // few sizes; a block never grows past this).
        self.geom(inputs).map_or(0, |(g, t)| {
            4 * block_len(g.cg, g.m, block_tiles(g.cg, g.m, t), t)
        })
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        // The direct convolution's count (the transforms do fewer
        // multiplies): comparable with other engines' and direct paths'.
        self.geom(inputs).map_or(0, |(g, _)| g.flops())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Conv";
        let conv = &self.conv;
        let (geom, t) = self.geom(inputs)?;
        let Operands {
            g,
            x,
            w,
            bias,
            residual,
            y,
        } = conv.operands_of(geom, inputs, outputs, |g| {
            positions(t) * panels_a_len(g.m, g.cg)
        })?;
        let (ihw, ohw) = (g.x.h * g.x.w, g.ohw());
        if ohw == 0 {
            return Ok(());
        }
        #[cfg(feature = "std")]
        let threads = crate::threads::num_threads();
        #[cfg(not(feature = "std"))]
        let threads = 1;
        let plan = Plan::new(&g, threads, t);
        let own = scratch_f32(scratch, block_len(g.cg, g.m, plan.block, t), OP)?;
        let blocks = plan.blocks();
        let fused_tail = conv.has_epilogue() || residual.is_some();
        for n in 0..g.x.n {
            let base = n * g.m * ohw;
            let tail = conv.tail(residual, base);
            let im = Image {
                g: &g,
                plan,
                x: &x[n * g.x.c * ihw..][..g.x.c * ihw],
                u: w,
                bias,
                tail: if fused_tail { Some(&tail) } else { None },
            };
            let yn = &mut y[base..][..g.m * ohw];
            #[cfg(feature = "std")]
            if blocks > 1 && threads > 1 {
                let shared = crate::threads::SharedMut::new(yn);
                let failed = core::sync::atomic::AtomicBool::new(false);
                crate::threads::run(blocks, own, &|b, buf| {
                    let mut sink = |at: usize, seg: &[f32]| {
                        // SAFETY: a block's output segments belong to its
                        // tiles only (no other task writes them), and `run`
                        // returns after every task, while `yn` is borrowed.
                        copy_short(unsafe { shared.range(at, seg.len()) }, seg)
                    };
                    if im.block(b, buf, &mut sink).is_err() {
                        failed.store(true, core::sync::atomic::Ordering::Relaxed);
                    }
                });
                if failed.into_inner() {
                    return Err(KernelError::Buffer { op: OP });
                }
                continue;
            }
            let mut sink = |at: usize, seg: &[f32]| copy_short(&mut yn[at..at + seg.len()], seg);
            for b in 0..blocks {
                im.block(b, own, &mut sink)?;
            }
        }
        Ok(())
    }
}
