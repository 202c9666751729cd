#[lele::model("../../../../ui-tests/tests/hostile/models/model_is_a_directory.toml")]
struct Model;

fn main() {}
