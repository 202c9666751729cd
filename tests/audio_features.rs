//! The audio feature graphs of onnx-asr (log-mel for Whisper and NeMo,
//! Kaldi fbank) through the macro: each `STFT` form and its `Conv` twin on
//! 10 s of speech-like audio, against ONNX Runtime (on a float64 copy of
//! the STFT forms, see `xtask/python/fixtures.py`); and its resamplers.
mod common;

use common::{assert_close, load, view};

macro_rules! feature_test {
    ($test:ident, $model:ident, $toml:literal, $case:literal) => {
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
                concat!($case, " features"),
                out.features.as_untyped(),
                &load($case, 0, "out", 0),
            );
            assert_close(
                concat!($case, " lengths"),
                out.features_lens.as_untyped(),
                &load($case, 0, "out", 1),
            );
        }
    };
}

feature_test!(
    whisper80_stft_matches_the_f64_reference,
    Whisper80,
    "tests/models/asr_whisper80.toml",
    "asr_whisper80_10s"
);
feature_test!(
    whisper80_conv_matches_ort,
    Whisper80Conv,
    "tests/models/asr_whisper80_conv.toml",
    "asr_whisper80_conv_10s"
);
feature_test!(
    kaldi_stft_matches_the_f64_reference,
    Kaldi,
    "tests/models/asr_kaldi.toml",
    "asr_kaldi_10s"
);
feature_test!(
    kaldi_conv_matches_ort,
    KaldiConv,
    "tests/models/asr_kaldi_conv.toml",
    "asr_kaldi_conv_10s"
);
feature_test!(
    nemo80_stft_matches_the_f64_reference,
    Nemo80,
    "tests/models/asr_nemo80.toml",
    "asr_nemo80_10s"
);
feature_test!(
    nemo80_conv_matches_ort,
    Nemo80Conv,
    "tests/models/asr_nemo80_conv.toml",
    "asr_nemo80_conv_10s"
);

// onnx-asr's resamplers: a strided Conv whose windowed-sinc weights the
// graph computes from initializers (folded into a constant at import).
macro_rules! resample_test {
    ($test:ident, $model:ident, $toml:literal, $case:literal) => {
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
                concat!($case, " samples"),
                out.resampled.as_untyped(),
                &load($case, 0, "out", 0),
            );
            assert_close(
                concat!($case, " lengths"),
                out.resampled_lens.as_untyped(),
                &load($case, 0, "out", 1),
            );
        }
    };
}

resample_test!(
    resample_44k_to_16k_matches_ort,
    Resample44To16,
    "tests/models/asr_resample_44_16.toml",
    "asr_resample_44_16_1s"
);
resample_test!(
    resample_48k_to_16k_matches_ort,
    Resample48To16,
    "tests/models/asr_resample_48_16.toml",
    "asr_resample_48_16_1s"
);
