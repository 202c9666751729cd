//! DeepFilterNet3 at 48 kHz: its features, its three networks and its
//! deep filter, over blocks of frames.
//!
//! Per frame (960-point FFT every 480 samples, the power-complementary
//! Vorbis window, spectra scaled by `1/960`): the power of 32 ERB bands in
//! dB with an exponentially decaying mean taken out (`/40`), and the first
//! 96 bins divided by the square root of their decaying mean magnitude.
//! The encoder sees the features two frames ahead (its lookahead); the ERB
//! decoder gives one gain per band, applied to every bin of the band; the
//! deep-filter decoder gives, for each of the first 96 bins, five complex
//! taps over the noisy frames `t-2 ..= t+2`, which replace those bins.
//!
//! The networks take a block of up to [`Dfn3::MAX_FRAMES`] frames at once
//! (their recurrent layers start from zero on each block); the feature
//! normalization and the STFT carry over between blocks.
use lele::audio::{Complex, StreamingIstft, StreamingStft, Symmetry, Window};

use crate::DenoiseError;

/// The encoder, compiled from `dfn3_enc.toml`.
#[lele::model("dfn3_enc.toml")]
pub struct Dfn3Encoder;

/// The ERB mask decoder, compiled from `dfn3_erb_dec.toml`.
#[lele::model("dfn3_erb_dec.toml")]
pub struct Dfn3ErbDecoder;

/// The deep-filter decoder, compiled from `dfn3_df_dec.toml`.
#[lele::model("dfn3_df_dec.toml")]
pub struct Dfn3DfDecoder;

const N_FFT: usize = 960;
const HOP: usize = 480;
const BINS: usize = N_FFT / 2 + 1;
const ERB_BANDS: usize = 32;
const DF_BINS: usize = 96;
const DF_ORDER: usize = 5;
/// Frames the deep filter looks ahead, and the encoder's feature lookahead.
const LOOKAHEAD: usize = 2;
const MIN_BAND_BINS: usize = 2;
/// The normalization's time constant is 1 s: `exp(-hop / rate)`, rounded
/// as DeepFilterNet rounds it (to the first decimals that make it < 1).
const NORM_ALPHA: f32 = 0.99;
/// `1 / (n_fft² / (2·hop))`: the analysis scale the networks were trained on.
const SPECTRUM_SCALE: f32 = 1.0 / 960.0;

/// ERB scale of DeepFilterNet (`9.265·ln(1 + f/(24.7·9.265))`).
fn freq_to_erb(hz: f32) -> f32 {
    9.265 * (hz / (24.7 * 9.265)).ln_1p()
}

fn erb_to_freq(erb: f32) -> f32 {
    24.7 * 9.265 * ((erb / 9.265).exp() - 1.0)
}

/// Bins per ERB band: equal steps on the ERB scale, rounded to bins, each
/// band at least two bins wide (the excess taken from the next band), the
/// last band ending at the Nyquist bin.
pub fn erb_band_widths() -> [usize; ERB_BANDS] {
    let bin_hz = 48_000.0 / N_FFT as f32;
    let (lo, hi) = (freq_to_erb(0.0), freq_to_erb(24_000.0));
    let step = (hi - lo) / ERB_BANDS as f32;
    let mut widths = [0usize; ERB_BANDS];
    // Signed: a band whose edge rounds below the previous band's widened
    // end owes more than one bin to the next.
    let min = MIN_BAND_BINS as i64;
    let (mut prev, mut over) = (0i64, 0i64);
    for (i, w) in widths.iter_mut().enumerate() {
        let edge = (erb_to_freq(lo + (i + 1) as f32 * step) / bin_hz).round() as i64;
        let mut n = edge - prev - over;
        if n < min {
            over = min - n;
            n = min;
        } else {
            over = 0;
        }
        *w = n as usize;
        prev = edge;
    }
    widths[ERB_BANDS - 1] += 1;
    let total: usize = widths.iter().sum();
    widths[ERB_BANDS - 1] -= total.saturating_sub(BINS);
    widths
}

/// `n` values from `a` to `b`, evenly spaced (both ends included).
fn linspace<const N: usize>(a: f32, b: f32) -> [f32; N] {
    core::array::from_fn(|i| a + (b - a) * i as f32 / (N - 1) as f32)
}

/// The whole DeepFilterNet3 pipeline with its buffers for blocks of up to
/// [`Dfn3::MAX_FRAMES`] frames.
pub struct Dfn3 {
    enc: Dfn3Encoder,
    erb_dec: Dfn3ErbDecoder,
    df_dec: Dfn3DfDecoder,
    enc_ws: Dfn3EncoderWorkspace,
    erb_ws: Dfn3ErbDecoderWorkspace,
    df_ws: Dfn3DfDecoderWorkspace,
    widths: [usize; ERB_BANDS],
    stft: StreamingStft,
    istft: StreamingIstft,
    erb_mean: [f32; ERB_BANDS],
    unit_mean: [f32; DF_BINS],
    /// The block's spectra, `[frames + LOOKAHEAD][BINS]` (the lookahead
    /// frames at the end are zeros).
    spectra: Vec<Complex>,
    /// `[1, 1, frames, 32]` and `[1, 2, frames, 96]`.
    feat_erb: Vec<f32>,
    feat_spec: Vec<f32>,
    /// Features of the block before the lookahead shift.
    raw_erb: Vec<f32>,
    raw_spec: Vec<Complex>,
    frame: Vec<Complex>,
}

impl Dfn3 {
    /// Sample rate of the networks.
    pub const SAMPLE_RATE: u32 = 48_000;
    /// Samples per frame.
    pub const HOP: usize = HOP;
    /// The most frames one block takes (30 s).
    pub const MAX_FRAMES: usize = 3000;

    /// Loads the three networks and allocates every buffer.
    pub fn new() -> Result<Dfn3, DenoiseError> {
        let enc = Dfn3Encoder::new()?;
        let erb_dec = Dfn3ErbDecoder::new()?;
        let df_dec = Dfn3DfDecoder::new()?;
        let window = Window::Vorbis.build(Symmetry::Periodic, N_FFT);
        let frames = Self::MAX_FRAMES + LOOKAHEAD;
        Ok(Dfn3 {
            enc_ws: enc.workspace(),
            erb_ws: erb_dec.workspace(),
            df_ws: df_dec.workspace(),
            enc,
            erb_dec,
            df_dec,
            widths: erb_band_widths(),
            stft: StreamingStft::new(N_FFT, HOP, &window)?,
            istft: StreamingIstft::new(N_FFT, HOP, &window, &window)?,
            erb_mean: linspace(-60.0, -90.0),
            unit_mean: linspace(0.001, 0.0001),
            spectra: vec![Complex::ZERO; frames * BINS],
            feat_erb: vec![0.0; Self::MAX_FRAMES * ERB_BANDS],
            feat_spec: vec![0.0; 2 * Self::MAX_FRAMES * DF_BINS],
            raw_erb: vec![0.0; frames * ERB_BANDS],
            raw_spec: vec![Complex::ZERO; frames * DF_BINS],
            frame: vec![Complex::ZERO; BINS],
        })
    }

    /// Samples from an input to its enhanced output: the STFT's 480 (the
    /// two frames the networks look ahead are inside the block).
    pub fn latency(&self) -> usize {
        self.istft.delay()
    }

    /// Enhances `input` (48 kHz; a whole number of hops, at most
    /// [`Dfn3::MAX_FRAMES`] of them) into `output` (as long), continuing the
    /// stream of the previous call; the output is [`Dfn3::latency`]
    /// samples late. The last two frames of a block see silence ahead.
    pub fn process_block(&mut self, input: &[f32], output: &mut [f32]) -> Result<(), DenoiseError> {
        let frames = input.len() / HOP;
        if !input.len().is_multiple_of(HOP)
            || frames > Self::MAX_FRAMES
            || output.len() != input.len()
        {
            return Err(DenoiseError::Block {
                hop: HOP,
                max_frames: Self::MAX_FRAMES,
                got: input.len(),
            });
        }
        if frames == 0 {
            return Ok(());
        }
        self.analyse(input)?;
        self.encode_features(frames);
        let e = self.enc.forward(
            &mut self.enc_ws,
            lele::TensorView::new(
                &self.feat_erb[..frames * ERB_BANDS],
                &[1, 1, frames, ERB_BANDS],
            )?,
            lele::TensorView::new(
                &self.feat_spec[..2 * frames * DF_BINS],
                &[1, 2, frames, DF_BINS],
            )?,
        )?;
        let mask = self
            .erb_dec
            .forward(&mut self.erb_ws, e.emb, e.e3, e.e2, e.e1, e.e0)?;
        let coefs = self.df_dec.forward(&mut self.df_ws, e.emb, e.c0)?;
        let (mask, coefs) = (mask.m.data(), coefs.coefs.data());
        for t in 0..frames {
            let noisy = &self.spectra[t * BINS..(t + 1) * BINS];
            // Band gains on every bin.
            let mut bin = 0;
            for (b, &w) in self.widths.iter().enumerate() {
                let g = mask[t * ERB_BANDS + b];
                for (o, x) in self.frame[bin..bin + w]
                    .iter_mut()
                    .zip(&noisy[bin..bin + w])
                {
                    *o = x.scale(g);
                }
                bin += w;
            }
            // The deep filter over frames t-2 ..= t+2 of the noisy
            // spectrum (before the block: the frames kept from the last
            // block are not used; the networks restart there too).
            for f in 0..DF_BINS {
                let mut acc = Complex::ZERO;
                for i in 0..DF_ORDER {
                    let Some(src) = (t + i).checked_sub(DF_ORDER - 1 - LOOKAHEAD) else {
                        continue;
                    };
                    let c = &coefs[((t * DF_BINS + f) * DF_ORDER + i) * 2..][..2];
                    acc = acc + self.spectra[src * BINS + f] * Complex::new(c[0], c[1]);
                }
                self.frame[f] = acc;
            }
            for c in self.frame.iter_mut() {
                *c = c.scale(1.0 / SPECTRUM_SCALE);
            }
            self.istft
                .push(&self.frame, &mut output[t * HOP..(t + 1) * HOP])?;
        }
        Ok(())
    }

    /// Spectra and raw features of the block's frames.
    fn analyse(&mut self, input: &[f32]) -> Result<(), DenoiseError> {
        let frames = input.len() / HOP;
        for (t, hop) in input.chunks_exact(HOP).enumerate() {
            let spec = &mut self.spectra[t * BINS..(t + 1) * BINS];
            self.stft.push(hop, spec)?;
            for c in spec.iter_mut() {
                *c = c.scale(SPECTRUM_SCALE);
            }
            let mut bin = 0;
            for (b, &w) in self.widths.iter().enumerate() {
                let power: f32 = spec[bin..bin + w]
                    .iter()
                    .map(|c| c.re * c.re + c.im * c.im)
                    .sum::<f32>()
                    / w as f32;
                let db = 10.0 * (power + 1e-10).log10();
                let mean = &mut self.erb_mean[b];
                *mean = db * (1.0 - NORM_ALPHA) + *mean * NORM_ALPHA;
                self.raw_erb[t * ERB_BANDS + b] = (db - *mean) / 40.0;
                bin += w;
            }
            for (f, (c, mean)) in spec[..DF_BINS].iter().zip(&mut self.unit_mean).enumerate() {
                let mag = (c.re * c.re + c.im * c.im).sqrt();
                *mean = mag * (1.0 - NORM_ALPHA) + *mean * NORM_ALPHA;
                self.raw_spec[t * DF_BINS + f] = c.scale(1.0 / mean.sqrt());
            }
        }
        // Past the block's end the lookahead sees silence (zeros).
        self.spectra[frames * BINS..(frames + LOOKAHEAD) * BINS].fill(Complex::ZERO);
        Ok(())
    }

    /// The networks' inputs: the features `LOOKAHEAD` frames ahead, zeros
    /// past the block.
    fn encode_features(&mut self, frames: usize) {
        for t in 0..frames {
            let src = t + LOOKAHEAD;
            let erb = &mut self.feat_erb[t * ERB_BANDS..(t + 1) * ERB_BANDS];
            if src < frames {
                erb.copy_from_slice(&self.raw_erb[src * ERB_BANDS..(src + 1) * ERB_BANDS]);
            } else {
                erb.fill(0.0);
            }
            for f in 0..DF_BINS {
                let c = if src < frames {
                    self.raw_spec[src * DF_BINS + f]
                } else {
                    Complex::ZERO
                };
                self.feat_spec[t * DF_BINS + f] = c.re;
                self.feat_spec[(frames + t) * DF_BINS + f] = c.im;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erb_bands_cover_the_spectrum_at_least_two_bins_wide() {
        let w = erb_band_widths();
        assert_eq!(w.iter().sum::<usize>(), BINS);
        assert!(w.iter().all(|&n| n >= MIN_BAND_BINS));
        // Where the scale's edges crowd below two bins, the owed bins carry
        // into the next band (band 12 ends at bin 26, band 13 spans 5).
        assert_eq!(&w[..16], &[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 5, 5, 7]);
    }
}
