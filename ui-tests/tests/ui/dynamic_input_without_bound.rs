#[lele::model("../../../../ui-tests/tests/ui/models/missing_bound.toml")]
struct Model;

fn main() {}
