//! Built-in fusions that every compilation applies.
//!
//! - `Mul(x, Sigmoid(x))` (SiLU, as exported by PyTorch for YOLO and many
//!   others) becomes one `Swish { alpha: 1 }` node.
//! - `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (HardSwish as Paddle exports
//!   it, e.g. every PP-OCR backbone) becomes one `HardSwish` node.
//! - LayerNorm decomposed into `ReduceMean`, `Sub`, `Pow`, `ReduceMean`,
//!   `Add`, `Sqrt`, `Div` (+ scale/bias) becomes one `LayerNormalization`.
//! - `Add(MatMul(x, W), b)` with constant `W` and bias becomes one
//!   `MatMulBias` (`MatMul+Add`).
//! - `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)` (GELU as PyTorch and
//!   Paddle export it: MiniLM, PP-OCRv6) becomes one `Gelu` node.
//! - `Add(y, r)` where `y` comes from a convolution (with whatever it
//!   fused already) or a `MatMulBias` and `r` has `y`'s shape (a residual
//!   connection) becomes that node with `r` as an extra input, added as
//!   each block of the output is finished.
//!
//! One pass over the tensor instead of two or four, and no intermediates.
//! Every inner output must have exactly one reader and not be a model
//! output, and every matched node must run lele's own kernel (a user
//! override is never fused away).
use std::collections::HashMap;

use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::conv::Conv;
use lele_kernels::ops::layout::Identity;
use lele_kernels::ops::matmul::{MatMul, MatMulBias};
use lele_kernels::ops::norm::LayerNormalization;
use lele_kernels::ops::reduce::{Reduce, ReduceOp};
use lele_kernels::ops::unary::{Clip, GeluErf, Swish, Unary, UnaryOp};
use lele_kernels::{DType, Shape};

use crate::ir::{Graph, Node, Op, OutDType, Tensor, ValueId};

/// Whether `n` runs exactly lele's own kernel `own` (its type and
/// parameters: the node's op-type label is for display only).
pub(crate) fn runs<K: PartialEq + 'static>(n: &Node, own: &K) -> bool {
    kernel_of::<K>(n) == Some(own)
}

/// The node's kernel (or view) when it is lele's own `K` (not a user
/// override).
pub(crate) fn kernel_of<K: 'static>(n: &Node) -> Option<&K> {
    let (Op::Kernel(k) | Op::View(k)) = &n.op else {
        return None;
    };
    let any: &dyn std::any::Any = k.as_ref();
    any.downcast_ref::<K>()
}

/// The node reading each value of the main block (the last one, when
/// several do; callers check the value has one reader).
pub(crate) fn readers(g: &Graph) -> HashMap<ValueId, usize> {
    let mut reader = HashMap::new();
    for (i, n) in g.main.nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            reader.insert(*v, i);
        }
    }
    reader
}

/// Whether the node runs lele's own `Sigmoid` kernel (not a user override).
fn is_sigmoid(n: &Node) -> bool {
    runs(
        n,
        &Unary {
            op: UnaryOp::Sigmoid,
        },
    )
}

/// Readers of each value (model outputs and the values an `If` branch
/// returns, which may come from the enclosing block, count as readers).
pub(crate) fn use_counts(g: &Graph) -> HashMap<ValueId, usize> {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    g.for_each_node(&mut |n| {
        for v in n.inputs.iter().flatten() {
            *uses.entry(*v).or_default() += 1;
        }
        if let Op::If {
            then_branch,
            else_branch,
        } = &n.op
        {
            for v in then_branch.outputs.iter().chain(&else_branch.outputs) {
                *uses.entry(*v).or_default() += 1;
            }
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

/// Producers and reader counts of the main block, for chain matching.
pub(super) struct Links<'g> {
    g: &'g Graph,
    uses: HashMap<ValueId, usize>,
    producer: HashMap<ValueId, usize>,
}

impl<'g> Links<'g> {
    pub(super) fn new(g: &'g Graph) -> Self {
        let mut producer = HashMap::new();
        for (i, n) in g.main.nodes.iter().enumerate() {
            for &o in &n.outputs {
                producer.insert(o, i);
            }
        }
        Links {
            g,
            uses: use_counts(g),
            producer,
        }
    }

    /// The node producing `v`, when `v` has exactly one reader and the node
    /// runs exactly `own`.
    pub(super) fn inner<K: PartialEq + 'static>(
        &self,
        v: ValueId,
        own: &K,
    ) -> Option<(usize, &'g Node)> {
        let &i = self.producer.get(&v)?;
        let n = &self.g.main.nodes[i];
        (self.uses.get(&v) == Some(&1) && runs(n, own)).then_some((i, n))
    }

    /// The node producing `v` (any op), when `v` has exactly one reader.
    pub(super) fn inner_any(&self, v: ValueId) -> Option<(usize, &'g Node)> {
        let &i = self.producer.get(&v)?;
        (self.uses.get(&v) == Some(&1)).then_some((i, &self.g.main.nodes[i]))
    }

    /// The operands of a two-input node as `(other, scalar)` when one of
    /// them is a one-element constant (tried in both orders).
    pub(super) fn with_const(&self, n: &Node) -> Option<(ValueId, f64)> {
        let (a, b) = (n.inputs.first().copied()??, n.inputs.get(1).copied()??);
        if n.inputs.len() != 2 {
            return None;
        }
        match (scalar_const(self.g, Some(b)), scalar_const(self.g, Some(a))) {
            (Some(c), _) => Some((a, c)),
            (None, Some(c)) => Some((b, c)),
            _ => None,
        }
    }

    /// The operands of a two-input node with `x` as one of them: the other.
    fn other_than(n: &Node, x: ValueId) -> Option<ValueId> {
        match (n.inputs.first().copied()?, n.inputs.get(1).copied()?) {
            (Some(a), Some(b)) if a == x => Some(b),
            (Some(a), Some(b)) if b == x => Some(a),
            _ => None,
        }
    }

    /// The two operands of `n` when it is an `Add` running lele's own
    /// kernel with both inputs present.
    pub(super) fn add_operands(n: &Node) -> Option<(ValueId, ValueId)> {
        if !runs(n, &bin(BinaryOp::Add)) {
            return None;
        }
        match n.inputs.as_slice() {
            &[Some(p), Some(q)] => Some((p, q)),
            _ => None,
        }
    }

    pub(super) fn is_f32(&self, v: ValueId) -> bool {
        self.g.values[v].dtype == Some(DType::F32)
    }
}

/// One fused chain: node `last` becomes `op` applied to `inputs`; the
/// `inner` nodes go.
pub(super) struct Fused {
    pub(super) last: usize,
    pub(super) inputs: Vec<Option<ValueId>>,
    pub(super) inner: Vec<usize>,
    pub(super) kernel: Box<dyn crate::ops::OpKernel>,
    pub(super) op_type: String,
    pub(super) tag: &'static str,
}

pub(super) fn rewrite(g: &mut Graph, fused: Vec<Fused>) -> usize {
    let mut drop = Vec::new();
    let count = fused.len();
    for f in fused {
        let n = &mut g.main.nodes[f.last];
        n.op = Op::Kernel(f.kernel);
        n.op_type = f.op_type;
        n.name = format!("{}::{}", n.name, f.tag);
        n.inputs = f.inputs;
        n.out_dtypes = vec![OutDType::Input(0)];
        drop.extend(f.inner);
    }
    drop.sort_unstable();
    drop.dedup();
    for &p in drop.iter().rev() {
        g.main.nodes.remove(p);
    }
    count
}

pub(super) const fn bin(op: BinaryOp) -> Binary {
    Binary { op }
}

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

/// Fuses LayerNorm as PyTorch and Paddle export it when it is not an
/// operator of their opset — `d = Sub(x, ReduceMean(x))`, `Div(d,
/// Sqrt(Add(ReduceMean(Pow(d, 2)), eps)))`, both means over the last axis
/// with kept dims, then optionally `Mul` by a constant scale and `Add` of a
/// constant bias — into one `LayerNormalization` (axis -1). Every inner
/// value must be read only inside the chain (`d` by its `Pow` and `Div`).
/// Returns how many were fused.
pub fn fuse_layer_norm(g: &mut Graph) -> usize {
    let l = Links::new(g);
    let mean = Reduce {
        op: ReduceOp::Mean,
        keepdims: true,
        noop_with_empty_axes: false,
    };
    // A ReduceMean over the last axis only.
    let last_axis_mean = |v: ValueId| -> Option<(usize, &Node)> {
        let (i, n) = l.inner(v, &mean)?;
        let axes = g
            .values
            .get(n.inputs.get(1).copied()??)?
            .constant
            .as_ref()?;
        (axes.to_f64s()? == [-1.0]).then_some((i, n))
    };
    let reader = readers(g);
    // (last node, x, epsilon, inner nodes, scale, bias)
    type Found = (
        usize,
        ValueId,
        f32,
        Vec<usize>,
        Option<ValueId>,
        Option<ValueId>,
    );
    let mut found_all: Vec<Found> = Vec::new();
    for (i, div) in g.main.nodes.iter().enumerate() {
        if !runs(div, &bin(BinaryOp::Div)) || div.inputs.len() != 2 {
            continue;
        }
        let found = (|| {
            let (d, s) = (div.inputs[0]?, div.inputs[1]?);
            let (si, sqrt) = l.inner(s, &Unary { op: UnaryOp::Sqrt })?;
            let (ai, add) = l.inner(sqrt.inputs.first().copied()??, &bin(BinaryOp::Add))?;
            let (v, eps) = l.with_const(add)?;
            let (vi, var) = last_axis_mean(v)?;
            let (pi, pow) = l.inner(var.inputs.first().copied()??, &bin(BinaryOp::Pow))?;
            let squares_d = pow.inputs.first().copied().flatten() == Some(d)
                && scalar_const(g, pow.inputs.get(1).copied().flatten()) == Some(2.0);
            // d: read by the Pow and the Div only.
            let &di = l.producer.get(&d)?;
            let sub = &g.main.nodes[di];
            let d_inner = l.uses.get(&d) == Some(&2) && runs(sub, &bin(BinaryOp::Sub));
            (squares_d && d_inner).then_some(())?;
            let (x, m) = (sub.inputs.first().copied()??, sub.inputs.get(1).copied()??);
            let (mi, mn) = last_axis_mean(m)?;
            (mn.inputs.first().copied()? == Some(x) && l.is_f32(x) && eps > 0.0).then_some(())?;
            Some((x, eps as f32, vec![mi, di, pi, vi, ai, si]))
        })();
        let Some((x, eps, mut inner)) = found else {
            continue;
        };
        // The optional constant scale, then bias.
        let mut last = i;
        let (mut scale, mut bias) = (None, None);
        let affine = |from: usize, op: BinaryOp| -> Option<(usize, ValueId)> {
            let out = *g.main.nodes[from].outputs.first()?;
            let &ri = reader.get(&out)?;
            let n = &g.main.nodes[ri];
            (l.uses.get(&out) == Some(&1) && runs(n, &bin(op))).then_some(())?;
            let c = Links::other_than(n, out)?;
            let t = g.values[c].constant.as_ref()?;
            // Along the last axis only (leading dims 1).
            let last_only = t
                .dims
                .split_last()
                .is_none_or(|(_, rest)| rest.iter().all(|&d| d == 1));
            (t.dtype == DType::F32 && last_only).then_some((ri, c))
        };
        if let Some((mi, c)) = affine(last, BinaryOp::Mul) {
            inner.push(last);
            (last, scale) = (mi, Some(c));
            if let Some((ai, c)) = affine(last, BinaryOp::Add) {
                inner.push(last);
                (last, bias) = (ai, Some(c));
            }
        }
        found_all.push((last, x, eps, inner, scale, bias));
    }
    // The scale input is required: a one-element 1 when the model has none.
    let mut fused = Vec::new();
    for (last, x, eps, inner, scale, bias) in found_all {
        let scale = match scale {
            Some(s) => s,
            None => match Tensor::from_values::<f32>(&[1], &[1.0]) {
                Some(t) => g.add_constant("layernorm_unit_scale", t),
                None => continue,
            },
        };
        let mut inputs = vec![Some(x), Some(scale)];
        inputs.extend(bias.map(Some));
        fused.push(Fused {
            last,
            inputs,
            inner,
            kernel: Box::new(LayerNormalization {
                axis: -1,
                epsilon: eps,
            }),
            op_type: "LayerNormalization".into(),
            tag: "layernorm",
        });
    }
    rewrite(g, fused)
}

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

/// Fuses residual adds, `Add(y, r)` with `y` produced by a convolution or
/// a `MatMulBias` (read only by the `Add`) and `y` and `r` of one shape at
/// every sizing point in `shapes` (which must be all of them: no
/// broadcasting in the `Add` at any input size the model accepts), into
/// the producer, which takes `r` as its last input; returns how many.
pub fn fuse_residual_add(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let same_shape = |a: ValueId, b: ValueId| {
        !shapes.is_empty()
            && shapes.iter().all(|s| match (s.get(&a), s.get(&b)) {
                (Some(x), Some(y)) => x == y,
                _ => false,
            })
    };
    let l = Links::new(g);
    let mut found = Vec::new();
    for (i, add) in g.main.nodes.iter().enumerate() {
        let Some((p, q)) = Links::add_operands(add) else {
            continue;
        };
        if p == q || !l.is_f32(p) {
            continue;
        }
        let hit = [(p, q), (q, p)].into_iter().find_map(|(y, r)| {
            if !same_shape(y, r) {
                return None;
            }
            // Through `Identity` views (Paddle exports put them between a
            // convolution and its residual add).
            let (mut v, mut inner) = (y, Vec::new());
            let (pi, prod) = loop {
                let &pi = l.producer.get(&v)?;
                let prod = &g.main.nodes[pi];
                if l.uses.get(&v) != Some(&1) || prod.outputs.len() != 1 {
                    return None;
                }
                match (kernel_of::<Identity>(prod), prod.inputs.as_slice()) {
                    (Some(_), &[Some(x)]) => {
                        inner.push(pi);
                        v = x;
                    }
                    _ => break (pi, prod),
                }
            };
            inner.push(pi);
            let kernel: Box<dyn crate::ops::OpKernel> = if let Some(conv) = kernel_of::<Conv>(prod)
            {
                (prod.inputs.len() <= 3).then_some(())?;
                Box::new(*conv)
            } else if runs(prod, &MatMulBias) && prod.inputs.len() == 3 {
                Box::new(MatMulBias)
            } else {
                return None;
            };
            let mut inputs = prod.inputs.clone();
            // A convolution without bias keeps an empty bias slot.
            inputs.resize(inputs.len().max(3), None);
            inputs.push(Some(r));
            Some(Fused {
                last: i,
                inputs,
                inner,
                kernel,
                op_type: format!("{}+Add", prod.op_type),
                tag: "residual",
            })
        });
        found.extend(hit);
    }
    rewrite(g, found)
}
