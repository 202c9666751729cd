#[lele::model("model.toml")]
enum Model {
    A,
}

fn main() {}
