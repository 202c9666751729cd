#[lele::model("../../../../ui-tests/tests/ui/models/conflicting_codegen.toml")]
struct Model;

fn main() {}
