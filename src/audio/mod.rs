//! Audio around the models: what a speech pipeline computes before and after
//! the network.
//!
//! - [`RealFft`]: the FFT of a real signal of any length (lele's kernel FFT:
//!   mixed radix, Bluestein for large primes) and its inverse.
//! - [`Window`]: Hann, Hamming, Blackman, Povey, square-root Hann.
//! - [`StreamingStft`] / [`StreamingIstft`]: one frame per hop of new samples,
//!   and weighted overlap-add back to samples, for real-time loops.
//! - [`MelBank`]: triangular mel filterbanks (HTK, Slaney, Kaldi).
//! - [`WhisperLogMel`], [`KaldiFbank`], [`NemoLogMel`]: the front ends of
//!   Whisper, Kaldi-style recognizers and NeMo models, frame for frame.
//! - [`lfr_stack`], [`Cmvn`]: low-frame-rate stacking and mean/variance
//!   normalization.
//! - [`Resampler`]: streaming rational-rate resampling (windowed sinc).
//! - `read_wav` / `write_wav` (feature `wav`).
//!
//! Every type allocates in its constructor only; the calls that process
//! audio write into buffers the caller passes, so a real-time callback can
//! make them.
mod error;
mod features;
mod fft;
mod lfr;
mod mel;
mod resample;
mod stft;
#[cfg(feature = "wav")]
mod wav;
mod window;

pub use error::AudioError;
pub use features::{KaldiFbank, KaldiOptions, NemoLogMel, WhisperLogMel};
pub use fft::{Complex, RealFft};
pub use lfr::{Cmvn, lfr_frames, lfr_stack};
pub use mel::{MelBank, MelStyle};
pub use resample::Resampler;
pub use stft::{StreamingIstft, StreamingStft};
#[cfg(feature = "wav")]
pub use wav::{read_wav, write_wav};
pub use window::{Symmetry, Window};

#[cfg(test)]
mod tests;
