#[lele::model("no/such/model.toml")]
struct Model;

fn main() {}
