#[lele::model("../../../../ui-tests/tests/ui/models/bad_codegen.toml")]
struct Model;

fn main() {}
