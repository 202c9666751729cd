//! Object detection with a YOLOv8-format model compiled by lele.
//!
//! [`Detector::detect`] letterboxes an RGB image into the model's square
//! input, runs the model, keeps each anchor's best class above a confidence
//! threshold, suppresses overlapping boxes class by class and maps the
//! boxes back to image pixels. Class names come from the model's `names`
//! metadata, so any YOLOv8 detection export works after editing
//! `model.toml`. [`draw_boxes`] paints the result onto the image.
//!
//! ```no_run
//! use lele_example_detect::Detector;
//! let img = image::open("photo.jpg").expect("image").to_rgb8();
//! let mut detector = Detector::new()?;
//! for d in detector.detect(img.as_raw(), img.width() as usize, img.height() as usize)? {
//!     println!("{} {:.2} {:?}", d.class_name, d.score, d.bbox);
//! }
//! # Ok::<(), lele_example_detect::DetectError>(())
//! ```
use std::time::Instant;

mod postprocess;
mod preprocess;

pub use postprocess::{BoxXyxy, Candidate, decode, iou, parse_names};
pub use preprocess::{Letterbox, PAD_VALUE, letterbox, resize_bilinear};

/// The detector, compiled from `model.toml` at build time.
#[lele::model("model.toml")]
pub struct Yolo;

/// Largest square input the compiled model accepts (`model.toml`).
pub const MAX_SIZE: usize = 640;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// The input size is not a multiple of the model's stride or too big.
    #[error("input size {0} must be a multiple of 32 between 32 and {MAX_SIZE}")]
    Size(usize),
    /// The pixel buffer does not hold `w*h` RGB pixels.
    #[error("image buffer of {got} bytes for {w}×{h} RGB")]
    Buffer {
        /// Bytes given.
        got: usize,
        /// Width.
        w: usize,
        /// Height.
        h: usize,
    },
    /// The model output is not `[1, 4 + classes, anchors]`.
    #[error("model output of shape {0:?}, expected [1, 4 + classes, anchors]")]
    OutputShape(Vec<usize>),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] lele::Error),
    /// An input tensor could not be formed.
    #[error(transparent)]
    Input(#[from] lele::kernels::KernelError),
}

/// One detected object, in image pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Index of the class.
    pub class_id: usize,
    /// Name of the class (from the model's metadata).
    pub class_name: String,
    /// Class score.
    pub score: f32,
    /// `[x1, y1, x2, y2]`, clamped to the image.
    pub bbox: [f64; 4],
}

/// Model, workspace, thresholds and buffers, reused across images.
pub struct Detector {
    model: Yolo,
    ws: YoloWorkspace,
    input: Vec<f32>,
    names: Vec<String>,
    size: usize,
    /// Minimum class score (default 0.25).
    pub conf: f32,
    /// Boxes of one class overlapping more than this are merged (default 0.45).
    pub iou: f32,
    /// Milliseconds of each model call.
    pub call_ms: Vec<f64>,
}

/// The model's training size from its `imgsz` metadata (`[320, 320]`).
fn metadata_size() -> Option<usize> {
    let v = Yolo::metadata_value("imgsz")?;
    let first = v.trim().trim_start_matches('[').split(',').next()?;
    first.trim().parse().ok()
}

impl Detector {
    /// Loads the model; the input size is the one it was trained at (its
    /// `imgsz` metadata, rounded down to a multiple of 32 and capped at
    /// [`MAX_SIZE`]; 640 without it).
    pub fn new() -> Result<Self, DetectError> {
        let model = Yolo::new()?;
        let ws = model.workspace();
        let names = Yolo::metadata_value("names")
            .and_then(parse_names)
            .unwrap_or_default();
        let mut det = Self {
            model,
            ws,
            input: Vec::new(),
            names,
            size: MAX_SIZE,
            conf: 0.25,
            iou: 0.45,
            call_ms: Vec::new(),
        };
        // A model trained bigger than the compiled bound runs at the bound.
        let size = metadata_size().map_or(MAX_SIZE, |s| (s.clamp(32, MAX_SIZE) / 32) * 32);
        det.set_size(size)?;
        Ok(det)
    }

    /// Changes the square input size (a multiple of 32, at most [`MAX_SIZE`]).
    pub fn set_size(&mut self, size: usize) -> Result<(), DetectError> {
        if size == 0 || !size.is_multiple_of(32) || size > MAX_SIZE {
            return Err(DetectError::Size(size));
        }
        self.size = size;
        Ok(())
    }

    /// The square input size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Class names by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Detections in an interleaved RGB image (`w*h*3` bytes), best first.
    pub fn detect(
        &mut self,
        rgb: &[u8],
        w: usize,
        h: usize,
    ) -> Result<Vec<Detection>, DetectError> {
        if w == 0 || h == 0 || rgb.len() != w * h * 3 {
            return Err(DetectError::Buffer {
                got: rgb.len(),
                w,
                h,
            });
        }
        let size = self.size;
        let lb = letterbox(rgb, w, h, size, &mut self.input);
        let start = Instant::now();
        let out = self.model.forward(
            &mut self.ws,
            lele::TensorView::new(&self.input, &[1, 3, size, size])?,
        )?;
        self.call_ms.push(start.elapsed().as_secs_f64() * 1e3);
        let dims = out.output0.dims().to_vec();
        let [1, rows, anchors] = dims[..] else {
            return Err(DetectError::OutputShape(dims));
        };
        if rows <= 4 {
            return Err(DetectError::OutputShape(dims));
        }
        let (wf, hf) = (w as f64, h as f64);
        Ok(decode(out.output0.data(), anchors, self.conf, self.iou)
            .into_iter()
            .map(|c| {
                let (x1, y1) = lb.to_image(c.bbox[0], c.bbox[1]);
                let (x2, y2) = lb.to_image(c.bbox[2], c.bbox[3]);
                Detection {
                    class_id: c.class_id,
                    class_name: self
                        .names
                        .get(c.class_id)
                        .cloned()
                        .unwrap_or_else(|| format!("class {}", c.class_id)),
                    score: c.score,
                    bbox: [
                        x1.clamp(0.0, wf),
                        y1.clamp(0.0, hf),
                        x2.clamp(0.0, wf),
                        y2.clamp(0.0, hf),
                    ],
                }
            })
            .collect())
    }
}

/// A colour per class (evenly spread hues).
pub fn class_color(class_id: usize) -> [u8; 3] {
    let hue = (class_id as f32 * 0.618_034).fract() * 6.0;
    let x = 1.0 - (hue % 2.0 - 1.0).abs();
    let (r, g, b) = match hue as u32 {
        0 => (1.0, x, 0.0),
        1 => (x, 1.0, 0.0),
        2 => (0.0, 1.0, x),
        3 => (0.0, x, 1.0),
        4 => (x, 0.0, 1.0),
        _ => (1.0, 0.0, x),
    };
    [(r * 255.0) as u8, (g * 255.0) as u8, (b * 255.0) as u8]
}

/// Draws each detection's box (3 px wide, its class colour) onto `img`.
pub fn draw_boxes(img: &mut image::RgbImage, detections: &[Detection]) {
    let (w, h) = (img.width() as i64, img.height() as i64);
    for d in detections {
        let color = image::Rgb(class_color(d.class_id));
        let [x1, y1, x2, y2] = d.bbox.map(|v| v.round() as i64);
        for t in 0..3 {
            let (l, r, top, bot) = (x1 + t, x2 - t, y1 + t, y2 - t);
            for x in l..=r {
                for y in [top, bot] {
                    if (0..w).contains(&x) && (0..h).contains(&y) {
                        img.put_pixel(x as u32, y as u32, color);
                    }
                }
            }
            for y in top..=bot {
                for x in [l, r] {
                    if (0..w).contains(&x) && (0..h).contains(&y) {
                        img.put_pixel(x as u32, y as u32, color);
                    }
                }
            }
        }
    }
}
