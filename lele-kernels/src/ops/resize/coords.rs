//! Coordinate transformation and per-axis interpolation taps.
use super::{CoordMode, NearestMode, Resize, ResizeMode};

/// Taps per output coordinate.
pub(super) fn taps(mode: ResizeMode) -> usize {
    match mode {
        ResizeMode::Nearest => 1,
        ResizeMode::Linear => 2,
        ResizeMode::Cubic => 4,
    }
}

/// Marks an output coordinate that maps outside the input (tf_crop_and_resize).
pub(super) const EXTRAPOLATE: u32 = u32::MAX;

impl Resize {
    /// Source coordinate of output index `x` along one axis.
    fn source(&self, x: f64, scale: f64, len_in: usize, len_out: usize, roi: (f64, f64)) -> f64 {
        let inf = len_in as f64;
        let out_f = scale * inf;
        match self.coord {
            CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordMode::HalfPixelSymmetric => {
                let adj = len_out as f64 / out_f;
                let center = inf / 2.0;
                center * (1.0 - adj) + (x + 0.5) / scale - 0.5
            }
            CoordMode::PytorchHalfPixel => {
                if out_f == 1.0 {
                    -0.5
                } else {
                    (x + 0.5) / scale - 0.5
                }
            }
            CoordMode::AlignCorners => {
                if out_f == 1.0 {
                    0.0
                } else {
                    x * (inf - 1.0) / (out_f - 1.0)
                }
            }
            CoordMode::Asymmetric => x / scale,
            CoordMode::TfCropAndResize => {
                let (r0, r1) = roi;
                let v = if out_f == 1.0 {
                    (r1 - r0) * (inf - 1.0) / 2.0
                } else {
                    x * (r1 - r0) * (inf - 1.0) / (out_f - 1.0)
                };
                v + r0 * (inf - 1.0)
            }
        }
    }

    /// Fills the tap table of one axis: `idx`/`w` hold `len_out * T` entries.
    pub(super) fn axis_taps(
        &self,
        scale: f64,
        len_in: usize,
        len_out: usize,
        roi: (f64, f64),
        idx: &mut [u32],
        w: &mut [f32],
    ) {
        let t = taps(self.mode);
        let last = len_in as i64 - 1;
        let clamp = |i: i64| i.clamp(0, last) as u32;
        for o in 0..len_out {
            let (ix, wx) = (&mut idx[o * t..(o + 1) * t], &mut w[o * t..(o + 1) * t]);
            let xo = self.source(o as f64, scale, len_in, len_out, roi);
            if self.coord == CoordMode::TfCropAndResize && (xo < 0.0 || xo > last as f64) {
                ix.fill(EXTRAPOLATE);
                wx.fill(0.0);
                continue;
            }
            // Prefer the left neighbour: an integral coordinate has ratio 1.
            let mut base = xo.floor();
            let mut ratio = xo - base;
            if ratio == 0.0 {
                base -= 1.0;
                ratio = 1.0;
            }
            let b = base as i64;
            match self.mode {
                ResizeMode::Nearest => {
                    let right = ratio == 1.0
                        || match self.nearest {
                            NearestMode::RoundPreferFloor => ratio > 0.5,
                            NearestMode::RoundPreferCeil => ratio >= 0.5,
                            NearestMode::Floor => false,
                            NearestMode::Ceil => true,
                        };
                    ix[0] = clamp(if right { b + 1 } else { b });
                    wx[0] = 1.0;
                }
                ResizeMode::Linear => {
                    ix[0] = clamp(b);
                    ix[1] = clamp(b + 1);
                    wx[0] = (1.0 - ratio) as f32;
                    wx[1] = ratio as f32;
                }
                ResizeMode::Cubic => {
                    let a = self.cubic_coeff_a as f64;
                    let r = ratio;
                    let s = 1.0 - r;
                    let mut c = [
                        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
                    ];
                    if self.exclude_outside {
                        for (k, ck) in c.iter_mut().enumerate() {
                            let i = b - 1 + k as i64;
                            if i < 0 || i > last {
                                *ck = 0.0;
                            }
                        }
                        let sum: f64 = c.iter().sum();
                        if sum != 0.0 {
                            c.iter_mut().for_each(|v| *v /= sum);
                        }
                    }
                    for k in 0..4 {
                        ix[k] = clamp(b - 1 + k as i64);
                        wx[k] = c[k] as f32;
                    }
                }
            }
        }
    }
}
