#[lele::model("../../../../ui-tests/tests/hostile/models/tiny_arena_cap.toml")]
struct Model;

fn main() {}
