//! Implicit im2col: input patches packed straight into the `B` panels of
//! the conv GEMM.
use super::{Conv, ConvGeom};
use crate::ops::gemm::{GEMM_NC, PackB, scatter_row};

/// Most columns [`Im2col::one_row`] packs at once.
const ROW_COLUMNS: usize = 8;

/// The im2col matrix of one group (`k × ohw`, row `(c, ki, kj)`, column
/// = output position) as a GEMM operand that packs itself straight from the
/// input: the matrix never exists in memory.
pub(super) struct Im2col<'a> {
    pub(super) conv: &'a Conv,
    pub(super) g: &'a ConvGeom,
    /// The group's input channels.
    pub(super) xg: &'a [f32],
}

impl PackB for Im2col<'_> {
    fn pack(&self, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32]) {
        if nr == 1 {
            // Columns stored contiguously (a product over a few output
            // positions): each column gathered in order.
            return self.columns(p0, kc, j0, nc, dst);
        }
        let mut buf = [0f32; GEMM_NC];
        // The GEMM never asks for more than GEMM_NC columns at once.
        let nc = nc.min(GEMM_NC);
        for p in 0..kc {
            self.row(p0 + p, j0, &mut buf[..nc]);
            scatter_row(&buf[..nc], p, kc, nr, dst);
        }
    }
}

impl Im2col<'_> {
    /// Rows `p0..p0 + kc` of columns `j0..j0 + nc`, column `j` at
    /// `dst[j·kc..]`, the taps `(c, ki, kj)` in order. Whole columns go
    /// through [`Im2col::one_row`] by output row; the rest run by run
    /// ([`Im2col::columns_in_runs`]). Row by row ([`Im2col::row`] and a
    /// scatter) cost a range computation per row for a few floats, and a
    /// voice detector's convolutions over four frames spent a large share of
    /// the model's time packing.
    fn columns(&self, p0: usize, kc: usize, j0: usize, nc: usize, dst: &mut [f32]) {
        let g = self.g;
        if p0 == 0 && kc == g.k() && kc > 0 && g.ow > 0 {
            // Whole columns: those of one output row at a time.
            let mut done = 0;
            while done < nc {
                let first = j0 + done;
                let cn = (g.ow - first % g.ow).min(nc - done).min(ROW_COLUMNS);
                self.one_row(first, cn, &mut dst[done * kc..(done + cn) * kc]);
                done += cn;
            }
            return;
        }
        self.columns_in_runs(p0, kc, j0, nc, dst);
    }

    /// [`Im2col::columns`] run by run (a run: the taps of one `(c, ki)`),
    /// each column on its own: one bounds check per tap, no division.
    fn columns_in_runs(&self, p0: usize, kc: usize, j0: usize, nc: usize, dst: &mut [f32]) {
        let (conv, g) = (self.conv, self.g);
        let [sh, sw] = conv.strides;
        let [dh, dw] = conv.dilations;
        let (ih, iw) = (g.x.h as isize, g.x.w as isize);
        let (taps, ihw) = (g.kh * g.kw, g.x.h * g.x.w);
        for (j, col) in dst.chunks_exact_mut(kc.max(1)).take(nc).enumerate() {
            let (oh, ow) = ((j0 + j) / g.ow, (j0 + j) % g.ow);
            let top = (oh * sh) as isize - g.pt as isize;
            let left = (ow * sw) as isize - g.pl as isize;
            let mut r = p0;
            // The first tap; later runs start at kj = 0 of the next (c, ki).
            let (mut c, mut ki, mut kj0) = (p0 / taps, (p0 / g.kw) % g.kh, p0 % g.kw);
            while r < p0 + kc {
                // The run of taps of one (c, ki), kj from kj0 on.
                let run = (g.kw - kj0).min(p0 + kc - r);
                let out = &mut col[r - p0..r - p0 + run];
                let hh = top + (ki * dh) as isize;
                let first = left + (kj0 * dw) as isize;
                let xrow = (0..ih)
                    .contains(&hh)
                    .then(|| &self.xg[c * ihw + hh as usize * g.x.w..][..g.x.w]);
                match xrow {
                    None => out.fill(0.0),
                    // A long run (a wide 1-D kernel: Silero's STFT is 256
                    // taps): the columns inside the input as one range.
                    Some(x) if run >= 16 => copy_inside(x, first, dw, out),
                    Some(x) => {
                        for (t, o) in out.iter_mut().enumerate() {
                            let ww = first + (t * dw) as isize;
                            *o = if (0..iw).contains(&ww) {
                                x[ww as usize]
                            } else {
                                0.0
                            };
                        }
                    }
                }
                r += run;
                kj0 = 0;
                ki += 1;
                if ki == g.kh {
                    ki = 0;
                    c += 1;
                }
            }
        }
    }

    /// [`Im2col::columns`] for whole columns (every tap) of `cn` (at most
    /// [`ROW_COLUMNS`]) output positions from `first` on that lie in one
    /// output row: per `(ki, c)` the input row is looked up once for all of
    /// them; a column whose taps all lie inside the row takes them with
    /// fixed-size moves (at dilation 1 and the usual kernel widths), one
    /// reaching into the padding tap by tap.
    fn one_row(&self, first: usize, cn: usize, cols: &mut [f32]) {
        match (self.conv.dilations[1], self.g.kw) {
            (1, 1) => self.one_row_taps::<1>(first, cn, cols),
            (1, 2) => self.one_row_taps::<2>(first, cn, cols),
            (1, 3) => self.one_row_taps::<3>(first, cn, cols),
            (1, 4) => self.one_row_taps::<4>(first, cn, cols),
            (1, 5) => self.one_row_taps::<5>(first, cn, cols),
            (1, 7) => self.one_row_taps::<7>(first, cn, cols),
            _ => self.one_row_taps::<0>(first, cn, cols),
        }
    }

    /// [`Im2col::one_row`] for `kW == KW` at dilation 1, or (`KW == 0`)
    /// any width and dilation. Column by column, the input channels inner:
    /// which taps of the column lie inside the input row is worked out once
    /// per column, and a column inside takes each channel's taps as one
    /// fixed-size move.
    #[inline(always)]
    fn one_row_taps<const KW: usize>(&self, first: usize, cn: usize, cols: &mut [f32]) {
        let (conv, g) = (self.conv, self.g);
        let [sh, sw] = conv.strides;
        let [dh, dw] = conv.dilations;
        let (kw, k, iw) = (if KW > 0 { KW } else { g.kw }, g.k(), g.x.w);
        let (oh, ow0) = (first / g.ow, first % g.ow);
        let ihw = g.x.h * iw;
        for ki in 0..g.kh {
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            let row = (0..g.x.h as isize).contains(&hh).then(|| hh as usize * iw);
            for (t, col) in cols.chunks_exact_mut(k).take(cn).enumerate() {
                // The column's first tap in the input row, and its taps
                // inside the row, `lo..hi`.
                let s = ((ow0 + t) * sw) as isize - g.pl as isize;
                let (lo, hi) = valid_range(s, dw as isize, iw as isize, kw);
                let runs = col
                    .chunks_exact_mut(g.kh * kw)
                    .map(|c| &mut c[ki * kw..][..kw]);
                let Some(r) = row else {
                    runs.for_each(|out| out.fill(0.0));
                    continue;
                };
                let xs = self.xg.chunks_exact(ihw).map(|xc| &xc[r..][..iw]);
                if lo == 0 && hi == kw {
                    let s = s as usize;
                    for (out, x) in runs.zip(xs) {
                        if KW > 0 {
                            out.copy_from_slice(&x[s..][..KW]);
                        } else {
                            strided_copy(&x[s..], dw, out);
                        }
                    }
                } else if KW > 0 {
                    // Reaching into the padding, a few taps: each chosen
                    // in registers (no calls to fill or copy two floats).
                    for (out, x) in runs.zip(xs) {
                        for (q, o) in out.iter_mut().enumerate() {
                            *o = if (lo..hi).contains(&q) {
                                x[(s + q as isize) as usize]
                            } else {
                                0.0
                            };
                        }
                    }
                } else {
                    for (out, x) in runs.zip(xs) {
                        copy_inside(x, s, dw, out);
                    }
                }
            }
        }
    }

    /// Row `r` (`c·kH·kW + ki·kW + kj`) for output positions
    /// `j0..j0 + row.len()`.
    fn row(&self, r: usize, j0: usize, row: &mut [f32]) {
        let (conv, g) = (self.conv, self.g);
        let [sh, sw] = conv.strides;
        let [dh, dw] = conv.dilations;
        let ih = g.x.h as isize;
        let (c, ki, kj) = (r / (g.kh * g.kw), (r / g.kw) % g.kh, r % g.kw);
        let xc = &self.xg[c * g.x.h * g.x.w..(c + 1) * g.x.h * g.x.w];
        let cw = row.len();
        let mut j = 0;
        while j < cw {
            let pos = j0 + j;
            let (oh, ow0) = (pos / g.ow, pos % g.ow);
            let seg = (g.ow - ow0).min(cw - j);
            let dst = &mut row[j..j + seg];
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            if hh < 0 || hh >= ih {
                dst.fill(0.0);
            } else {
                let xrow = &xc[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
                // Input column of output column t: first + t·sw. The
                // columns inside the input form one range [lo, hi).
                let first = (ow0 * sw + kj * dw) as isize - g.pl as isize;
                copy_inside(xrow, first, sw, dst);
            }
            j += seg;
        }
    }
}

/// `out[t] = x[first + t·step]` where that column lies inside `x`, zero
/// where it falls in the padding (`step > 0`).
#[inline]
fn copy_inside(x: &[f32], first: isize, step: usize, out: &mut [f32]) {
    let (lo, hi) = valid_range(first, step as isize, x.len() as isize, out.len());
    out[..lo].fill(0.0);
    out[hi..].fill(0.0);
    if hi > lo {
        let start = (first + (lo * step) as isize) as usize;
        strided_copy(&x[start..], step, &mut out[lo..hi]);
    }
}

/// `dst[t] = src[t·step]` (`src` holds at least `(dst.len() - 1)·step + 1`
/// floats). Stride 2 takes the even lanes of two vectors at a time on
/// every vector ISA (staging was a large share of a wide strided
/// convolution with few channels, such as 48→24 3×3 s2 at 240²); otherwise
/// the loops run over fixed-size chunks, so the compiler turns stride 2
/// into vector shuffles instead of a scalar loop with a bounds check per
/// element.
pub(super) fn strided_copy(src: &[f32], step: usize, dst: &mut [f32]) {
    if step == 1 {
        let n = dst.len();
        dst.copy_from_slice(&src[..n]);
        return;
    }
    if step == 2 && super::row_kernels::evens(crate::simd::best_isa(), src, dst) {
        return;
    }
    let whole = (src.len() / step).min(dst.len());
    let (head, tail) = dst.split_at_mut(whole);
    if step == 2 {
        for (d, c) in head.iter_mut().zip(src.chunks_exact(2)) {
            *d = c[0];
        }
    } else {
        for (d, c) in head.iter_mut().zip(src.chunks_exact(step)) {
            *d = c[0];
        }
    }
    for (t, d) in tail.iter_mut().enumerate() {
        *d = src[(whole + t) * step];
    }
}

/// The output columns `t` in `0..n` whose input column `first + t·step`
/// lies in `0..len`, as a range `[lo, hi)` (`step > 0`; empty gives
/// `lo == hi`).
pub(crate) fn valid_range(first: isize, step: isize, len: isize, n: usize) -> (usize, usize) {
    let n = n as isize;
    // lo: smallest t with first + t·step >= 0.
    let lo = if first >= 0 {
        0
    } else {
        (-first + step - 1) / step
    };
    // hi: smallest t with first + t·step >= len.
    let hi = if first >= len {
        0
    } else {
        (len - first + step - 1) / step
    };
    let lo = lo.clamp(0, n);
    let hi = hi.clamp(lo, n);
    (lo as usize, hi as usize)
}

#[cfg(test)]
mod tests {
    use super::{strided_copy, valid_range};

    /// Steps 1–3 (stride 2 takes the AVX-512 or AVX2 shuffles where there are)
    /// over lengths around the 16-output vectors, each from a source of
    /// exactly the floats the copy may read, at offsets that move the
    /// loads off alignment: every output equals its input.
    #[test]
    fn strided_copy_takes_every_step_th_input() {
        let pool: alloc::vec::Vec<f32> = (0..400).map(|i| i as f32 * 0.5 - 7.0).collect();
        for step in 1..4 {
            for n in 0..70 {
                for offset in [0, 1, 5] {
                    let need = if n == 0 { 0 } else { (n - 1) * step + 1 };
                    let src = &pool[offset..offset + need];
                    let mut dst = alloc::vec![f32::NAN; n];
                    strided_copy(src, step, &mut dst);
                    for (t, &d) in dst.iter().enumerate() {
                        assert_eq!(d, src[t * step], "step {step} n {n} offset {offset} t {t}");
                    }
                }
            }
        }
    }

    #[test]
    fn valid_range_matches_a_direct_scan() {
        for first in -7isize..9 {
            for step in 1isize..4 {
                for len in 0isize..7 {
                    for n in 0usize..9 {
                        let inside: alloc::vec::Vec<usize> = (0..n)
                            .filter(|&t| (0..len).contains(&(first + t as isize * step)))
                            .collect();
                        let (lo, hi) = valid_range(first, step, len, n);
                        assert_eq!(
                            inside,
                            (lo..hi).collect::<alloc::vec::Vec<_>>(),
                            "{first} {step} {len} {n}"
                        );
                    }
                }
            }
        }
    }

    /// The im2col operand packed column by column (a product over at most
    /// eight output positions reads B's columns contiguously) holds what the
    /// row-by-row packing holds, transposed: pads on every side, strides,
    /// dilations, 1-D and 2-D kernels (short runs of taps and wide ones),
    /// depth ranges that start and end inside a run of taps, column ranges
    /// that start inside an output row, whole columns through the staged row
    /// window and ones too wide for it.
    #[test]
    fn im2col_columns_match_rows() {
        use super::super::tests::conv;
        use super::Im2col;
        use crate::ops::gemm::PackB;
        use crate::ops::test_util::*;
        use alloc::vec;
        // (c, h, w, kh, kw, strides, pads, dilations)
        type Case = (
            usize,
            usize,
            usize,
            usize,
            usize,
            [usize; 2],
            [usize; 4],
            [usize; 2],
        );
        let cases: &[Case] = &[
            (3, 1, 9, 1, 3, [1, 1], [0, 1, 0, 1], [1, 1]),
            (2, 1, 12, 1, 5, [1, 2], [0, 2, 0, 3], [1, 2]),
            (4, 5, 6, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1]),
            (2, 7, 8, 3, 2, [2, 2], [0, 1, 2, 0], [1, 1]),
            (3, 6, 7, 2, 3, [1, 3], [2, 0, 1, 2], [2, 1]),
            // Wide 1-D kernels (runs of taps copied as one range, Silero's
            // STFT), with padding on both sides, a stride and a dilation.
            (1, 1, 300, 1, 40, [1, 7], [0, 10, 0, 12], [1, 1]),
            (2, 1, 200, 1, 20, [1, 3], [0, 25, 0, 5], [1, 2]),
            // Kernel widths with their own fixed-size gathers (1, 4, 7) and a
            // window of one output row wider than the staged 256 floats.
            (3, 4, 5, 2, 1, [1, 2], [1, 0, 0, 0], [1, 1]),
            (2, 2, 11, 1, 4, [1, 2], [0, 3, 0, 3], [1, 1]),
            (2, 1, 15, 1, 7, [1, 1], [0, 3, 0, 3], [1, 1]),
            (1, 1, 704, 1, 256, [1, 128], [0, 0, 0, 0], [1, 1]),
        ];
        for (ci, &(c, h, w, kh, kw, strides, pads, dil)) in cases.iter().enumerate() {
            let x = rand_vec(c * h * w, 900 + ci as u64);
            let wt = rand_vec(2 * c * kh * kw, 950 + ci as u64);
            let inputs = [
                Some(t(&x, &[1, c, h, w])),
                Some(t(&wt, &[2, c, kh, kw])),
                None,
            ];
            let op = conv(1, strides, pads, dil);
            let g = op.geom(&inputs).unwrap();
            let im = Im2col {
                conv: &op,
                g: &g,
                xg: &x,
            };
            let (k, n) = (g.k(), g.ohw());
            for (p0, kc) in [(0, k), (1, k - 2), (k / 2, k - k / 2)] {
                for (j0, nc) in [(0, n), (n / 3, n - n / 3 - 1)] {
                    let mut columns = vec![f32::NAN; nc * kc];
                    im.pack(p0, kc, j0, nc, 1, &mut columns);
                    // One panel as wide as the range: row p at p·nc.
                    let mut rows = vec![f32::NAN; nc * kc];
                    im.pack(p0, kc, j0, nc, nc, &mut rows);
                    for p in 0..kc {
                        for j in 0..nc {
                            assert_eq!(
                                columns[j * kc + p].to_bits(),
                                rows[p * nc + j].to_bits(),
                                "case {ci}: depth {p0}+{p} of {k}, column {j0}+{j} of {n}"
                            );
                        }
                    }
                }
            }
        }
    }
}
