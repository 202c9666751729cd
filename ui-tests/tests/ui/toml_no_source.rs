#[lele::model("../../../../ui-tests/tests/ui/models/no_source.toml")]
struct Model;

fn main() {}
