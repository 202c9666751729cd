//! `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (HardSwish as Paddle exports
//! it, e.g. every PP-OCR backbone) becomes one `HardSwish` node.
use super::matching::*;
use crate::ir::Graph;
use lele_kernels::ops::binary::BinaryOp;
use lele_kernels::ops::unary::{Clip, Unary, UnaryOp};

/// Fuses Paddle's decomposed HardSwish; returns how many were fused.
pub fn fuse_hardswish(g: &mut Graph) -> usize {
    let l = Links::new(g);
    let mut fused = Vec::new();
    for (i, div) in g.main.nodes.iter().enumerate() {
        if !runs(div, &bin(BinaryOp::Div)) || div.inputs.len() != 2 {
            continue;
        }
        let found = (|| {
            let m_out = div.inputs[0]?;
            (scalar_const(g, div.inputs[1]) == Some(6.0)).then_some(())?;
            let (mi, mul) = l.inner(m_out, &bin(BinaryOp::Mul))?;
            let (a, b) = (mul.inputs.first().copied()??, mul.inputs.get(1).copied()??);
            [(a, b), (b, a)].into_iter().find_map(|(x, c_out)| {
                let (ci, clip) = l.inner(c_out, &Clip)?;
                let lo = scalar_const(g, clip.inputs.get(1).copied().flatten());
                let hi = scalar_const(g, clip.inputs.get(2).copied().flatten());
                (lo == Some(0.0) && hi == Some(6.0)).then_some(())?;
                let (ai, add) = l.inner(clip.inputs.first().copied()??, &bin(BinaryOp::Add))?;
                let plus3 = l.with_const(add) == Some((x, 3.0));
                (plus3 && l.is_f32(x)).then(|| Fused {
                    last: i,
                    inputs: vec![Some(x)],
                    inner: vec![ai, ci, mi],
                    kernel: Box::new(Unary {
                        op: UnaryOp::HardSwish,
                    }),
                    op_type: "HardSwish".into(),
                    tag: "hardswish",
                })
            })
        })();
        fused.extend(found);
    }
    rewrite(g, fused)
}
