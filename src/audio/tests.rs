//! Properties of the audio functions that need no outside reference; the
//! NumPy references are checked in `tests/audio_library.rs`.
use super::*;

/// A seeded pseudo-random signal in [-1, 1).
fn noise(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn dft(x: &[f32], n: usize) -> Vec<(f64, f64)> {
    (0..n / 2 + 1)
        .map(|k| {
            x.iter().enumerate().fold((0.0, 0.0), |(re, im), (j, &v)| {
                let a = -2.0 * std::f64::consts::PI * (j * k % n) as f64 / n as f64;
                (re + v as f64 * a.cos(), im + v as f64 * a.sin())
            })
        })
        .collect()
}

#[test]
fn real_fft_matches_a_direct_dft_and_inverts() {
    for n in (1..=40).chain([97, 128, 400, 512, 1000]) {
        let x = noise(n, n as u64);
        let mut fft = RealFft::new(n).unwrap();
        let mut bins = vec![Complex::ZERO; fft.bins()];
        fft.forward(&x, &mut bins).unwrap();
        let want = dft(&x, n);
        let tol = 1e-5 * (n as f64).sqrt() * 4.0;
        for (k, (g, w)) in bins.iter().zip(&want).enumerate() {
            assert!(
                (g.re as f64 - w.0).abs() <= tol && (g.im as f64 - w.1).abs() <= tol,
                "n {n} bin {k}: {g:?} vs {w:?}"
            );
        }
        let mut back = vec![0.0; n];
        fft.inverse(&bins, &mut back).unwrap();
        for (j, (a, b)) in back.iter().zip(&x).enumerate() {
            assert!((a - b).abs() <= 1e-5, "n {n} sample {j}: {a} vs {b}");
        }
    }
}

#[test]
fn real_fft_pads_short_input_and_rejects_wrong_buffers() {
    let mut fft = RealFft::new(8).unwrap();
    let mut bins = vec![Complex::ZERO; 5];
    fft.forward(&[1.0, 2.0, 3.0], &mut bins).unwrap();
    let want = dft(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0], 8);
    for (g, w) in bins.iter().zip(&want) {
        assert!((g.re as f64 - w.0).abs() < 1e-5 && (g.im as f64 - w.1).abs() < 1e-5);
    }
    assert!(fft.forward(&[0.0; 9], &mut bins).is_err());
    assert!(fft.forward(&[0.0; 8], &mut bins[..4]).is_err());
    assert!(fft.inverse(&bins, &mut [0.0; 7]).is_err());
    assert!(RealFft::new(0).is_err());
}

/// STFT then ISTFT gives the input back, `window - hop` samples later.
fn round_trip(n_fft: usize, hop: usize, analysis: &[f32], synthesis: &[f32]) {
    let x = noise(hop * 40, 7);
    let mut stft = StreamingStft::new(n_fft, hop, analysis).unwrap();
    let mut istft = StreamingIstft::new(n_fft, hop, analysis, synthesis).unwrap();
    let delay = istft.delay();
    let mut spec = vec![Complex::ZERO; stft.bins()];
    let mut y = vec![0.0; x.len()];
    for (chunk, out) in x.chunks_exact(hop).zip(y.chunks_exact_mut(hop)) {
        stft.push(chunk, &mut spec).unwrap();
        istft.push(&spec, out).unwrap();
    }
    for t in delay + analysis.len()..x.len() {
        let (got, want) = (y[t], x[t - delay]);
        assert!(
            (got - want).abs() < 2e-5,
            "n_fft {n_fft} hop {hop} sample {t}: {got} vs {want}"
        );
    }
}

#[test]
fn stft_then_istft_reconstructs_the_signal() {
    let sqrt_hann = Window::SqrtHann.build(Symmetry::Periodic, 512);
    round_trip(512, 256, &sqrt_hann, &sqrt_hann);
    let hann = Window::Hann.build(Symmetry::Periodic, 400);
    round_trip(512, 160, &hann, &hann);
    let hamming = Window::Hamming.build(Symmetry::Periodic, 320);
    round_trip(
        320,
        80,
        &hamming,
        &Window::Rectangular.build(Symmetry::Periodic, 320),
    );
    // A prime FFT length (Bluestein) and a frame shorter than the FFT.
    let hann = Window::Hann.build(Symmetry::Periodic, 90);
    round_trip(97, 30, &hann, &hann);
}

#[test]
fn stft_rejects_bad_shapes() {
    let w = Window::Hann.build(Symmetry::Periodic, 400);
    assert!(
        StreamingStft::new(256, 160, &w).is_err(),
        "window longer than n_fft"
    );
    assert!(StreamingStft::new(512, 0, &w).is_err());
    assert!(StreamingStft::new(512, 401, &w).is_err());
    let mut stft = StreamingStft::new(512, 160, &w).unwrap();
    let mut spec = vec![Complex::ZERO; 257];
    assert!(stft.push(&[0.0; 159], &mut spec).is_err());
    // Windows that are zero where no other frame covers them.
    let zeros = vec![0.0; 400];
    assert!(StreamingIstft::new(512, 160, &zeros, &w).is_err());
}

/// The band-limited value of a sine at input-rate instant `t`.
fn sine(f: f64, rate: f64, t: f64) -> f64 {
    (2.0 * std::f64::consts::PI * f * t / rate).sin()
}

#[test]
fn resampling_keeps_a_tone_and_the_length() {
    for (from, to, f) in [
        (44_100u32, 16_000u32, 440.0),
        (48_000, 16_000, 1_000.0),
        (16_000, 48_000, 3_000.0),
        (22_050, 16_000, 5_000.0),
        (8_000, 16_000, 200.0),
        (16_000, 16_000, 7_000.0),
    ] {
        let len = from as usize / 2 + 17;
        let x: Vec<f32> = (0..len)
            .map(|i| 0.5 * sine(f, from as f64, i as f64) as f32)
            .collect();
        let mut r = Resampler::new(from, to).unwrap();
        let mut out = vec![0.0; r.max_output(len) + r.max_output(1 << 12)];
        // Uneven chunks, as a stream arrives.
        let mut n = 0;
        let mut pos = 0;
        for size in [1usize, 7, 500, 3, 4096].iter().cycle() {
            if pos >= len {
                break;
            }
            let end = (pos + size).min(len);
            let cap = r.max_output(end - pos);
            n += r.process(&x[pos..end], &mut out[n..n + cap]).unwrap();
            pos = end;
        }
        let cap = out.len() - n;
        n += r.flush(&mut out[n..n + cap]).unwrap();
        let want_len = (len as u64 * to as u64).div_ceil(from as u64) as usize;
        assert_eq!(n, want_len, "{from} -> {to}: output length");
        // Away from the edges (where the signal starts and stops), the
        // output is the same tone at the new rate.
        let edge = 64 * (to as usize).div_ceil(from as usize).max(1) + 64;
        for (k, &got) in out.iter().enumerate().take(n - edge).skip(edge) {
            let want = 0.5 * sine(f, to as f64, k as f64);
            assert!(
                (got as f64 - want).abs() < 1e-3,
                "{from} -> {to} Hz, {f} Hz tone, sample {k}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn resampling_removes_what_the_new_rate_cannot_hold() {
    // 7 kHz at 48 kHz → 8 kHz (Nyquist 4 kHz): gone.
    let x: Vec<f32> = (0..48_000)
        .map(|i| sine(7_000.0, 48_000.0, i as f64) as f32)
        .collect();
    let mut r = Resampler::new(48_000, 8_000).unwrap();
    let mut out = vec![0.0; r.max_output(x.len())];
    let n = r.process(&x, &mut out).unwrap();
    let peak = out[200..n - 200].iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(peak < 1e-3, "aliased tone left at {peak}");
    assert!(Resampler::new(0, 16_000).is_err());
}

#[test]
fn lfr_repeats_the_edges_and_strides() {
    // 5 frames of 2 features; m = 3, n = 2: left padding of one copy of
    // frame 0, output frames ceil(5 / 2) = 3, the last padded with frame 4.
    let feats: Vec<f32> = (0..10).map(|v| v as f32).collect();
    let mut out = vec![0.0; 18];
    assert_eq!(lfr_frames(5, 2), 3);
    assert_eq!(lfr_stack(&feats, 2, 3, 2, &mut out).unwrap(), 3);
    let frame = |i: usize| [2.0 * i as f32, 2.0 * i as f32 + 1.0];
    let want: Vec<f32> = [0, 0, 1, 1, 2, 3, 3, 4, 4]
        .iter()
        .flat_map(|&i| frame(i))
        .collect();
    assert_eq!(out, want);
    assert!(lfr_stack(&feats[..9], 2, 3, 2, &mut out).is_err());
    assert!(lfr_stack(&feats, 2, 3, 2, &mut out[..17]).is_err());
}

#[test]
fn utterance_cmvn_gives_zero_mean_and_unit_variance() {
    let mut feats = noise(3 * 50, 3);
    for (i, v) in feats.iter_mut().enumerate() {
        *v = *v * (1 + i % 3) as f32 + (i % 3) as f32 * 10.0;
    }
    let cmvn = Cmvn::from_utterance(&feats, 3, true).unwrap();
    cmvn.apply(&mut feats).unwrap();
    for d in 0..3 {
        let col: Vec<f64> = feats.iter().skip(d).step_by(3).map(|&v| v as f64).collect();
        let mean = col.iter().sum::<f64>() / 50.0;
        let var = col.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 50.0;
        assert!(
            mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4,
            "dim {d}: {mean} {var}"
        );
    }
    assert!(cmvn.apply(&mut feats[..4]).is_err());
    assert!(Cmvn::new(vec![0.0; 2], vec![1.0; 3]).is_err());
}

#[test]
fn front_ends_reject_short_outputs_and_handle_short_input() {
    let mut kaldi = KaldiFbank::new(KaldiOptions::default()).unwrap();
    assert_eq!(kaldi.frames(399), 0);
    assert_eq!(kaldi.compute(&[0.1; 300], &mut []).unwrap(), 0);
    let mut centred = KaldiFbank::new(KaldiOptions {
        snip_edges: false,
        ..KaldiOptions::default()
    })
    .unwrap();
    // One frame of a 100-sample signal: the mirrored signal fills it.
    let mut out = vec![0.0; 80];
    assert_eq!(centred.compute(&noise(100, 1), &mut out).unwrap(), 1);
    assert!(out.iter().all(|v| v.is_finite()));
    let mut whisper = WhisperLogMel::new(80).unwrap();
    assert!(whisper.compute(&[0.0; 10], &mut [0.0; 100]).is_err());
    let mut nemo = NemoLogMel::new(80).unwrap();
    assert!(nemo.compute(&[0.0; 1600], &mut [0.0; 80 * 10]).is_err());
    assert!(MelBank::new(MelStyle::Htk, 16_000, 512, 40, 0.0, 9_000.0, false).is_err());
    assert!(MelBank::new(MelStyle::Kaldi, 16_000, 512, 40, 20.0, 0.0, true).is_err());
}
