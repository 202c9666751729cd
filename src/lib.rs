//! lele: ONNX models compiled into plain Rust.
pub use lele_kernels as kernels;
