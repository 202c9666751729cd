//! End to end: an image of printed text we render ourselves
//! (`examples/data/text.png`, made by `xtask/python/make_app_inputs.py` from
//! `text.txt`) read by the whole pipeline must give back the source text,
//! line by line, with PP-OCRv4 and v6, upright and upside down.
use std::path::PathBuf;

use image::RgbImage;
use lele_example_ocr::{Ocr, Version};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data")
        .join(name)
}

fn source_lines() -> Vec<String> {
    std::fs::read_to_string(data("text.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn text_image() -> RgbImage {
    image::open(data("text.png")).unwrap().to_rgb8()
}

fn read(version: Version, img: &RgbImage) -> Vec<(String, bool)> {
    let mut ocr = Ocr::new(version).unwrap();
    ocr.recognize(img)
        .unwrap()
        .into_iter()
        .map(|l| {
            assert!(l.score > 0.8, "{:?}: score {}", l.text, l.score);
            (l.text, l.flipped)
        })
        .collect()
}

fn check_upright(version: Version) {
    let lines = read(version, &text_image());
    let texts: Vec<&str> = lines.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, source_lines(), "PP-OCR{version:?}");
    assert!(
        lines.iter().all(|(_, flipped)| !flipped),
        "upright lines turned: {lines:?}"
    );
}

#[test]
fn v4_reads_the_rendered_text() {
    check_upright(Version::V4);
}

#[test]
fn v6_reads_the_rendered_text() {
    check_upright(Version::V6);
}

#[test]
fn upside_down_text_is_turned_and_read() {
    let mut img = text_image();
    image::imageops::rotate180_in_place(&mut img);
    let lines = read(Version::V4, &img);
    // Turned around, the last line comes first.
    let mut expected = source_lines();
    expected.reverse();
    let texts: Vec<&str> = lines.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, expected);
    assert!(
        lines.iter().all(|(_, flipped)| *flipped),
        "not turned: {lines:?}"
    );
}
