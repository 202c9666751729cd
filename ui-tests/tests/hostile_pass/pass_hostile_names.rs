// Names that once reached rustc raw (an input called `profiler`, a carriage
// return and a right-to-left override in an output name) compile, and the
// model runs.
#[lele::model("../../../../ui-tests/tests/hostile_pass/pass_hostile_names.toml")]
struct Model;

fn main() {
    let model = Model::new().expect("the model loads");
    let mut ws = model.workspace();
    let x = [-1.0f32, 2.0];
    let out = model
        .forward(&mut ws, lele::TensorView::new(&x, &[2]).expect("a view"))
        .expect("forward runs");
    let _ = out;
}
