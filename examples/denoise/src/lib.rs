//! Speech enhancement compiled by lele: GTCRN in real time at 16 kHz, and
//! DeepFilterNet3 at 48 kHz over blocks of frames ([`dfn3`]).
//!
//! [`Denoiser::process_hop`] is the real-time entry point: 256 new samples
//! at 16 kHz in, 256 enhanced samples out, 16 ms later; it allocates
//! nothing, so an audio callback can call it. Inside: a streaming STFT
//! (512 points, square-root Hann window), one model call that predicts the
//! clean spectrum and updates the model's three caches, and a streaming
//! ISTFT (overlap-add with the same window). [`denoise`] runs a whole
//! recording at any sample rate (resampled to 16 kHz and back).
//!
//! ```no_run
//! use lele::audio::{read_wav, write_wav};
//! let (noisy, rate) = read_wav("noisy.wav".as_ref())?;
//! let (clean, _timings) = lele_example_denoise::denoise(&noisy, rate)?;
//! write_wav("clean.wav".as_ref(), &clean, rate)?;
//! # Ok::<(), lele_example_denoise::DenoiseError>(())
//! ```
use std::time::Instant;

use lele::audio::{
    AudioError, Complex, Resampler, StreamingIstft, StreamingStft, Symmetry, Window,
};

pub mod dfn3;

/// The model, compiled from `model.toml` at build time.
#[lele::model("model.toml")]
pub struct Gtcrn;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum DenoiseError {
    /// A hop of the wrong length.
    #[error("a hop is {expected} samples at 16 kHz, got {got}")]
    Hop {
        /// [`Denoiser::HOP`].
        expected: usize,
        /// Samples passed.
        got: usize,
    },
    /// A DeepFilterNet3 block that is not whole hops or is too long.
    #[error(
        "a block is a whole number of {hop}-sample hops, at most {max_frames} of them, with an output as long; got {got} samples"
    )]
    Block {
        /// Samples per hop.
        hop: usize,
        /// Most hops per block.
        max_frames: usize,
        /// Samples passed.
        got: usize,
    },
    /// The model failed.
    #[error(transparent)]
    Model(#[from] lele::Error),
    /// An input tensor could not be formed.
    #[error(transparent)]
    Input(#[from] lele::kernels::KernelError),
    /// STFT, resampling or WAV.
    #[error(transparent)]
    Audio(#[from] AudioError),
}

const N_FFT: usize = 512;
const BINS: usize = N_FFT / 2 + 1;
const CONV_CACHE: [usize; 5] = [2, 1, 16, 16, 33];
const TRA_CACHE: [usize; 5] = [2, 3, 1, 1, 16];
const INTER_CACHE: [usize; 4] = [2, 1, 33, 16];

fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The streaming enhancer: STFT, GTCRN and ISTFT with their state.
pub struct Denoiser {
    model: Gtcrn,
    ws: GtcrnWorkspace,
    stft: StreamingStft,
    istft: StreamingIstft,
    spectrum: Vec<Complex>,
    /// The model's input `[1, 257, 1, 2]`: real and imaginary parts.
    mix: Vec<f32>,
    conv: Vec<f32>,
    tra: Vec<f32>,
    inter: Vec<f32>,
}

impl Denoiser {
    /// The model's sample rate.
    pub const SAMPLE_RATE: u32 = 16_000;
    /// Samples per call (16 ms).
    pub const HOP: usize = 256;

    /// Loads the model and allocates every buffer.
    pub fn new() -> Result<Denoiser, DenoiseError> {
        let model = Gtcrn::new()?;
        let ws = model.workspace();
        let window = Window::SqrtHann.build(Symmetry::Periodic, N_FFT);
        Ok(Denoiser {
            model,
            ws,
            stft: StreamingStft::new(N_FFT, Self::HOP, &window)?,
            istft: StreamingIstft::new(N_FFT, Self::HOP, &window, &window)?,
            spectrum: vec![Complex::ZERO; BINS],
            mix: vec![0.0; BINS * 2],
            conv: vec![0.0; numel(&CONV_CACHE)],
            tra: vec![0.0; numel(&TRA_CACHE)],
            inter: vec![0.0; numel(&INTER_CACHE)],
        })
    }

    /// Samples from an input to its enhanced output: 256 (one hop).
    pub fn latency(&self) -> usize {
        self.istft.delay()
    }

    /// Back to the start of a stream (caches and overlap state cleared).
    pub fn reset(&mut self) {
        self.stft.reset();
        self.istft.reset();
        self.conv.fill(0.0);
        self.tra.fill(0.0);
        self.inter.fill(0.0);
    }

    /// Takes [`Denoiser::HOP`] samples at 16 kHz and writes as many
    /// enhanced samples into `output`: the input of [`Denoiser::latency`]
    /// samples ago. No allocation.
    pub fn process_hop(&mut self, input: &[f32], output: &mut [f32]) -> Result<(), DenoiseError> {
        for got in [input.len(), output.len()] {
            if got != Self::HOP {
                return Err(DenoiseError::Hop {
                    expected: Self::HOP,
                    got,
                });
            }
        }
        self.stft.push(input, &mut self.spectrum)?;
        for (pair, c) in self.mix.chunks_exact_mut(2).zip(&self.spectrum) {
            pair[0] = c.re;
            pair[1] = c.im;
        }
        let out = self.model.forward(
            &mut self.ws,
            lele::TensorView::new(&self.mix, &[1, BINS, 1, 2])?,
            lele::TensorView::new(&self.conv, &CONV_CACHE)?,
            lele::TensorView::new(&self.tra, &TRA_CACHE)?,
            lele::TensorView::new(&self.inter, &INTER_CACHE)?,
        )?;
        for (c, pair) in self.spectrum.iter_mut().zip(out.enh.data().chunks_exact(2)) {
            *c = Complex::new(pair[0], pair[1]);
        }
        self.conv.copy_from_slice(out.conv_cache_out.data());
        self.tra.copy_from_slice(out.tra_cache_out.data());
        self.inter.copy_from_slice(out.inter_cache_out.data());
        self.istft.push(&self.spectrum, output)?;
        Ok(())
    }
}

/// Where the time of [`denoise`] went.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// Loading the model and allocating the buffers, in milliseconds.
    pub init_ms: f64,
    /// Each processing call ([`Denoiser::process_hop`], or
    /// [`dfn3::Dfn3::process_block`]), in milliseconds.
    pub call_ms: Vec<f64>,
    /// Input samples (at the model's rate) per call.
    pub samples_per_call: usize,
    /// The model's sample rate.
    pub model_rate: u32,
    /// From the start of processing to the first output, in milliseconds.
    pub first_output_ms: f64,
}

impl Timings {
    /// The `q`-quantile (0..=1) of the call times (nearest rank).
    pub fn call_quantile(&self, q: f64) -> f64 {
        if self.call_ms.is_empty() {
            return 0.0;
        }
        let mut v = self.call_ms.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }
}

/// Runs `samples` at `rate` Hz through a fresh [`Denoiser`] (resampling to
/// 16 kHz and back when needed) and returns the enhanced signal, aligned
/// with the input and of its length, and the timings.
pub fn denoise(samples: &[f32], rate: u32) -> Result<(Vec<f32>, Timings), DenoiseError> {
    let mut timings = Timings {
        model_rate: Denoiser::SAMPLE_RATE,
        ..Timings::default()
    };
    let start = Instant::now();
    let mut denoiser = Denoiser::new()?;
    timings.init_ms = start.elapsed().as_secs_f64() * 1e3;

    let hop = Denoiser::HOP;
    let delay = denoiser.latency();
    // Enough hops to flush the last samples through the overlap-add.
    let padded = |len: usize| (len + delay).div_ceil(hop) * hop;
    let enhanced = run_recording(samples, rate, hop, delay, padded, &mut timings, |x, y| {
        denoiser.process_hop(x, y)
    })?;
    Ok((enhanced, timings))
}

/// Runs `samples` at `rate` Hz through a fresh [`dfn3::Dfn3`] at 48 kHz
/// (resampled there and back when needed), in blocks of up to 30 s, and
/// returns the enhanced signal, aligned with the input and of its length,
/// and the timings (one call per block).
pub fn denoise_dfn3(samples: &[f32], rate: u32) -> Result<(Vec<f32>, Timings), DenoiseError> {
    use crate::dfn3::Dfn3;
    let mut timings = Timings {
        model_rate: Dfn3::SAMPLE_RATE,
        ..Timings::default()
    };
    let start = Instant::now();
    let mut model = Dfn3::new()?;
    timings.init_ms = start.elapsed().as_secs_f64() * 1e3;

    let hop = Dfn3::HOP;
    let delay = model.latency();
    // Whole hops covering the signal, the STFT's delay and one more frame
    // of silence, as DeepFilterNet pads a recording.
    let padded = |len: usize| (len + 2 * delay) / hop * hop;
    let block = Dfn3::MAX_FRAMES * hop;
    let enhanced = run_recording(samples, rate, block, delay, padded, &mut timings, |x, y| {
        model.process_block(x, y)
    })?;
    Ok((enhanced, timings))
}

/// What both whole-recording runs do around their model: `samples` at
/// `rate` taken to `timings.model_rate`, zero-padded to `padded(len)`,
/// handed to `process` `call` samples at a time (each call timed), the
/// output read `delay` samples on and taken back to `rate` at the input's
/// length.
fn run_recording(
    samples: &[f32],
    rate: u32,
    call: usize,
    delay: usize,
    padded: impl Fn(usize) -> usize,
    timings: &mut Timings,
    mut process: impl FnMut(&[f32], &mut [f32]) -> Result<(), DenoiseError>,
) -> Result<Vec<f32>, DenoiseError> {
    let at_model_rate = resample(samples, rate, timings.model_rate)?;
    let mut input = at_model_rate.clone();
    input.resize(padded(at_model_rate.len()), 0.0);
    let mut output = vec![0.0; input.len()];
    timings.samples_per_call = call.min(input.len());
    timings.call_ms.reserve(input.len().div_ceil(call));
    let begin = Instant::now();
    for (i, (x, y)) in input.chunks(call).zip(output.chunks_mut(call)).enumerate() {
        let t = Instant::now();
        process(x, y)?;
        timings.call_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            timings.first_output_ms = begin.elapsed().as_secs_f64() * 1e3;
        }
    }
    let enhanced = &output[delay..delay + at_model_rate.len()];
    let mut back = resample(enhanced, timings.model_rate, rate)?;
    back.resize(samples.len(), 0.0);
    Ok(back)
}

/// `samples` from `from` Hz to `to` Hz, the whole stream.
fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, DenoiseError> {
    if from == to {
        return Ok(samples.to_vec());
    }
    let mut r = Resampler::new(from, to)?;
    let mut out = vec![0.0; r.max_output(samples.len()) + r.max_output(1 << 16)];
    let mut n = r.process(samples, &mut out)?;
    n += r.flush(&mut out[n..])?;
    out.truncate(n);
    Ok(out)
}

/// Signal-to-noise ratio in dB of `estimate` against `clean`:
/// `10·log10(Σ clean² / Σ (clean - estimate)²)` over their common length.
pub fn snr_db(clean: &[f32], estimate: &[f32]) -> f64 {
    let (mut signal, mut noise) = (0.0f64, 0.0f64);
    for (&c, &e) in clean.iter().zip(estimate) {
        signal += f64::from(c) * f64::from(c);
        noise += (f64::from(c) - f64::from(e)).powi(2);
    }
    10.0 * (signal / noise).log10()
}
