//! The transforms of each tile size: the weight's `G·g·Gᵀ`, the input's
//! `Bᵀ·d·B` and the output's `Aᵀ·M·A` for `F(2×2, 3×3)` (4×4 input tiles)
//! and `F(4×4, 3×3)` (6×6), over runs of tiles, written so that the
//! compiler turns the loops over tiles into vectors.
use super::moves::Moves;
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
pub(super) fn transform_inputs4<M: Moves, const L: usize>(
    moves: M,
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
        moves.split_phases(&line[..4 * L + 4], ph, L + 1);
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
