//! The error type of every kernel and of a generated `forward`.
use core::fmt;

use crate::dtype::DType;

/// What went wrong while computing a shape or running a kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelError {
    /// An input had a dtype the kernel does not handle.
    UnsupportedDType {
        /// Kernel name.
        op: &'static str,
        /// The dtype that was given.
        dtype: DType,
    },
    /// Two dtypes that must agree do not.
    DTypeMismatch {
        /// Kernel name.
        op: &'static str,
        /// Expected dtype.
        expected: DType,
        /// Found dtype.
        found: DType,
    },
    /// Shapes are incompatible (the message names how).
    Shape {
        /// Kernel name.
        op: &'static str,
        /// What is wrong.
        msg: &'static str,
    },
    /// A required input is missing.
    MissingInput {
        /// Kernel name.
        op: &'static str,
        /// Input position.
        index: usize,
    },
    /// The output shape depends on input values that are not known.
    NeedsData {
        /// Kernel name.
        op: &'static str,
    },
    /// A rank above [`crate::MAX_RANK`].
    RankTooLarge(usize),
    /// A buffer is too small or misaligned for its tensor.
    Buffer {
        /// Kernel name.
        op: &'static str,
    },
    /// An attribute or parameter value is invalid.
    Invalid {
        /// Kernel name.
        op: &'static str,
        /// What is wrong.
        msg: &'static str,
    },
    /// An index (Gather, Slice…) is out of range.
    IndexOutOfRange {
        /// Kernel name.
        op: &'static str,
    },
    /// A model input has the wrong shape.
    InputShape {
        /// Input name as in the ONNX file.
        input: &'static str,
        /// Human readable expectation.
        expected: &'static str,
    },
    /// A tensor computed at run time is larger than the space planned for it
    /// from the `[inputs]` bounds of `model.toml`.
    CapacityExceeded {
        /// ONNX value name.
        value: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes planned.
        planned: usize,
    },
    /// The weights file does not belong to this model.
    Weights(&'static str),
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::UnsupportedDType { op, dtype } => {
                write!(f, "{op}: unsupported dtype {dtype:?}")
            }
            KernelError::DTypeMismatch {
                op,
                expected,
                found,
            } => write!(f, "{op}: expected dtype {expected:?}, found {found:?}"),
            KernelError::Shape { op, msg } => write!(f, "{op}: {msg}"),
            KernelError::MissingInput { op, index } => write!(f, "{op}: missing input {index}"),
            KernelError::NeedsData { op } => {
                write!(
                    f,
                    "{op}: output shape depends on input values that are not known"
                )
            }
            KernelError::RankTooLarge(r) => write!(f, "rank {r} exceeds the supported maximum"),
            KernelError::Buffer { op } => write!(f, "{op}: buffer too small or misaligned"),
            KernelError::Invalid { op, msg } => write!(f, "{op}: {msg}"),
            KernelError::IndexOutOfRange { op } => write!(f, "{op}: index out of range"),
            KernelError::InputShape { input, expected } => {
                write!(
                    f,
                    "input `{input}` has the wrong shape; expected {expected}"
                )
            }
            KernelError::CapacityExceeded {
                value,
                needed,
                planned,
            } => write!(
                f,
                "value `{value}` needs {needed} bytes but {planned} were planned from the input bounds"
            ),
            KernelError::Weights(msg) => write!(f, "weights: {msg}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for KernelError {}
