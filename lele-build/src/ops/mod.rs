//! Lowering ONNX nodes to kernels: attributes are parsed once into the
//! kernels' parameter structs, and opset differences are normalized (old
//! attributes that later became inputs are turned into constant inputs).
mod attrs;
mod data;
mod math;
mod nn;
mod pool_norm;
mod quant;
mod signal;
mod spatial;

use std::path::Path;

use lele_kernels::DType;

pub use crate::ir::OpKernel;
pub use attrs::Attrs;

use crate::ir::{Graph, Op, OutDType, Tensor, ValueId};
use crate::onnx_file::{Limits, proto};

/// What lowering needs to know about a node.
pub struct LowerCtx<'a> {
    /// The graph (to add constants for normalized attributes).
    pub graph: &'a mut Graph,
    /// The ONNX node.
    pub node: &'a proto::NodeProto,
    /// Node name.
    pub name: &'a str,
    /// Default-domain opset.
    pub opset: i64,
    /// Inputs (may be extended with constants).
    pub inputs: &'a mut Vec<Option<ValueId>>,
    /// Outputs.
    pub outputs: &'a [ValueId],
}

impl<'a> LowerCtx<'a> {
    /// The node's attributes.
    pub fn attrs(&self) -> Attrs<'a> {
        Attrs::new(self.node)
    }

    /// Sets input `index` to a new constant (used to turn attributes into
    /// inputs).
    pub fn set_const_input(&mut self, index: usize, t: Tensor) {
        let name = format!("{}::attr{index}", self.name);
        let id = self.graph.add_constant(&name, t);
        while self.inputs.len() <= index {
            self.inputs.push(None);
        }
        self.inputs[index] = Some(id);
    }

    /// Number of outputs the node has.
    pub fn n_outputs(&self) -> usize {
        self.outputs.len()
    }
}

/// A lowered node.
pub struct Lowered {
    /// The operation.
    pub op: Op,
    /// Dtype rule of each output.
    pub dtypes: Vec<OutDType>,
}

impl Lowered {
    /// A kernel whose outputs all have input 0's dtype.
    pub fn same<K: OpKernel + 'static>(k: K, n_out: usize) -> Lowered {
        Lowered {
            op: Op::Kernel(Box::new(k)),
            dtypes: vec![OutDType::Input(0); n_out],
        }
    }

    /// A kernel with explicit output dtype rules.
    pub fn with<K: OpKernel + 'static>(k: K, dtypes: Vec<OutDType>) -> Lowered {
        Lowered {
            op: Op::Kernel(Box::new(k)),
            dtypes,
        }
    }

    /// A zero-copy view of input 0.
    pub fn view<K: OpKernel + 'static>(k: K) -> Lowered {
        Lowered {
            op: Op::View(Box::new(k)),
            dtypes: vec![OutDType::Input(0)],
        }
    }
}

/// Result of lowering one op: `Err` carries the reason it is unsupported.
pub type LowerResult = std::result::Result<Lowered, String>;

/// Lowers one node. Unsupported nodes become [`Op::Unsupported`] so that
/// every problem of a model can be reported at once.
pub fn lower(ctx: &mut LowerCtx<'_>) -> Lowered {
    let domain = ctx.node.domain.clone().unwrap_or_default();
    let op_type = ctx.node.op_type.clone().unwrap_or_default();
    let result = if domain.is_empty() || domain == "ai.onnx" {
        math::lower(&op_type, ctx)
            .or_else(|| nn::lower(&op_type, ctx))
            .or_else(|| data::lower(&op_type, ctx))
            .or_else(|| quant::lower(&op_type, ctx))
            .or_else(|| spatial::lower(&op_type, ctx))
            .or_else(|| signal::lower(&op_type, ctx))
            .unwrap_or_else(|| Err("no kernel for this operator".to_string()))
    } else {
        Err(format!("operators of domain `{domain}` are not supported"))
    };
    match result {
        Ok(l) => l,
        Err(reason) => Lowered {
            op: Op::Unsupported { reason },
            dtypes: vec![OutDType::Fixed(DType::F32); ctx.n_outputs()],
        },
    }
}

/// The tensor of a `Constant` node.
pub fn constant_value(
    np: &proto::NodeProto,
    dir: &Path,
    limits: &Limits,
) -> std::result::Result<Tensor, String> {
    let a = Attrs::new(np);
    if let Some(t) = a.tensor("value") {
        return crate::onnx_file::tensor_from_proto(t, dir, limits).map_err(|e| e.to_string());
    }
    if let Some(v) = a.float_opt("value_float") {
        return Tensor::from_values::<f32>(&[], &[v]).ok_or_else(|| "bad value_float".into());
    }
    if let Some(v) = a.floats_opt("value_floats") {
        return Tensor::from_values::<f32>(&[v.len()], v).ok_or_else(|| "bad value_floats".into());
    }
    if let Some(v) = a.int_opt("value_int") {
        return Tensor::from_values::<i64>(&[], &[v]).ok_or_else(|| "bad value_int".into());
    }
    if let Some(v) = a.ints_opt("value_ints") {
        return Tensor::from_values::<i64>(&[v.len()], v).ok_or_else(|| "bad value_ints".into());
    }
    Err("Constant without a supported value attribute (sparse and string constants are not supported)".into())
}
