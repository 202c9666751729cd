//! A scalar `Mul` and/or `Add` after a convolution (and its fused
//! activation) joins it as its `post_mul` / `post_add` (PP-OCR's learnable
//! affine after each HardSwish).
use super::matching::{kernel_of, readers, runs, use_counts};
use crate::ir::{Graph, Op, ValueId};
use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::conv::Conv;

/// The value of a one-element f32 constant of rank at most `rank`.
fn scalar_f32(g: &Graph, v: ValueId, rank: usize) -> Option<f32> {
    let t = g.values.get(v)?.constant.as_ref()?;
    let vals: &[f32] = bytemuck::try_cast_slice(t.bytes()).ok()?;
    match vals {
        [x] if t.dtype == DType::F32 && t.dims.len() <= rank => Some(*x),
        _ => None,
    }
}

/// One fused scalar step: (node index, Mul or Add, the scalar).
type Step = (usize, BinaryOp, f32);

/// Fuses a scalar `Mul` and/or `Add` after a convolution (and its fused
/// activation) into the convolution's `post_mul`/`post_add` (PP-OCR's
/// learnable affine after each HardSwish); returns how many convolutions
/// took one.
pub fn fuse_conv_scalar_affine(g: &mut Graph) -> usize {
    let mut fused = 0;
    loop {
        let uses = use_counts(g);
        let reader = readers(g);
        // The conv index and the (node, op, scalar) steps of the first
        // chain found.
        let mut plan: Option<(usize, Vec<Step>)> = None;
        for (ci, n) in g.main.nodes.iter().enumerate() {
            let Some(conv) = kernel_of::<Conv>(n) else {
                continue;
            };
            if conv.post_mul != 1.0 || conv.post_add != 0.0 || n.outputs.len() != 1 {
                continue;
            }
            let rank = n
                .inputs
                .get(1)
                .copied()
                .flatten()
                .and_then(|w| g.values[w].constant.as_ref().map(|t| t.dims.len()));
            let Some(rank) = rank else { continue };
            let mut steps = Vec::new();
            let mut v = n.outputs[0];
            for want in [BinaryOp::Mul, BinaryOp::Add] {
                if uses.get(&v) != Some(&1)
                    || g.outputs.contains(&v)
                    || g.values[v].dtype != Some(DType::F32)
                {
                    break;
                }
                let Some(&ni) = reader.get(&v) else { break };
                let node = &g.main.nodes[ni];
                if !runs(node, &Binary { op: want }) || node.outputs.len() != 1 {
                    continue;
                }
                let (Some(Some(a)), Some(Some(b))) = (node.inputs.first(), node.inputs.get(1))
                else {
                    break;
                };
                let other = if *a == v { *b } else { *a };
                if *a == *b {
                    break;
                }
                let Some(x) = scalar_f32(g, other, rank) else {
                    break;
                };
                steps.push((ni, want, x));
                v = node.outputs[0];
            }
            if !steps.is_empty() {
                plan = Some((ci, steps));
                break;
            }
        }
        let Some((ci, steps)) = plan else {
            return fused;
        };
        let Some(&conv) = kernel_of::<Conv>(&g.main.nodes[ci]) else {
            return fused;
        };
        let (mut post_mul, mut post_add) = (1.0, 0.0);
        for &(_, op, x) in &steps {
            if op == BinaryOp::Mul {
                post_mul = x;
            } else {
                post_add = x;
            }
        }
        let last = steps.last().map(|s| s.0).unwrap_or(ci);
        let out = g.main.nodes[last].outputs[0];
        let n = &mut g.main.nodes[ci];
        n.op = Op::Kernel(Box::new(Conv {
            post_mul,
            post_add,
            ..conv
        }));
        n.outputs = vec![out];
        if !n.op_type.ends_with("+Affine") {
            n.op_type.push_str("+Affine");
        }
        let mut drop: Vec<usize> = steps.iter().map(|s| s.0).collect();
        drop.sort_unstable();
        for &i in drop.iter().rev() {
            g.main.nodes.remove(i);
        }
        fused += 1;
    }
}
