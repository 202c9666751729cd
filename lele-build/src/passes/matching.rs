//! What the fusion passes share: finding lele's own kernels by type
//! ([`kernel_of`], [`runs`]), counting readers, following single-reader
//! chains ([`Links`]) and rewriting a matched chain into one node
//! ([`rewrite`], [`fuse_into_producer`]).
//!
//! A pass matches the kernel a node runs (its type and parameters), never
//! the node's op-type label, which is for display and profiles. Every
//! inner output of a chain must have exactly one reader and not be a model
//! output, and every matched node must run lele's own kernel (a user
//! override is never fused away).
use std::collections::HashMap;

use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::unary::{Activation, GeluErf, Swish, Unary, UnaryOp};

use crate::ir::{Graph, Node, Op, OutDType, ValueId};

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
pub(super) fn scalar_const(g: &Graph, v: Option<ValueId>) -> Option<f64> {
    let t = g.values.get(v?)?.constant.as_ref()?;
    match t.to_f64s()?.as_slice() {
        [x] => Some(*x),
        _ => None,
    }
}

/// Producers and reader counts of the main block, for chain matching.
pub(super) struct Links<'g> {
    g: &'g Graph,
    /// Readers of each value ([`use_counts`]).
    pub(super) uses: HashMap<ValueId, usize>,
    /// The index of the node producing each value.
    pub(super) producer: HashMap<ValueId, usize>,
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
    pub(super) fn other_than(n: &Node, x: ValueId) -> Option<ValueId> {
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

/// The fused activation a node applies, when it is one of lele's own
/// Relu / Sigmoid / Swish(alpha 1) / HardSwish / GELU (erf form: ONNX
/// `Gelu` or the fused subgraph) kernels on f32.
fn activation_of(n: &crate::ir::Node) -> Option<Activation> {
    if let Some(u) = kernel_of::<Unary>(n) {
        return match u.op {
            UnaryOp::Relu => Some(Activation::Relu),
            UnaryOp::Sigmoid => Some(Activation::Sigmoid),
            UnaryOp::HardSwish => Some(Activation::HardSwish),
            UnaryOp::Gelu => Some(Activation::Gelu),
            _ => None,
        };
    }
    if kernel_of::<GeluErf>(n).is_some() {
        return Some(Activation::Gelu);
    }
    kernel_of::<Swish>(n)
        .filter(|s| s.alpha == 1.0)
        .map(|_| Activation::Swish)
}

/// The pattern of the activation fusions: a node running lele's own `K`
/// that `takes` it (given the node and its kernel), whose single f32
/// output is read only by a one-input activation node ([`activation_of`])
/// and is not a model output, becomes the kernel `with` builds, producing
/// the activation's output under the op type `op_type` makes of the old
/// one; the activation node goes. Returns how many.
pub(crate) fn fuse_following_activation<K: Copy + 'static>(
    g: &mut Graph,
    takes: impl Fn(&crate::ir::Node, &K) -> bool,
    with: impl Fn(K, Activation) -> Box<dyn crate::ops::OpKernel>,
    op_type: impl Fn(&str, Activation) -> String,
) -> usize {
    fuse_into_producer(g, takes, |n, _| activation_of(n), with, op_type)
}

/// The pattern of the fusions into a producer: a node running lele's own
/// `K` that `takes` it, whose single f32 output `out` is not a model output
/// and is read only by a node of one input and one output that `follower`
/// accepts (given that node and `out`, returning what to fuse), becomes the
/// kernel `with` builds, producing the follower's output under the op type
/// `op_type` makes of the old one; the follower goes. Returns how many.
pub(crate) fn fuse_into_producer<K: Copy + 'static, T: Copy>(
    g: &mut Graph,
    takes: impl Fn(&crate::ir::Node, &K) -> bool,
    follower: impl Fn(&crate::ir::Node, ValueId) -> Option<T>,
    with: impl Fn(K, T) -> Box<dyn crate::ops::OpKernel>,
    op_type: impl Fn(&str, T) -> String,
) -> usize {
    let uses = use_counts(g);
    let reader = readers(g);
    let mut fused: Vec<(usize, usize, K, T)> = Vec::new();
    for (pi, n) in g.main.nodes.iter().enumerate() {
        let Some(&kernel) = kernel_of::<K>(n).filter(|k| takes(n, k)) else {
            continue;
        };
        let Some(&out) = n.outputs.first() else {
            continue;
        };
        if uses.get(&out) != Some(&1)
            || g.outputs.contains(&out)
            || g.values[out].dtype != Some(DType::F32)
        {
            continue;
        }
        let Some(&ai) = reader.get(&out) else {
            continue;
        };
        let next = &g.main.nodes[ai];
        if next.inputs.len() != 1 || next.outputs.len() != 1 {
            continue;
        }
        if let Some(what) = follower(next, out) {
            fused.push((pi, ai, kernel, what));
        }
    }
    for &(pi, ai, kernel, what) in &fused {
        let out = g.main.nodes[ai].outputs[0];
        let n = &mut g.main.nodes[pi];
        n.op = Op::Kernel(with(kernel, what));
        n.op_type = op_type(&n.op_type, what);
        n.outputs = vec![out];
    }
    let mut drop: Vec<usize> = fused.iter().map(|f| f.1).collect();
    drop.sort_unstable();
    for &i in drop.iter().rev() {
        g.main.nodes.remove(i);
    }
    fused.len()
}
