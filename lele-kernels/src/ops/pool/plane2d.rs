//! The float32 plane loops of 1-D and 2-D max and (undilated) average pools,
//! the shapes of real vision models. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]) and that the leading spatial slot is unused.
use super::{Geom, valid_taps};

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

/// Max pool of every `(n, c)` plane; NaN propagates.
pub(super) fn max(g: &Geom, x: &[f32], y: &mut [f32]) {
    let p = Plane::of(g);
    for (xp, yp) in x
        .chunks_exact(p.h * p.w)
        .zip(y.chunks_exact_mut(p.oh * p.ow))
    {
        for oh in 0..p.oh {
            let hs = (oh * p.s[0]) as isize - p.pad0[0] as isize;
            let (hlo, hhi) = valid_taps(hs, p.k[0], p.d[0], p.h);
            for ow in 0..p.ow {
                let ws = (ow * p.s[1]) as isize - p.pad0[1] as isize;
                let (wlo, whi) = valid_taps(ws, p.k[1], p.d[1], p.w);
                let mut m = f32::NEG_INFINITY;
                for ki in hlo..hhi {
                    let h = (hs + (ki * p.d[0]) as isize) as usize;
                    let row = &xp[h * p.w..(h + 1) * p.w];
                    for kj in wlo..whi {
                        let v = row[(ws + (kj * p.d[1]) as isize) as usize];
                        if v > m || v.is_nan() {
                            m = v;
                        }
                    }
                }
                yp[oh * p.ow + ow] = m;
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
