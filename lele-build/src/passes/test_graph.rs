//! Small graphs for the passes' unit tests.
use crate::ir::{Graph, Node, Op, OutDType, Tensor, ValueId};

/// A constant f32 tensor of `dims` holding 0, 1, 2, ….
pub(super) fn f32_const(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    let vals: Vec<f32> = (0..dims.iter().product::<usize>())
        .map(|i| i as f32)
        .collect();
    g.add_constant(name, Tensor::from_values::<f32>(dims, &vals).unwrap())
}

/// A one-output node labelled `op` running `kernel`, its outputs typed
/// like its first input.
pub(super) fn node(
    op: &str,
    kernel: Box<dyn crate::ops::OpKernel>,
    ins: &[ValueId],
    out: ValueId,
) -> Node {
    Node {
        name: format!("{op}_{out}"),
        op_type: op.into(),
        domain: String::new(),
        op: Op::Kernel(kernel),
        inputs: ins.iter().map(|&v| Some(v)).collect(),
        outputs: vec![out],
        out_dtypes: vec![OutDType::Input(0)],
    }
}
