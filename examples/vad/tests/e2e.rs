//! End to end: our WAV (speech synthesized by `xtask/python/make_app_inputs.py`
//! at known times) through the compiled Silero VAD, against the known
//! speech intervals and against the same pipeline run with ONNX Runtime
//! (`cargo xtask fixtures` writes `target/fixtures/apps/vad.json`).
use std::path::PathBuf;

use lele_example_vad::{VadParams, VadStream, read_wav, speech_probabilities, speech_segments};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data")
        .join(name)
}

fn reference() -> Value {
    let dir = std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fixtures"));
    let path = dir.join("apps/vad.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures` first)", path.display()));
    serde_json::from_str(&text).expect("vad.json")
}

fn pairs(v: &Value) -> Vec<(f64, f64)> {
    v.as_array()
        .expect("list of segments")
        .iter()
        .map(|p| (p[0].as_f64().expect("start"), p[1].as_f64().expect("end")))
        .collect()
}

fn check_rate(file: &str, rate: u32) {
    let (samples, got_rate) = read_wav(&data(file)).unwrap();
    assert_eq!(got_rate, rate);
    let reference = reference();

    // Per-chunk probabilities, state carried across calls, match ORT's.
    let mut stream = VadStream::new(rate).unwrap();
    let probs = speech_probabilities(&mut stream, &samples).unwrap();
    let ort: Vec<f64> = reference[format!("probs_{rate}")]
        .as_array()
        .expect("probs")
        .iter()
        .map(|p| p.as_f64().expect("prob"))
        .collect();
    assert_eq!(probs.len(), ort.len(), "number of chunks");
    for (i, (&p, &o)) in probs.iter().zip(&ort).enumerate() {
        assert!(
            (f64::from(p) - o).abs() <= 1e-4 + 1e-3 * o.abs(),
            "chunk {i}: lele {p} vs ORT {o}"
        );
    }

    // Segments: the same as ORT's, and within 100 ms of the known speech.
    let segs = speech_segments(&samples, rate, &VadParams::default()).unwrap();
    let ours: Vec<(usize, usize)> = segs.iter().map(|s| (s.start, s.end)).collect();
    let ort_samples: Vec<(usize, usize)> = pairs(&reference[format!("samples_{rate}")])
        .into_iter()
        .map(|(s, e)| (s as usize, e as usize))
        .collect();
    assert_eq!(ours, ort_samples, "segments (samples) vs ONNX Runtime");

    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(data("speech.json")).unwrap()).unwrap();
    let truth = pairs(&truth["speech"]);
    assert_eq!(segs.len(), truth.len(), "number of speech segments");
    for (s, (start, end)) in segs.iter().zip(truth) {
        let (a, b) = (s.start_s(rate), s.end_s(rate));
        assert!(
            (a - start).abs() <= 0.1 && (b - end).abs() <= 0.1,
            "segment {a:.3}-{b:.3} s vs known speech {start:.3}-{end:.3} s"
        );
    }
}

#[test]
fn speech_16k_segments_match_known_speech_and_ort() {
    check_rate("speech_16k.wav", 16_000);
}

#[test]
fn speech_8k_segments_match_known_speech_and_ort() {
    check_rate("speech_8k.wav", 8_000);
}

#[test]
fn other_rates_are_rejected() {
    assert!(VadStream::new(44_100).is_err());
}
