#[lele::model(model_toml)]
struct Model;

fn main() {}
