//! Direct depthwise convolution (one input channel per group).
use super::{Conv, ConvGeom};

/// One channel of a depthwise convolution, accumulated into `out` (which
/// holds the bias).
pub(super) fn depthwise_plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    for oh in 0..g.oh {
        let orow = &mut out[oh * g.ow..(oh + 1) * g.ow];
        for ki in 0..g.kh {
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            if hh < 0 || hh >= ih {
                continue;
            }
            let xrow = &xp[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
            for kj in 0..g.kw {
                let wv = wk[ki * g.kw + kj];
                let base = (kj * dw) as isize - g.pl as isize;
                // Output columns whose input column is inside the row.
                let lo = if base >= 0 {
                    0
                } else {
                    ((-base) as usize).div_ceil(sw)
                };
                let hi = if iw - 1 - base < 0 {
                    0
                } else {
                    (((iw - 1 - base) as usize) / sw + 1).min(g.ow)
                };
                if sw == 1 {
                    for ow in lo..hi {
                        orow[ow] += wv * xrow[(ow as isize + base) as usize];
                    }
                } else {
                    for ow in lo..hi {
                        orow[ow] += wv * xrow[((ow * sw) as isize + base) as usize];
                    }
                }
            }
        }
    }
}
