//! `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)` (GELU as PyTorch and Paddle
//! export it: MiniLM, PP-OCRv6) becomes one `Gelu` node.
use super::matching::*;
use crate::ir::Graph;
use lele_kernels::ops::binary::BinaryOp;
use lele_kernels::ops::unary::{GeluErf, Unary, UnaryOp};

/// Fuses the erf form of GELU as PyTorch and Paddle export it,
/// `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)` (operands in either order;
/// `Mul(x, 1/√2)` for the Div), into one `Gelu`; returns how many.
pub fn fuse_gelu(g: &mut Graph) -> usize {
    let l = Links::new(g);
    let near = |v: f64, want: f64| (v - want).abs() <= 1e-6 * want;
    let mut fused = Vec::new();
    for (i, half) in g.main.nodes.iter().enumerate() {
        if !runs(half, &bin(BinaryOp::Mul)) {
            continue;
        }
        let found = (|| {
            let (m_out, c) = l.with_const(half)?;
            (c == 0.5).then_some(())?;
            let (mi, mul) = l.inner(m_out, &bin(BinaryOp::Mul))?;
            let (a, b) = (mul.inputs.first().copied()??, mul.inputs.get(1).copied()??);
            [(a, b), (b, a)].into_iter().find_map(|(x, add_out)| {
                let (ai, add) = l.inner(add_out, &bin(BinaryOp::Add))?;
                let (e_out, one) = l.with_const(add)?;
                (one == 1.0).then_some(())?;
                let (ei, erf) = l.inner(e_out, &Unary { op: UnaryOp::Erf })?;
                let d_out = erf.inputs.first().copied()??;
                let (di, scale) = l
                    .inner(d_out, &bin(BinaryOp::Div))
                    .filter(|(_, n)| {
                        scalar_const(g, n.inputs.get(1).copied().flatten())
                            .is_some_and(|c| near(c, core::f64::consts::SQRT_2))
                    })
                    .or_else(|| {
                        l.inner(d_out, &bin(BinaryOp::Mul)).filter(|(_, n)| {
                            l.with_const(n)
                                .is_some_and(|(_, c)| near(c, core::f64::consts::FRAC_1_SQRT_2))
                        })
                    })?;
                // Div must divide x (not the constant); Mul either way.
                let arg_is_x = Links::other_than(scale, x).is_some()
                    && (runs(scale, &bin(BinaryOp::Mul))
                        || scale.inputs.first().copied().flatten() == Some(x));
                (arg_is_x && l.is_f32(x)).then(|| Fused {
                    last: i,
                    inputs: vec![Some(x)],
                    inner: vec![di, ei, ai, mi],
                    kernel: Box::new(GeluErf {}),
                    op_type: "Gelu".into(),
                    tag: "gelu",
                })
            })
        })();
        fused.extend(found);
    }
    rewrite(g, fused)
}
