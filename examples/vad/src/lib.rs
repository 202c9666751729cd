//! Voice activity detection with Silero VAD v6 compiled by lele.
//!
//! [`VadStream`] runs the model on consecutive chunks (512 samples at
//! 16 kHz, 256 at 8 kHz), carrying the recurrent state and the few samples
//! of context the model expects from the previous chunk. [`Segmenter`] turns
//! the per-chunk speech probabilities into segments with the rules of the
//! reference Silero pipeline (`get_speech_timestamps`): a start threshold,
//! a lower end threshold, minimum speech and silence durations, and padding
//! around each segment. [`speech_segments`] does both for a whole recording.
//!
//! ```no_run
//! use lele_example_vad::{read_wav, speech_segments, VadParams};
//! let (samples, rate) = read_wav("speech.wav".as_ref())?;
//! for seg in speech_segments(&samples, rate, &VadParams::default())? {
//!     println!("{:.2}s – {:.2}s", seg.start_s(rate), seg.end_s(rate));
//! }
//! # Ok::<(), lele_example_vad::VadError>(())
//! ```
use std::path::Path;
use std::time::Instant;

mod segment;

pub use segment::{Segment, Segmenter, VadParams};

/// The model, compiled from `model.toml` at build time.
#[lele::model("model.toml")]
pub struct SileroVad;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum VadError {
    /// Only the two rates the model was trained for are supported.
    #[error("sample rate {0} Hz is not supported (8000 or 16000; resample first)")]
    SampleRate(u32),
    /// A chunk longer than the model's window.
    #[error("chunk of {got} samples, at most {max} at this rate")]
    ChunkTooLong {
        /// Samples passed.
        got: usize,
        /// The window at this rate.
        max: usize,
    },
    /// The WAV file could not be read.
    #[error(transparent)]
    Wav(#[from] lele::audio::AudioError),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] lele::Error),
    /// An input tensor could not be formed.
    #[error(transparent)]
    Input(#[from] lele::kernels::KernelError),
}

/// Size of the recurrent state (`[2, 1, 128]`).
const STATE_LEN: usize = 2 * 128;

/// Streaming speech probability: one model call per chunk, state carried.
pub struct VadStream {
    model: SileroVad,
    ws: SileroVadWorkspace,
    rate: u32,
    window: usize,
    context: usize,
    state: [f32; STATE_LEN],
    /// `context` samples from the previous chunk followed by the chunk.
    input: Vec<f32>,
    /// Milliseconds of each model call.
    pub call_ms: Vec<f64>,
}

impl VadStream {
    /// A stream at `rate` Hz (8000 or 16000).
    pub fn new(rate: u32) -> Result<Self, VadError> {
        let (window, context) = match rate {
            16_000 => (512, 64),
            8_000 => (256, 32),
            other => return Err(VadError::SampleRate(other)),
        };
        let model = SileroVad::new()?;
        let ws = model.workspace();
        Ok(Self {
            model,
            ws,
            rate,
            window,
            context,
            state: [0.0; STATE_LEN],
            input: vec![0.0; context + window],
            call_ms: Vec::new(),
        })
    }

    /// Samples per chunk at this rate (512 at 16 kHz, 256 at 8 kHz).
    pub fn window(&self) -> usize {
        self.window
    }

    /// Samples per model input: the context kept from the previous chunk
    /// plus one chunk (576 at 16 kHz, 288 at 8 kHz).
    pub fn input_len(&self) -> usize {
        self.input.len()
    }

    /// The sample rate.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Forgets the state and context (start of a new stream).
    pub fn reset(&mut self) {
        self.state = [0.0; STATE_LEN];
        self.input.fill(0.0);
    }

    /// Speech probability of the next chunk (`window()` samples; a shorter
    /// final chunk is padded with zeros).
    pub fn process(&mut self, chunk: &[f32]) -> Result<f32, VadError> {
        if chunk.len() > self.window {
            return Err(VadError::ChunkTooLong {
                got: chunk.len(),
                max: self.window,
            });
        }
        let new = &mut self.input[self.context..];
        new[..chunk.len()].copy_from_slice(chunk);
        new[chunk.len()..].fill(0.0);
        let sr = [i64::from(self.rate)];
        let start = Instant::now();
        let out = self.model.forward(
            &mut self.ws,
            lele::TensorView::new(&self.input, &[1, self.input.len()])?,
            lele::TensorView::new(&self.state, &[2, 1, 128])?,
            lele::TensorView::new(&sr, &[])?,
        )?;
        self.call_ms.push(start.elapsed().as_secs_f64() * 1e3);
        let prob = out.output.data().first().copied().unwrap_or(0.0);
        self.state.copy_from_slice(out.state_n.data());
        // The next call sees the end of this chunk as its context.
        let tail = self.input.len() - self.context;
        self.input.copy_within(tail.., 0);
        Ok(prob)
    }
}

/// Speech probability of every chunk of a recording.
pub fn speech_probabilities(stream: &mut VadStream, samples: &[f32]) -> Result<Vec<f32>, VadError> {
    samples
        .chunks(stream.window())
        .map(|chunk| stream.process(chunk))
        .collect()
}

/// Speech segments of a whole recording (sample positions), like the
/// reference pipeline.
pub fn speech_segments(
    samples: &[f32],
    rate: u32,
    params: &VadParams,
) -> Result<Vec<Segment>, VadError> {
    let mut stream = VadStream::new(rate)?;
    let mut seg = Segmenter::new(params, rate, stream.window());
    for chunk in samples.chunks(stream.window()) {
        seg.push(stream.process(chunk)?);
    }
    Ok(seg.finish(samples.len()))
}

/// Reads a WAV file as mono f32 in [-1, 1] (channels averaged) and its rate
/// ([`lele::audio::read_wav`]).
pub fn read_wav(path: &Path) -> Result<(Vec<f32>, u32), VadError> {
    Ok(lele::audio::read_wav(path)?)
}
