#[lele::model("../../../../ui-tests/tests/ui/models/missing_model.toml")]
struct Model;

fn main() {}
