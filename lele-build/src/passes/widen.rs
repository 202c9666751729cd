//! Half-precision inputs of float32-only kernels: for such a node whose
//! float16/bfloat16 operands, each is cast to float32 before the node and
//! each float16/bfloat16 output is computed in float32 and cast back (the
//! same widening ONNX Runtime's CPU kernels do). Only widening: float64 is
//! never narrowed.
use lele_kernels::DType;
use lele_kernels::ops::cast::Cast;

use crate::ir::{Graph, Node, Op, OutDType};

/// Ops whose kernels compute in float32 only.
const F32_ONLY: &[&str] = &[
    "MatMul",
    "Gemm",
    "Attention",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "RMSNormalization",
    "InstanceNormalization",
    "BatchNormalization",
    "Conv",
    "ConvTranspose",
    "AveragePool",
    "MaxPool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "LSTM",
    "GRU",
    "RNN",
    "LpPool",
    "LRN",
    "LpNormalization",
    "MeanVarianceNormalization",
    "GroupNormalization",
    "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss",
    "DFT",
    "STFT",
];

fn is_half(d: Option<DType>) -> bool {
    matches!(d, Some(DType::F16 | DType::BF16))
}

/// Rewrites the main block; returns how many nodes were widened.
pub fn widen_half_precision(g: &mut Graph) -> usize {
    let mut widened = 0;
    let nodes = std::mem::take(&mut g.main.nodes);
    let mut out = Vec::with_capacity(nodes.len());
    for mut n in nodes {
        let eligible = matches!(n.op, Op::Kernel(_))
            && n.domain.is_empty()
            && F32_ONLY.contains(&n.op_type.as_str())
            && n.inputs
                .iter()
                .flatten()
                .any(|&v| is_half(g.values[v].dtype));
        if !eligible {
            out.push(n);
            continue;
        }
        widened += 1;
        for (i, input) in n.inputs.iter_mut().enumerate() {
            let Some(v) = *input else { continue };
            if !is_half(g.values[v].dtype) {
                continue;
            }
            let name = format!("{}::in{i}_f32", n.name);
            let wide = g.add_value(&name, Some(DType::F32));
            out.push(Node {
                name: name.clone(),
                op_type: "Cast".into(),
                domain: String::new(),
                op: Op::Kernel(Box::new(Cast { to: DType::F32 })),
                inputs: vec![Some(v)],
                outputs: vec![wide],
                out_dtypes: vec![OutDType::Fixed(DType::F32)],
            });
            *input = Some(wide);
        }
        let mut casts_back = Vec::new();
        for (i, o) in n.outputs.iter_mut().enumerate() {
            let dt = g.values[*o].dtype;
            if !is_half(dt) {
                continue;
            }
            let Some(dt) = dt else { continue };
            let name = format!("{}::out{i}_f32", n.name);
            let wide = g.add_value(&name, Some(DType::F32));
            casts_back.push(Node {
                name: format!("{name}::back"),
                op_type: "Cast".into(),
                domain: String::new(),
                op: Op::Kernel(Box::new(Cast { to: dt })),
                inputs: vec![Some(wide)],
                outputs: vec![*o],
                out_dtypes: vec![OutDType::Fixed(dt)],
            });
            if let Some(rule) = n.out_dtypes.get_mut(i) {
                *rule = OutDType::Fixed(DType::F32);
            }
            *o = wide;
        }
        out.push(n);
        out.extend(casts_back);
    }
    g.main.nodes = out;
    widened
}
