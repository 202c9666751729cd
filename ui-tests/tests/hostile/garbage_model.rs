#[lele::model("../../../../ui-tests/tests/hostile/models/garbage_model.toml")]
struct Model;

fn main() {}
