#[lele::model("../../../../ui-tests/tests/ui/models/syntax_error.toml")]
struct Model;

fn main() {}
