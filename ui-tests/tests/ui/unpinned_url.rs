#[lele::model("../../../../ui-tests/tests/ui/models/unpinned_url.toml")]
struct Model;

fn main() {}
