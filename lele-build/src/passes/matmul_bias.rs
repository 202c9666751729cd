//! `Add(MatMul(x, W), b)` with a constant `W` and bias becomes one
//! `MatMulBias` (`MatMul+Add`): one pass over the output instead of two.
use super::matching::*;
use crate::ir::Graph;
use lele_kernels::DType;
use lele_kernels::ops::matmul::{MatMul, MatMulBias};

/// Fuses `Add(MatMul(a, W), bias)` with constant `W` and a constant bias
/// vector as long as `W`'s last dim (a Linear layer) into one
/// `MatMulBias`, whose product accumulates onto the bias rows; returns how
/// many were fused.
pub fn fuse_matmul_bias(g: &mut Graph) -> usize {
    let l = Links::new(g);
    let mut found = Vec::new();
    for (i, add) in g.main.nodes.iter().enumerate() {
        let Some((p, q)) = Links::add_operands(add) else {
            continue;
        };
        let hit = [(p, q), (q, p)].into_iter().find_map(|(mm_out, c)| {
            let (mi, mm) = l.inner(mm_out, &MatMul)?;
            let (a, w) = (mm.inputs.first().copied()??, mm.inputs.get(1).copied()??);
            let wt = g.values[w].constant.as_ref()?;
            let bias = g.values[c].constant.as_ref()?;
            let n = *wt.dims.last()?;
            let fits = wt.dims.len() >= 2 && bias.dims == [n] && bias.dtype == DType::F32;
            (fits && l.is_f32(a)).then_some((mi, a, w, c))
        });
        if let Some((mi, a, w, c)) = hit {
            found.push(Fused {
                last: i,
                inputs: vec![Some(a), Some(w), Some(c)],
                inner: vec![mi],
                kernel: Box::new(MatMulBias),
                op_type: "MatMul+Add".into(),
                tag: "bias",
            });
        }
    }
    rewrite(g, found)
}
