//! The feature front ends of common speech models, frame for frame as their
//! reference implementations compute them.
use super::error::{AudioError, at_least};
use super::fft::{Complex, RealFft};
use super::mel::{MelBank, MelStyle};
use super::window::{Symmetry, Window};

/// Buffers of one frame's analysis: the windowed frame, its spectrum, its
/// power and its mel energies.
#[derive(Debug, Clone)]
struct FrameAnalysis {
    fft: RealFft,
    bank: MelBank,
    frame: Vec<f32>,
    spectrum: Vec<Complex>,
    power: Vec<f32>,
    mel: Vec<f32>,
}

impl FrameAnalysis {
    fn new(n_fft: usize, bank: MelBank) -> Result<FrameAnalysis, AudioError> {
        let fft = RealFft::new(n_fft)?;
        let bins = fft.bins();
        Ok(FrameAnalysis {
            fft,
            frame: vec![0.0; n_fft],
            spectrum: vec![Complex::ZERO; bins],
            power: vec![0.0; bins],
            mel: vec![0.0; bank.mels()],
            bank,
        })
    }

    /// The mel energies of the power spectrum of `self.frame`.
    fn mel_energies(&mut self) -> Result<&[f32], AudioError> {
        self.fft.forward(&self.frame, &mut self.spectrum)?;
        for (p, c) in self.power.iter_mut().zip(&self.spectrum) {
            *p = c.re * c.re + c.im * c.im;
        }
        self.bank.apply(&self.power, &mut self.mel)?;
        Ok(&self.mel)
    }
}

/// Whisper's log-mel spectrogram of one 30-second window at 16 kHz: the
/// audio cut or zero-padded to 480,000 samples, reflect-padded by 200 on
/// both sides, 400-point frames every 160 samples with a periodic Hann
/// window (the last frame dropped), Slaney mel filters with area
/// normalization, `log10(max(e, 1e-10))`, floored at the maximum minus 8,
/// then `(x + 4) / 4`. Output `[mels, 3000]`, mel-major, as the model takes.
#[derive(Debug, Clone)]
pub struct WhisperLogMel {
    analysis: FrameAnalysis,
    window: Vec<f32>,
}

impl WhisperLogMel {
    /// Samples of the window: 30 s at 16 kHz.
    pub const SAMPLES: usize = 480_000;
    /// Frames of the output.
    pub const FRAMES: usize = 3000;
    const N_FFT: usize = 400;
    const HOP: usize = 160;

    /// The front end with `mels` filters (80, or 128 for large-v3).
    pub fn new(mels: usize) -> Result<WhisperLogMel, AudioError> {
        let bank = MelBank::new(
            MelStyle::Slaney,
            16_000,
            Self::N_FFT,
            mels,
            0.0,
            8_000.0,
            true,
        )?;
        Ok(WhisperLogMel {
            analysis: FrameAnalysis::new(Self::N_FFT, bank)?,
            window: Window::Hann.build(Symmetry::Periodic, Self::N_FFT),
        })
    }

    /// Filters per frame.
    pub fn mels(&self) -> usize {
        self.analysis.bank.mels()
    }

    /// The features of `samples` (16 kHz; beyond 30 s ignored) into `out`
    /// (`mels · 3000` values).
    pub fn compute(&mut self, samples: &[f32], out: &mut [f32]) -> Result<(), AudioError> {
        let mels = self.mels();
        let frames = Self::FRAMES;
        at_least("Whisper features", mels * frames, out.len())?;
        let len = Self::SAMPLES as isize;
        let pad = (Self::N_FFT / 2) as isize;
        // Sample `i` of the padded window: the signal reflected at both
        // ends of the 30 s (zeros past the input).
        let sample = |i: isize| {
            let mut j = i - pad;
            if j < 0 {
                j = -j;
            } else if j >= len {
                j = 2 * (len - 1) - j;
            }
            samples.get(j as usize).copied().unwrap_or(0.0)
        };
        let mut max = f32::NEG_INFINITY;
        for t in 0..frames {
            let start = (t * Self::HOP) as isize;
            for (j, (f, &w)) in self.analysis.frame.iter_mut().zip(&self.window).enumerate() {
                *f = sample(start + j as isize) * w;
            }
            let mel = self.analysis.mel_energies()?;
            for (m, &e) in mel.iter().enumerate() {
                let v = e.max(1e-10).log10();
                max = max.max(v);
                out[m * frames + t] = v;
            }
        }
        let floor = max - 8.0;
        for v in &mut out[..mels * frames] {
            *v = (v.max(floor) + 4.0) / 4.0;
        }
        Ok(())
    }
}

/// Options of [`KaldiFbank`]. `Default` is Kaldi's `compute-fbank-feats`
/// at 16 kHz with 80 bins and dither off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KaldiOptions {
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Samples per frame (25 ms: 400 at 16 kHz).
    pub frame_length: usize,
    /// Samples between frames (10 ms: 160 at 16 kHz).
    pub frame_shift: usize,
    /// Mel filters.
    pub mels: usize,
    /// Lowest filter edge in Hz.
    pub low_freq: f64,
    /// Highest edge in Hz; `<= 0` is an offset below the Nyquist frequency.
    pub high_freq: f64,
    /// Pre-emphasis coefficient (0 for none).
    pub preemphasis: f32,
    /// Subtract each frame's mean first.
    pub remove_dc_offset: bool,
    /// The frame window.
    pub window: Window,
    /// `true`: only frames that fit inside the signal (from sample 0);
    /// `false`: one frame per shift centred on it, the signal mirrored at
    /// the ends.
    pub snip_edges: bool,
}

impl Default for KaldiOptions {
    fn default() -> Self {
        KaldiOptions {
            sample_rate: 16_000,
            frame_length: 400,
            frame_shift: 160,
            mels: 80,
            low_freq: 20.0,
            high_freq: 0.0,
            preemphasis: 0.97,
            remove_dc_offset: true,
            window: Window::Povey,
            snip_edges: true,
        }
    }
}

/// Kaldi-style log mel filterbank features (`compute-fbank-feats` with
/// dither off, power spectrum, natural log floored at the f32 epsilon):
/// per frame, DC removal, pre-emphasis, window, FFT of the frame length
/// rounded up to a power of two, Kaldi mel filters. Output `[frames, mels]`.
#[derive(Debug, Clone)]
pub struct KaldiFbank {
    options: KaldiOptions,
    analysis: FrameAnalysis,
    window: Vec<f32>,
}

impl KaldiFbank {
    /// The front end for `options`.
    pub fn new(options: KaldiOptions) -> Result<KaldiFbank, AudioError> {
        let KaldiOptions {
            frame_length,
            frame_shift,
            ..
        } = options;
        if frame_length == 0 || frame_shift == 0 {
            return Err(AudioError::Invalid(
                "Kaldi frames need a positive length and shift".into(),
            ));
        }
        let n_fft = frame_length
            .checked_next_power_of_two()
            .ok_or(AudioError::TooLarge("Kaldi FFT"))?;
        let bank = MelBank::new(
            MelStyle::Kaldi,
            options.sample_rate,
            n_fft,
            options.mels,
            options.low_freq,
            options.high_freq,
            false,
        )?;
        Ok(KaldiFbank {
            analysis: FrameAnalysis::new(n_fft, bank)?,
            window: options.window.build(Symmetry::Symmetric, frame_length),
            options,
        })
    }

    /// Frames of a signal of `len` samples.
    pub fn frames(&self, len: usize) -> usize {
        let KaldiOptions {
            frame_length,
            frame_shift,
            snip_edges,
            ..
        } = self.options;
        if snip_edges {
            if len < frame_length {
                0
            } else {
                1 + (len - frame_length) / frame_shift
            }
        } else {
            (len + frame_shift / 2) / frame_shift
        }
    }

    /// Filters per frame.
    pub fn mels(&self) -> usize {
        self.options.mels
    }

    /// The features of `samples` into `out` (at least
    /// `frames(len) · mels` values); returns the number of frames.
    pub fn compute(&mut self, samples: &[f32], out: &mut [f32]) -> Result<usize, AudioError> {
        let frames = self.frames(samples.len());
        let mels = self.mels();
        let need = frames
            .checked_mul(mels)
            .ok_or(AudioError::TooLarge("Kaldi features"))?;
        at_least("Kaldi features", need, out.len())?;
        let KaldiOptions {
            frame_length,
            frame_shift,
            snip_edges,
            preemphasis,
            remove_dc_offset,
            ..
        } = self.options;
        let len = samples.len() as isize;
        for t in 0..frames {
            let start = if snip_edges {
                (t * frame_shift) as isize
            } else {
                (t * frame_shift + frame_shift / 2) as isize - (frame_length / 2) as isize
            };
            let frame = &mut self.analysis.frame[..frame_length];
            for (j, f) in frame.iter_mut().enumerate() {
                // Mirrored at both ends (`s = -s - 1`, `s = 2·len - 1 - s`).
                let mut s = start + j as isize;
                while s < 0 || s >= len {
                    s = if s < 0 { -s - 1 } else { 2 * len - 1 - s };
                }
                *f = samples[s as usize];
            }
            if remove_dc_offset {
                let mean = frame.iter().map(|&v| v as f64).sum::<f64>() / frame_length as f64;
                for f in frame.iter_mut() {
                    *f -= mean as f32;
                }
            }
            if preemphasis != 0.0 {
                for j in (1..frame_length).rev() {
                    frame[j] -= preemphasis * frame[j - 1];
                }
                frame[0] -= preemphasis * frame[0];
            }
            for (f, &w) in frame.iter_mut().zip(&self.window) {
                *f *= w;
            }
            self.analysis.frame[frame_length..].fill(0.0);
            let mel = self.analysis.mel_energies()?;
            for (o, &e) in out[t * mels..(t + 1) * mels].iter_mut().zip(mel) {
                *o = e.max(f32::EPSILON).ln();
            }
        }
        Ok(frames)
    }
}

/// NeMo's log-mel features (`AudioToMelSpectrogramPreprocessor` at 16 kHz):
/// pre-emphasis 0.97, 512-point frames every 160 samples centred on the
/// hop (zero padding), a symmetric 400-point Hann window in the middle of
/// the frame, Slaney filters with area normalization,
/// `ln(e + 2^-24)`, then each filter normalized over the frames the
/// signal fills (`len / 160`; mean, and standard deviation with `n - 1`
/// plus 1e-5); frames past those are zero. Output `[mels, frames]`.
#[derive(Debug, Clone)]
pub struct NemoLogMel {
    analysis: FrameAnalysis,
    window: Vec<f32>,
}

impl NemoLogMel {
    const N_FFT: usize = 512;
    const WINDOW: usize = 400;
    const HOP: usize = 160;
    const PREEMPHASIS: f32 = 0.97;

    /// The front end with `mels` filters (80 or 128).
    pub fn new(mels: usize) -> Result<NemoLogMel, AudioError> {
        let bank = MelBank::new(
            MelStyle::Slaney,
            16_000,
            Self::N_FFT,
            mels,
            0.0,
            8_000.0,
            true,
        )?;
        let mut window = vec![0.0; Self::N_FFT];
        let off = (Self::N_FFT - Self::WINDOW) / 2;
        Window::Hann.fill(Symmetry::Symmetric, &mut window[off..off + Self::WINDOW]);
        Ok(NemoLogMel {
            analysis: FrameAnalysis::new(Self::N_FFT, bank)?,
            window,
        })
    }

    /// Filters per frame.
    pub fn mels(&self) -> usize {
        self.analysis.bank.mels()
    }

    /// Frames of a signal of `len` samples: `1 + len / 160`.
    pub fn frames(&self, len: usize) -> usize {
        1 + len / Self::HOP
    }

    /// The features of `samples` into `out` (at least
    /// `mels · frames(len)` values, mel-major); returns the frame count.
    pub fn compute(&mut self, samples: &[f32], out: &mut [f32]) -> Result<usize, AudioError> {
        let frames = self.frames(samples.len());
        let mels = self.mels();
        let need = frames
            .checked_mul(mels)
            .ok_or(AudioError::TooLarge("NeMo features"))?;
        at_least("NeMo features", need, out.len())?;
        let len = samples.len() as isize;
        let pad = (Self::N_FFT / 2) as isize;
        let emphasized = |i: isize| {
            let j = i - pad;
            if j < 0 || j >= len {
                return 0.0;
            }
            let x = samples[j as usize];
            if j == 0 {
                x
            } else {
                x - Self::PREEMPHASIS * samples[j as usize - 1]
            }
        };
        for t in 0..frames {
            let start = (t * Self::HOP) as isize;
            for (j, (f, &w)) in self.analysis.frame.iter_mut().zip(&self.window).enumerate() {
                *f = emphasized(start + j as isize) * w;
            }
            let mel = self.analysis.mel_energies()?;
            for (m, &e) in mel.iter().enumerate() {
                out[m * frames + t] = (e + f32::powi(2.0, -24)).ln();
            }
        }
        let valid = (samples.len() / Self::HOP).min(frames);
        for row in out[..mels * frames].chunks_exact_mut(frames) {
            let (used, rest) = row.split_at_mut(valid);
            let n = used.len() as f64;
            let mean = used.iter().map(|&v| v as f64).sum::<f64>() / n.max(1.0);
            let var = if used.len() > 1 {
                used.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)
            } else {
                0.0
            };
            let scale = 1.0 / (var.sqrt() + 1e-5);
            for v in used.iter_mut() {
                *v = ((*v as f64 - mean) * scale) as f32;
            }
            rest.fill(0.0);
        }
        Ok(frames)
    }
}
