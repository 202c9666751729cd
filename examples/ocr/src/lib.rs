//! Optical character recognition with PP-OCR compiled by lele.
//!
//! The pipeline of PaddleOCR's mobile models, end to end in Rust:
//!
//! 1. **det**: the image is resized so both sides are multiples of 32 (the
//!    longer at most [`OcrParams::max_side`]) and the detector predicts a
//!    text probability map;
//! 2. **DB post-processing** ([`geometry::db_boxes`]): binarize, connected
//!    regions, minimum-area rectangles, score, unclip;
//! 3. **crop**: each box is cut out of the original image with a
//!    perspective transform ([`geometry::crop_quad`]);
//! 4. **cls**: lines classified as upside down are turned 180°;
//! 5. **rec**: each line, scaled to height 48, goes through the recognizer;
//! 6. **CTC decoding** ([`ctc_decode`]): best class per step, repeats
//!    merged, blanks dropped, characters from the recognizer's metadata.
//!
//! ```no_run
//! use lele_example_ocr::{Ocr, Version};
//! let img = image::open("page.png").expect("image").to_rgb8();
//! let mut ocr = Ocr::new(Version::V4)?;
//! for line in ocr.recognize(&img)? {
//!     println!("{:.2} {}", line.score, line.text);
//! }
//! # Ok::<(), lele_example_ocr::OcrError>(())
//! ```
use image::RgbImage;

pub mod geometry;
mod models;

pub use geometry::{DbParams, Point};
pub use models::{Classifier, Detector, Owned, Recognizer, Version};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    /// The recognizer carries no `character` metadata.
    #[error("the recognition model has no `character` metadata")]
    NoCharacters,
    /// A model output has an unexpected shape.
    #[error("{what}: output of shape {dims:?}")]
    OutputShape {
        /// Which stage.
        what: &'static str,
        /// The shape seen.
        dims: Vec<usize>,
    },
    /// A model failed.
    #[error(transparent)]
    Model(#[from] lele::Error),
    /// An input tensor could not be formed.
    #[error(transparent)]
    Input(#[from] lele::kernels::KernelError),
}

/// Tunables of the pipeline (PaddleOCR's defaults).
#[derive(Clone, Debug)]
pub struct OcrParams {
    /// Longest side of the detector's input (at most 960, the compiled bound).
    pub max_side: usize,
    /// DB post-processing.
    pub db: DbParams,
    /// Turn a line when the classifier says 180° with at least this score.
    pub cls_thresh: f32,
    /// Skip the orientation classifier.
    pub use_cls: bool,
    /// Drop lines whose mean character score is below this.
    pub drop_score: f32,
}

impl Default for OcrParams {
    fn default() -> Self {
        Self {
            max_side: 960,
            db: DbParams::default(),
            cls_thresh: 0.9,
            use_cls: true,
            drop_score: 0.5,
        }
    }
}

/// One recognized line.
#[derive(Clone, Debug, PartialEq)]
pub struct TextLine {
    /// The text.
    pub text: String,
    /// Mean probability of its characters.
    pub score: f32,
    /// Corners in image pixels: top-left, top-right, bottom-right, bottom-left.
    pub corners: [Point; 4],
    /// Whether the classifier turned the line by 180°.
    pub flipped: bool,
}

/// Model calls of one stage: time and input shape of each.
#[derive(Clone, Debug, Default)]
pub struct Calls {
    /// Milliseconds of each call.
    pub ms: Vec<f64>,
    /// Input shape of each call.
    pub shapes: Vec<Vec<usize>>,
}

impl Calls {
    /// Median call time in milliseconds (0 without calls).
    pub fn median_ms(&self) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }
}

/// Model calls per stage.
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    /// Detector calls.
    pub det: Calls,
    /// Classifier calls.
    pub cls: Calls,
    /// Recognizer calls.
    pub rec: Calls,
}

/// Height of a line at the recognizer's and classifier's input.
pub const LINE_HEIGHT: usize = 48;
/// Width of the classifier's input.
pub const CLS_WIDTH: usize = 192;
/// Narrowest recognizer input (PaddleOCR pads shorter lines to 320).
pub const REC_MIN_WIDTH: usize = 320;
/// Widest recognizer input (the compiled bound).
pub const REC_MAX_WIDTH: usize = 1280;
/// Largest detector side (the compiled bound).
pub const DET_MAX_SIDE: usize = 960;

/// The whole pipeline with its models, buffers and timings.
pub struct Ocr {
    det: Detector,
    cls: Classifier,
    rec: Recognizer,
    charset: Vec<&'static str>,
    /// Tunables.
    pub params: OcrParams,
    /// Time of each model call.
    pub times: StageTimes,
    input: Vec<f32>,
    out: Owned,
}

impl Ocr {
    /// Loads det, cls and rec of `version`.
    pub fn new(version: Version) -> Result<Self, OcrError> {
        let rec = Recognizer::new(version)?;
        let charset = rec
            .characters()
            .ok_or(OcrError::NoCharacters)?
            .lines()
            .collect();
        Ok(Self {
            det: Detector::new(version)?,
            cls: Classifier::new()?,
            rec,
            charset,
            params: OcrParams::default(),
            times: StageTimes::default(),
            input: Vec::new(),
            out: Owned::default(),
        })
    }

    /// The recognizer's characters (class `i + 1` is `charset()[i]`).
    pub fn charset(&self) -> &[&'static str] {
        &self.charset
    }

    /// Text boxes of an image, in image pixels, in reading order.
    pub fn detect(&mut self, img: &RgbImage) -> Result<Vec<geometry::TextBox>, OcrError> {
        let (w, h) = (img.width() as usize, img.height() as usize);
        if w == 0 || h == 0 {
            return Ok(Vec::new());
        }
        let max_side = self.params.max_side.clamp(32, DET_MAX_SIDE);
        let scale = (max_side as f64 / w.max(h) as f64).min(1.0);
        let side =
            |v: usize| ((((v as f64 * scale) / 32.0).round() as usize) * 32).clamp(32, max_side);
        let (dw, dh) = (side(w), side(h));
        let resized = image::imageops::resize(
            img,
            dw as u32,
            dh as u32,
            image::imageops::FilterType::Triangle,
        );
        // PaddleOCR's det normalization (ImageNet mean/std on BGR, as trained).
        const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
        const STD: [f32; 3] = [0.229, 0.224, 0.225];
        to_chw_bgr(
            &resized,
            dw,
            |c, v| (v / 255.0 - MEAN[c]) / STD[c],
            &mut self.input,
        );
        self.det.run(
            &self.input,
            &[1, 3, dh, dw],
            &mut self.out,
            &mut self.times.det,
        )?;
        if self.out.dims != [1, 1, dh, dw] {
            return Err(OcrError::OutputShape {
                what: "det",
                dims: self.out.dims.clone(),
            });
        }
        let (sx, sy) = (w as f32 / dw as f32, h as f32 / dh as f32);
        Ok(geometry::db_boxes(&self.out.data, dw, dh, &self.params.db)
            .into_iter()
            .map(|b| geometry::TextBox {
                corners: geometry::scale_corners(&b.corners, sx, sy),
                score: b.score,
            })
            .collect())
    }

    /// Whether a cropped line is upside down (classifier score ≥ threshold).
    pub fn is_upside_down(&mut self, line: &RgbImage) -> Result<bool, OcrError> {
        line_input(line, CLS_WIDTH, CLS_WIDTH, &mut self.input);
        self.cls.run(
            &self.input,
            &[1, 3, LINE_HEIGHT, CLS_WIDTH],
            &mut self.out,
            &mut self.times.cls,
        )?;
        match self.out.data[..] {
            [_, p180] if self.out.dims == [1, 2] => Ok(p180 >= self.params.cls_thresh),
            _ => Err(OcrError::OutputShape {
                what: "cls",
                dims: self.out.dims.clone(),
            }),
        }
    }

    /// Text and score of one upright line image.
    pub fn read_line(&mut self, line: &RgbImage) -> Result<(String, f32), OcrError> {
        let width = line_width(line).clamp(REC_MIN_WIDTH, REC_MAX_WIDTH);
        line_input(line, width, REC_MAX_WIDTH, &mut self.input);
        self.rec.run(
            &self.input,
            &[1, 3, LINE_HEIGHT, width],
            &mut self.out,
            &mut self.times.rec,
        )?;
        let [1, steps, classes] = self.out.dims[..] else {
            return Err(OcrError::OutputShape {
                what: "rec",
                dims: self.out.dims.clone(),
            });
        };
        if classes != self.charset.len() + 2 {
            return Err(OcrError::OutputShape {
                what: "rec (classes vs. character list)",
                dims: self.out.dims.clone(),
            });
        }
        Ok(ctc_decode(
            &self.out.data[..steps * classes],
            classes,
            &self.charset,
        ))
    }

    /// All text lines of an image, in reading order.
    pub fn recognize(&mut self, img: &RgbImage) -> Result<Vec<TextLine>, OcrError> {
        let boxes = self.detect(img)?;
        let mut lines = Vec::with_capacity(boxes.len());
        for b in boxes {
            let (rgb, w, h) = geometry::crop_quad(
                img.as_raw(),
                img.width() as usize,
                img.height() as usize,
                &b.corners,
            );
            // An empty crop (degenerate box) is skipped.
            let Some(mut crop) =
                RgbImage::from_raw(w as u32, h as u32, rgb).filter(|_| w > 0 && h > 0)
            else {
                continue;
            };
            let flipped = self.params.use_cls && self.is_upside_down(&crop)?;
            if flipped {
                image::imageops::rotate180_in_place(&mut crop);
            }
            let (text, score) = self.read_line(&crop)?;
            if score >= self.params.drop_score && !text.trim().is_empty() {
                lines.push(TextLine {
                    text,
                    score,
                    corners: b.corners,
                    flipped,
                });
            }
        }
        Ok(lines)
    }
}

/// Width of a line scaled to height 48, keeping its aspect ratio.
fn line_width(line: &RgbImage) -> usize {
    let (w, h) = (line.width().max(1) as f64, line.height().max(1) as f64);
    ((LINE_HEIGHT as f64 * w / h).ceil() as usize).max(1)
}

/// A line scaled to height 48 and at most `max_width` wide, normalized to
/// [-1, 1] (BGR), left-aligned in a zero-padded `[3, 48, width]` tensor.
fn line_input(line: &RgbImage, width: usize, max_width: usize, out: &mut Vec<f32>) {
    let w = line_width(line).min(width).min(max_width);
    let resized = image::imageops::resize(
        line,
        w as u32,
        LINE_HEIGHT as u32,
        image::imageops::FilterType::Triangle,
    );
    out.clear();
    out.resize(3 * LINE_HEIGHT * width, 0.0);
    let plane = LINE_HEIGHT * width;
    for (y, row) in resized.rows().enumerate() {
        for (x, px) in row.enumerate() {
            for c in 0..3 {
                out[c * plane + y * width + x] = (f32::from(px.0[2 - c]) / 255.0 - 0.5) / 0.5;
            }
        }
    }
}

/// Writes an RGB image as a `[3, h, w]` BGR tensor through `f(channel, value)`.
fn to_chw_bgr(img: &RgbImage, w: usize, f: impl Fn(usize, f32) -> f32, out: &mut Vec<f32>) {
    let plane = w * img.height() as usize;
    out.clear();
    out.resize(3 * plane, 0.0);
    for (i, px) in img.pixels().enumerate() {
        for c in 0..3 {
            out[c * plane + i] = f(c, f32::from(px.0[2 - c]));
        }
    }
}

/// Greedy CTC decoding of `[steps, classes]` probabilities: the best class
/// per step, repeats merged, blanks (class 0) dropped; class `i` (1-based)
/// is `charset[i - 1]`, class `charset.len() + 1` a space. Returns the text
/// and the mean probability of its characters (0 for no characters).
pub fn ctc_decode(probs: &[f32], classes: usize, charset: &[&str]) -> (String, f32) {
    let mut text = String::new();
    let (mut sum, mut count) = (0.0f32, 0usize);
    let mut prev = 0usize;
    for step in probs.chunks_exact(classes.max(1)) {
        let (best, p) = step
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, f32::MIN),
                |acc, (i, v)| if v > acc.1 { (i, v) } else { acc },
            );
        if best != 0 && best != prev {
            match best.checked_sub(1).and_then(|i| charset.get(i)) {
                Some(ch) => text.push_str(ch),
                None => text.push(' '),
            }
            sum += p;
            count += 1;
        }
        prev = best;
    }
    (text, if count == 0 { 0.0 } else { sum / count as f32 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctc_merges_repeats_and_drops_blanks() {
        let charset = ["a", "b"];
        // classes: blank, a, b, space; steps: a a blank a b space b
        let best = [1, 1, 0, 1, 2, 3, 2];
        let probs: Vec<f32> = best
            .iter()
            .flat_map(|&b| (0..4).map(move |c| if c == b { 0.8 } else { 0.05 }))
            .collect();
        let (text, score) = ctc_decode(&probs, 4, &charset);
        assert_eq!(text, "aab b");
        assert!((score - 0.8).abs() < 1e-6);
        assert_eq!(ctc_decode(&[0.9, 0.1], 2, &charset), (String::new(), 0.0));
    }
}
