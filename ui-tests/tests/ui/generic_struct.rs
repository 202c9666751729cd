#[lele::model("model.toml")]
struct Model<T>;

fn main() {}
