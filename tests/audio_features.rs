//! The audio feature graphs of onnx-asr (log-mel for Whisper and NeMo,
//! Kaldi fbank) through the macro: each `STFT` form and its `Conv` twin on
//! 10 s of speech-like audio, against ONNX Runtime (on a float64 copy of
//! the STFT forms, see `xtask/python/fixtures.py`); and its resamplers.
mod common;

use common::{assert_close, load, view};

/// A parity test of a two-input (`waveforms`, `waveforms_lens`) graph:
/// both outputs (`$out`, `$lens`) against the fixture's.
macro_rules! wave_test {
    ($test:ident, $model:ident, $toml:literal, $case:literal) => {
        wave_test!($test, $model, $toml, $case, features, features_lens);
    };
    ($test:ident, $model:ident, $toml:literal, $case:literal, $out:ident, $lens:ident) => {
        #[lele::model($toml)]
        struct $model;

        #[test]
        fn $test() {
            let model = $model::new().unwrap();
            let mut ws = model.workspace();
            let wave = load($case, 0, "in", 0);
            let lens = load($case, 0, "in", 1);
            let out = model.forward(&mut ws, view(&wave), view(&lens)).unwrap();
            assert_close(
                concat!($case, " ", stringify!($out)),
                out.$out.as_untyped(),
                &load($case, 0, "out", 0),
            );
            assert_close(
                concat!($case, " lengths"),
                out.$lens.as_untyped(),
                &load($case, 0, "out", 1),
            );
        }
    };
}

wave_test!(
    whisper80_stft_matches_the_f64_reference,
    Whisper80,
    "tests/models/asr_whisper80.toml",
    "asr_whisper80_10s"
);
wave_test!(
    whisper80_conv_matches_ort,
    Whisper80Conv,
    "tests/models/asr_whisper80_conv.toml",
    "asr_whisper80_conv_10s"
);
wave_test!(
    kaldi_stft_matches_the_f64_reference,
    Kaldi,
    "tests/models/asr_kaldi.toml",
    "asr_kaldi_10s"
);
wave_test!(
    kaldi_conv_matches_ort,
    KaldiConv,
    "tests/models/asr_kaldi_conv.toml",
    "asr_kaldi_conv_10s"
);
wave_test!(
    nemo80_stft_matches_the_f64_reference,
    Nemo80,
    "tests/models/asr_nemo80.toml",
    "asr_nemo80_10s"
);
wave_test!(
    nemo80_conv_matches_ort,
    Nemo80Conv,
    "tests/models/asr_nemo80_conv.toml",
    "asr_nemo80_conv_10s"
);

// onnx-asr's resamplers: a strided Conv whose windowed-sinc weights the
// graph computes from initializers (folded into a constant at import).
wave_test!(
    resample_44k_to_16k_matches_ort,
    Resample44To16,
    "tests/models/asr_resample_44_16.toml",
    "asr_resample_44_16_1s",
    resampled,
    resampled_lens
);
wave_test!(
    resample_48k_to_16k_matches_ort,
    Resample48To16,
    "tests/models/asr_resample_48_16.toml",
    "asr_resample_48_16_1s",
    resampled,
    resampled_lens
);
