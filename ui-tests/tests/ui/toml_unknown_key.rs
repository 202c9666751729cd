#[lele::model("../../../../ui-tests/tests/ui/models/unknown_key.toml")]
struct Model;

fn main() {}
