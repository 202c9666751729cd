//! LayerNorm decomposed into `ReduceMean`, `Sub`, `Pow`, `ReduceMean`,
//! `Add`, `Sqrt`, `Div` (then an optional constant scale and bias) becomes
//! one `LayerNormalization`.
use super::matching::*;
use crate::ir::{Graph, Node, Tensor, ValueId};
use lele_kernels::DType;
use lele_kernels::ops::binary::BinaryOp;
use lele_kernels::ops::norm::LayerNormalization;
use lele_kernels::ops::reduce::{Reduce, ReduceOp};
use lele_kernels::ops::unary::{Unary, UnaryOp};

/// Fuses LayerNorm as PyTorch and Paddle export it when it is not an
/// operator of their opset — `d = Sub(x, ReduceMean(x))`, `Div(d,
/// Sqrt(Add(ReduceMean(Pow(d, 2)), eps)))`, both means over the last axis
/// with kept dims, then optionally `Mul` by a constant scale and `Add` of a
/// constant bias — into one `LayerNormalization` (axis -1). Every inner
/// value must be read only inside the chain (`d` by its `Pow` and `Div`).
/// Returns how many were fused.
pub fn fuse_layer_norm(g: &mut Graph) -> usize {
    let l = Links::new(g);
    let mean = Reduce {
        op: ReduceOp::Mean,
        keepdims: true,
        noop_with_empty_axes: false,
    };
    // A ReduceMean over the last axis only.
    let last_axis_mean = |v: ValueId| -> Option<(usize, &Node)> {
        let (i, n) = l.inner(v, &mean)?;
        let axes = g
            .values
            .get(n.inputs.get(1).copied()??)?
            .constant
            .as_ref()?;
        (axes.to_f64s()? == [-1.0]).then_some((i, n))
    };
    let reader = readers(g);
    // (last node, x, epsilon, inner nodes, scale, bias)
    type Found = (
        usize,
        ValueId,
        f32,
        Vec<usize>,
        Option<ValueId>,
        Option<ValueId>,
    );
    let mut found_all: Vec<Found> = Vec::new();
    for (i, div) in g.main.nodes.iter().enumerate() {
        if !runs(div, &bin(BinaryOp::Div)) || div.inputs.len() != 2 {
            continue;
        }
        let found = (|| {
            let (d, s) = (div.inputs[0]?, div.inputs[1]?);
            let (si, sqrt) = l.inner(s, &Unary { op: UnaryOp::Sqrt })?;
            let (ai, add) = l.inner(sqrt.inputs.first().copied()??, &bin(BinaryOp::Add))?;
            let (v, eps) = l.with_const(add)?;
            let (vi, var) = last_axis_mean(v)?;
            let (pi, pow) = l.inner(var.inputs.first().copied()??, &bin(BinaryOp::Pow))?;
            let squares_d = pow.inputs.first().copied().flatten() == Some(d)
                && scalar_const(g, pow.inputs.get(1).copied().flatten()) == Some(2.0);
            // d: read by the Pow and the Div only.
            let &di = l.producer.get(&d)?;
            let sub = &g.main.nodes[di];
            let d_inner = l.uses.get(&d) == Some(&2) && runs(sub, &bin(BinaryOp::Sub));
            (squares_d && d_inner).then_some(())?;
            let (x, m) = (sub.inputs.first().copied()??, sub.inputs.get(1).copied()??);
            let (mi, mn) = last_axis_mean(m)?;
            (mn.inputs.first().copied()? == Some(x) && l.is_f32(x) && eps > 0.0).then_some(())?;
            Some((x, eps as f32, vec![mi, di, pi, vi, ai, si]))
        })();
        let Some((x, eps, mut inner)) = found else {
            continue;
        };
        // The optional constant scale, then bias.
        let mut last = i;
        let (mut scale, mut bias) = (None, None);
        let affine = |from: usize, op: BinaryOp| -> Option<(usize, ValueId)> {
            let out = *g.main.nodes[from].outputs.first()?;
            let &ri = reader.get(&out)?;
            let n = &g.main.nodes[ri];
            (l.uses.get(&out) == Some(&1) && runs(n, &bin(op))).then_some(())?;
            let c = Links::other_than(n, out)?;
            let t = g.values[c].constant.as_ref()?;
            // Along the last axis only (leading dims 1).
            let last_only = t
                .dims
                .split_last()
                .is_none_or(|(_, rest)| rest.iter().all(|&d| d == 1));
            (t.dtype == DType::F32 && last_only).then_some((ri, c))
        };
        if let Some((mi, c)) = affine(last, BinaryOp::Mul) {
            inner.push(last);
            (last, scale) = (mi, Some(c));
            if let Some((ai, c)) = affine(last, BinaryOp::Add) {
                inner.push(last);
                (last, bias) = (ai, Some(c));
            }
        }
        found_all.push((last, x, eps, inner, scale, bias));
    }
    // The scale input is required: a one-element 1 when the model has none.
    let mut fused = Vec::new();
    for (last, x, eps, inner, scale, bias) in found_all {
        let scale = match scale {
            Some(s) => s,
            None => match Tensor::from_values::<f32>(&[1], &[1.0]) {
                Some(t) => g.add_constant("layernorm_unit_scale", t),
                None => continue,
            },
        };
        let mut inputs = vec![Some(x), Some(scale)];
        inputs.extend(bias.map(Some));
        fused.push(Fused {
            last,
            inputs,
            inner,
            kernel: Box::new(LayerNormalization {
                axis: -1,
                epsilon: eps,
            }),
            op_type: "LayerNormalization".into(),
            tag: "layernorm",
        });
    }
    rewrite(g, fused)
}
