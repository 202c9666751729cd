//! The float32 plane loops of 1-D and 2-D max and (undilated) average pools,
//! the shapes of real vision models. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]) and that the leading spatial slot is unused.
use super::{Geom, valid_taps};
use crate::ops::conv::valid_range;

/// Geometry of the two trailing slots (`H`, `W`).
#[derive(Clone, Copy)]
struct Plane {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pad0: [usize; 2],
    pad1: [usize; 2],
}

impl Plane {
    fn of(g: &Geom) -> Plane {
        Plane {
            h: g.x[1],
            w: g.x[2],
            oh: g.out[1],
            ow: g.out[2],
            k: [g.k[1], g.k[2]],
            s: [g.s[1], g.s[2]],
            d: [g.d[1], g.d[2]],
            pad0: [g.pad0[1], g.pad0[2]],
            pad1: [g.pad1[1], g.pad1[2]],
        }
    }
}

/// Max pool of every `(n, c)` plane; NaN propagates. Works a whole output
/// row per tap (the taps in row-major order, as a per-element loop would
/// visit them), so the inner loops are straight slices that vectorize; built
/// for the baseline target and with AVX2 (chosen at run time).
pub(super) fn max(g: &Geom, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(
        crate::ops::gemm::best_isa(),
        crate::ops::gemm::Isa::Avx2 | crate::ops::gemm::Isa::Avx512
    ) {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { max_avx2(g, x, y) };
    }
    max_body(g, x, y)
}

/// [`max_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn max_avx2(g: &Geom, x: &[f32], y: &mut [f32]) {
    max_body(g, x, y)
}

#[inline(always)]
fn max_body(g: &Geom, x: &[f32], y: &mut [f32]) {
    let p = Plane::of(g);
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let orow = &mut yp[oh * p.ow..(oh + 1) * p.ow];
            orow.fill(f32::NEG_INFINITY);
            let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
            let (hlo, hhi) = valid_taps(hs, p.k[0], p.d[0], p.h);
            for ki in hlo..hhi {
                let h = (hs + (ki * p.d[0]) as isize) as usize;
                let row = &xp[h * p.w..(h + 1) * p.w];
                for kj in 0..p.k[1] {
                    // Input column of output column t: first + t·s.
                    let first = (kj * p.d[1]) as isize - p.pad0[1] as isize;
                    let (lo, hi) = valid_range(first, p.s[1] as isize, p.w as isize, p.ow);
                    if hi <= lo {
                        continue;
                    }
                    let start = (first + (lo * p.s[1]) as isize) as usize;
                    let dst = &mut orow[lo..hi];
                    let take = |m: f32, v: f32| if v > m || v.is_nan() { v } else { m };
                    if p.s[1] == 1 {
                        for (m, &v) in dst.iter_mut().zip(&row[start..start + (hi - lo)]) {
                            *m = take(*m, v);
                        }
                    } else {
                        for (m, &v) in dst.iter_mut().zip(row[start..].iter().step_by(p.s[1])) {
                            *m = take(*m, v);
                        }
                    }
                }
            }
        }
    }
}

/// Average pool (unit dilations) of every `(n, c)` plane.
pub(super) fn avg(g: &Geom, x: &[f32], y: &mut [f32], include_pad: bool) {
    let p = Plane::of(g);
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
            let (hlo, hhi) = valid_taps(hs, p.k[0], 1, p.h);
            // Taps inside the padded extent [-pad0, len + pad1).
            let hpad = ((p.h + p.pad1[0]) as isize - hs).clamp(0, p.k[0] as isize) as usize;
            for ow in 0..p.ow {
                let ws = (ow * p.s[1]) as isize - p.pad0[1] as isize;
                let (wlo, whi) = valid_taps(ws, p.k[1], 1, p.w);
                let mut sum = 0f32;
                for ki in hlo..hhi {
                    let h = (hs + ki as isize) as usize;
                    let row = &xp[h * p.w..(h + 1) * p.w];
                    let w0 = (ws + wlo as isize) as usize;
                    sum += row[w0..w0 + (whi - wlo)].iter().sum::<f32>();
                }
                let count = if include_pad {
                    let wpad = ((p.w + p.pad1[1]) as isize - ws).clamp(0, p.k[1] as isize) as usize;
                    hpad * wpad
                } else {
                    (hhi - hlo) * (whi - wlo)
                };
                yp[oh * p.ow + ow] = sum / count as f32;
            }
        }
    }
}
