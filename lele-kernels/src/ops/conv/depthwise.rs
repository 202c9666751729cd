//! Direct depthwise convolution (one input channel per group).
use super::{Conv, ConvGeom};

/// One channel of a depthwise convolution, accumulated into `out` (which
/// holds the bias). Compiled twice: for the baseline target and with AVX2+FMA
/// (chosen at run time), so the row loops vectorize eight wide.
pub(super) fn depthwise_plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(
        crate::ops::gemm::best_isa(),
        crate::ops::gemm::Isa::Avx2 | crate::ops::gemm::Isa::Avx512
    ) {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { plane_avx2(conv, g, xp, wk, out) };
    }
    plane(conv, g, xp, wk, out)
}

/// [`plane`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_avx2(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    plane(conv, g, xp, wk, out)
}

#[inline(always)]
fn plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
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
                if hi <= lo {
                    continue;
                }
                // First input column read: lo·sw + base (inside the row).
                let start = ((lo * sw) as isize + base) as usize;
                let dst = &mut orow[lo..hi];
                if sw == 1 {
                    for (o, &v) in dst.iter_mut().zip(&xrow[start..start + (hi - lo)]) {
                        *o += wv * v;
                    }
                } else {
                    for (o, &v) in dst.iter_mut().zip(xrow[start..].iter().step_by(sw)) {
                        *o += wv * v;
                    }
                }
            }
        }
    }
}
