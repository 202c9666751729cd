//! Direct depthwise convolution (one input channel per group).
use super::{Conv, ConvGeom, valid_range};

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

/// Widest input row the stride-2 path splits on the stack.
const SPLIT_MAX: usize = 4096;

#[inline(always)]
fn plane(conv: &Conv, g: &ConvGeom, xp: &[f32], wk: &[f32], out: &mut [f32]) {
    let [sh, sw] = conv.strides;
    let [dh, dw] = conv.dilations;
    let (ih, iw) = (g.x.h as isize, g.x.w as isize);
    // Stride 2: each input row is split into its even and odd columns, so
    // every tap reads a contiguous run (a strided read does not vectorize).
    let split = sw == 2 && g.x.w <= SPLIT_MAX;
    let mut halves = [[0f32; SPLIT_MAX / 2]; 2];
    for oh in 0..g.oh {
        let orow = &mut out[oh * g.ow..(oh + 1) * g.ow];
        for ki in 0..g.kh {
            let hh = (oh * sh + ki * dh) as isize - g.pt as isize;
            if hh < 0 || hh >= ih {
                continue;
            }
            let xrow = &xp[hh as usize * g.x.w..(hh as usize + 1) * g.x.w];
            if split {
                let [even, odd] = &mut halves;
                for (i, pair) in xrow.chunks(2).enumerate() {
                    even[i] = pair[0];
                    if let Some(&v) = pair.get(1) {
                        odd[i] = v;
                    }
                }
            }
            for kj in 0..g.kw {
                let wv = wk[ki * g.kw + kj];
                // Input column of output column t: base + t·sw.
                let base = (kj * dw) as isize - g.pl as isize;
                let (lo, hi) = valid_range(base, sw as isize, iw, g.ow);
                if hi <= lo {
                    continue;
                }
                // First input column read: lo·sw + base (inside the row).
                let start = ((lo * sw) as isize + base) as usize;
                let dst = &mut orow[lo..hi];
                let src = if sw == 1 {
                    &xrow[start..start + (hi - lo)]
                } else if split {
                    // Column `start + 2i` is element `start / 2 + i` of
                    // the half of `start`'s parity.
                    &halves[start % 2][start / 2..start / 2 + (hi - lo)]
                } else {
                    for (o, &v) in dst.iter_mut().zip(xrow[start..].iter().step_by(sw)) {
                        *o += wv * v;
                    }
                    continue;
                };
                for (o, &v) in dst.iter_mut().zip(src) {
                    *o += wv * v;
                }
            }
        }
    }
}
