//! The compiled PP-OCR networks, behind one small interface per stage so the
//! pipeline can switch between v4 and v6 at run time.
use std::time::Instant;

use crate::{Calls, OcrError};

#[lele::model("models/v4_det.toml")]
/// PP-OCRv4 text detector, compiled at build time.
pub struct DetV4;
#[lele::model("models/v6_det.toml")]
/// PP-OCRv6 small text detector, compiled at build time.
pub struct DetV6;
#[lele::model("models/v4_rec.toml")]
/// PP-OCRv4 text recognizer, compiled at build time.
pub struct RecV4;
#[lele::model("models/v6_rec.toml")]
/// PP-OCRv6 small text recognizer, compiled at build time.
pub struct RecV6;
#[lele::model("models/cls.toml")]
/// PP-OCR 0°/180° line classifier, compiled at build time.
pub struct ClsNet;

/// Which PP-OCR generation to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// PP-OCRv4 mobile det + rec (Chinese and English, 6,623 characters).
    V4,
    /// PP-OCRv6 small det + rec (multilingual, 18,708 characters).
    V6,
}

/// A tensor the pipeline keeps after the model's workspace is reused.
#[derive(Clone, Debug, Default)]
pub struct Owned {
    /// Values, row-major.
    pub data: Vec<f32>,
    /// Shape.
    pub dims: Vec<usize>,
}

impl Owned {
    fn set(&mut self, data: &[f32], dims: &[usize]) {
        self.data.clear();
        self.data.extend_from_slice(data);
        self.dims.clear();
        self.dims.extend_from_slice(dims);
    }
}

/// Runs a model on one `[1, 3, h, w]` input, copies its output into `out`
/// and records the call's time and input shape.
macro_rules! run_stage {
    ($model:expr, $ws:expr, $field:ident, $input:expr, $dims:expr, $out:expr, $calls:expr) => {{
        let start = Instant::now();
        let y = $model.forward($ws, lele::TensorView::new($input, $dims)?)?;
        $calls.ms.push(start.elapsed().as_secs_f64() * 1e3);
        $calls.shapes.push($dims.to_vec());
        $out.set(y.$field.data(), y.$field.dims());
    }};
}

/// The text detector (probability map of text pixels).
pub enum Detector {
    /// PP-OCRv4 det.
    V4(Box<DetV4>, Box<DetV4Workspace>),
    /// PP-OCRv6 small det.
    V6(Box<DetV6>, Box<DetV6Workspace>),
}

impl Detector {
    /// Loads the detector of `version`.
    pub fn new(version: Version) -> Result<Self, OcrError> {
        Ok(match version {
            Version::V4 => {
                let m = DetV4::new()?;
                let ws = m.workspace();
                Self::V4(Box::new(m), Box::new(ws))
            }
            Version::V6 => {
                let m = DetV6::new()?;
                let ws = m.workspace();
                Self::V6(Box::new(m), Box::new(ws))
            }
        })
    }

    /// Probability map `[1, 1, h, w]` of a normalized `[1, 3, h, w]` image.
    pub fn run(
        &mut self,
        x: &[f32],
        dims: &[usize],
        out: &mut Owned,
        calls: &mut Calls,
    ) -> Result<(), OcrError> {
        match self {
            Self::V4(m, ws) => run_stage!(m, ws, sigmoid_0_tmp_0, x, dims, out, calls),
            Self::V6(m, ws) => run_stage!(m, ws, fetch_name_0, x, dims, out, calls),
        }
        Ok(())
    }
}

/// The text recognizer (per-column character probabilities).
pub enum Recognizer {
    /// PP-OCRv4 rec.
    V4(Box<RecV4>, Box<RecV4Workspace>),
    /// PP-OCRv6 small rec.
    V6(Box<RecV6>, Box<RecV6Workspace>),
}

impl Recognizer {
    /// Loads the recognizer of `version`.
    pub fn new(version: Version) -> Result<Self, OcrError> {
        Ok(match version {
            Version::V4 => {
                let m = RecV4::new()?;
                let ws = m.workspace();
                Self::V4(Box::new(m), Box::new(ws))
            }
            Version::V6 => {
                let m = RecV6::new()?;
                let ws = m.workspace();
                Self::V6(Box::new(m), Box::new(ws))
            }
        })
    }

    /// The character list stored in the model (`character` metadata, one
    /// per line); class 0 is the CTC blank, class `len + 1` a space.
    pub fn characters(&self) -> Option<&'static str> {
        match self {
            Self::V4(..) => RecV4::metadata_value("character"),
            Self::V6(..) => RecV6::metadata_value("character"),
        }
    }

    /// Probabilities `[1, steps, classes]` of a normalized `[1, 3, 48, w]` line.
    pub fn run(
        &mut self,
        x: &[f32],
        dims: &[usize],
        out: &mut Owned,
        calls: &mut Calls,
    ) -> Result<(), OcrError> {
        match self {
            Self::V4(m, ws) => run_stage!(m, ws, softmax_11_tmp_0, x, dims, out, calls),
            Self::V6(m, ws) => run_stage!(m, ws, fetch_name_0, x, dims, out, calls),
        }
        Ok(())
    }
}

/// The 0°/180° text orientation classifier.
pub struct Classifier {
    model: ClsNet,
    ws: ClsNetWorkspace,
}

impl Classifier {
    /// Loads the classifier.
    pub fn new() -> Result<Self, OcrError> {
        let model = ClsNet::new()?;
        let ws = model.workspace();
        Ok(Self { model, ws })
    }

    /// `[p(0°), p(180°)]` of a normalized `[1, 3, 48, 192]` line.
    pub fn run(
        &mut self,
        x: &[f32],
        dims: &[usize],
        out: &mut Owned,
        calls: &mut Calls,
    ) -> Result<(), OcrError> {
        run_stage!(
            self.model,
            &mut self.ws,
            save_infer_model_scale_0_tmp_1,
            x,
            dims,
            out,
            calls
        );
        Ok(())
    }
}
