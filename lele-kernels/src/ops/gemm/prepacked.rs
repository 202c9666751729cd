//! Right-hand operands packed ahead of time (constant weights).
//!
//! A `k × n` matrix is stored as `n.div_ceil(PANEL)` column panels of
//! `PANEL` columns, each `k` rows of `PANEL` floats (row `p` of panel `q`
//! at `q·PANEL·k + p·PANEL`), the last panel zero padded. `PANEL` is the
//! AVX2 micro-kernel's `NR`, so that kernel reads its micro-panel as one
//! contiguous run (rows of a wider panel would be a cache line apart and
//! fill only every other set of the L1 cache); a 32-column kernel reads
//! two neighbouring panels, `PANEL·k` floats apart, and the scalar kernel
//! half of one. Nothing is copied per call. The compiler writes weights in
//! this layout into the weights blob.
use super::{MatRef, PackB};

/// Columns per panel (the AVX2 micro-kernel's `NR`).
pub const PANEL: usize = 16;

/// Length in floats of a `k × n` matrix packed by [`pack_into`].
pub fn packed_len(k: usize, n: usize) -> usize {
    n.div_ceil(PANEL) * PANEL * k
}

/// Writes `b` (`k × n`) into `dst` (at least [`packed_len`] floats) in the
/// panel layout; returns `false` (writing nothing) when `b` does not hold
/// `k × n` or `dst` is short.
pub fn pack_into(b: MatRef<'_>, k: usize, n: usize, dst: &mut [f32]) -> bool {
    let len = packed_len(k, n);
    if dst.len() < len || !b.fits(k, n) {
        return false;
    }
    for (q, panel) in dst[..len].chunks_exact_mut(PANEL * k).enumerate() {
        let j0 = q * PANEL;
        let w = PANEL.min(n - j0);
        for (p, row) in panel.chunks_exact_mut(PANEL).enumerate() {
            for (jj, x) in row[..w].iter_mut().enumerate() {
                *x = b.at(p, j0 + jj);
            }
            row[w..].fill(0.0);
        }
    }
    true
}

/// A `k × n` operand in the panel layout of [`pack_into`].
#[derive(Clone, Copy)]
pub struct Prepacked<'a> {
    data: &'a [f32],
    k: usize,
    n: usize,
}

impl<'a> Prepacked<'a> {
    /// The packed operand, when `data` is exactly [`packed_len`]`(k, n)`
    /// floats.
    pub fn new(data: &'a [f32], k: usize, n: usize) -> Option<Self> {
        (data.len() == packed_len(k, n)).then_some(Prepacked { data, k, n })
    }

    /// Depth `k`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Width `n`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Rows `p0..p0 + kc` (`kc >= 1`, `p0 + kc <= k`) of the `width`
    /// columns from `j` that a micro-kernel reads, as a micro-panel with
    /// rows [`PANEL`] floats apart, and the distance in floats from a
    /// row's column `j` to its column `j + PANEL` (the next panel). The
    /// columns lie inside one panel (`j % PANEL + width <= PANEL`), or
    /// start one and span whole panels; all of them are below the padded
    /// width.
    pub(crate) fn micro_panel(
        self,
        p0: usize,
        kc: usize,
        j: usize,
        width: usize,
    ) -> (&'a [f32], usize) {
        debug_assert!(
            kc >= 1
                && p0 + kc <= self.k
                && width >= 1
                && (j % PANEL + width <= PANEL
                    || (j.is_multiple_of(PANEL) && width.is_multiple_of(PANEL)))
        );
        let panel = PANEL * self.k;
        let start = (j / PANEL) * panel + p0 * PANEL + j % PANEL;
        let last = j + width - 1;
        let end = (last / PANEL) * panel + (p0 + kc - 1) * PANEL + last % PANEL + 1;
        (&self.data[start..end], panel)
    }

    /// Element `(p, j)` (zero in the padding columns).
    fn at(&self, p: usize, j: usize) -> f32 {
        self.data[(j / PANEL) * PANEL * self.k + p * PANEL + j % PANEL]
    }
}

impl PackB for Prepacked<'_> {
    fn pack(&self, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32]) {
        for (pj, panel) in dst
            .chunks_exact_mut(nr * kc)
            .take(nc.div_ceil(nr))
            .enumerate()
        {
            let c0 = j0 + pj * nr;
            let w = nr.min(j0 + nc - c0);
            for (p, d) in panel.chunks_exact_mut(nr).enumerate() {
                for (jj, x) in d[..w].iter_mut().enumerate() {
                    *x = self.at(p0 + p, c0 + jj);
                }
                d[w..].fill(0.0);
            }
        }
    }

    fn prepacked(&self) -> Option<Prepacked<'_>> {
        Some(*self)
    }
}

/// How far ahead (in floats) [`gemv`] prefetches each of its streams.
#[cfg(target_arch = "x86_64")]
const GEMV_AHEAD: usize = 256;

/// `c = alpha·a·B + beta·c` for one row `a` (`k` floats at stride `a.cs`)
/// and a packed `B`: each panel's `k` rows are read front to back into
/// `PANEL` accumulators.
pub(crate) fn gemv(alpha: f32, a: MatRef<'_>, b: Prepacked<'_>, beta: f32, c: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(super::best_isa(), super::Isa::Avx2 | super::Isa::Avx512) {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { gemv_avx2(alpha, a, b, beta, c) };
    }
    gemv_body(alpha, a, b, beta, c)
}

/// [`gemv_body`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_avx2(alpha: f32, a: MatRef<'_>, b: Prepacked<'_>, beta: f32, c: &mut [f32]) {
    gemv_body(alpha, a, b, beta, c)
}

#[inline(always)]
fn gemv_body(alpha: f32, a: MatRef<'_>, b: Prepacked<'_>, beta: f32, c: &mut [f32]) {
    let k = b.k;
    if k == 0 {
        // An empty sum (and no panels to walk).
        c.iter_mut().for_each(|x| *x *= beta);
        return;
    }
    // Two panels at a time (eight streams through memory), the last one
    // alone when their number is odd.
    for (pair, out) in b.data.chunks(2 * PANEL * k).zip(c.chunks_mut(2 * PANEL)) {
        if pair.len() == 2 * PANEL * k {
            gemv_panels::<2>(alpha, a, pair, k, beta, out);
        } else {
            gemv_panels::<1>(alpha, a, pair, k, beta, out);
        }
    }
}

/// [`gemv_body`] over `G` (1 or 2) neighbouring panels (`panels`,
/// `G·PANEL·k` floats) into their columns `out` (at most `G·PANEL`).
#[inline(always)]
fn gemv_panels<const G: usize>(
    alpha: f32,
    a: MatRef<'_>,
    panels: &[f32],
    k: usize,
    beta: f32,
    out: &mut [f32],
) {
    // Four rows per step into each panel's accumulator row, one from each
    // quarter of the panel: four streams per panel (as `gemv_row_body`
    // reads four rows of B), not one.
    let (first, second) = panels.split_at(PANEL * k);
    let mut lo = [0f32; PANEL];
    let mut hi = [0f32; PANEL];
    let q = k / 4;
    for t in 0..q {
        let at = [t, q + t, 2 * q + t, 3 * q + t];
        let s = at.map(|p| a.at(0, p));
        let r = at.map(|p| row_of(first, p));
        prefetch_ahead(r);
        accumulate4(&mut lo, s, r);
        if G == 2 {
            let r = at.map(|p| row_of(second, p));
            prefetch_ahead(r);
            accumulate4(&mut hi, s, r);
        }
    }
    for p in 4 * q..k {
        let s = a.at(0, p);
        let row = row_of(first, p);
        for j in 0..PANEL {
            lo[j] += s * row[j];
        }
        if G == 2 {
            let row = row_of(second, p);
            for j in 0..PANEL {
                hi[j] += s * row[j];
            }
        }
    }
    for (j, x) in out.iter_mut().enumerate() {
        let v = alpha * if j < PANEL { lo[j] } else { hi[j - PANEL] };
        *x = if beta == 0.0 { v } else { v + beta * *x };
    }
}

/// Prefetches each of four streams' row 1 KiB ahead.
#[inline(always)]
fn prefetch_ahead(rows: [&[f32; PANEL]; 4]) {
    #[cfg(target_arch = "x86_64")]
    for row in rows {
        for line in (0..PANEL).step_by(16) {
            let ahead = row.as_ptr().wrapping_add(GEMV_AHEAD + line) as *const i8;
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ahead)
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = rows;
}

/// `acc += s[0]·r[0] + … + s[3]·r[3]`, lane by lane.
#[inline(always)]
fn accumulate4(acc: &mut [f32; PANEL], s: [f32; 4], r: [&[f32; PANEL]; 4]) {
    for j in 0..PANEL {
        acc[j] += s[0] * r[0][j] + s[1] * r[1][j] + s[2] * r[2][j] + s[3] * r[3][j];
    }
}

/// Row `i` of a run of packed rows, as a fixed-size array (so the loops
/// over it compile without bounds checks).
#[inline(always)]
fn row_of(rows: &[f32], i: usize) -> &[f32; PANEL] {
    rows[i * PANEL..(i + 1) * PANEL]
        .try_into()
        .expect("a packed row is PANEL floats")
}
