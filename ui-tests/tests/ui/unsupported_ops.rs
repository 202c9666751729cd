#[lele::model("../../../../ui-tests/tests/ui/models/unsupported_ops.toml")]
struct Model;

fn main() {}
