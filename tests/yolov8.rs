//! YOLOv8n (NudeNet 320n) through the macro at 320² and 640² from one build.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/yolov8n.toml")]
struct Yolo;

fn case(name: &str) {
    let model = Yolo::new().unwrap();
    let mut ws = model.workspace();
    let x = load(name, 0, "in", 0);
    let out = model.forward(&mut ws, view(&x)).unwrap();
    assert_close(name, out.output0.as_untyped(), &load(name, 0, "out", 0));
}

#[test]
fn yolov8n_320_matches_ort() {
    case("yolov8n_320");
}

#[test]
fn yolov8n_640_matches_ort() {
    case("yolov8n_640");
}
