#[lele::model("../../../../ui-tests/tests/hostile/models/wrapped_count.toml")]
struct Model;

fn main() {}
