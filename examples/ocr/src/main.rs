//! `ocr`: text lines of an image with PP-OCR compiled by lele.
//!
//! ```text
//! ocr [--v4 | --v6] [--no-cls] [--timings FILE] IMAGE
//! ```
//! Prints each line's text, score and corners, then the time per model
//! call. `--timings` appends one JSON line per model call (model, input
//! shape, milliseconds).
use std::io::Write;
use std::path::PathBuf;

use lele_example_ocr::{Ocr, Version};

fn usage() -> ! {
    eprintln!("usage: ocr [--v4 | --v6] [--no-cls] [--timings FILE] IMAGE");
    std::process::exit(2)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ocr: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (mut version, mut use_cls, mut timings, mut file) = (Version::V4, true, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--v4" => version = Version::V4,
            "--v6" => version = Version::V6,
            "--no-cls" => use_cls = false,
            "--timings" => timings = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "-h" | "--help" => usage(),
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => usage(),
        }
    }
    let file = file.unwrap_or_else(|| usage());
    let img = image::open(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .to_rgb8();
    let mut ocr = Ocr::new(version)?;
    ocr.params.use_cls = use_cls;
    // One untimed pass first (the first call touches weights and arenas),
    // then timed passes.
    ocr.recognize(&img)?;
    ocr.times = Default::default();
    let mut lines = Vec::new();
    for _ in 0..3 {
        lines = ocr.recognize(&img)?;
    }
    println!(
        "{}: {}×{}, PP-OCR{version:?}",
        file.display(),
        img.width(),
        img.height()
    );
    for l in &lines {
        let c = l.corners;
        println!(
            "  {:.3}  {:<40} [({:.0},{:.0}) ({:.0},{:.0}) ({:.0},{:.0}) ({:.0},{:.0})]{}",
            l.score,
            format!("{:?}", l.text),
            c[0].x,
            c[0].y,
            c[1].x,
            c[1].y,
            c[2].x,
            c[2].y,
            c[3].x,
            c[3].y,
            if l.flipped { " turned 180°" } else { "" }
        );
    }
    let t = &ocr.times;
    let (det, rec) = match version {
        Version::V4 => ("ppocr_v4_det.onnx", "ppocr_v4_rec.onnx"),
        Version::V6 => ("ppocr_v6_det_small.onnx", "ppocr_v6_rec_small.onnx"),
    };
    let stages = [
        (det, "det, whole image", &t.det),
        ("ppocr_cls.onnx", "cls, one line", &t.cls),
        (rec, "rec, one line", &t.rec),
    ];
    for (model, what, calls) in &stages {
        if !calls.ms.is_empty() {
            println!(
                "{model}: {:.2} ms per call ({what}, median of {})",
                calls.median_ms(),
                calls.ms.len()
            );
        }
    }
    if let Some(path) = timings {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        for (model, what, calls) in &stages {
            for (ms, shape) in calls.ms.iter().zip(&calls.shapes) {
                writeln!(
                    f,
                    r#"{{"example":"ocr","model":"{model}","what":"{what}","shape":{shape:?},"ms":{ms:.4}}}"#
                )?;
            }
        }
    }
    Ok(())
}
