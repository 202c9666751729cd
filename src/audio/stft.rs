//! Streaming short-time Fourier transform and its inverse by weighted
//! overlap-add: one frame in or out per hop of samples.
use super::error::{AudioError, exact};
use super::fft::{Complex, RealFft};

fn check_frame(n_fft: usize, hop: usize, frame: usize) -> Result<(), AudioError> {
    if hop == 0 || frame == 0 || hop > frame || frame > n_fft {
        return Err(AudioError::Invalid(format!(
            "STFT with n_fft {n_fft}, window {frame}, hop {hop}: needs 0 < hop <= window <= n_fft"
        )));
    }
    Ok(())
}

/// Frames of a signal arriving a hop at a time: each [`StreamingStft::push`]
/// takes `hop` new samples and gives the spectrum of the last
/// `window.len()` samples (zeros before the first), windowed and
/// zero-padded to `n_fft`.
#[derive(Debug, Clone)]
pub struct StreamingStft {
    fft: RealFft,
    window: Vec<f32>,
    hop: usize,
    history: Vec<f32>,
    frame: Vec<f32>,
}

impl StreamingStft {
    /// An STFT of `n_fft` points whose frames are `window.len()` samples,
    /// `hop` apart.
    pub fn new(n_fft: usize, hop: usize, window: &[f32]) -> Result<StreamingStft, AudioError> {
        check_frame(n_fft, hop, window.len())?;
        Ok(StreamingStft {
            fft: RealFft::new(n_fft)?,
            window: window.to_vec(),
            hop,
            history: vec![0.0; window.len()],
            frame: vec![0.0; window.len()],
        })
    }

    /// Samples per call.
    pub fn hop(&self) -> usize {
        self.hop
    }

    /// Bins per frame (`n_fft/2 + 1`).
    pub fn bins(&self) -> usize {
        self.fft.bins()
    }

    /// Takes `hop` new samples and writes the frame's spectrum into
    /// `spectrum` ([`StreamingStft::bins`] values).
    pub fn push(&mut self, samples: &[f32], spectrum: &mut [Complex]) -> Result<(), AudioError> {
        exact("STFT hop samples", self.hop, samples.len())?;
        exact("STFT spectrum", self.bins(), spectrum.len())?;
        let keep = self.history.len() - self.hop;
        self.history.copy_within(self.hop.., 0);
        self.history[keep..].copy_from_slice(samples);
        for ((f, &x), &w) in self.frame.iter_mut().zip(&self.history).zip(&self.window) {
            *f = x * w;
        }
        self.fft.forward(&self.frame, spectrum)
    }

    /// Forgets the past samples (back to zeros).
    pub fn reset(&mut self) {
        self.history.fill(0.0);
    }
}

/// Samples back from frames: each [`StreamingIstft::push`] takes one
/// spectrum, adds its inverse FFT times the synthesis window to the
/// running sum, and gives the `hop` samples no later frame touches.
///
/// The output is divided by the overlap-added product of the analysis and
/// synthesis windows, so that a [`StreamingStft`] with the same analysis
/// window followed by this gives the input back. Output `t` of the stream
/// is input `t - (window - hop)`: the first `window - hop` samples out
/// belong to the zeros before the signal.
#[derive(Debug, Clone)]
pub struct StreamingIstft {
    fft: RealFft,
    synthesis: Vec<f32>,
    inverse_envelope: Vec<f32>,
    hop: usize,
    sum: Vec<f32>,
    frame: Vec<f32>,
}

impl StreamingIstft {
    /// The inverse of a [`StreamingStft`] of `n_fft` points, `hop` and
    /// `analysis` window; frames are weighted by `synthesis` (same length)
    /// before they are added.
    pub fn new(
        n_fft: usize,
        hop: usize,
        analysis: &[f32],
        synthesis: &[f32],
    ) -> Result<StreamingIstft, AudioError> {
        check_frame(n_fft, hop, synthesis.len())?;
        exact("analysis window", synthesis.len(), analysis.len())?;
        // Sample j of a hop is covered by the frames' window positions j,
        // j + hop, j + 2·hop, ...; the sum of the products there is the
        // gain to take out.
        let mut inverse_envelope = vec![0.0; hop];
        for (j, inv) in inverse_envelope.iter_mut().enumerate() {
            let gain: f64 = (j..synthesis.len())
                .step_by(hop)
                .map(|i| analysis[i] as f64 * synthesis[i] as f64)
                .sum();
            if gain.is_nan() || gain.abs() <= 1e-6 {
                return Err(AudioError::Invalid(format!(
                    "the windows do not overlap-add to a usable gain at hop {hop} (position {j}: {gain})"
                )));
            }
            *inv = (1.0 / gain) as f32;
        }
        Ok(StreamingIstft {
            fft: RealFft::new(n_fft)?,
            synthesis: synthesis.to_vec(),
            inverse_envelope,
            hop,
            sum: vec![0.0; synthesis.len()],
            frame: vec![0.0; n_fft],
        })
    }

    /// Samples per call.
    pub fn hop(&self) -> usize {
        self.hop
    }

    /// Bins per frame (`n_fft/2 + 1`).
    pub fn bins(&self) -> usize {
        self.fft.bins()
    }

    /// Samples between an input of the STFT and its output here:
    /// `window - hop`.
    pub fn delay(&self) -> usize {
        self.synthesis.len() - self.hop
    }

    /// Adds the frame of `spectrum` and writes the next `hop` finished
    /// samples into `out`.
    pub fn push(&mut self, spectrum: &[Complex], out: &mut [f32]) -> Result<(), AudioError> {
        exact("ISTFT spectrum", self.bins(), spectrum.len())?;
        exact("ISTFT hop samples", self.hop, out.len())?;
        self.fft.inverse(spectrum, &mut self.frame)?;
        for ((s, &x), &w) in self.sum.iter_mut().zip(&self.frame).zip(&self.synthesis) {
            *s += x * w;
        }
        for ((o, &s), &g) in out.iter_mut().zip(&self.sum).zip(&self.inverse_envelope) {
            *o = s * g;
        }
        let len = self.sum.len();
        self.sum.copy_within(self.hop.., 0);
        self.sum[len - self.hop..].fill(0.0);
        Ok(())
    }

    /// Forgets the frames added so far.
    pub fn reset(&mut self) {
        self.sum.fill(0.0);
    }
}
