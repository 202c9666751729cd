#[lele::model("../../../../ui-tests/tests/hostile/models/huge_arena.toml")]
struct Model;

fn main() {}
