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

#[test]
fn sizes_beyond_the_bounds_are_errors() {
    let model = Yolo::new().unwrap();
    let mut ws = model.workspace();
    let data = vec![0f32; 3 * 672 * 320];
    let x = lele::TensorView::new(&data, &[1, 3, 672, 320]).unwrap();
    let err = model
        .forward(&mut ws, x)
        .err()
        .expect("h = 672 exceeds h <= 640");
    assert!(err.to_string().contains("images"), "{err}");
}

// wasm32-wasip1 has no threads: there the test is reported as ignored (the
// Send + Sync bound is still checked by the build of every target).
#[test]
#[cfg_attr(target_family = "wasm", ignore = "no threads on wasm32-wasip1")]
fn model_is_send_and_sync_and_serves_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Yolo>();
    let model = std::sync::Arc::new(Yolo::new().unwrap());
    let x = load("yolov8n_320", 0, "in", 0);
    let expected = load("yolov8n_320", 0, "out", 0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let model = model.clone();
            let (x, expected) = (&x, &expected);
            s.spawn(move || {
                let mut ws = model.workspace();
                let out = model.forward(&mut ws, view(x)).unwrap();
                assert_close("threaded", out.output0.as_untyped(), expected);
            });
        }
    });
}
