#[lele::model("../../../../ui-tests/tests/ui/models/two_sources.toml")]
struct Model;

fn main() {}
