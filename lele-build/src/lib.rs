//! The lele compiler: turns an ONNX model into Rust source that calls the
//! kernels of `lele-kernels`. Used by the `#[lele::model]` macro, by
//! `build.rs` scripts and by the `lele` CLI.
#![warn(missing_docs)]

pub mod artifact;
pub mod builder;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compile;
pub mod config;
pub mod driver;
pub mod emit;
pub mod error;
pub mod extend;
pub mod fetch;
pub mod fsutil;
pub mod gguf;
pub mod ir;
pub mod npy;
pub mod onnx;
pub mod onnx_file;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod signature;
pub mod version;

pub use builder::Compiler;
pub use config::ModelToml;
pub use driver::{CompileOptions, Compiled, compile_model, compile_toml, prepare};
pub use error::{BuildError, Result};
pub use extend::{GraphView, NodeInfo, PatternMatch, Replacement};
