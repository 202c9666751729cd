//! Single-precision matrix multiply (`C = alpha·A·B + beta·C`), BLIS style.
//!
//! `A` and `B` are read through arbitrary row/column strides ([`MatRef`]), so
//! transposed operands cost nothing extra. Blocks of `A` and `B` are packed
//! into a caller-provided scratch slice (no allocation) and multiplied by an
//! `MR×NR` register micro-kernel: scalar everywhere, AVX2+FMA and AVX-512 on
//! x86_64 (chosen once at run time and cached), NEON on aarch64 and simd128
//! on wasm32 built with it.
use crate::error::KernelError;

mod blocks;
mod dot_lanes;
#[cfg(target_arch = "x86_64")]
mod few_rows;
mod micro;
#[cfg(target_arch = "aarch64")]
mod neon;
pub(crate) mod operands;
mod pack_a;
pub mod prepacked;
pub(crate) mod rows;
mod skinny;
#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
#[cfg(test)]
pub(crate) use crate::simd::isa_available;
pub(crate) use crate::simd::{Isa, best_isa};
#[cfg(feature = "std")]
use blocks::reads_in_place;
use blocks::{CPtr, gemm_blocks};
pub(crate) use operands::{check_f32, check_residual, f32_in, f32_out, scratch_f32};
pub(crate) use pack_a::pack_row_panels;
pub use pack_a::{A_PANEL, PanelsA, pack_a_panels, panels_a_len};
use skinny::{DOT_M_MAX, NARROW_N, dot_columns, gemv_row};

/// Rows of `A` packed per block.
const MC: usize = 96;
/// Depth of one packed block.
const KC: usize = 256;
/// Columns of `B` packed per block.
const NC: usize = 1024;
/// The most columns [`PackB::pack`] is asked for at once.
pub const GEMM_NC: usize = NC;
/// A multiple of every micro-kernel's `MR`.
const MR_LCM: usize = 24;
/// A multiple of every micro-kernel's `NR`.
const NR_LCM: usize = 32;
/// Largest `MR × NR` of any micro-kernel (edge tiles go through a stack tile).
const MAX_TILE: usize = 8 * 32;

/// A read-only strided matrix: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride in elements.
    pub rs: usize,
    /// Column stride in elements.
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    /// A row-major matrix with leading dimension `ld`.
    pub fn row_major(data: &'a [f32], ld: usize) -> Self {
        MatRef {
            data,
            rs: ld,
            cs: 1,
        }
    }

    /// The transpose of a row-major matrix with leading dimension `ld`.
    pub fn transposed(data: &'a [f32], ld: usize) -> Self {
        MatRef {
            data,
            rs: 1,
            cs: ld,
        }
    }

    /// Whether a `rows × cols` matrix fits in `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        (rows - 1)
            .checked_mul(self.rs)
            .and_then(|r| {
                (cols - 1)
                    .checked_mul(self.cs)
                    .and_then(|c| r.checked_add(c))
            })
            .is_some_and(|last| last < self.data.len())
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}

/// The left operand as the blocked product reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeftOp<'a> {
    /// A strided matrix, packed per block.
    Strided(MatRef<'a>),
    /// Packed ahead of time (see [`PanelsA`]), of depth `k`.
    Panels(&'a [f32]),
}

impl<'a> LeftOp<'a> {
    fn fits(&self, m: usize, k: usize) -> bool {
        match self {
            LeftOp::Strided(a) => a.fits(m, k),
            LeftOp::Panels(d) => d.len() >= panels_a_len(m, k),
        }
    }

    /// The operand from row `i0` on (a multiple of [`A_PANEL`] for panels).
    #[cfg(feature = "std")]
    fn rows_from(self, i0: usize, k: usize) -> LeftOp<'a> {
        match self {
            LeftOp::Strided(a) => LeftOp::Strided(MatRef {
                data: a.data.get(i0 * a.rs..).unwrap_or(&[]),
                ..a
            }),
            LeftOp::Panels(d) => LeftOp::Panels(d.get(i0 * k..).unwrap_or(&[])),
        }
    }
}

/// A `k × n` right-hand operand that can pack itself into the micro-kernel's
/// panel layout, so it need not exist in memory as a matrix (a convolution
/// packs its im2col patches straight from the input).
pub trait PackB: Sync {
    /// Writes rows `p0..p0 + kc`, columns `j0..j0 + nc` as `nc.div_ceil(nr)`
    /// panels of `kc × nr` floats (row `p` of panel `q` at
    /// `q·nr·kc + p·nr`), zero padding past column `j0 + nc`.
    fn pack(&self, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32]);

    /// The operand as a strided matrix, when it is one (enables the
    /// unpacked single-row path).
    fn as_mat(&self) -> Option<MatRef<'_>> {
        None
    }

    /// The operand already in the panel layout (a weight packed ahead of
    /// time): the product reads it in place instead of calling `pack`.
    fn prepacked(&self) -> Option<prepacked::Prepacked<'_>> {
        None
    }
}

impl PackB for MatRef<'_> {
    fn pack(&self, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32]) {
        let panels = nc.div_ceil(nr);
        if nr == 1 && self.cs == 1 {
            // Columns stored contiguously (the dot products over a few
            // columns): column by column, each written front to back from
            // a strided read. Row by row, each row of a few floats paid a
            // dispatch on the panel width and a loop setup, and packing
            // took a large share of products over a handful of columns.
            for (q, col) in dst.chunks_exact_mut(kc).take(nc).enumerate() {
                let src = &self.data[p0 * self.rs + j0 + q..];
                for (p, d) in col.iter_mut().enumerate() {
                    *d = src[p * self.rs];
                }
            }
            return;
        }
        if self.cs == 1 && !(nr * kc * 4).is_multiple_of(4096) {
            // Row by row: each source row is read once, front to back (a
            // column-panel order would jump a whole row stride per 64 bytes).
            for p in 0..kc {
                let src = &self.data[(p0 + p) * self.rs + j0..][..nc];
                scatter_row(src, p, kc, nr, dst);
            }
            return;
        }
        if self.cs == 1 {
            // Panels a multiple of 4 KiB apart: row by row, the writes to
            // all panels would fall in the same L1 sets. So eight rows at a
            // time, panel by panel, each panel getting its eight rows in
            // one run.
            const ROWS: usize = 8;
            let full = nc / nr;
            for p in (0..kc).step_by(ROWS) {
                let rows = ROWS.min(kc - p);
                for q in 0..full {
                    let d = &mut dst[q * nr * kc + p * nr..][..rows * nr];
                    let src = &self.data[(p0 + p) * self.rs + j0 + q * nr..];
                    match nr {
                        32 => copy_rows::<32>(src, self.rs, d),
                        16 => copy_rows::<16>(src, self.rs, d),
                        8 => copy_rows::<8>(src, self.rs, d),
                        _ => {
                            for (r, d) in d.chunks_exact_mut(nr).enumerate() {
                                d.copy_from_slice(&src[r * self.rs..][..nr]);
                            }
                        }
                    }
                }
                if full * nr < nc {
                    let w = nc - full * nr;
                    let d = &mut dst[full * nr * kc + p * nr..][..rows * nr];
                    let src = &self.data[(p0 + p) * self.rs + j0 + full * nr..];
                    for (r, d) in d.chunks_exact_mut(nr).enumerate() {
                        d[..w].copy_from_slice(&src[r * self.rs..][..w]);
                        d[w..].fill(0.0);
                    }
                }
            }
            return;
        }
        for (pj, panel) in dst.chunks_exact_mut(nr * kc).take(panels).enumerate() {
            let c0 = j0 + pj * nr;
            let w = nr.min(j0 + nc - c0);
            if self.rs == 1 {
                // Columns are contiguous (a transposed operand): read each
                // column front to back; the panel (≤ KC·NR floats) stays in L1.
                for jj in 0..w {
                    let col = &self.data[(c0 + jj) * self.cs + p0..][..kc];
                    for (p, &v) in col.iter().enumerate() {
                        panel[p * nr + jj] = v;
                    }
                }
                for d in panel.chunks_exact_mut(nr) {
                    d[w..].fill(0.0);
                }
                continue;
            }
            for (p, d) in panel.chunks_exact_mut(nr).enumerate() {
                for (jj, x) in d[..w].iter_mut().enumerate() {
                    *x = self.at(p0 + p, c0 + jj);
                }
                d[w..].fill(0.0);
            }
        }
    }

    fn as_mat(&self) -> Option<MatRef<'_>> {
        Some(*self)
    }
}

/// Copies one packed-operand row `src` (all `nc` columns of row `p`) into
/// its place in each `kc × nr` panel of `dst`, zero padding the last panel.
#[inline]
pub fn scatter_row(src: &[f32], p: usize, kc: usize, nr: usize, dst: &mut [f32]) {
    // Fixed-width copies for the micro-kernels' widths (a copy of a
    // run-time length would be a library call per 64 bytes).
    match nr {
        // Columns stored contiguously (`narrow`'s transposed copy of B).
        1 => {
            for (j, &v) in src.iter().enumerate() {
                dst[j * kc + p] = v;
            }
        }
        8 => scatter_fixed::<8>(src, p, kc, dst),
        16 => scatter_fixed::<16>(src, p, kc, dst),
        32 => scatter_fixed::<32>(src, p, kc, dst),
        _ => {
            for (pj, chunk) in src.chunks(nr).enumerate() {
                let d = &mut dst[pj * nr * kc + p * nr..][..nr];
                d[..chunk.len()].copy_from_slice(chunk);
                d[chunk.len()..].fill(0.0);
            }
        }
    }
}

/// Copies rows of `NR` floats, `rs` apart in `src`, into consecutive rows
/// of `panel`.
#[inline(always)]
fn copy_rows<const NR: usize>(src: &[f32], rs: usize, panel: &mut [f32]) {
    for (p, d) in panel.chunks_exact_mut(NR).enumerate() {
        let d: &mut [f32; NR] = d.try_into().expect("chunk of NR floats");
        let s: &[f32; NR] = src[p * rs..][..NR].try_into().expect("slice of NR floats");
        *d = *s;
    }
}

#[inline(always)]
fn scatter_fixed<const NR: usize>(src: &[f32], p: usize, kc: usize, dst: &mut [f32]) {
    let full = src.chunks_exact(NR);
    let tail = full.remainder();
    let mut pj = 0;
    for chunk in full {
        let d: &mut [f32; NR] = (&mut dst[pj * NR * kc + p * NR..][..NR])
            .try_into()
            .expect("slice of NR floats");
        let s: &[f32; NR] = chunk.try_into().expect("chunk of NR floats");
        *d = *s;
        pj += 1;
    }
    if !tail.is_empty() {
        let d = &mut dst[pj * NR * kc + p * NR..][..NR];
        d[..tail.len()].copy_from_slice(tail);
        d[tail.len()..].fill(0.0);
    }
}

/// Number of `f32`s of scratch [`sgemm`] needs for an `m × n × k` product.
pub fn sgemm_scratch_len(m: usize, n: usize, k: usize) -> usize {
    if m == 0 || n == 0 || k == 0 {
        return 0;
    }
    let kc = k.min(KC);
    m.min(MC).next_multiple_of(MR_LCM) * kc + n.min(NC).next_multiple_of(NR_LCM) * kc
}

/// `C = alpha·A·B + beta·C` where `A` is `m × k`, `B` is `k × n` and `C` is
/// row-major `m × n` with row stride `ldc`. When `beta == 0`, `C` is only
/// written (NaNs in it do not propagate). `scratch` must hold at least
/// [`sgemm_scratch_len`]`(m, n, k)` floats.
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if !b.fits(k, n) {
        return Err(KernelError::Buffer { op: "sgemm" });
    }
    sgemm_isa(
        best_isa(),
        m,
        n,
        k,
        alpha,
        a,
        &b,
        beta,
        c,
        ldc,
        scratch,
        None,
    )
}

/// A function applied to each finished row segment of C (a fused
/// activation, a residual add): the segment, and the index in C of its
/// first element (`row · ldc + column`).
pub type Epilogue<'e> = &'e (dyn Fn(&mut [f32], usize) + Sync);

/// [`sgemm`] with a right-hand operand that packs itself (see [`PackB`])
/// and an optional epilogue run on every row segment of C once it holds
/// its final value (while it is still in cache); the caller guarantees `b`
/// has `k` rows and `n` columns.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_packed_b<B: PackB>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: &B,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) -> Result<(), KernelError> {
    sgemm_isa(
        best_isa(),
        m,
        n,
        k,
        alpha,
        a,
        b,
        beta,
        c,
        ldc,
        scratch,
        epilogue,
    )
}

/// Whether [`sgemm_packed_b_softmax`] computes a product of `m` rows at
/// depth `k` with `scratch` floats for it (the few-rows product: AVX-512
/// and few rows).
pub(crate) fn packed_b_softmax_takes(m: usize, k: usize, scratch: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        few_rows::takes(best_isa(), m, k, scratch)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, k, scratch);
        false
    }
}

/// Floats of slots [`sgemm_packed_b_softmax`] needs for `m` rows of `n`.
pub(crate) fn softmax_slots_len(m: usize, n: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        2 * m * n.div_ceil(few_rows::GROUP_COLUMNS)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, n);
        0
    }
}

/// `c = a·B` for `m` rows of `a` and `B` packed ahead of time (`k × n`),
/// `c` `m × n` row-major, `epilogue` on each finished run of columns of a
/// row, then every row of `c` replaced by its softmax: each group of
/// columns exponentiated as it is finished, while cached, and scaled by
/// its share of the row's total at the end (a classifier's output layer
/// and its softmax without a pass over the logits). Results do not depend
/// on the thread count. `Ok(false)`, nothing computed, when
/// [`packed_b_softmax_takes`] does not hold for `scratch`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_packed_b_softmax(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: &prepacked::Prepacked<'_>,
    c: &mut [f32],
    scratch: &mut [f32],
    slots: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) -> Result<bool, KernelError> {
    const OP: &str = "sgemm";
    if !packed_b_softmax_takes(m, k, scratch.len()) {
        return Ok(false);
    }
    if c.len() < m * n
        || !a.fits(m, k)
        || b.k() != k
        || b.n() < n
        || slots.len() < softmax_slots_len(m, n)
    {
        return Err(KernelError::Buffer { op: OP });
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `takes` saw AVX-512; A fits m × k and C holds m rows of n
    // (checked above).
    unsafe {
        few_rows::few_rows(
            m,
            n,
            k,
            1.0,
            a,
            *b,
            0.0,
            c,
            n,
            scratch,
            epilogue,
            Some(slots),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = epilogue;
    Ok(true)
}

/// [`sgemm_packed_b`] with a left operand packed ahead of time (a
/// convolution's weight, see [`PanelsA`]); the caller guarantees `b` has
/// `k` rows and `n` columns.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_panels_a<B: PackB>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: PanelsA<'_>,
    b: &B,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) -> Result<(), KernelError> {
    sgemm_core(
        best_isa(),
        m,
        n,
        k,
        alpha,
        LeftOp::Panels(a.data),
        b,
        beta,
        c,
        ldc,
        scratch,
        epilogue,
    )
}

/// [`sgemm`] with an explicit micro-kernel (tests compare them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_isa<B: PackB>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: &B,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) -> Result<(), KernelError> {
    let a = LeftOp::Strided(a);
    sgemm_core(isa, m, n, k, alpha, a, b, beta, c, ldc, scratch, epilogue)
}

/// The product for either kind of left operand.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_core<B: PackB>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: LeftOp<'_>,
    b: &B,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) -> Result<(), KernelError> {
    const OP: &str = "sgemm";
    if m == 0 || n == 0 {
        return Ok(());
    }
    let c_fits = ldc >= n
        && (m - 1)
            .checked_mul(ldc)
            .and_then(|x| x.checked_add(n))
            .is_some_and(|end| end <= c.len());
    if !c_fits || !a.fits(m, k) {
        return Err(KernelError::Buffer { op: OP });
    }
    if k == 0 || alpha == 0.0 {
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + n];
            if beta == 0.0 {
                row.fill(0.0);
            } else if beta != 1.0 {
                row.iter_mut().for_each(|x| *x *= beta);
            }
            if let Some(f) = epilogue {
                f(row, i * ldc);
            }
        }
        return Ok(());
    }
    if let Some(bp) = b.prepacked()
        && (bp.k() != k || bp.n() < n)
    {
        return Err(KernelError::Buffer { op: OP });
    }
    if let LeftOp::Strided(a) = a
        && m <= DOT_M_MAX
        && n > NARROW_N
        && a.cs == 1
        && let Some(bm) = b.as_mat()
        && bm.rs == 1
    {
        // A few rows (down to one: an LSTM step) against a transposed
        // operand (a Linear layer's weight, `x·Wᵀ`): packing W would cost
        // more than the product.
        dot_columns(isa, m, n, k, alpha, a, bm.data, bm.cs, beta, c, ldc);
        if let Some(f) = epilogue {
            for i in 0..m {
                f(&mut c[i * ldc..i * ldc + n], i * ldc);
            }
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if let LeftOp::Strided(a) = a
        && let Some(bp) = b.prepacked()
        && few_rows::takes(isa, m, k, scratch.len())
    {
        #[cfg(all(test, feature = "std"))]
        few_rows::CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: `takes` saw AVX-512 (detected, or the caller's ISA
        // contract); A fits m × k and C holds m rows of n at ldc (both
        // checked above).
        unsafe { few_rows::few_rows(m, n, k, alpha, a, bp, beta, c, ldc, scratch, epilogue, None) };
        return Ok(());
    }
    if m == 1
        && let LeftOp::Strided(a) = a
        && let Some(bp) = b.prepacked()
    {
        prepacked::gemv(alpha, a, bp, beta, &mut c[..n]);
        if let Some(f) = epilogue {
            f(&mut c[..n], 0);
        }
        return Ok(());
    }
    if m == 1
        && let LeftOp::Strided(a) = a
        && let Some(b) = b.as_mat()
    {
        gemv_row(n, k, alpha, a, b, beta, &mut c[..n]);
        if let Some(f) = epilogue {
            f(&mut c[..n], 0);
        }
        return Ok(());
    }
    if scratch.len() < sgemm_scratch_len(m, n, k) {
        return Err(KernelError::Buffer { op: OP });
    }
    if let LeftOp::Strided(a) = a
        && n <= NARROW_N
        && a.cs == 1
        && n * k <= scratch.len()
    {
        // A few columns (a convolution over a handful of frames): dot
        // products against B's columns copied contiguously.
        let bt = &mut scratch[..n * k];
        b.pack(0, k, 0, n, 1, bt);
        dot_columns(isa, m, n, k, alpha, a, bt, k, beta, c, ldc);
        if let Some(f) = epilogue {
            for i in 0..m {
                f(&mut c[i * ldc..i * ldc + n], i * ldc);
            }
        }
        return Ok(());
    }
    let cp = CPtr(c.as_mut_ptr());
    #[cfg(feature = "std")]
    {
        let threads = crate::threads::num_threads();
        // B packed ahead of time (a Linear layer's weight) and at most a
        // block of columns per thread: one row range per thread, each
        // packing only its rows of A and reading B in place, so no work is
        // repeated (a column split makes every task pack all of A, and a
        // transformer's 128×384×384 products gained little from a second
        // thread).
        // Whole panels of the micro-kernel and of a left operand packed
        // ahead of time, so every tile is where one thread puts it (an
        // edge tile rounds `beta` differently); at least two ranges.
        let mr = micro::micro_for(isa).mr;
        let unit = if A_PANEL.is_multiple_of(mr) {
            A_PANEL
        } else {
            MR_LCM
        };
        let prepacked_height =
            (threads > 1 && b.prepacked().is_some() && n.div_ceil(threads) <= NC)
                .then(|| m.div_ceil(threads).next_multiple_of(unit))
                .filter(|&h| h < m);
        // B read in place (see `reads_in_place`): nothing of it is packed,
        // so row ranges cost no repeated work either.
        let in_place = b.prepacked().is_none()
            && b.as_mat()
                .is_some_and(|mat| reads_in_place(&mat, micro::micro_for(isa).nr, k.min(KC)));
        let rows = (m > n || in_place) && m >= 2 * MR_LCM;
        if threads > 1 && m * n * k >= PARALLEL_MIN_MACS && (prepacked_height.is_some() || rows) {
            // Taller than wide (a 1×1 convolution with many channels at a
            // low resolution), or B read in place: row ranges, so each task
            // packs only its share of A (a column split makes every task
            // pack all of it) and all of the narrower B, or none of it.
            // Row ranges start on whole panels of a left operand packed
            // ahead of time. One range per thread: every task packs all of
            // B, so more tasks pack it more often.
            let height =
                prepacked_height.unwrap_or_else(|| m.div_ceil(threads).next_multiple_of(unit));
            let tasks = m.div_ceil(height);
            crate::threads::run(tasks, scratch, &|t, s| {
                let i0 = t * height;
                let h = height.min(m - i0);
                let rows = a.rows_from(i0, k);
                // SAFETY: `cp` points at C, which holds rows `0..m` of
                // stride `ldc` (checked above); task `t` writes only rows
                // `i0..i0 + h`, which no other task touches, and `run`
                // returns only after every task is done. A's rows from i0
                // on are inside `a` (it fits m × k).
                unsafe {
                    gemm_blocks(
                        isa,
                        h,
                        n,
                        k,
                        alpha,
                        rows,
                        b,
                        0,
                        beta,
                        cp.add(i0 * ldc),
                        i0 * ldc,
                        ldc,
                        s,
                        epilogue,
                    )
                };
            });
            return Ok(());
        }
        if threads > 1 && m * n * k >= PARALLEL_MIN_MACS && n >= 2 * NR_LCM {
            // Column ranges (multiples of every NR), a few per thread so an
            // uneven split evens out.
            let width = n.div_ceil(2 * threads).next_multiple_of(NR_LCM);
            let tasks = n.div_ceil(width);
            crate::threads::run(tasks, scratch, &|t, s| {
                let j0 = t * width;
                let w = width.min(n - j0);
                // SAFETY: `cp` points at C, which holds rows `0..m` of
                // stride `ldc` and `n` columns (checked above); task `t`
                // writes only columns `j0..j0 + w`, which no other task
                // touches, and `run` returns only after every task is done.
                unsafe {
                    gemm_blocks(
                        isa,
                        m,
                        w,
                        k,
                        alpha,
                        a,
                        b,
                        j0,
                        beta,
                        cp.add(j0),
                        j0,
                        ldc,
                        s,
                        epilogue,
                    )
                };
            });
            return Ok(());
        }
    }
    // SAFETY: as above, with one task covering every column.
    unsafe {
        gemm_blocks(
            isa, m, n, k, alpha, a, b, 0, beta, cp, 0, ldc, scratch, epilogue,
        )
    };
    Ok(())
}

/// Products smaller than this many multiply-adds stay on one thread. From
/// 1M rather than 2M: products between the two (a transformer block's
/// 40-row products, small 1×1 convolutions) gain from a second thread,
/// while one LSTM step (1×2048×512, just at the bound) loses nothing.
#[cfg(feature = "std")]
const PARALLEL_MIN_MACS: usize = 1 << 20;

/// Floats of scratch the largest GEMM block needs (a worker's buffer).
pub(crate) const MAX_SCRATCH: usize =
    MC.next_multiple_of(MR_LCM) * KC + NC.next_multiple_of(NR_LCM) * KC;
// A worker's buffer holds the largest block.
#[cfg(feature = "std")]
const _: () = assert!(MAX_SCRATCH <= crate::threads::WORKER_SCRATCH);
