#[lele::model("../../../../ui-tests/tests/ui/models/sha_mismatch.toml")]
struct Model;

fn main() {}
