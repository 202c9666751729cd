//! Triangular mel filterbanks.
use super::error::{AudioError, at_least, exact};

/// How the filters are placed and shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MelStyle {
    /// HTK's scale `2595·log10(1 + f/700)`; triangles in Hz between
    /// equally spaced mel points (torchaudio's default).
    Htk,
    /// Slaney's scale (linear below 1 kHz, logarithmic above, as librosa's
    /// default); triangles in Hz.
    Slaney,
    /// Kaldi's: the scale `1127·ln(1 + f/700)`, triangles in mel, and no
    /// weight on the Nyquist bin; an `f_max <= 0` is an offset below the
    /// Nyquist frequency.
    Kaldi,
}

fn htk_mel(f: f64) -> f64 {
    2595.0 * (f / 700.0).ln_1p() / std::f64::consts::LN_10
}

fn htk_hz(m: f64) -> f64 {
    700.0 * (m * std::f64::consts::LN_10 / 2595.0).exp_m1()
}

// Slaney: 3 mels per 200 Hz up to 1 kHz, then 27 mels per factor 6.4.
const SLANEY_HZ_PER_MEL: f64 = 200.0 / 3.0;
const SLANEY_LOG_HZ: f64 = 1000.0;
const SLANEY_LOG_MEL: f64 = SLANEY_LOG_HZ / SLANEY_HZ_PER_MEL;

fn slaney_log_step() -> f64 {
    6.4f64.ln() / 27.0
}

fn slaney_mel(f: f64) -> f64 {
    if f < SLANEY_LOG_HZ {
        f / SLANEY_HZ_PER_MEL
    } else {
        SLANEY_LOG_MEL + (f / SLANEY_LOG_HZ).ln() / slaney_log_step()
    }
}

fn slaney_hz(m: f64) -> f64 {
    if m < SLANEY_LOG_MEL {
        m * SLANEY_HZ_PER_MEL
    } else {
        SLANEY_LOG_HZ * ((m - SLANEY_LOG_MEL) * slaney_log_step()).exp()
    }
}

fn kaldi_mel(f: f64) -> f64 {
    1127.0 * (f / 700.0).ln_1p()
}

/// A bank of `mels` triangular filters over the `bins = n_fft/2 + 1` bins
/// of a power spectrum: weights `[bins, mels]` (row-major, the layout of
/// ONNX `MelWeightMatrix` and of the matrices feature graphs multiply by),
/// and each filter's non-zero bin range so that [`MelBank::apply`] skips
/// the zeros.
#[derive(Debug, Clone)]
pub struct MelBank {
    bins: usize,
    mels: usize,
    weights: Vec<f32>,
    ranges: Vec<(usize, usize)>,
}

impl MelBank {
    /// The filters of `style` for `n_fft`-point spectra at `sample_rate`,
    /// spanning `f_min..f_max` Hz; `area_norm` scales each triangle to unit
    /// area in Hz (Slaney's normalization: `2 / (right - left)`; not for
    /// [`MelStyle::Kaldi`]).
    pub fn new(
        style: MelStyle,
        sample_rate: u32,
        n_fft: usize,
        mels: usize,
        f_min: f64,
        f_max: f64,
        area_norm: bool,
    ) -> Result<MelBank, AudioError> {
        let nyquist = sample_rate as f64 / 2.0;
        let f_max = if style == MelStyle::Kaldi && f_max <= 0.0 {
            nyquist + f_max
        } else {
            f_max
        };
        if sample_rate == 0 || n_fft == 0 || mels == 0 {
            return Err(AudioError::Invalid(
                "a mel bank needs a positive rate, FFT length and filter count".into(),
            ));
        }
        if !(f_min.is_finite()
            && f_max.is_finite()
            && 0.0 <= f_min
            && f_min < f_max
            && f_max <= nyquist)
        {
            return Err(AudioError::Invalid(format!(
                "mel bank edges {f_min}..{f_max} Hz must satisfy 0 <= low < high <= {nyquist}"
            )));
        }
        if style == MelStyle::Kaldi && area_norm {
            return Err(AudioError::Invalid(
                "Kaldi's filters are not area-normalized".into(),
            ));
        }
        let bins = n_fft / 2 + 1;
        let len = bins
            .checked_mul(mels)
            .ok_or(AudioError::TooLarge("mel bank"))?;
        let mut weights = vec![0.0f32; len];
        let bin_hz = sample_rate as f64 / n_fft as f64;
        match style {
            MelStyle::Htk | MelStyle::Slaney => {
                type Scale = fn(f64) -> f64;
                let (to_mel, to_hz): (Scale, Scale) = match style {
                    MelStyle::Htk => (htk_mel, htk_hz),
                    _ => (slaney_mel, slaney_hz),
                };
                let (lo, hi) = (to_mel(f_min), to_mel(f_max));
                let hz = |i: usize| to_hz(lo + (hi - lo) * i as f64 / (mels + 1) as f64);
                for m in 0..mels {
                    let (left, center, right) = (hz(m), hz(m + 1), hz(m + 2));
                    let scale = if area_norm { 2.0 / (right - left) } else { 1.0 };
                    for k in 0..bins {
                        let f = k as f64 * bin_hz;
                        let up = (f - left) / (center - left);
                        let down = (right - f) / (right - center);
                        weights[k * mels + m] = (up.min(down).max(0.0) * scale) as f32;
                    }
                }
            }
            MelStyle::Kaldi => {
                let (lo, hi) = (kaldi_mel(f_min), kaldi_mel(f_max));
                let delta = (hi - lo) / (mels + 1) as f64;
                for m in 0..mels {
                    let left = lo + m as f64 * delta;
                    let (center, right) = (left + delta, left + 2.0 * delta);
                    // Kaldi leaves the Nyquist bin out.
                    for k in 0..bins - 1 {
                        let mel = kaldi_mel(k as f64 * bin_hz);
                        if mel > left && mel < right {
                            let w = if mel <= center {
                                (mel - left) / (center - left)
                            } else {
                                (right - mel) / (right - center)
                            };
                            weights[k * mels + m] = w as f32;
                        }
                    }
                }
            }
        }
        let ranges = (0..mels)
            .map(|m| {
                let nonzero = |k: &usize| weights[k * mels + m] != 0.0;
                let start = (0..bins).find(nonzero).unwrap_or(0);
                let end = (0..bins).rev().find(nonzero).map_or(start, |k| k + 1);
                (start, end)
            })
            .collect();
        Ok(MelBank {
            bins,
            mels,
            weights,
            ranges,
        })
    }

    /// Spectrum bins a frame has (`n_fft/2 + 1`).
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Filters.
    pub fn mels(&self) -> usize {
        self.mels
    }

    /// The weights, `[bins, mels]` row-major.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// `out[m] = Σ_k power[k] · w[k, m]` for one frame's power spectrum.
    pub fn apply(&self, power: &[f32], out: &mut [f32]) -> Result<(), AudioError> {
        exact("mel bank input bins", self.bins, power.len())?;
        at_least("mel bank output", self.mels, out.len())?;
        for (m, (o, &(start, end))) in out.iter_mut().zip(&self.ranges).enumerate() {
            let column = self.weights[start * self.mels + m..]
                .iter()
                .step_by(self.mels);
            *o = power[start..end]
                .iter()
                .zip(column)
                .map(|(p, w)| p * w)
                .sum();
        }
        Ok(())
    }
}
