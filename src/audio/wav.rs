//! WAV files through `hound`.
use std::path::Path;

use super::error::AudioError;

fn wav_error(path: &Path) -> impl FnOnce(hound::Error) -> AudioError + '_ {
    move |source| AudioError::Wav {
        path: path.display().to_string(),
        source,
    }
}

/// Reads a WAV file (8/16/24/32-bit integer PCM or 32-bit float) as mono
/// samples in [-1, 1] (channels averaged) and its sample rate.
pub fn read_wav(path: &Path) -> Result<(Vec<f32>, u32), AudioError> {
    let err = |e| wav_error(path)(e);
    let mut reader = hound::WavReader::open(path).map_err(err)?;
    let spec = reader.spec();
    let channels = usize::from(spec.channels.max(1));
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(err)?,
        hound::SampleFormat::Int => {
            let bits = u32::from(spec.bits_per_sample.clamp(1, 32));
            let scale = 1.0 / (1u64 << (bits - 1)) as f32;
            reader
                .samples::<i32>()
                .map(|s| s.map(|v| v as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(err)?
        }
    };
    let mono = interleaved
        .chunks_exact(channels)
        .map(|frame| frame.iter().sum::<f32>() / channels as f32)
        .collect();
    Ok((mono, spec.sample_rate))
}

/// Writes mono samples as 16-bit PCM (clipped to [-1, 1], rounded).
pub fn write_wav(path: &Path, samples: &[f32], sample_rate: u32) -> Result<(), AudioError> {
    let err = |e| wav_error(path)(e);
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec).map_err(err)?;
    for &s in samples {
        let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
        writer.write_sample(v).map_err(err)?;
    }
    writer.finalize().map_err(err)
}
