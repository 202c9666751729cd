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
    max_body(g, x, y, max_into)
}

/// [`max_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn max_avx2(g: &Geom, x: &[f32], y: &mut [f32]) {
    // SAFETY: this function's own contract (AVX2).
    max_body(g, x, y, |d, s| unsafe { max_into_avx2(d, s) })
}

#[inline(always)]
fn max_body(g: &Geom, x: &[f32], y: &mut [f32], row_max: impl Fn(&mut [f32], &[f32])) {
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
                    if p.s[1] == 1 {
                        row_max(dst, &row[start..start + (hi - lo)]);
                    } else {
                        for (m, &v) in dst.iter_mut().zip(row[start..].iter().step_by(p.s[1])) {
                            *m = take_max(*m, v);
                        }
                    }
                }
            }
        }
    }
}

/// The running maximum `m` after seeing `v` (a NaN sticks).
#[inline(always)]
fn take_max(m: f32, v: f32) -> f32 {
    if v > m || v.is_nan() { v } else { m }
}

/// `dst[i] = take_max(dst[i], src[i])`.
#[inline(always)]
fn max_into(dst: &mut [f32], src: &[f32]) {
    for (m, &v) in dst.iter_mut().zip(src) {
        *m = take_max(*m, v);
    }
}

/// [`max_into`] through `max`: written as a select of the running value
/// (in Rust or with a blend intrinsic) the compiler emits a masked store,
/// which is microcoded on AMD cores (PP-OCRv6 det's 2×2 pool took 3.3 ms).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_into_avx2(dst: &mut [f32], src: &[f32]) {
    use core::arch::x86_64::*;
    let n = dst.len().min(src.len());
    let body = n - n % 8;
    for i in (0..body).step_by(8) {
        // SAFETY: i + 8 <= n, inside both slices.
        unsafe {
            let m = _mm256_loadu_ps(dst.as_ptr().add(i));
            let v = _mm256_loadu_ps(src.as_ptr().add(i));
            // max(v, m) is v where v > m, else m (also when either is
            // NaN, which keeps a NaN in m); a NaN v is put back after. A
            // blend of the loaded m itself would become a masked store.
            let r = _mm256_blendv_ps(_mm256_max_ps(v, m), v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), r);
        }
    }
    max_into(&mut dst[body..n], &src[body..n]);
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{max_into, max_into_avx2};

    /// Same bits, or both NaN.
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn avx2_row_max_matches_scalar_with_nans_and_tails() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        // NaNs every `period` elements, -inf next to them, else a spread
        // of finite values.
        let val = |i: usize, period: usize| -> f32 {
            match i % period {
                1 => f32::NAN,
                2 => f32::NEG_INFINITY,
                _ => ((i * 2654435761) % 1009) as f32 / 100.0 - 5.0,
            }
        };
        for n in 0..41 {
            let src: Vec<f32> = (0..n).map(|i| val(i, 7)).collect();
            let init: Vec<f32> = (0..n).map(|i| val(i, 5)).collect();
            let mut want = init.clone();
            max_into(&mut want, &src);
            let mut got = init.clone();
            // SAFETY: AVX2 was detected above.
            unsafe { max_into_avx2(&mut got, &src) };
            for i in 0..n {
                assert!(
                    same(got[i], want[i]),
                    "n {n} i {i}: {} vs {}",
                    got[i],
                    want[i]
                );
            }
            // Each case (NaN in the running value, NaN in the input, both
            // finite) occurs in the vector body.
            if n == 40 {
                assert!((0..32).any(|i| init[i].is_nan() && !src[i].is_nan()));
                assert!((0..32).any(|i| src[i].is_nan() && !init[i].is_nan()));
            }
        }
    }
}
