#[lele::model("../../../../ui-tests/tests/hostile/models/revision_escape.toml")]
struct Model;

fn main() {}
