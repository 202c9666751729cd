//! lele: ONNX models compiled into plain Rust at build time.
//!
//! ```text
//! #[lele::model("models/silero_vad.toml")]
//! pub struct SileroVad;
//!
//! let model = SileroVad::new()?;
//! let mut ws = model.workspace();
//! let out = model.forward(&mut ws, input, state, sr)?;
//! ```
//!
//! See the README for the generated API and docs/model-toml.md for `model.toml`.
#![warn(missing_docs)]

pub mod audio;
pub mod llm;
mod profile;
mod weights;

pub use lele_kernels as kernels;
pub use lele_kernels::{DType, Shape, TensorView};
pub use lele_macros::model;
pub use profile::{NodeTime, NodeTimer, Work};
pub use weights::Weights;

/// Errors of a generated model.
#[derive(Debug)]
pub enum Error {
    /// A kernel or an input check failed.
    Kernel(kernels::KernelError),
    /// The weights file could not be opened or does not belong to the model.
    Weights(String),
    /// The build had no generated code for this model (an offline build
    /// with `LELE_SKIP_MODEL_GEN=1` and neither a cached nor a vendored
    /// artifact); the message says how to get one.
    NotGenerated(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Kernel(e) => write!(f, "{e}"),
            Error::Weights(m) => write!(f, "weights: {m}"),
            Error::NotGenerated(m) => write!(f, "model not generated: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<kernels::KernelError> for Error {
    fn from(e: kernels::KernelError) -> Self {
        Error::Kernel(e)
    }
}
