//! The general pool loops: up to [`MAX_SPATIAL`] spatial dims, any window
//! geometry, any dtype for max. The caller checked the buffer sizes
//! ([`Geom::check_buffers`]).
use super::{Geom, MAX_SPATIAL, taps_before, valid_taps};
use crate::ops::num::Num;

/// Element types `MaxPool` handles, with the value of an empty window.
pub(super) trait MaxElem: Num {
    /// The value of a window with no element inside the input.
    const LOWEST: Self;
}

macro_rules! max_elem {
    ($($t:ty => $v:expr),*) => {$(impl MaxElem for $t { const LOWEST: Self = $v; })*};
}
max_elem!(f32 => f32::NEG_INFINITY, f64 => f64::NEG_INFINITY, i8 => i8::MIN, u8 => 0);

/// One output position's window: per axis, the input coordinate of tap 0
/// and the range of taps inside the input.
#[derive(Clone, Copy, Default)]
struct Win {
    start: [isize; MAX_SPATIAL],
    lo: [usize; MAX_SPATIAL],
    hi: [usize; MAX_SPATIAL],
}

impl Win {
    #[inline(always)]
    fn set(&mut self, g: &Geom, axis: usize, o: usize) {
        let s = (o * g.s[axis]) as isize - g.pad0[axis] as isize;
        let (lo, hi) = valid_taps(s, g.k[axis], g.d[axis], g.x[axis]);
        self.start[axis] = s;
        self.lo[axis] = lo;
        self.hi[axis] = hi;
    }

    /// Number of taps inside the input.
    #[inline(always)]
    fn valid(&self) -> usize {
        (0..MAX_SPATIAL).map(|a| self.hi[a] - self.lo[a]).product()
    }

    /// Number of taps inside the explicitly padded input.
    #[inline(always)]
    fn padded(&self, g: &Geom) -> usize {
        (0..MAX_SPATIAL)
            .map(|a| taps_before(self.start[a], g.k[a], g.d[a], g.x[a] + g.pad1[a]))
            .product()
    }

    /// Input coordinate of tap `t` along `axis` (`t` in `lo..hi`).
    #[inline(always)]
    fn coord(&self, g: &Geom, axis: usize, t: usize) -> usize {
        (self.start[axis] + (t * g.d[axis]) as isize) as usize
    }
}

/// Calls `f(output offset, window)` for every output position of a plane,
/// in row-major order.
#[inline(always)]
fn windows(g: &Geom, mut f: impl FnMut(usize, &Win)) {
    let mut w = Win::default();
    let mut o = 0;
    for o0 in 0..g.out[0] {
        w.set(g, 0, o0);
        for o1 in 0..g.out[1] {
            w.set(g, 1, o1);
            for o2 in 0..g.out[2] {
                w.set(g, 2, o2);
                f(o, &w);
                o += 1;
            }
        }
    }
}

/// Calls `f(input offset, coords)` for every tap of `w` inside the input,
/// in row-major order.
#[inline(always)]
fn taps(g: &Geom, w: &Win, mut f: impl FnMut(usize, [usize; MAX_SPATIAL])) {
    for t0 in w.lo[0]..w.hi[0] {
        let c0 = w.coord(g, 0, t0);
        for t1 in w.lo[1]..w.hi[1] {
            let c1 = w.coord(g, 1, t1);
            let row = (c0 * g.x[1] + c1) * g.x[2];
            for t2 in w.lo[2]..w.hi[2] {
                let c2 = w.coord(g, 2, t2);
                f(row + c2, [c0, c1, c2]);
            }
        }
    }
}

/// Max pool of every plane, NaN-propagating; `indices` (one per output)
/// receives the flat input index of the first maximum (the first NaN if
/// any), with the spatial part row-major or column-major.
pub(super) fn max<T: MaxElem>(
    g: &Geom,
    x: &[T],
    y: &mut [T],
    mut indices: Option<&mut [i64]>,
    column_major: bool,
) {
    let (ip, op) = (g.in_plane(), g.out_plane());
    for (pi, (xp, yp)) in x.chunks_exact(ip).zip(y.chunks_exact_mut(op)).enumerate() {
        let mut ix = indices
            .as_deref_mut()
            .map(|s| &mut s[pi * op..(pi + 1) * op]);
        windows(g, |o, w| {
            let mut best: Option<(T, usize, [usize; MAX_SPATIAL])> = None;
            taps(g, w, |off, c| {
                let v = xp[off];
                let better = match best {
                    None => true,
                    Some((m, ..)) => !m.is_nan() && (v > m || v.is_nan()),
                };
                if better {
                    best = Some((v, off, c));
                }
            });
            let (v, index) = match best {
                Some((v, off, c)) => {
                    let spatial = if column_major {
                        c[0] + c[1] * g.x[0] + c[2] * g.x[0] * g.x[1]
                    } else {
                        off
                    };
                    (v, (pi * ip + spatial) as i64)
                }
                None => (T::LOWEST, -1),
            };
            yp[o] = v;
            if let Some(ix) = ix.as_deref_mut() {
                ix[o] = index;
            }
        });
    }
}

/// Average pool of every plane.
pub(super) fn avg(g: &Geom, x: &[f32], y: &mut [f32], include_pad: bool) {
    let (ip, op) = (g.in_plane(), g.out_plane());
    for (xp, yp) in x.chunks_exact(ip).zip(y.chunks_exact_mut(op)) {
        windows(g, |o, w| {
            let mut sum = 0f32;
            taps(g, w, |off, _| sum += xp[off]);
            let count = if include_pad { w.padded(g) } else { w.valid() };
            yp[o] = sum / count as f32;
        });
    }
}

/// Lp pool of every plane: `(Σ |x|^p)^(1/p)` over the taps inside the input.
pub(super) fn lp(g: &Geom, x: &[f32], y: &mut [f32], p: u32) {
    let (ip, op) = (g.in_plane(), g.out_plane());
    let pi = p.min(i32::MAX as u32) as i32;
    let inv = 1.0 / p as f32;
    for (xp, yp) in x.chunks_exact(ip).zip(y.chunks_exact_mut(op)) {
        windows(g, |o, w| {
            let mut sum = 0f32;
            match p {
                1 => taps(g, w, |off, _| sum += xp[off].abs()),
                2 => taps(g, w, |off, _| sum += xp[off] * xp[off]),
                _ => taps(g, w, |off, _| sum += xp[off].abs().powi(pi)),
            }
            yp[o] = match p {
                1 => sum,
                2 => sum.sqrt(),
                _ => sum.powf(inv),
            };
        });
    }
}
