//! Built-in fusions that every compilation applies.
//!
//! - `Mul(x, Sigmoid(x))` (SiLU, as exported by PyTorch for YOLO and many
//!   others) becomes one `Swish { alpha: 1 }` node.
//! - `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (HardSwish as Paddle exports
//!   it, e.g. every PP-OCR backbone) becomes one `HardSwish` node.
//!
//! One pass over the tensor instead of two or four, and no intermediates.
//! Every inner output must have exactly one reader and not be a model
//! output, and every matched node must run lele's own kernel (a user
//! override is never fused away).
use std::collections::HashMap;

use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::unary::{Clip, Swish, Unary, UnaryOp};

use crate::ir::{Graph, Node, Op, OutDType, ValueId};

/// Whether `n` is an `op_type` node running exactly the kernel `own`.
fn runs(n: &Node, op_type: &str, own: &dyn core::fmt::Debug) -> bool {
    n.op_type == op_type && matches!(&n.op, Op::Kernel(k) if format!("{k:?}") == format!("{own:?}"))
}

/// Whether the node runs lele's own `Sigmoid` kernel (not a user override).
fn is_sigmoid(n: &Node) -> bool {
    runs(
        n,
        "Sigmoid",
        &Unary {
            op: UnaryOp::Sigmoid,
        },
    )
}

/// Readers of each value (model outputs count as readers).
fn use_counts(g: &Graph) -> HashMap<ValueId, usize> {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    g.for_each_node(&mut |n| {
        for v in n.inputs.iter().flatten() {
            *uses.entry(*v).or_default() += 1;
        }
    });
    for v in &g.outputs {
        *uses.entry(*v).or_default() += 1;
    }
    uses
}

/// The single float value of a one-element constant.
fn scalar_const(g: &Graph, v: Option<ValueId>) -> Option<f64> {
    let t = g.values.get(v?)?.constant.as_ref()?;
    match t.to_f64s()?.as_slice() {
        [x] => Some(*x),
        _ => None,
    }
}

/// Fuses Paddle's decomposed HardSwish; returns how many were fused.
pub fn fuse_hardswish(g: &mut Graph) -> usize {
    let uses = use_counts(g);
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.main.nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer.insert(o, i);
        }
    }
    let binary = |op| Binary { op };
    let single = |v: ValueId| uses.get(&v) == Some(&1);
    let is_f32 = |v: ValueId| g.values[v].dtype == Some(DType::F32);
    let mut fused: Vec<(usize, ValueId, [usize; 3])> = Vec::new();
    for (i, div) in g.main.nodes.iter().enumerate() {
        if !runs(div, "Div", &binary(BinaryOp::Div))
            || div.inputs.len() != 2
            || scalar_const(g, div.inputs[1]) != Some(6.0)
        {
            continue;
        }
        let found = (|| {
            let m_out = div.inputs[0]?;
            let &mi = producer.get(&m_out)?;
            let mul = &g.main.nodes[mi];
            if !single(m_out) || !runs(mul, "Mul", &binary(BinaryOp::Mul)) {
                return None;
            }
            let (a, b) = (mul.inputs.first().copied()??, mul.inputs.get(1).copied()??);
            [(a, b), (b, a)].into_iter().find_map(|(x, c_out)| {
                let &ci = producer.get(&c_out)?;
                let clip = &g.main.nodes[ci];
                if !single(c_out)
                    || !runs(clip, "Clip", &Clip)
                    || scalar_const(g, clip.inputs.get(1).copied().flatten()) != Some(0.0)
                    || scalar_const(g, clip.inputs.get(2).copied().flatten()) != Some(6.0)
                {
                    return None;
                }
                let a_out = clip.inputs.first().copied()??;
                let &ai = producer.get(&a_out)?;
                let add = &g.main.nodes[ai];
                if !single(a_out) || !runs(add, "Add", &binary(BinaryOp::Add)) {
                    return None;
                }
                let (p, q) = (add.inputs.first().copied()??, add.inputs.get(1).copied()??);
                let plus3 = (p == x && scalar_const(g, Some(q)) == Some(3.0))
                    || (q == x && scalar_const(g, Some(p)) == Some(3.0));
                (plus3 && is_f32(x) && ai < ci && ci < mi && mi < i).then_some((x, [ai, ci, mi]))
            })
        })();
        if let Some((x, inner)) = found {
            fused.push((i, x, inner));
        }
    }
    let mut drop = Vec::new();
    for &(i, x, inner) in &fused {
        let n = &mut g.main.nodes[i];
        n.op = Op::Kernel(Box::new(Unary {
            op: UnaryOp::HardSwish,
        }));
        n.op_type = "HardSwish".into();
        n.name = format!("{}::hardswish", n.name);
        n.inputs = vec![Some(x)];
        n.out_dtypes = vec![OutDType::Input(0)];
        drop.extend(inner);
    }
    drop.sort_unstable();
    drop.dedup();
    for &p in drop.iter().rev() {
        g.main.nodes.remove(p);
    }
    fused.len()
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
