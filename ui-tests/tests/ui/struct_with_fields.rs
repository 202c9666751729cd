#[lele::model("model.toml")]
struct Model {
    x: u32,
}

fn main() {}
