//! `detect`: objects in an image with a YOLOv8-format model compiled by lele.
//!
//! ```text
//! detect [--conf P] [--iou P] [--size N] [--out OUT.png] [--timings FILE] IMAGE
//! ```
//! Prints one line per detection and, with `--out`, writes the image with
//! the boxes drawn. `--timings` appends one JSON line per model call (model,
//! input shape, milliseconds).
use std::io::Write;
use std::path::PathBuf;

use lele_example_detect::{Detector, draw_boxes};

fn usage() -> ! {
    eprintln!(
        "usage: detect [--conf P] [--iou P] [--size N] [--out OUT.png] [--timings FILE] IMAGE"
    );
    std::process::exit(2)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("detect: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut detector = Detector::new()?;
    let (mut out, mut timings, mut file) = (None, None, None);
    let mut args = std::env::args().skip(1);
    let value = |args: &mut std::iter::Skip<std::env::Args>| args.next().unwrap_or_else(|| usage());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--conf" => detector.conf = value(&mut args).parse()?,
            "--iou" => detector.iou = value(&mut args).parse()?,
            "--size" => detector.set_size(value(&mut args).parse()?)?,
            "--out" => out = Some(PathBuf::from(value(&mut args))),
            "--timings" => timings = Some(PathBuf::from(value(&mut args))),
            "-h" | "--help" => usage(),
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => usage(),
        }
    }
    let file = file.unwrap_or_else(|| usage());
    let mut img = image::open(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .to_rgb8();
    let (w, h) = (img.width() as usize, img.height() as usize);
    // One untimed call first: the first call touches the weights and the arena.
    detector.detect(img.as_raw(), w, h)?;
    detector.call_ms.clear();
    let mut dets = Vec::new();
    for _ in 0..5 {
        dets = detector.detect(img.as_raw(), w, h)?;
    }
    let size = detector.size();
    println!("{}: {w}×{h}, model input {size}×{size}", file.display());
    for d in &dets {
        let [x1, y1, x2, y2] = d.bbox;
        println!(
            "  {:<24} {:.3}  [{x1:.1}, {y1:.1}, {x2:.1}, {y2:.1}]",
            d.class_name, d.score
        );
    }
    if dets.is_empty() {
        println!("  (nothing above {:.2})", detector.conf);
    }
    let mut ms = detector.call_ms.clone();
    ms.sort_by(f64::total_cmp);
    let median = ms.get(ms.len() / 2).copied().unwrap_or(0.0);
    println!(
        "model: {median:.2} ms per image (median of {} calls)",
        ms.len()
    );
    if let Some(path) = out {
        draw_boxes(&mut img, &dets);
        img.save(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = timings {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let shape = [1, 3, size, size];
        for ms in &detector.call_ms {
            writeln!(
                f,
                r#"{{"example":"detect","model":"yolov8n_320n.onnx","what":"one image","shape":{shape:?},"ms":{ms:.4}}}"#
            )?;
        }
    }
    Ok(())
}
