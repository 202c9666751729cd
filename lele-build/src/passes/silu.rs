//! `Mul(x, Sigmoid(x))` (SiLU, as PyTorch exports it for YOLO and many
//! others) becomes one `Swish { alpha: 1 }` node.
use super::matching::*;
use crate::ir::{Graph, Node, Op, OutDType, ValueId};
use lele_kernels::ops::binary::BinaryOp;
use lele_kernels::ops::unary::{Swish, Unary, UnaryOp};
use std::collections::HashMap;

/// Whether the node runs lele's own `Sigmoid` kernel (not a user override).
fn is_sigmoid(n: &Node) -> bool {
    runs(
        n,
        &Unary {
            op: UnaryOp::Sigmoid,
        },
    )
}

/// Fuses `Mul(x, Sigmoid(x))` into `Swish`; returns how many were fused.
pub fn fuse_silu(g: &mut Graph) -> usize {
    let uses = use_counts(g);
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.main.nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer.insert(o, i);
        }
    }
    let mut drop = Vec::new();
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        if !runs(n, &bin(BinaryOp::Mul)) || n.inputs.len() != 2 {
            continue;
        }
        let (Some(a), Some(b)) = (n.inputs[0], n.inputs[1]) else {
            continue;
        };
        // Either operand may be the sigmoid.
        let found = [(a, b), (b, a)].into_iter().find_map(|(x, s)| {
            let &p = producer.get(&s)?;
            let sn = &g.main.nodes[p];
            (p < i
                && is_sigmoid(sn)
                && sn.inputs.first().copied().flatten() == Some(x)
                && uses.get(&s) == Some(&1))
            .then_some((x, p))
        });
        let Some((x, p)) = found else { continue };
        // The Mul's output keeps its value id; only its operation changes.
        let n = &mut g.main.nodes[i];
        n.op = Op::Kernel(Box::new(Swish { alpha: 1.0 }));
        n.op_type = "Swish".into();
        n.name = format!("{}::silu", n.name);
        n.inputs = vec![Some(x)];
        n.out_dtypes = vec![OutDType::Input(0)];
        drop.push(p);
    }
    drop.sort_unstable();
    drop.dedup();
    for &p in drop.iter().rev() {
        g.main.nodes.remove(p);
    }
    drop.len()
}
