#[lele::model("../../../../ui-tests/tests/ui/models/silero.toml")]
struct Vad;

fn main() {
    let model = Vad::new().unwrap();
    let mut ws = model.workspace();
    let input = [0f32; 576];
    let state = [0f32; 256];
    let sr = [16000f32];
    // `sr` is int64 in the model: passing f32 data must not compile.
    let _ = model.forward(
        &mut ws,
        lele::TensorView::new(&input, &[1, 576]).unwrap(),
        lele::TensorView::new(&state, &[2, 1, 128]).unwrap(),
        lele::TensorView::new(&sr, &[]).unwrap(),
    );
}
