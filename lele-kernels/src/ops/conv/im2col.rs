//! im2col: unfolds input patches into the `B` operand of the conv GEMM.
use super::{Conv, ConvGeom};

/// Fills `col` (`k × cw`, row-major) with the input patches of output
/// positions `j0..j0 + cw` of one group.
pub(super) fn im2col(conv: &Conv, g: &ConvGeom, xg: &[f32], j0: usize, cw: usize, col: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    let mut r = 0;
    for c in 0..g.cg {
        let xc = &xg[c * g.x.h * g.x.w..(c + 1) * g.x.h * g.x.w];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &mut col[r * cw..(r + 1) * cw];
                r += 1;
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
                        let base = (kj * dw) as isize - g.pl as isize;
                        for (t, d) in dst.iter_mut().enumerate() {
                            let ww = ((ow0 + t) * sw) as isize + base;
                            *d = if ww >= 0 && ww < iw {
                                xrow[ww as usize]
                            } else {
                                0.0
                            };
                        }
                    }
                    j += seg;
                }
            }
        }
    }
}
