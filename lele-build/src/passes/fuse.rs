//! Built-in fusions that every compilation applies.
//!
//! `Mul(x, Sigmoid(x))` (SiLU, as exported by PyTorch for YOLO and many
//! others) becomes one `Swish { alpha: 1 }` node: one pass over the tensor
//! instead of two, and no intermediate. The Sigmoid output must have no
//! other reader and must not be a model output.
use std::collections::HashMap;

use lele_kernels::ops::unary::{Swish, Unary, UnaryOp};

use crate::ir::{Graph, Op, OutDType, ValueId};

/// Whether the node runs lele's own `Sigmoid` kernel (not a user override).
fn is_sigmoid(n: &crate::ir::Node) -> bool {
    let own = format!(
        "{:?}",
        Unary {
            op: UnaryOp::Sigmoid
        }
    );
    n.op_type == "Sigmoid" && matches!(&n.op, Op::Kernel(k) if format!("{k:?}") == own)
}

/// Fuses `Mul(x, Sigmoid(x))` into `Swish`; returns how many were fused.
pub fn fuse_silu(g: &mut Graph) -> usize {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    g.for_each_node(&mut |n| {
        for v in n.inputs.iter().flatten() {
            *uses.entry(*v).or_default() += 1;
        }
    });
    for v in &g.outputs {
        *uses.entry(*v).or_default() += 1;
    }
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.main.nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer.insert(o, i);
        }
    }
    let mut drop = Vec::new();
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        if n.op_type != "Mul" || n.inputs.len() != 2 {
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
