//! Packing of the left operand: `MR` rows of a block interleaved into the
//! panel a micro-kernel reads (`panel[p·MR + ii]`).
use super::MatRef;
#[cfg(target_arch = "x86_64")]
use super::{Isa, best_isa, x86};

/// Packs `MR` rows of a row-major block (row `ii` at `a[ii·rs..][..kc]`)
/// into an `MR`-interleaved panel (`panel[p·MR + ii]`): eight rows on x86
/// with AVX take one register transpose per 8 × 8 block
/// ([`x86::pack_a8_avx`]; the portable loop compiled to a scalar load and
/// store per float, a measurable share of the GEMM's time on 1×1
/// convolutions and transformer products), other heights blocks of eight
/// columns.
pub(super) fn pack_a_rows<const MR: usize>(a: &[f32], rs: usize, kc: usize, panel: &mut [f32]) {
    let rows: [&[f32]; MR] = core::array::from_fn(|ii| &a[ii * rs..ii * rs + kc]);
    let full = kc - kc % 8;
    #[cfg(target_arch = "x86_64")]
    let transposed = match <&[&[f32]; 8]>::try_from(&rows[..]) {
        Ok(rows8) if matches!(best_isa(), Isa::Avx2 | Isa::Avx512) => {
            // SAFETY: AVX comes with the AVX2 or AVX-512 detected; each row
            // holds kc >= full floats and the panel full·8 (its MR·kc).
            unsafe { x86::pack_a8_avx(rows8, rs, full / 8, &mut panel[..full * 8], 8) };
            true
        }
        _ => false,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let transposed = false;
    let blocks = if transposed { 0 } else { full * MR };
    for (pb, dst) in panel[..blocks].chunks_exact_mut(8 * MR).enumerate() {
        // Every row a few lines ahead: a weight streams from memory once
        // per call, MR rows at a time (too many streams for the hardware
        // prefetchers to follow).
        #[cfg(target_arch = "x86_64")]
        if pb % 2 == 0 {
            for row in &rows {
                // SAFETY: a prefetch never faults, whatever the address.
                unsafe {
                    core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                        row.as_ptr().wrapping_add(pb * 8 + 64) as *const i8,
                    )
                };
            }
        }
        let mut block = [[0f32; 8]; MR];
        for (b, row) in block.iter_mut().zip(&rows) {
            b.copy_from_slice(&row[pb * 8..pb * 8 + 8]);
        }
        for (q, out) in dst.chunks_exact_mut(MR).enumerate() {
            for (o, b) in out.iter_mut().zip(&block) {
                *o = b[q];
            }
        }
    }
    for p in full..kc {
        for (ii, row) in rows.iter().enumerate() {
            panel[p * MR + ii] = row[p];
        }
    }
}

/// Packs a row-major `m × k` matrix into panels of `tm` rows over the
/// whole depth (`panels[t·k·tm + p·tm + i]` = element `(t·tm + i, p)`),
/// rows past `m` zero: the direct convolution's weights, packed on every
/// call. Each whole group of eight rows goes through the register
/// transposes on x86 with AVX; the other rows (and the last `k % 8`
/// columns) are copied row by row, reading each row in order (gathering
/// the weight column by column was a large share of a 60×2880 1×3
/// convolution over 40 outputs).
pub(crate) fn pack_row_panels(a: &[f32], m: usize, k: usize, tm: usize, panels: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    let full = k - k % 8;
    for (t, panel) in panels.chunks_exact_mut(k * tm).enumerate() {
        let m0 = t * tm;
        // Groups of eight rows that exist, through the transposes.
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if matches!(best_isa(), Isa::Avx2 | Isa::Avx512) && full > 0 {
            while done + 8 <= tm && m0 + done + 8 <= m {
                let rows: [&[f32]; 8] = core::array::from_fn(|ii| &a[(m0 + done + ii) * k..][..k]);
                let out = &mut panel[done..][..(full - 1) * tm + 8];
                // SAFETY: AVX comes with the AVX2 or AVX-512 detected; each
                // row holds k >= full floats, `out` (full − 1)·tm + 8 and
                // tm >= 8.
                unsafe { x86::pack_a8_avx(&rows, k, full / 8, out, tm) };
                for p in full..k {
                    for (ii, row) in rows.iter().enumerate() {
                        panel[p * tm + done + ii] = row[p];
                    }
                }
                done += 8;
            }
        }
        for ii in done..tm {
            let dst = panel[ii..].iter_mut().step_by(tm);
            match a.get((m0 + ii) * k..(m0 + ii + 1) * k) {
                Some(row) if m0 + ii < m => dst.zip(row).for_each(|(d, &v)| *d = v),
                _ => dst.for_each(|d| *d = 0.0),
            }
        }
    }
}

/// Packs rows `i0..i0 + h` (columns `pc..pc + kc`) of any-strided `A`
/// into an `mr`-interleaved panel, zero-filling rows `h..mr`.
pub(super) fn pack_a_strided(
    a: MatRef<'_>,
    i0: usize,
    pc: usize,
    h: usize,
    mr: usize,
    kc: usize,
    panel: &mut [f32],
) {
    for ii in 0..mr {
        if ii < h {
            let row = (i0 + ii) * a.rs + pc * a.cs;
            for p in 0..kc {
                panel[p * mr + ii] = a.data[row + p * a.cs];
            }
        } else {
            for p in 0..kc {
                panel[p * mr + ii] = 0.0;
            }
        }
    }
}

/// Rows per panel of a left operand packed ahead of time ([`PanelsA`]):
/// the AVX-512 micro-kernel's `MR`, so that kernel reads its panels in
/// place.
pub const A_PANEL: usize = 8;

/// A left operand (`m × k`) packed ahead of time: panels of [`A_PANEL`]
/// rows over the whole depth, element `(i, p)` at
/// `data[(i / 8)·8k + p·8 + i % 8]`, rows past `m` zero. A convolution's
/// weight is stored this way at build time ([`pack_a_panels`]), so no call
/// packs it again.
#[derive(Clone, Copy, Debug)]
pub struct PanelsA<'a> {
    /// The panels.
    pub data: &'a [f32],
}

/// Floats of a [`PanelsA`] holding `m × k`.
pub fn panels_a_len(m: usize, k: usize) -> usize {
    m.next_multiple_of(A_PANEL) * k
}

/// Writes row-major-or-strided `a` (`m × k`) into `dst` in the
/// [`PanelsA`] layout; false when `a` or `dst` is too small.
pub fn pack_a_panels(a: MatRef<'_>, m: usize, k: usize, dst: &mut [f32]) -> bool {
    if !a.fits(m, k) || dst.len() < panels_a_len(m, k) {
        return false;
    }
    for (b, panel) in dst[..panels_a_len(m, k)]
        .chunks_exact_mut(A_PANEL * k.max(1))
        .enumerate()
    {
        let i0 = b * A_PANEL;
        pack_a_strided(a, i0, 0, A_PANEL.min(m - i0), A_PANEL, k, panel);
    }
    true
}

/// Packs rows `i0..i0 + h` (depth `pc..pc + kc`) of a [`PanelsA`] of depth
/// `k` into an `mr`-interleaved panel, zero-filling rows `h..mr` (for
/// micro-kernels whose `MR` is not [`A_PANEL`]: AVX2's 6, the scalar 4).
#[allow(clippy::too_many_arguments)]
pub(super) fn repack_panels(
    a: &[f32],
    k: usize,
    i0: usize,
    pc: usize,
    h: usize,
    mr: usize,
    kc: usize,
    panel: &mut [f32],
) {
    let done = match mr {
        6 if h == mr => repack_whole::<6>(a, k, i0, pc, kc, panel),
        4 if h == mr => repack_whole::<4>(a, k, i0, pc, kc, panel),
        _ => false,
    };
    if !done {
        for ii in 0..mr {
            let i = i0 + ii;
            let src = (i / A_PANEL) * A_PANEL * k + pc * A_PANEL + i % A_PANEL;
            for p in 0..kc {
                panel[p * mr + ii] = if ii < h { a[src + p * A_PANEL] } else { 0.0 };
            }
        }
    }
}

/// [`repack_panels`] of `MR` (at most [`A_PANEL`]) rows that all exist,
/// depth by depth from the one or two source panels holding them, with
/// the rows' offset in their first panel a constant so each depth's copy
/// is a few fixed moves (a float-by-float gather at stride 8, or a copy
/// through a stack buffer, took 3–4 times as long). Returns false for an
/// offset without a specialization.
#[inline(always)]
fn repack_whole<const MR: usize>(
    a: &[f32],
    k: usize,
    i0: usize,
    pc: usize,
    kc: usize,
    panel: &mut [f32],
) -> bool {
    let (q, r) = (i0 / A_PANEL, i0 % A_PANEL);
    let depth = |q: usize| &a[q * A_PANEL * k + pc * A_PANEL..][..kc * A_PANEL];
    let first = depth(q);
    // The rows reach into the next panel only when they do not fit this one.
    let second = if r + MR > A_PANEL {
        depth(q + 1)
    } else {
        first
    };
    let panel = &mut panel[..kc * MR];
    match r {
        0 => repack_from::<MR, 0>(first, second, panel),
        2 => repack_from::<MR, 2>(first, second, panel),
        4 => repack_from::<MR, 4>(first, second, panel),
        6 => repack_from::<MR, 6>(first, second, panel),
        _ => return false,
    }
    true
}

/// The copies of [`repack_whole`] for rows from offset `R` of `first`'s
/// panel on, continuing into `second`'s.
#[inline(always)]
fn repack_from<const MR: usize, const R: usize>(first: &[f32], second: &[f32], panel: &mut [f32]) {
    let sources = first
        .chunks_exact(A_PANEL)
        .zip(second.chunks_exact(A_PANEL));
    for (d, (s0, s1)) in panel.chunks_exact_mut(MR).zip(sources) {
        if R + MR <= A_PANEL {
            d.copy_from_slice(&s0[R..R + MR]);
        } else {
            d[..A_PANEL - R].copy_from_slice(&s0[R..]);
            d[A_PANEL - R..].copy_from_slice(&s1[..R + MR - A_PANEL]);
        }
    }
}
