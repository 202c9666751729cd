//! The lele compiler: turns an ONNX model into Rust source that calls the
//! kernels of `lele-kernels`. Used by the `#[lele::model]` macro, by
//! `build.rs` scripts and by the `lele` CLI.
#![warn(missing_docs)]

pub mod cli;
pub mod compile;
pub mod config;
pub mod emit;
pub mod error;
pub mod ir;
pub mod npy;
pub mod onnx;
pub mod ops;
pub mod passes;
pub mod plan;

pub use compile::{CompileOptions, Compiled, compile_model, compile_toml};
pub use config::ModelToml;
pub use error::{BuildError, Result};
