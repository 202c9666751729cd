//! End to end: a public-domain photo (scikit-image's `astronaut.png`,
//! fetched into the zoo by `cargo xtask models`) through the compiled
//! YOLOv8n, against the same pipeline run with ONNX Runtime (`cargo xtask
//! fixtures` writes `target/fixtures/apps/detect.json`): same classes, boxes
//! with IoU ≥ 0.95.
use std::path::PathBuf;

use lele_example_detect::Detector;
use serde_json::Value;

fn zoo() -> PathBuf {
    std::env::var_os("LELE_ZOO")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("lele/zoo")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/lele/zoo")))
        .expect("set LELE_ZOO")
}

fn reference() -> Value {
    let dir = std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fixtures"));
    let path = dir.join("apps/detect.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures` first)", path.display()));
    serde_json::from_str(&text).expect("detect.json")
}

fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let ix = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iy = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ix * iy;
    inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
}

#[test]
fn astronaut_detections_match_ort() {
    let reference = reference();
    let img = image::open(zoo().join("astronaut.png"))
        .expect("astronaut.png (run `cargo xtask models`)")
        .to_rgb8();
    let mut detector = Detector::new().unwrap();
    assert_eq!(
        detector.size(),
        320,
        "input size from the model's imgsz metadata"
    );
    let dets = detector
        .detect(img.as_raw(), img.width() as usize, img.height() as usize)
        .unwrap();
    let expected = reference["detections"].as_array().expect("detections");
    assert!(!expected.is_empty(), "the reference found nothing");
    assert_eq!(dets.len(), expected.len(), "number of detections: {dets:?}");
    for (d, e) in dets.iter().zip(expected) {
        assert_eq!(d.class_name, e["class_name"].as_str().unwrap());
        assert_eq!(d.class_id as u64, e["class_id"].as_u64().unwrap());
        let b: Vec<f64> = e["box"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let overlap = iou(d.bbox, [b[0], b[1], b[2], b[3]]);
        assert!(
            overlap >= 0.95,
            "{}: IoU {overlap:.4} ({:?} vs {b:?})",
            d.class_name,
            d.bbox
        );
        let score = e["score"].as_f64().unwrap();
        assert!(
            (f64::from(d.score) - score).abs() <= 1e-3,
            "score {} vs {score}",
            d.score
        );
    }
}
