//! `Add(y, r)` where `y` comes from a convolution (with whatever it fused
//! already) or a `MatMulBias` and `r` has `y`'s shape (a residual
//! connection) becomes that node with `r` as an extra input, added as each
//! block of the output is finished.
use super::matching::*;
use crate::ir::{Graph, ValueId};
use lele_kernels::Shape;
use lele_kernels::ops::conv::Conv;
use lele_kernels::ops::layout::Identity;
use lele_kernels::ops::matmul::MatMulBias;
use std::collections::HashMap;

/// Fuses residual adds, `Add(y, r)` with `y` produced by a convolution or
/// a `MatMulBias` (read only by the `Add`) and `y` and `r` of one shape at
/// every sizing point in `shapes` (which must be all of them: no
/// broadcasting in the `Add` at any input size the model accepts), into
/// the producer, which takes `r` as its last input; returns how many.
pub fn fuse_residual_add(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let same_shape = |a: ValueId, b: ValueId| {
        !shapes.is_empty()
            && shapes.iter().all(|s| match (s.get(&a), s.get(&b)) {
                (Some(x), Some(y)) => x == y,
                _ => false,
            })
    };
    let l = Links::new(g);
    let mut found = Vec::new();
    for (i, add) in g.main.nodes.iter().enumerate() {
        let Some((p, q)) = Links::add_operands(add) else {
            continue;
        };
        if p == q || !l.is_f32(p) {
            continue;
        }
        let hit = [(p, q), (q, p)].into_iter().find_map(|(y, r)| {
            if !same_shape(y, r) {
                return None;
            }
            // Through `Identity` views (Paddle exports put them between a
            // convolution and its residual add).
            let (mut v, mut inner) = (y, Vec::new());
            let (pi, prod) = loop {
                let &pi = l.producer.get(&v)?;
                let prod = &g.main.nodes[pi];
                if l.uses.get(&v) != Some(&1) || prod.outputs.len() != 1 {
                    return None;
                }
                match (kernel_of::<Identity>(prod), prod.inputs.as_slice()) {
                    (Some(_), &[Some(x)]) => {
                        inner.push(pi);
                        v = x;
                    }
                    _ => break (pi, prod),
                }
            };
            inner.push(pi);
            let kernel: Box<dyn crate::ops::OpKernel> = if let Some(conv) = kernel_of::<Conv>(prod)
            {
                (prod.inputs.len() <= 3).then_some(())?;
                Box::new(*conv)
            } else if runs(prod, &MatMulBias) && prod.inputs.len() == 3 {
                Box::new(MatMulBias)
            } else {
                return None;
            };
            let mut inputs = prod.inputs.clone();
            // A convolution without bias keeps an empty bias slot.
            inputs.resize(inputs.len().max(3), None);
            inputs.push(Some(r));
            Some(Fused {
                last: i,
                inputs,
                inner,
                kernel,
                op_type: format!("{}+Add", prod.op_type),
                tag: "residual",
            })
        });
        found.extend(hit);
    }
    rewrite(g, found)
}
