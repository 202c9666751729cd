//! The public interface of a compiled model (input and output names, dtypes
//! and dims, sizes) and the workspace layout its wrapper needs. Both are
//! stored with cached artifacts; the signature also goes into lock files so
//! an offline build can emit a stub with the same API.
use lele_kernels::DType;
use serde::{Deserialize, Serialize};

use crate::config::Dim;
use crate::error::{BuildError, Result};

/// An input or output of the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    /// ONNX name.
    pub name: String,
    /// Element type (`f32`, `i64`, …).
    pub dtype: String,
    /// Dims of an input: `"3"` (fixed) or `"1..=576"` (bounded); empty for outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<String>,
}

impl Port {
    /// The element type.
    pub fn dtype(&self) -> Result<DType> {
        DType::from_name(&self.dtype).ok_or_else(|| {
            BuildError::Config(format!(
                "`{}` has unknown dtype `{}`",
                self.name, self.dtype
            ))
        })
    }

    /// The dims of an input.
    pub fn dims(&self) -> Result<Vec<Dim>> {
        self.dims.iter().map(|d| dim_from_text(d)).collect()
    }
}

/// What a user of the generated struct sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// Inputs in `forward` argument order.
    pub inputs: Vec<Port>,
    /// Outputs in field order.
    pub outputs: Vec<Port>,
    /// Bytes of the workspace arena.
    pub arena_bytes: u64,
    /// Bytes of the weights.
    pub weights_bytes: u64,
    /// Content hash of the compiled model.
    pub model_hash: String,
}

/// Where the generated code keeps inputs and outputs in the workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Number of shape slots.
    pub slots: u64,
    /// Shape slot of each input, `-1` when the input is unused.
    pub input_slots: Vec<i64>,
    /// Shape slot of each output.
    pub output_slots: Vec<u64>,
    /// Arena offset of each output.
    pub output_offsets: Vec<u64>,
}

/// `"3"` or `"1..=576"`.
pub fn dim_text(d: &Dim) -> String {
    match d {
        Dim::Fixed(n) => n.to_string(),
        Dim::Range { min, max } => format!("{min}..={max}"),
    }
}

/// Parses [`dim_text`]'s output.
pub fn dim_from_text(s: &str) -> Result<Dim> {
    let bad = || BuildError::Config(format!("`{s}` is not a dim (`3` or `1..=576`)"));
    match s.split_once("..=") {
        None => s.trim().parse().map(Dim::Fixed).map_err(|_| bad()),
        Some((a, b)) => {
            let min: usize = a.trim().parse().map_err(|_| bad())?;
            let max: usize = b.trim().parse().map_err(|_| bad())?;
            if min > max {
                return Err(bad());
            }
            Ok(Dim::Range { min, max })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_round_trip() {
        for d in [Dim::Fixed(3), Dim::Range { min: 1, max: 576 }] {
            assert_eq!(dim_from_text(&dim_text(&d)).unwrap(), d);
        }
        assert!(dim_from_text("9..=3").is_err());
        assert!(dim_from_text("x").is_err());
    }
}
