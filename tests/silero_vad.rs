//! Silero VAD v6 through the macro: 16 kHz and 8 kHz streams of several
//! chunks carrying the recurrent state, against ONNX Runtime.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/silero_vad.toml")]
struct SileroVad;

fn stream(case: &str, steps: usize) {
    let model = SileroVad::new().unwrap();
    let mut ws = model.workspace();
    let mut state: Vec<f32> = view::<f32>(&load(case, 0, "in", 1)).data().to_vec();
    for step in 0..steps {
        let input = load(case, step, "in", 0);
        let sr = load(case, step, "in", 2);
        let state_view = lele::TensorView::new(&state, &[2, 1, 128]).unwrap();
        let out = model
            .forward(&mut ws, view(&input), state_view, view(&sr))
            .unwrap();
        assert_close(
            &format!("{case} step {step} output"),
            out.output.as_untyped(),
            &load(case, step, "out", 0),
        );
        assert_close(
            &format!("{case} step {step} stateN"),
            out.state_n.as_untyped(),
            &load(case, step, "out", 1),
        );
        state = out.state_n.to_vec();
    }
}

#[test]
fn silero_vad_16k_stream_matches_ort() {
    stream("silero_vad_16k", 6);
}

#[test]
fn silero_vad_8k_stream_matches_ort() {
    stream("silero_vad_8k", 6);
}
