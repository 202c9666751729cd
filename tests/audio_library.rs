//! `lele::audio` against NumPy references (`xtask/python/audio_reference.py`,
//! written by `cargo xtask fixtures` into `<fixtures>/audio/`), and against
//! the compiled feature graphs of onnx-asr on the same audio.
mod common;

use common::{fixtures_dir, view};
use lele::audio::*;
use lele::kernels::npy::NpyArray;

fn reference(name: &str) -> NpyArray {
    let p = fixtures_dir().join("audio").join(format!("{name}.npy"));
    let bytes = std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e}\n(run `cargo xtask fixtures` first)", p.display()));
    lele::kernels::npy::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn values(a: &NpyArray) -> Vec<f32> {
    view::<f32>(a).data().to_vec()
}

/// `|got - want| <= atol + rtol·|want|` everywhere.
fn assert_within(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = (0, 0.0f32, 0.0f32);
    let mut bad = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        if err.is_nan() || err > atol + rtol * w.abs() {
            bad += 1;
            if err.is_nan() || err > (worst.1 - worst.2).abs() {
                worst = (i, g, w);
            }
        }
    }
    assert!(
        bad == 0,
        "{what}: {bad} of {} values off; worst at {}: {} vs {}",
        got.len(),
        worst.0,
        worst.1,
        worst.2
    );
}

/// Parity tolerance of the model tests: 1e-4 + 1e-3·|reference|.
fn assert_features(what: &str, got: &[f32], want: &[f32]) {
    assert_within(what, got, want, 1e-4, 1e-3);
}

#[test]
fn windows_match_numpy() {
    for (kind, window) in [
        ("hann", Window::Hann),
        ("hamming", Window::Hamming),
        ("blackman", Window::Blackman),
    ] {
        for (sym, symmetry) in [
            ("symmetric", Symmetry::Symmetric),
            ("periodic", Symmetry::Periodic),
        ] {
            for n in [7, 400] {
                let name = format!("window_{kind}_{sym}_{n}");
                assert_within(
                    &name,
                    &window.build(symmetry, n),
                    &values(&reference(&name)),
                    1e-6,
                    0.0,
                );
            }
        }
    }
    let povey = Window::Povey.build(Symmetry::Symmetric, 400);
    assert_within(
        "povey",
        &povey,
        &values(&reference("window_povey_400")),
        1e-6,
        0.0,
    );
    let sqrt_hann = Window::SqrtHann.build(Symmetry::Periodic, 512);
    let want = values(&reference("window_sqrt_hann_periodic_512"));
    assert_within("sqrt hann", &sqrt_hann, &want, 1e-6, 0.0);
}

#[test]
fn mel_filters_match_librosa_and_torchaudio() {
    let cases = [
        ("whisper80", MelStyle::Slaney, 400, 80, 0.0, 8_000.0, true),
        ("whisper128", MelStyle::Slaney, 400, 128, 0.0, 8_000.0, true),
        ("nemo80", MelStyle::Slaney, 512, 80, 0.0, 8_000.0, true),
        ("nemo128", MelStyle::Slaney, 512, 128, 0.0, 8_000.0, true),
        ("kaldi", MelStyle::Kaldi, 512, 80, 20.0, -400.0, false),
        ("gigaam_v2", MelStyle::Htk, 400, 64, 0.0, 8_000.0, false),
    ];
    for (name, style, n_fft, mels, lo, hi, norm) in cases {
        let bank = MelBank::new(style, 16_000, n_fft, mels, lo, hi, norm).unwrap();
        let want = reference(&format!("fbank_{name}"));
        assert_eq!(want.dims, [bank.bins(), mels], "{name}: shape");
        let peak = values(&want).iter().fold(0.0f32, |m, v| m.max(*v));
        assert_within(name, bank.weights(), &values(&want), 1e-6 * peak, 1e-5);
    }
}

#[test]
fn whisper_log_mel_matches_numpy() {
    let x = values(&reference("signal"));
    let mut front = WhisperLogMel::new(80).unwrap();
    let mut out = vec![0.0; 80 * WhisperLogMel::FRAMES];
    front.compute(&x, &mut out).unwrap();
    assert_features("whisper log-mel", &out, &values(&reference("whisper80")));
}

#[test]
fn nemo_log_mel_matches_numpy() {
    let x = values(&reference("signal"));
    let mut front = NemoLogMel::new(80).unwrap();
    let frames = front.frames(x.len());
    let mut out = vec![0.0; 80 * frames];
    assert_eq!(front.compute(&x, &mut out).unwrap(), frames);
    let want = reference("nemo80");
    assert_eq!(want.dims, [80, frames]);
    assert_features("nemo log-mel", &out, &values(&want));
}

fn kaldi_features(x: &[f32], snip_edges: bool) -> (Vec<f32>, usize) {
    // onnx-asr's filters end 400 Hz below Nyquist (as k2/sherpa front ends).
    let mut fbank = KaldiFbank::new(KaldiOptions {
        snip_edges,
        high_freq: -400.0,
        ..KaldiOptions::default()
    })
    .unwrap();
    let frames = fbank.frames(x.len());
    let mut out = vec![0.0; frames * 80];
    assert_eq!(fbank.compute(x, &mut out).unwrap(), frames);
    (out, frames)
}

#[test]
fn kaldi_fbank_matches_numpy() {
    let x = values(&reference("signal"));
    for (snip, name) in [(true, "kaldi_snip_edges"), (false, "kaldi_centred")] {
        let (out, frames) = kaldi_features(&x, snip);
        let want = reference(name);
        assert_eq!(want.dims, [frames, 80], "{name}");
        assert_features(name, &out, &values(&want));
    }
}

#[test]
fn lfr_and_cmvn_match_numpy() {
    // On the reference Kaldi features, so that only LFR/CMVN is tested.
    let feats = values(&reference("kaldi_centred"));
    let frames = feats.len() / 80;
    let mut stacked = vec![0.0; lfr_frames(frames, 6) * 7 * 80];
    assert_eq!(
        lfr_stack(&feats, 80, 7, 6, &mut stacked).unwrap(),
        frames.div_ceil(6)
    );
    assert_within("lfr", &stacked, &values(&reference("lfr_7_6")), 0.0, 0.0);
    let cmvn = Cmvn::new(
        values(&reference("cmvn_shift")),
        values(&reference("cmvn_scale")),
    )
    .unwrap();
    cmvn.apply(&mut stacked).unwrap();
    assert_within(
        "cmvn",
        &stacked,
        &values(&reference("cmvn_applied")),
        1e-5,
        1e-6,
    );
    let mut feats = feats;
    Cmvn::from_utterance(&feats, 80, true)
        .unwrap()
        .apply(&mut feats)
        .unwrap();
    assert_within(
        "utterance cmvn",
        &feats,
        &values(&reference("cmvn_utterance")),
        1e-4,
        1e-4,
    );
}

#[test]
fn streaming_stft_and_istft_match_numpy() {
    let x = values(&reference("signal"));
    let window = Window::SqrtHann.build(Symmetry::Periodic, 512);
    let mut stft = StreamingStft::new(512, 256, &window).unwrap();
    let want = values(&reference("stft_512_256"));
    let mut spec = vec![Complex::ZERO; 257];
    let mut got = Vec::new();
    for hop in x.chunks_exact(256) {
        stft.push(hop, &mut spec).unwrap();
        got.extend(spec.iter().flat_map(|c| [c.re, c.im]));
    }
    // Spectra of frames of ~0.3 amplitude over 512 samples: absolute error
    // relative to the frame's scale.
    assert_within("stft", &got, &want, 2e-4, 1e-4);

    let hann = Window::Hann.build(Symmetry::Periodic, 400);
    let mut istft = StreamingIstft::new(512, 160, &hann, &hann).unwrap();
    let input = values(&reference("istft_input_512_160"));
    let mut out = vec![0.0; input.len() / (257 * 2) * 160];
    for (frame, hop) in input.chunks_exact(257 * 2).zip(out.chunks_exact_mut(160)) {
        let spec: Vec<Complex> = frame
            .chunks_exact(2)
            .map(|c| Complex::new(c[0], c[1]))
            .collect();
        istft.push(&spec, hop).unwrap();
    }
    assert_within(
        "istft",
        &out,
        &values(&reference("istft_512_160")),
        1e-5,
        1e-4,
    );
}

fn resample_all(x: &[f32], from: u32, to: u32) -> Vec<f32> {
    let mut r = Resampler::new(from, to).unwrap();
    let mut out = vec![0.0; r.max_output(x.len()) + r.max_output(4096)];
    let mut n = 0;
    for chunk in x.chunks(333) {
        let cap = r.max_output(chunk.len());
        n += r.process(chunk, &mut out[n..n + cap]).unwrap();
    }
    let cap = out.len() - n;
    n += r.flush(&mut out[n..n + cap]).unwrap();
    out.truncate(n);
    out
}

#[test]
fn resampling_matches_numpy() {
    let x44 = values(&reference("resample_in_44100"));
    let got = resample_all(&x44, 44_100, 16_000);
    assert_within(
        "44.1 -> 16 kHz",
        &got,
        &values(&reference("resample_44100_16000")),
        1e-5,
        0.0,
    );
    let x16 = &values(&reference("signal"))[..8_000];
    let got = resample_all(x16, 16_000, 48_000);
    assert_within(
        "16 -> 48 kHz",
        &got,
        &values(&reference("resample_16000_48000")),
        1e-5,
        0.0,
    );
}

// The library and the compiled onnx-asr graphs on the same 10 s of audio
// (the parity fixtures' input): Whisper and NeMo compute the same features.
// (onnx-asr's `kaldi.onnx` removes the DC offset and pre-emphasizes the
// whole signal rather than each frame, so it is not Kaldi's fbank and is
// left out here.)

#[lele::model("tests/models/asr_whisper80.toml")]
struct Whisper80Graph;

#[lele::model("tests/models/asr_nemo80.toml")]
struct Nemo80Graph;

fn fixture_wave() -> (NpyArray, NpyArray) {
    (
        common::load("asr_whisper80_10s", 0, "in", 0),
        common::load("asr_whisper80_10s", 0, "in", 1),
    )
}

#[test]
fn whisper_library_equals_the_compiled_graph() {
    let (wave, lens) = fixture_wave();
    let model = Whisper80Graph::new().unwrap();
    let mut ws = model.workspace();
    let out = model.forward(&mut ws, view(&wave), view(&lens)).unwrap();
    let mut lib = vec![0.0; 80 * WhisperLogMel::FRAMES];
    WhisperLogMel::new(80)
        .unwrap()
        .compute(view::<f32>(&wave).data(), &mut lib)
        .unwrap();
    assert_eq!(out.features.shape().dims(), [1, 80, WhisperLogMel::FRAMES]);
    assert_features("whisper: graph vs library", out.features.data(), &lib);
}

#[test]
fn nemo_library_equals_the_compiled_graph() {
    let (wave, lens) = fixture_wave();
    let model = Nemo80Graph::new().unwrap();
    let mut ws = model.workspace();
    let out = model.forward(&mut ws, view(&wave), view(&lens)).unwrap();
    let samples = view::<f32>(&wave).data();
    let mut front = NemoLogMel::new(80).unwrap();
    let frames = front.frames(samples.len());
    let mut lib = vec![0.0; 80 * frames];
    front.compute(samples, &mut lib).unwrap();
    assert_eq!(out.features.shape().dims(), [1, 80, frames]);
    assert_features("nemo: graph vs library", out.features.data(), &lib);
}
