#[lele::model("../../../../ui-tests/tests/hostile/models/huge_bound.toml")]
struct Model;

fn main() {}
