//! Decomposed multi-head attention fused into one [`MultiHeadAttention`].
//!
//! Transformer exports (BERT, MiniLM, many encoders) write attention as
//!
//! ```text
//! Q4 = Transpose(Qr, [0,2,1,3])   Kt = Transpose(Kr, [0,2,3,1])   V4 = Transpose(Vr, [0,2,1,3])
//! S = MatMul(Q4, Kt);  X = Div(S, c) | Mul(S, c);  X = Add(X, mask);  P = Softmax(X, -1)
//! Y = Transpose(MatMul(P, V4), [0,2,1,3])
//! ```
//!
//! with `Qr`, `Kr`, `Vr` the `[B, S, H, D]` reshapes of the Linear layers'
//! outputs. The whole chain becomes `MultiHeadAttention(Qr, Kr, Vr, mask)`,
//! which reads the heads in place: no transposed copies and no
//! `[B, H, S, T]` scores in memory. The scale and the mask are optional.
use std::collections::HashMap;

use lele_kernels::Shape;
use lele_kernels::ops::binary::BinaryOp;
use lele_kernels::ops::matmul::MatMul;
use lele_kernels::ops::mha::MultiHeadAttention;
use lele_kernels::ops::softmax::Softmax;
use lele_kernels::ops::transpose::Transpose;

use super::matching::{Fused, Links, bin, kernel_of, rewrite, runs};
use crate::ir::{Graph, ValueId};

/// The input of a `Transpose` with exactly `perm` producing `v` (read only
/// by the chain), and the node's index.
fn transposed_from(l: &Links<'_>, v: ValueId, perm: &[i64]) -> Option<(usize, ValueId)> {
    let (i, n) = l.inner_any(v)?;
    let t = kernel_of::<Transpose>(n)?;
    (t.perm.as_slice() == perm && n.inputs.len() == 1).then_some((i, n.inputs[0]?))
}

/// `x` as `MatMul(a, b)` optionally scaled by a constant (`Div(·, c)` or
/// `Mul` by `c` in either order), each value read once: the nodes, the
/// scale, the product's value and its node.
fn scaled_scores<'g>(
    l: &Links<'g>,
    x: ValueId,
) -> Option<(Vec<usize>, f32, ValueId, &'g crate::ir::Node)> {
    let mut nodes = Vec::new();
    let (mut x, mut scale) = (x, 1.0f32);
    let (i, n) = l.inner_any(x)?;
    let div = runs(n, &bin(BinaryOp::Div));
    if div || runs(n, &bin(BinaryOp::Mul)) {
        let (s, c) = l.with_const(n)?;
        // `c / S` is no scale of S.
        if div && n.inputs.first().copied().flatten() != Some(s) {
            return None;
        }
        scale = if div { 1.0 / c as f32 } else { c as f32 };
        if !scale.is_finite() {
            return None;
        }
        nodes.push(i);
        x = s;
    }
    let (qk_i, qk) = l.inner(x, &MatMul)?;
    nodes.push(qk_i);
    Some((nodes, scale, x, qk))
}

/// Whether the shapes at every sizing point are those of attention over
/// `[B, S, H, D]` inputs: `K` and `V` of the same batch, length and heads,
/// the scores `[B, H, S, T]` and the masked scores no larger.
fn shapes_fit(
    shapes: &[HashMap<ValueId, Shape>],
    (q, k, v): (ValueId, ValueId, ValueId),
    scores: ValueId,
    masked: ValueId,
) -> bool {
    !shapes.is_empty()
        && shapes.iter().all(|s| {
            let (Some(q), Some(k), Some(v), Some(sc), Some(m)) = (
                s.get(&q),
                s.get(&k),
                s.get(&v),
                s.get(&scores),
                s.get(&masked),
            ) else {
                return false;
            };
            let (q, k, v) = (q.dims(), k.dims(), v.dims());
            q.len() == 4
                && k.len() == 4
                && v.len() == 4
                && k[0] == q[0]
                && v[0] == q[0]
                && k[2] == q[2]
                && v[2] == q[2]
                && k[3] == q[3]
                && v[1] == k[1]
                && sc.dims() == [q[0], q[2], q[1], k[1]]
                && m == sc
        })
}

/// Fuses every decomposed attention of the main block whose shapes fit at
/// all sizing points (`shapes`); returns how many.
pub fn fuse_attention(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let l = Links::new(g);
    let mut found = Vec::new();
    for (last, out) in g.main.nodes.iter().enumerate() {
        let hit = (|| {
            // Y = Transpose(O, [0, 2, 1, 3]) on O = MatMul(P, V4).
            let t = kernel_of::<Transpose>(out)?;
            if t.perm.as_slice() != [0, 2, 1, 3] {
                return None;
            }
            let (pv_i, pv) = l.inner(out.inputs.first().copied()??, &MatMul)?;
            let (p, v4) = (pv.inputs.first().copied()??, pv.inputs.get(1).copied()??);
            let (sm_i, sm) = l.inner_any(p)?;
            let axis = kernel_of::<Softmax>(sm)?.axis;
            if !(axis == -1 || axis == 3) {
                return None;
            }
            // Optional mask (either operand of the Add), then the scores.
            let x = sm.inputs.first().copied()??;
            let masked = x;
            let mut inner = vec![pv_i, sm_i];
            let mut mask = None;
            let mut chain = scaled_scores(&l, x);
            if chain.is_none()
                && let Some((i, n)) = l.inner_any(x)
                && let Some((a, b)) = Links::add_operands(n)
            {
                let (c, m) = match scaled_scores(&l, a) {
                    Some(c) => (c, b),
                    None => (scaled_scores(&l, b)?, a),
                };
                if !l.is_f32(m) {
                    return None;
                }
                inner.push(i);
                mask = Some(m);
                chain = Some(c);
            }
            let (chain_nodes, scale, scores, qk) = chain?;
            inner.extend(chain_nodes);
            let (q4, kt) = (qk.inputs.first().copied()??, qk.inputs.get(1).copied()??);
            let (qt_i, qr) = transposed_from(&l, q4, &[0, 2, 1, 3])?;
            let (kt_i, kr) = transposed_from(&l, kt, &[0, 2, 3, 1])?;
            let (vt_i, vr) = transposed_from(&l, v4, &[0, 2, 1, 3])?;
            if ![qr, kr, vr].iter().all(|&v| l.is_f32(v))
                || !shapes_fit(shapes, (qr, kr, vr), scores, masked)
            {
                return None;
            }
            inner.extend([qt_i, kt_i, vt_i]);
            let mut inputs = vec![Some(qr), Some(kr), Some(vr)];
            inputs.extend(mask.map(Some));
            Some(Fused {
                last,
                inputs,
                inner,
                kernel: Box::new(MultiHeadAttention { scale }),
                op_type: "Attention".into(),
                tag: "attention",
            })
        })();
        found.extend(hit);
    }
    rewrite(g, found)
}
