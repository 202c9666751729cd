//! End to end: our speech (`examples/data/speech_16k.wav`) with white noise
//! at 5 dB SNR through the streaming enhancer, against the same pipeline
//! run with ONNX Runtime (`cargo xtask fixtures` writes
//! `target/fixtures/apps/denoise*.{json,npy}`).
use std::path::PathBuf;

use lele::audio::{Resampler, read_wav};
use lele_example_denoise::{Denoiser, denoise, denoise_dfn3, snr_db};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data")
        .join(name)
}

fn fixtures() -> PathBuf {
    std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fixtures"))
        .join("apps")
}

fn npy(name: &str) -> Vec<f32> {
    let path = fixtures().join(name);
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures` first)", path.display()));
    let arr = lele_kernels::npy::parse(&bytes).expect("npy");
    bytemuck_f32(arr.bytes())
}

fn bytemuck_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn reference() -> Value {
    json("denoise.json")
}

fn json(name: &str) -> Value {
    let path = fixtures().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures` first)", path.display()));
    serde_json::from_str(&text).expect("reference json")
}

#[test]
fn enhances_our_speech_as_onnx_runtime_does() {
    let (clean, rate) = read_wav(&data("speech_16k.wav")).unwrap();
    assert_eq!(rate, 16_000);
    let noisy = npy("denoise_noisy.npy");
    let ort = npy("denoise_ort.npy");
    let reference = reference();
    assert_eq!(noisy.len(), clean.len());

    let (enhanced, timings) = denoise(&noisy, 16_000).unwrap();
    assert_eq!(enhanced.len(), noisy.len());
    assert_eq!(timings.call_ms.len(), (noisy.len() + 256).div_ceil(256));

    let snr_in = snr_db(&clean, &noisy);
    let snr = snr_db(&clean, &enhanced);
    let snr_ort = reference["snr_ort_db"].as_f64().unwrap();
    assert!((snr_in - 5.0).abs() < 0.01, "input SNR {snr_in}");
    assert!(snr >= 12.0, "output SNR {snr:.2} dB");
    assert!(
        (snr - snr_ort).abs() <= 0.1,
        "output SNR {snr:.3} dB, ONNX Runtime's pipeline {snr_ort:.3} dB"
    );
    // Sample by sample: the parity tolerance on the model's outputs, on a
    // signal of peak ~0.5.
    let worst = max_abs_diff(&enhanced, &ort);
    assert!(
        worst <= 1e-3,
        "largest difference from ONNX Runtime's output: {worst}"
    );
}

#[test]
fn any_rate_goes_through_resampling() {
    // The 16 kHz noisy mix taken to 8 kHz, enhanced there (to 16 kHz and
    // back inside), against our 8 kHz speech file.
    let (clean8, rate) = read_wav(&data("speech_8k.wav")).unwrap();
    assert_eq!(rate, 8_000);
    let noisy16 = npy("denoise_noisy.npy");
    let mut r = Resampler::new(16_000, 8_000).unwrap();
    let mut noisy8 = vec![0.0; r.max_output(noisy16.len()) + r.max_output(4096)];
    let mut n = r.process(&noisy16, &mut noisy8).unwrap();
    n += r.flush(&mut noisy8[n..]).unwrap();
    noisy8.truncate(n);
    assert_eq!(noisy8.len(), clean8.len());
    let (enhanced, _) = denoise(&noisy8, 8_000).unwrap();
    assert_eq!(enhanced.len(), noisy8.len());
    let (before, after) = (snr_db(&clean8, &noisy8), snr_db(&clean8, &enhanced));
    // The noise above 4 kHz is gone at 8 kHz (input SNR ~8.3 dB); the bar
    // is the 16 kHz one.
    assert!(
        after >= 12.0 && after > before,
        "8 kHz: SNR {before:.2} -> {after:.2} dB"
    );
}

#[test]
fn process_hop_checks_its_buffers() {
    let mut d = Denoiser::new().unwrap();
    let mut out = [0.0; 256];
    assert!(d.process_hop(&[0.0; 255], &mut out).is_err());
    assert!(d.process_hop(&[0.0; 256], &mut out[..128]).is_err());
    d.process_hop(&[0.0; 256], &mut out).unwrap();
    assert_eq!(d.latency(), 256);
}

#[test]
fn deepfilternet3_enhances_our_speech_at_48k_as_onnx_runtime_does() {
    // Our speech taken to 48 kHz, white noise at 5 dB SNR; the reference is
    // the same pipeline with ONNX Runtime (apps_reference.py), whose output
    // agrees with DeepFilterNet's own streaming library at 55.8 dB SNR.
    let clean = npy("denoise_dfn3_clean.npy");
    let noisy = npy("denoise_dfn3_noisy.npy");
    let ort = npy("denoise_dfn3_ort.npy");
    let snr_ort = json("denoise_dfn3.json")["snr_ort_db"].as_f64().unwrap();
    let (enhanced, timings) = denoise_dfn3(&noisy, 48_000).unwrap();
    assert_eq!(enhanced.len(), noisy.len());
    assert_eq!(timings.call_ms.len(), 1, "8 s is one block");
    let snr = snr_db(&clean, &enhanced);
    assert!(snr >= 12.0, "output SNR {snr:.2} dB");
    assert!(
        (snr - snr_ort).abs() <= 0.1,
        "output SNR {snr:.3} dB, ONNX Runtime's pipeline {snr_ort:.3} dB"
    );
    let worst = max_abs_diff(&enhanced, &ort);
    assert!(
        worst <= 1e-3,
        "largest difference from ONNX Runtime's output: {worst}"
    );
}
