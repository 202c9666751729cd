#[lele::model("../../../../ui-tests/tests/ui/models/bad_bound.toml")]
struct Model;

fn main() {}
