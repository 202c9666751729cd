//! Constant folding and dead-code elimination.
//!
//! A node is folded only when every input it reads is a constant (an
//! initializer, a `Constant` node or an already folded value). The one
//! exception is `Shape`/`Size` of a value whose shape is *static* — known
//! exactly for every allowed input — which the caller passes in
//! `static_shapes` only when the model has no dynamic input dimension.
use super::dead_code::eliminate_dead_code;
use std::collections::HashMap;
use std::sync::Arc;

use lele_kernels::{DType, Shape, TensorRef};

use lele_kernels::ops::layout::{ShapeOf, Size};

use super::eval::eval_kernel;
use super::matching::kernel_of;
use crate::config::Dim;
use crate::error::{BuildError, Result};
use crate::ir::{Block, Graph, Node, Op, OutDType, ValueId};

/// Largest folded output: folding must not bloat the weights.
const MAX_FOLD_BYTES: usize = 64 << 20;

/// Folds constant subgraphs; returns whether anything changed.
pub fn fold_constants(
    g: &mut Graph,
    static_shapes: Option<&HashMap<ValueId, Shape>>,
) -> Result<bool> {
    let mut main = std::mem::take(&mut g.main);
    let r = fold_block(g, &mut main, static_shapes);
    g.main = main;
    r
}

/// Folds constants, removing what dead code they leave, until nothing
/// changes (at most eight rounds). When every input dimension is fixed,
/// each round also folds `Shape`/`Size` of values whose shape the graph
/// sized at those dims. Returns how many rounds changed the graph.
pub fn fold_to_fixed_point(g: &mut Graph, dims: &[Vec<Dim>]) -> Result<usize> {
    let fully_static = dims
        .iter()
        .all(|d| d.iter().all(|x| matches!(x, Dim::Fixed(_))));
    let point: Vec<Vec<usize>> = dims
        .iter()
        .map(|d| d.iter().map(Dim::max).collect())
        .collect();
    let mut rounds = 0;
    for _ in 0..8 {
        let mut changed = fold_constants(g, None)?;
        eliminate_dead_code(g);
        if fully_static {
            let sizes = super::sizing::size_graph(g, std::slice::from_ref(&point))?;
            changed |= fold_constants(g, Some(&sizes.shapes))?;
            eliminate_dead_code(g);
        }
        if !changed {
            break;
        }
        rounds += 1;
    }
    Ok(rounds)
}

/// [`fold_constants`] over one block (the importer folds the block it is
/// building when a node needs a constant input; see `onnx::Importer`).
pub(crate) fn fold_block(
    g: &mut Graph,
    b: &mut Block,
    static_shapes: Option<&HashMap<ValueId, Shape>>,
) -> Result<bool> {
    let mut changed = false;
    let mut out = Vec::with_capacity(b.nodes.len());
    for mut n in std::mem::take(&mut b.nodes) {
        let (node_name, node_op) = (n.name.clone(), n.op_type.clone());
        let err = |msg: String| BuildError::Node {
            node: node_name.clone(),
            op: node_op.clone(),
            msg,
        };
        let reads_only_shape =
            kernel_of::<ShapeOf>(&n).is_some() || kernel_of::<Size>(&n).is_some();
        match &mut n.op {
            Op::If {
                then_branch,
                else_branch,
            } => {
                changed |= fold_block(g, then_branch, static_shapes)?;
                changed |= fold_block(g, else_branch, static_shapes)?;
                let cond = n
                    .inputs
                    .first()
                    .copied()
                    .flatten()
                    .and_then(|c| g.values[c].constant.clone());
                if let Some(c) = cond {
                    let taken = c.bytes().first().copied().unwrap_or(0) != 0;
                    let branch = std::mem::take(if taken { then_branch } else { else_branch });
                    out.extend(branch.nodes);
                    for (&src, &dst) in branch.outputs.iter().zip(&n.outputs) {
                        out.push(identity_node(&n.name, src, dst));
                    }
                    changed = true;
                    continue;
                }
                out.push(n);
            }
            Op::Kernel(k) | Op::View(k) => {
                let all_const = n
                    .inputs
                    .iter()
                    .flatten()
                    .all(|&v| g.values[v].constant.is_some());
                let shape_of_static = reads_only_shape
                    && n.inputs.len() == 1
                    && static_shapes
                        .and_then(|s| n.inputs[0].and_then(|v| s.get(&v)))
                        .is_some();
                if !(all_const || shape_of_static) {
                    out.push(n);
                    continue;
                }
                let mut refs: Vec<Option<TensorRef<'_>>> = Vec::with_capacity(n.inputs.len());
                let consts: Vec<Option<Arc<crate::ir::Tensor>>> = n
                    .inputs
                    .iter()
                    .map(|i| i.and_then(|v| g.values[v].constant.clone()))
                    .collect();
                for (i, inp) in n.inputs.iter().enumerate() {
                    refs.push(match (inp, &consts[i]) {
                        (None, _) => None,
                        (Some(_), Some(t)) => Some(t.view().map_err(|e| err(e.to_string()))?),
                        (Some(v), None) => {
                            let shape = static_shapes
                                .and_then(|s| s.get(v))
                                .copied()
                                .unwrap_or(Shape::SCALAR);
                            let dtype = g.values[*v].dtype.unwrap_or(DType::F32);
                            Some(TensorRef::shape_only(dtype, shape))
                        }
                    });
                }
                let dtypes: Vec<DType> = n
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(i, _)| match n.out_dtypes.get(i) {
                        Some(OutDType::Fixed(d)) => *d,
                        Some(OutDType::Input(k)) => n
                            .inputs
                            .get(*k)
                            .copied()
                            .flatten()
                            .and_then(|v| g.values[v].dtype)
                            .unwrap_or(DType::F32),
                        None => DType::F32,
                    })
                    .collect();
                // Estimate the output size before evaluating.
                let mut shapes = vec![Shape::SCALAR; n.outputs.len()];
                if k.infer(&refs, &mut shapes).is_err() {
                    // Let shape inference report the error later with context.
                    out.push(n);
                    continue;
                }
                // Saturating: an element count past `usize` is too large to
                // fold, never small.
                let bytes = shapes.iter().zip(&dtypes).fold(0usize, |acc, (s, d)| {
                    acc.saturating_add(s.checked_bytes(d.size()).unwrap_or(usize::MAX))
                });
                if bytes > MAX_FOLD_BYTES {
                    out.push(n);
                    continue;
                }
                let results = eval_kernel(k.as_ref(), &refs, &dtypes).map_err(err)?;
                for (&o, t) in n.outputs.iter().zip(results) {
                    g.values[o].dtype = Some(t.dtype);
                    g.values[o].constant = Some(Arc::new(t));
                }
                changed = true;
            }
            Op::Unsupported { .. } => out.push(n),
        }
    }
    b.nodes = out;
    Ok(changed)
}

/// An `Identity` view node from `src` to `dst`.
pub fn identity_node(name: &str, src: ValueId, dst: ValueId) -> Node {
    Node {
        name: format!("{name}::out"),
        op_type: "Identity".into(),
        domain: String::new(),
        op: Op::View(Box::new(lele_kernels::ops::layout::Identity)),
        inputs: vec![Some(src)],
        outputs: vec![dst],
        out_dtypes: vec![OutDType::Input(0)],
    }
}
