//! Dead-code elimination: nodes none of whose outputs is read (by a node,
//! a branch's results or the model's outputs) are removed.
use crate::ir::{Block, Graph, Op, ValueId};
use std::collections::HashSet;

/// Removes nodes none of whose outputs are needed by a model output.
pub fn eliminate_dead_code(g: &mut Graph) {
    let mut live: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut main = std::mem::take(&mut g.main);
    dce_block(&mut main, &mut live);
    g.main = main;
}

fn dce_block(b: &mut Block, live: &mut HashSet<ValueId>) {
    live.extend(b.outputs.iter().copied());
    let mut kept = Vec::with_capacity(b.nodes.len());
    for mut n in std::mem::take(&mut b.nodes).into_iter().rev() {
        if !n.outputs.iter().any(|o| live.contains(o)) {
            continue;
        }
        if let Op::If {
            then_branch,
            else_branch,
        } = &mut n.op
        {
            dce_block(then_branch, live);
            dce_block(else_branch, live);
        }
        live.extend(n.inputs.iter().flatten().copied());
        kept.push(n);
    }
    kept.reverse();
    b.nodes = kept;
}
