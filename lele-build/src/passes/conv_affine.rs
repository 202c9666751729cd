//! Convolution fusions.
//!
//! [`fuse_conv_activation`](super::fuse_conv_activation): a Relu, Sigmoid, Swish (SiLU), HardSwish or
//! GELU whose input is a convolution's output (and its only reader) becomes
//! the convolution's epilogue, applied to each block of the output as the
//! GEMM finishes it; after a transposed convolution, to each output once
//! final.
//!
//! [`fold_conv_affine`] folds a per-channel affine that follows a
//! convolution (or a transposed one) into its weights:
//! `Add(Mul(Conv(x, W, B), s), t)` → `Conv(x, W·s, B·s + t)`.
//!
//! Paddle exports every batch norm of PP-OCR this way (a Conv, then a Mul
//! and an Add with `[1, M, 1, 1]` constants); ONNX Runtime folds the same
//! chain at load time. Either step may be missing (`Conv → Mul`,
//! `Conv → Add`). An inference-mode `BatchNormalization` with constant
//! statistics after a convolution (PP-OCR's cls model) is the same affine,
//! `s = scale/√(var + ε)` and `t = B - mean·s` (computed in f64, rounded
//! once). Conditions: `W` (and `B`, if present) and the affine
//! operands are f32 constants, each operand is a scalar or has `M` values
//! along the channel axis and 1 elsewhere, every intermediate has exactly
//! one reader and is not a model output, and the Mul/Add run lele's own
//! kernels. The product is rounded once, in f32.
use super::matching::{kernel_of, readers, runs, use_counts};
use crate::ir::{Graph, Tensor, ValueId};
use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::conv::{Conv, ConvTranspose};
use lele_kernels::ops::norm::BatchNormalization;
use lele_kernels::ops::unary::Activation;

/// The `m` per-channel values of a constant shaped for a rank-`rank` conv
/// output (`None` when it is not per-channel or not f32).
fn per_channel(g: &Graph, v: ValueId, m: usize, rank: usize) -> Option<Vec<f32>> {
    let t = g.values.get(v)?.constant.as_ref()?;
    if t.dtype != DType::F32 || t.dims.len() > rank {
        return None;
    }
    let vals: &[f32] = bytemuck::try_cast_slice(t.bytes()).ok()?;
    if vals.len() == 1 {
        return Some(vec![vals[0]; m]);
    }
    // Right-aligned against the output's dims; the channel axis is 1.
    let lead = rank - t.dims.len();
    let ok = t
        .dims
        .iter()
        .enumerate()
        .all(|(i, &d)| if i + lead == 1 { d == m } else { d == 1 });
    (ok && vals.len() == m).then(|| vals.to_vec())
}

/// The values of a conv bias (f32 constant of `m` elements).
fn bias_vals(g: &Graph, v: ValueId, m: usize) -> Option<Vec<f32>> {
    let t = g.values.get(v)?.constant.as_ref()?;
    let vals: &[f32] = bytemuck::try_cast_slice(t.bytes()).ok()?;
    (t.dtype == DType::F32 && vals.len() == m).then(|| vals.to_vec())
}

/// One per-channel step after a convolution.
enum Affine {
    /// `y = x·s`.
    Mul(Vec<f32>),
    /// `y = x + t`.
    Add(Vec<f32>),
    /// `y = x·s + t` (a batch norm).
    MulAdd(Vec<f32>, Vec<f32>),
}

/// The affine of an inference-mode batch norm over `m` channels reading
/// `v`, when its four statistics are f32 constants of `m` values.
fn batch_norm_affine(g: &Graph, n: &crate::ir::Node, v: ValueId, m: usize) -> Option<Affine> {
    let bn = kernel_of::<BatchNormalization>(n)?;
    if bn.training || n.outputs.len() != 1 {
        return None;
    }
    if n.inputs.first().copied().flatten() != Some(v) || n.inputs.len() != 5 {
        return None;
    }
    let stat = |i: usize| bias_vals(g, n.inputs[i]?, m);
    let (scale, shift, mean, var) = (stat(1)?, stat(2)?, stat(3)?, stat(4)?);
    let mut s = Vec::with_capacity(m);
    let mut t = Vec::with_capacity(m);
    for c in 0..m {
        let k = scale[c] as f64 / (var[c] as f64 + bn.epsilon as f64).sqrt();
        s.push(k as f32);
        t.push((shift[c] as f64 - mean[c] as f64 * k) as f32);
    }
    Some(Affine::MulAdd(s, t))
}

/// Where a convolution's weight holds its output channels.
#[derive(Clone, Copy)]
enum ChannelAxis {
    /// `Conv`: `W` is `[M, C/group, k...]`.
    First,
    /// `ConvTranspose` with `group` groups: `W` is `[C, M/group, k...]`,
    /// input channel `c` feeding output channels `(c / (C/group))·M/group + j`.
    Second { group: usize },
}

impl ChannelAxis {
    /// Output channels of a weight of these dims.
    fn count(self, dims: &[usize]) -> Option<usize> {
        match self {
            ChannelAxis::First => dims.first().copied(),
            // A hostile `group` can make this wrap: then nothing folds.
            ChannelAxis::Second { group } => dims.get(1)?.checked_mul(group),
        }
    }

    /// Multiplies every weight of output channel `c` by `s[c]`.
    fn scale(self, dims: &[usize], w: &mut [f32], s: &[f32]) {
        match self {
            ChannelAxis::First => {
                let per = w.len() / dims[0].max(1);
                for (c, chunk) in w.chunks_exact_mut(per.max(1)).enumerate() {
                    chunk.iter_mut().for_each(|x| *x *= s[c]);
                }
            }
            ChannelAxis::Second { group } => {
                let (mg, taps) = (dims[1], dims[2..].iter().product::<usize>());
                let cg = dims[0] / group.max(1);
                for (ci, row) in w.chunks_exact_mut((mg * taps).max(1)).enumerate() {
                    let base = (ci / cg.max(1)) * mg;
                    for (j, tap) in row.chunks_exact_mut(taps.max(1)).enumerate() {
                        tap.iter_mut().for_each(|x| *x *= s[base + j]);
                    }
                }
            }
        }
    }
}

/// The channel axis of a node's weight when it is a convolution running
/// lele's own kernel (a `Conv`, or a `ConvTranspose` whose group count
/// divides its input channels).
fn output_channels(n: &crate::ir::Node) -> Option<ChannelAxis> {
    // Only a convolution with nothing fused after it yet (an affine after
    // an activation or a residual is not one of its weights').
    if let Some(conv) = kernel_of::<Conv>(n) {
        let plain = conv.activation == Activation::None
            && conv.post_mul == 1.0
            && conv.post_add == 0.0
            && n.inputs.len() <= 3;
        return plain.then_some(ChannelAxis::First);
    }
    let ct = kernel_of::<ConvTranspose>(n)?;
    (ct.group > 0 && ct.activation == Activation::None && n.inputs.len() <= 3)
        .then_some(ChannelAxis::Second { group: ct.group })
}

/// Folds every matching chain; returns how many convolutions absorbed one.
pub fn fold_conv_affine(g: &mut Graph) -> usize {
    let mut folded = 0;
    loop {
        let uses = use_counts(g);
        let reader = readers(g);
        let mut plan = None;
        for (ci, conv) in g.main.nodes.iter().enumerate() {
            let Some(axis) = output_channels(conv) else {
                continue;
            };
            if conv.outputs.len() != 1 || conv.inputs.len() < 2 {
                continue;
            }
            let Some(wv) = conv.inputs[1] else { continue };
            let Some(w) = g.values[wv].constant.as_ref() else {
                continue;
            };
            if w.dtype != DType::F32 || w.dims.len() < 3 {
                continue;
            }
            if let ChannelAxis::Second { group } = axis
                && !w.dims[0].is_multiple_of(group)
            {
                continue;
            }
            let Some(m) = axis.count(&w.dims) else {
                continue;
            };
            let rank = w.dims.len();
            let bias = conv.inputs.get(2).copied().flatten();
            if bias.is_some_and(|b| bias_vals(g, b, m).is_none()) {
                continue;
            }
            // The step reading `v` if it is a constant Mul/Add by a
            // per-channel operand or a batch norm: (node, affine).
            let step = |v: ValueId| {
                if uses.get(&v) != Some(&1) || g.outputs.contains(&v) {
                    return None;
                }
                let &ni = reader.get(&v)?;
                let n = &g.main.nodes[ni];
                if let Some(a) = batch_norm_affine(g, n, v, m) {
                    return Some((ni, a));
                }
                let op = [BinaryOp::Mul, BinaryOp::Add]
                    .into_iter()
                    .find(|&op| runs(n, &Binary { op }))?;
                let (a, b) = (n.inputs.first().copied()??, n.inputs.get(1).copied()??);
                let other = if a == v { b } else { a };
                if a == b || n.outputs.len() != 1 {
                    return None;
                }
                let vals = per_channel(g, other, m, rank)?;
                Some((
                    ni,
                    if op == BinaryOp::Mul {
                        Affine::Mul(vals)
                    } else {
                        Affine::Add(vals)
                    },
                ))
            };
            let first = step(conv.outputs[0]);
            let Some((n1, a1)) = first else {
                continue;
            };
            let second = if matches!(a1, Affine::Mul(_)) {
                step(g.main.nodes[n1].outputs[0]).filter(|s| matches!(s.1, Affine::Add(_)))
            } else {
                None
            };
            plan = Some((ci, m, axis, (n1, a1), second));
            break;
        }
        let Some((ci, m, axis, first, second)) = plan else {
            return folded;
        };
        let conv = &g.main.nodes[ci];
        let (wv, bias) = (conv.inputs[1], conv.inputs.get(2).copied().flatten());
        let Some(w) = wv.and_then(|v| g.values[v].constant.clone()) else {
            return folded;
        };
        let w_vals: &[f32] = bytemuck::cast_slice(w.bytes());
        let mut new_w = w_vals.to_vec();
        let mut new_b = match bias.and_then(|b| bias_vals(g, b, m)) {
            Some(b) => b,
            None => vec![0.0; m],
        };
        let mut last = first.0;
        let mut gone = Vec::new();
        for (ni, affine) in std::iter::once(first).chain(second) {
            last = ni;
            gone.push(ni);
            let (mul, add) = match &affine {
                Affine::Mul(s) => (Some(s), None),
                Affine::Add(t) => (None, Some(t)),
                Affine::MulAdd(s, t) => (Some(s), Some(t)),
            };
            if let Some(s) = mul {
                axis.scale(&w.dims, &mut new_w, s);
            }
            for c in 0..m {
                if let Some(s) = mul {
                    new_b[c] *= s[c];
                }
                if let Some(t) = add {
                    new_b[c] += t[c];
                }
            }
        }
        let name = g.main.nodes[ci].name.clone();
        let (Some(wt), Some(bt)) = (
            Tensor::from_values(&w.dims, &new_w),
            Tensor::from_values(&[m], &new_b),
        ) else {
            return folded;
        };
        let wid = g.add_constant(&format!("{name}::folded_w"), wt);
        let bid = g.add_constant(&format!("{name}::folded_b"), bt);
        // The conv now produces the last step's output (same value id, so
        // readers are untouched); the Mul/Add nodes go.
        let out = g.main.nodes[last].outputs[0];
        let conv = &mut g.main.nodes[ci];
        conv.inputs.resize(3, None);
        conv.inputs[1] = Some(wid);
        conv.inputs[2] = Some(bid);
        conv.outputs = vec![out];
        conv.name = format!("{name}::affine");
        gone.sort_unstable();
        for &i in gone.iter().rev() {
            g.main.nodes.remove(i);
        }
        folded += 1;
    }
}
