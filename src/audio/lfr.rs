//! Low-frame-rate stacking and cepstral mean/variance normalization, as
//! Paraformer/SenseVoice-style models take their fbank features.
use super::error::{AudioError, at_least, exact};

/// Output frames of [`lfr_stack`] for `frames` input frames and stride `n`:
/// `ceil(frames / n)`.
pub fn lfr_frames(frames: usize, n: usize) -> usize {
    if n == 0 { 0 } else { frames.div_ceil(n) }
}

/// Stacks `m` consecutive frames of `dim` features every `n` frames:
/// output frame `i` is input frames `i·n - (m-1)/2 .. i·n - (m-1)/2 + m`
/// concatenated, the first frame repeated before the start and the last
/// after the end. `features` holds whole frames; `out` at least
/// `lfr_frames(frames, n) · m · dim` values. Returns the output frames.
pub fn lfr_stack(
    features: &[f32],
    dim: usize,
    m: usize,
    n: usize,
    out: &mut [f32],
) -> Result<usize, AudioError> {
    if dim == 0 || m == 0 || n == 0 {
        return Err(AudioError::Invalid(
            "LFR stacking needs positive dim, m and n".into(),
        ));
    }
    if !features.len().is_multiple_of(dim) {
        return Err(AudioError::Invalid(format!(
            "{} features are not whole frames of {dim}",
            features.len()
        )));
    }
    let frames = features.len() / dim;
    let out_frames = lfr_frames(frames, n);
    let width = m.checked_mul(dim).ok_or(AudioError::TooLarge("LFR"))?;
    let need = out_frames
        .checked_mul(width)
        .ok_or(AudioError::TooLarge("LFR"))?;
    at_least("LFR output", need, out.len())?;
    let left = (m - 1) / 2;
    for (i, row) in out[..need].chunks_exact_mut(width).enumerate() {
        for (j, slot) in row.chunks_exact_mut(dim).enumerate() {
            let src = (i * n + j).saturating_sub(left).min(frames - 1);
            slot.copy_from_slice(&features[src * dim..(src + 1) * dim]);
        }
    }
    Ok(out_frames)
}

/// Per-feature normalization `(x + shift) · scale`, the form of Kaldi's
/// global CMVN files (a negated mean and an inverse standard deviation).
#[derive(Debug, Clone, PartialEq)]
pub struct Cmvn {
    shift: Vec<f32>,
    scale: Vec<f32>,
}

impl Cmvn {
    /// From the per-feature shift and scale.
    pub fn new(shift: Vec<f32>, scale: Vec<f32>) -> Result<Cmvn, AudioError> {
        exact("CMVN scale", shift.len(), scale.len())?;
        if shift.is_empty() {
            return Err(AudioError::Invalid("CMVN of zero features".into()));
        }
        Ok(Cmvn { shift, scale })
    }

    /// The normalization of the statistics of `features` (frames of `dim`):
    /// mean zero and, when `variance`, unit variance per feature (the
    /// population variance; features that never change only lose their
    /// mean).
    pub fn from_utterance(
        features: &[f32],
        dim: usize,
        variance: bool,
    ) -> Result<Cmvn, AudioError> {
        if dim == 0 || features.is_empty() || !features.len().is_multiple_of(dim) {
            return Err(AudioError::Invalid(format!(
                "CMVN statistics of {} values in frames of {dim}",
                features.len()
            )));
        }
        let frames = (features.len() / dim) as f64;
        let mut shift = Vec::with_capacity(dim);
        let mut scale = Vec::with_capacity(dim);
        for d in 0..dim {
            let col = features.iter().skip(d).step_by(dim).map(|&v| v as f64);
            let mean = col.clone().sum::<f64>() / frames;
            let var = col.map(|v| (v - mean) * (v - mean)).sum::<f64>() / frames;
            shift.push(-mean as f32);
            scale.push(if variance && var > 0.0 {
                (1.0 / var.sqrt()) as f32
            } else {
                1.0
            });
        }
        Cmvn::new(shift, scale)
    }

    /// Features per frame.
    pub fn dim(&self) -> usize {
        self.shift.len()
    }

    /// Normalizes whole frames of [`Cmvn::dim`] features in place.
    pub fn apply(&self, features: &mut [f32]) -> Result<(), AudioError> {
        if !features.len().is_multiple_of(self.dim()) {
            return Err(AudioError::Invalid(format!(
                "{} features are not whole frames of {}",
                features.len(),
                self.dim()
            )));
        }
        for frame in features.chunks_exact_mut(self.dim()) {
            for ((v, &a), &b) in frame.iter_mut().zip(&self.shift).zip(&self.scale) {
                *v = (*v + a) * b;
            }
        }
        Ok(())
    }
}
