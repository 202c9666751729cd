//! The transforms of each tile size: the weight's `G·g·Gᵀ`, the input's
//! `Bᵀ·d·B` and the output's `Aᵀ·M·A` for `F(2×2, 3×3)` (4×4 input tiles)
//! and `F(4×4, 3×3)` (6×6), over runs of tiles, written so that the
//! compiler turns the loops over tiles into vectors.
use super::{MAX_POS, OUT_ROW, RUN, STAGE};

/// `G·g·Gᵀ` of a 3×3 kernel `g` (row-major) for output tiles of `t × t`
/// (2: Lavin and Gray's `F(2×2, 3×3)` at 0, ±1, ∞; 4: `F(4×4, 3×3)` at
/// 0, ±1, ±2, ∞), row-major `(t + 2) × (t + 2)` in the first floats.
pub(super) fn kernel_transform(t: usize, g: &[f32]) -> [f32; MAX_POS] {
    const G2: [[f64; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];
    const G4: [[f64; 3]; 6] = [
        [1.0 / 4.0, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let gm: &[[f64; 3]] = if t == 4 { &G4 } else { &G2 };
    let a = gm.len();
    let mut u = [0f32; MAX_POS];
    for (xi, gx) in gm.iter().enumerate() {
        // Row xi of G·g.
        let row: [f64; 3] =
            core::array::from_fn(|j| (0..3).map(|r| gx[r] * f64::from(g[r * 3 + j])).sum());
        for (nu, gn) in gm.iter().enumerate() {
            u[xi * a + nu] = (0..3).map(|r| row[r] * gn[r]).sum::<f64>() as f32;
        }
    }
    u
}

/// `Bᵀ·d·B` of the `L` 4×4 tiles of `rows` from column `off` on (tile `u`
/// is columns `off + 2u..off + 2u + 4`): `out[4ξ + ν][u]`.
#[inline(always)]
pub(super) fn transform_inputs<const L: usize>(
    rows: &[[f32; STAGE]; 6],
    off: usize,
    out: &mut [[f32; RUN]; MAX_POS],
) {
    let r: [&[f32]; 4] = core::array::from_fn(|i| &rows[i][off..][..2 * L + 2]);
    for u in 0..L {
        let mut t = [[0f32; 4]; 4];
        for (ti, row) in t.iter_mut().zip(&r) {
            let [d0, d1, d2, d3] = [row[2 * u], row[2 * u + 1], row[2 * u + 2], row[2 * u + 3]];
            *ti = [d0 - d2, d1 + d2, d2 - d1, d1 - d3];
        }
        for nu in 0..4 {
            out[nu][u] = t[0][nu] - t[2][nu];
            out[4 + nu][u] = t[1][nu] + t[2][nu];
            out[8 + nu][u] = t[2][nu] - t[1][nu];
            out[12 + nu][u] = t[1][nu] - t[3][nu];
        }
    }
}

/// `Bᵀ·d` for one line `d` of a 6×6 tile of `F(4×4, 3×3)` (its `Bᵀ` at 0,
/// ±1, ±2, ∞).
#[inline(always)]
fn input_line4([d0, d1, d2, d3, d4, d5]: [f32; 6]) -> [f32; 6] {
    [
        4.0 * d0 - 5.0 * d2 + d4,
        (d3 + d4) - 4.0 * (d1 + d2),
        4.0 * (d1 - d2) - (d3 - d4),
        2.0 * (d3 - d1) + (d4 - d2),
        2.0 * (d1 - d3) + (d4 - d2),
        4.0 * d1 - 5.0 * d3 + d5,
    ]
}

/// `Bᵀ·d·B` of the `L` 6×6 tiles of `rows` from column `off` on (tile `u`
/// is columns `off + 4u..off + 4u + 6`): `out[6ξ + ν][u]`. First down
/// every column, contiguous (so it compiles to vectors), into `lines`;
/// each line then split by column phase (`q mod 4`) into `down`, so that
/// across, tile `u`'s six columns are element `u` or `u + 1` of four
/// contiguous phase rows.
#[inline(always)]
pub(super) fn transform_inputs4<const AVX512: bool, const L: usize>(
    rows: &[[f32; STAGE]; 6],
    off: usize,
    lines: &mut [[f32; 4 * RUN + 4]; 6],
    down: &mut [[[f32; RUN + 1]; 4]; 6],
    out: &mut [[f32; RUN]; MAX_POS],
) {
    let row = |i: usize| &rows[i][off..][..4 * L + 4];
    let r = [row(0), row(1), row(2), row(3), row(4), row(5)];
    for q in 0..4 * L + 4 {
        let line = input_line4([r[0][q], r[1][q], r[2][q], r[3][q], r[4][q], r[5][q]]);
        for (xi, v) in line.into_iter().enumerate() {
            lines[xi][q] = v;
        }
    }
    // down[ξ][k][u]: row ξ of Bᵀ·d at column 4u + k (u..=L).
    for (line, ph) in lines.iter().zip(down.iter_mut()) {
        split_phases::<AVX512>(&line[..4 * L + 4], ph, L + 1);
    }
    for (xi, ph) in down.iter().enumerate() {
        for u in 0..L {
            let line = input_line4([
                ph[0][u],
                ph[1][u],
                ph[2][u],
                ph[3][u],
                ph[0][u + 1],
                ph[1][u + 1],
            ]);
            for nu in 0..6 {
                out[6 * xi + nu][u] = line[nu];
            }
        }
    }
}

/// `ph[k][u] = src[4u + k]` for `u < n` (`src` holds `4n` floats): with
/// AVX-512 sixteen `u` at a time by permutes, with AVX2 eight by
/// transposes, the rest one by one.
#[inline(always)]
pub(super) fn split_phases<const AVX512: bool>(
    src: &[f32],
    ph: &mut [[f32; RUN + 1]; 4],
    n: usize,
) {
    let n = n.min(src.len() / 4).min(RUN + 1);
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if AVX512 {
        // SAFETY: `Moves::<true>`'s callers, the only ones passing
        // AVX512, detected AVX-512F (`input_avx512`).
        done = unsafe { split_phases_avx512(src, ph, n) };
    } else if crate::ops::gemm::best_isa() == crate::ops::gemm::Isa::Avx2 {
        // SAFETY: AVX2 was detected.
        done = unsafe { split_phases_avx2(src, ph, n) };
    }
    for u in done..n {
        for (k, p) in ph.iter_mut().enumerate() {
            p[u] = src[4 * u + k];
        }
    }
}

/// [`split_phases`] for whole groups of eight `u` with AVX2 (each group a
/// transpose of 8 × 4 floats); returns how many `u` it did.
///
/// # Safety
/// AVX2 is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn split_phases_avx2(
    src: &[f32],
    ph: &mut [[f32; RUN + 1]; 4],
    n: usize,
) -> usize {
    use core::arch::x86_64::*;
    let mut u = 0;
    while u + 8 <= n {
        // SAFETY: floats 4u..4u + 32 are inside `src` (4n <= src.len()),
        // and each phase row holds u + 8 <= n <= RUN + 1 floats.
        unsafe {
            let p = src.as_ptr().add(4 * u);
            // Row r of the 8 × 4 block is src[4(u + r)..][..4]; lane half h
            // of t[i] holds row i + 4h.
            let r = [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ];
            let t = [
                _mm256_permute2f128_ps::<0x20>(r[0], r[2]),
                _mm256_permute2f128_ps::<0x31>(r[0], r[2]),
                _mm256_permute2f128_ps::<0x20>(r[1], r[3]),
                _mm256_permute2f128_ps::<0x31>(r[1], r[3]),
            ];
            // A 4 × 4 transpose in each half.
            let lo01 = _mm256_castps_pd(_mm256_unpacklo_ps(t[0], t[1]));
            let hi01 = _mm256_castps_pd(_mm256_unpackhi_ps(t[0], t[1]));
            let lo23 = _mm256_castps_pd(_mm256_unpacklo_ps(t[2], t[3]));
            let hi23 = _mm256_castps_pd(_mm256_unpackhi_ps(t[2], t[3]));
            let phases = [
                _mm256_unpacklo_pd(lo01, lo23),
                _mm256_unpackhi_pd(lo01, lo23),
                _mm256_unpacklo_pd(hi01, hi23),
                _mm256_unpackhi_pd(hi01, hi23),
            ];
            for (row, v) in ph.iter_mut().zip(phases) {
                _mm256_storeu_ps(row.as_mut_ptr().add(u), _mm256_castpd_ps(v));
            }
        }
        u += 8;
    }
    u
}

/// [`split_phases`] for whole groups of sixteen `u`; returns how many `u`
/// it did.
///
/// # Safety
/// AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn split_phases_avx512(
    src: &[f32],
    ph: &mut [[f32; RUN + 1]; 4],
    n: usize,
) -> usize {
    use core::arch::x86_64::*;
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let mut u = 0;
    while u + 16 <= n {
        // SAFETY: floats 4u..4u + 64 are inside `src` (4n <= src.len()),
        // and each phase row holds u + 16 <= n <= RUN + 1 floats.
        unsafe {
            let p = src.as_ptr().add(4 * u);
            let a = [
                _mm512_loadu_ps(p),
                _mm512_loadu_ps(p.add(16)),
                _mm512_loadu_ps(p.add(32)),
                _mm512_loadu_ps(p.add(48)),
            ];
            // Columns of even and odd offset, then each split again.
            let e01 = _mm512_permutex2var_ps(a[0], even, a[1]);
            let o01 = _mm512_permutex2var_ps(a[0], odd, a[1]);
            let e23 = _mm512_permutex2var_ps(a[2], even, a[3]);
            let o23 = _mm512_permutex2var_ps(a[2], odd, a[3]);
            let phases = [
                _mm512_permutex2var_ps(e01, even, e23),
                _mm512_permutex2var_ps(o01, even, o23),
                _mm512_permutex2var_ps(e01, odd, e23),
                _mm512_permutex2var_ps(o01, odd, o23),
            ];
            for (row, v) in ph.iter_mut().zip(phases) {
                _mm512_storeu_ps(row.as_mut_ptr().add(u), v);
            }
        }
        u += 16;
    }
    u
}

/// `Aᵀ·M·A + bias` of the first `L` tiles of `mv` (`mv[4ξ + ν][u]`): row
/// `a` of tile `u`'s outputs at `out[a][off + 2u..off + 2u + 2]`.
#[inline(always)]
pub(super) fn transform_outputs<const L: usize>(
    mv: &[&[f32; RUN]; MAX_POS],
    bias: f32,
    out: &mut [[f32; OUT_ROW]; 4],
    off: usize,
) {
    let [o0, o1, _, _] = out;
    let mut o = [&mut o0[off..][..2 * L], &mut o1[off..][..2 * L]];
    for u in 0..L {
        let mut s = [[0f32; 4]; 2];
        for nu in 0..4 {
            let [m0, m1, m2, m3] = [mv[nu][u], mv[4 + nu][u], mv[8 + nu][u], mv[12 + nu][u]];
            s[0][nu] = m0 + m1 + m2;
            s[1][nu] = m1 - m2 - m3;
        }
        for (oa, sa) in o.iter_mut().zip(&s) {
            oa[2 * u] = sa[0] + sa[1] + sa[2] + bias;
            oa[2 * u + 1] = sa[1] - sa[2] - sa[3] + bias;
        }
    }
}

/// `Aᵀ·m` for one line `m` of a tile's 6×6 products in `F(4×4, 3×3)`.
#[inline(always)]
fn output_line4([m0, m1, m2, m3, m4, m5]: [f32; 6]) -> [f32; 4] {
    let (sum12, dif12, sum34, dif34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
    [
        m0 + sum12 + sum34,
        dif12 + 2.0 * dif34,
        sum12 + 4.0 * sum34,
        dif12 + 8.0 * dif34 + m5,
    ]
}

/// `Aᵀ·M·A + bias` of the first `L` tiles of `mv` (`mv[6ξ + ν][u]`): row
/// `a` of tile `u`'s outputs at `out[a][off + 4u..off + 4u + 4]`.
#[inline(always)]
pub(super) fn transform_outputs4<const L: usize>(
    mv: &[&[f32; RUN]; MAX_POS],
    bias: f32,
    down: &mut [[[f32; RUN]; 6]; 4],
    out: &mut [[f32; OUT_ROW]; 4],
    off: usize,
) {
    // down[a][ν][u]: row a of Aᵀ·M, contiguous over tiles (u < L written
    // before read).
    for nu in 0..6 {
        for u in 0..L {
            let line = output_line4([
                mv[nu][u],
                mv[6 + nu][u],
                mv[12 + nu][u],
                mv[18 + nu][u],
                mv[24 + nu][u],
                mv[30 + nu][u],
            ]);
            for a in 0..4 {
                down[a][nu][u] = line[a];
            }
        }
    }
    for (oa, d) in out.iter_mut().zip(down.iter()) {
        let oa = &mut oa[off..][..4 * L];
        for u in 0..L {
            let line = output_line4([d[0][u], d[1][u], d[2][u], d[3][u], d[4][u], d[5][u]]);
            for j in 0..4 {
                oa[4 * u + j] = line[j] + bias;
            }
        }
    }
}
