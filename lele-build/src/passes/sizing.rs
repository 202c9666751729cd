//! Sizing: shape inference at concrete input sizes.
//!
//! The generated code computes every shape at run time; the compiler only
//! needs the largest size of each intermediate to plan the arena. It runs
//! the kernels' own `infer` at sample points inside the `[inputs]` bounds
//! (the upper bounds, the lower bounds and the midpoint) and keeps, for each
//! value, the largest size seen. Small integer tensors derived from shapes
//! are evaluated too, so `Shape → Gather → Concat → Reshape` chains resolve.
//! A tensor that turns out larger at run time than planned makes `forward`
//! return an error; it never overflows.
use std::collections::{HashMap, HashSet};

use lele_kernels::ops::cast::{Cast, CastLike};
use lele_kernels::ops::layout::{Identity, ShapeOf, Size};
use lele_kernels::{DType, Kernel, KernelError, Shape, TensorRef};

use super::eval::eval_kernel;
use super::matching::kernel_of;
use crate::config::Dim;
use crate::error::{BuildError, Result};
use crate::ir::{Block, DeclaredDim, Graph, Node, Op, Tensor, ValueId};

/// Largest intermediate evaluated during sizing (elements).
const MAX_EVAL_ELEMS: usize = 1 << 16;

/// Result of sizing.
#[derive(Debug, Default, Clone)]
pub struct Sizes {
    /// Shapes at the first (largest) point.
    pub shapes: HashMap<ValueId, Shape>,
    /// Largest byte size of each value over all points.
    pub max_bytes: HashMap<ValueId, usize>,
    /// Largest scratch need of each node, keyed by its first output.
    pub scratch: HashMap<ValueId, usize>,
    /// Values whose shape was the same at every sizing point and never
    /// depended on data unknown at build time (empty when a point failed):
    /// their byte size is known when the code is generated.
    pub fixed: HashSet<ValueId>,
}

#[derive(Default, Clone)]
struct Point {
    shapes: HashMap<ValueId, Shape>,
    /// Values whose shape depends on input values unknown at build time:
    /// the most elements they can have (see `Kernel::max_output_elems`).
    bounds: HashMap<ValueId, usize>,
    data: HashMap<ValueId, Tensor>,
    scratch: HashMap<ValueId, usize>,
}

/// Sizes the graph at each point (one dims list per model input). The first
/// point must succeed; later points that fail are skipped.
pub fn size_graph(g: &Graph, points: &[Vec<Vec<usize>>]) -> Result<Sizes> {
    let mut sizes = Sizes::default();
    let mut all_points_sized = true;
    for (i, dims) in points.iter().enumerate() {
        let mut p = Point::default();
        for (&v, d) in g.inputs.iter().zip(dims) {
            let s = Shape::new(d).map_err(|e| BuildError::Other(e.to_string()))?;
            check_addressable(g, v, &s)?;
            p.shapes.insert(v, s);
        }
        match block(g, &g.main, &mut p) {
            Ok(()) => {}
            Err(e) if i == 0 => return Err(e),
            Err(_) => {
                all_points_sized = false;
                continue;
            }
        }
        if i == 0 {
            sizes.shapes = p.shapes.clone();
            sizes.fixed = p.shapes.keys().copied().collect();
        }
        sizes
            .fixed
            .retain(|v| !p.bounds.contains_key(v) && p.shapes.get(v) == sizes.shapes.get(v));
        let elems = p.shapes.iter().map(|(v, s)| (v, s.checked_numel()));
        for (v, n) in elems.chain(p.bounds.iter().map(|(v, n)| (v, Some(*n)))) {
            let bytes = n
                .and_then(|n| n.checked_mul(g.values[*v].dtype.unwrap_or(DType::F32).size()))
                .ok_or_else(|| {
                    BuildError::Limit(format!(
                        "value `{}` has more bytes than this machine can address",
                        g.values[*v].name
                    ))
                })?;
            let e = sizes.max_bytes.entry(*v).or_insert(0);
            *e = (*e).max(bytes);
        }
        for (v, s) in &p.scratch {
            let e = sizes.scratch.entry(*v).or_insert(0);
            *e = (*e).max(*s);
        }
    }
    if !all_points_sized {
        sizes.fixed.clear();
    }
    Ok(sizes)
}

/// Refuses a shape whose bytes, counting only its non-zero dims, exceed
/// `isize::MAX`: no tensor can have it, and a kernel multiplying some of its
/// dims (an empty tensor's other dims included) would overflow. Checked on
/// every shape before a kernel sees it.
fn check_addressable(g: &Graph, v: ValueId, s: &Shape) -> Result<()> {
    let elem = g.values[v].dtype.unwrap_or(DType::F32).size();
    if addressable(s, elem) {
        Ok(())
    } else {
        Err(BuildError::Limit(format!(
            "value `{}` of shape {:?} has more bytes than this machine can address",
            g.values[v].name,
            s.dims()
        )))
    }
}

/// Whether the product of the non-zero dims of `s` times `elem` fits
/// `isize`: then no product of some of its dims overflows in a kernel,
/// even when the tensor is empty (`[0, 2^62]` holds nothing, but a
/// kernel's `cols · 4` would wrap).
pub(crate) fn addressable(s: &Shape, elem: usize) -> bool {
    s.dims()
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(elem, |a, &d| a.checked_mul(d))
        .is_some_and(|b| b <= isize::MAX as usize)
}

fn node_err(n: &Node, msg: impl Into<String>) -> BuildError {
    BuildError::Node {
        node: n.name.clone(),
        op: n.op_type.clone(),
        msg: msg.into(),
    }
}

fn block(g: &Graph, b: &Block, p: &mut Point) -> Result<()> {
    for n in &b.nodes {
        node(g, n, p)?;
    }
    Ok(())
}

fn shape_of(g: &Graph, v: ValueId, p: &Point) -> Option<Shape> {
    if let Some(t) = &g.values[v].constant {
        return t.shape().ok();
    }
    p.shapes.get(&v).copied()
}

fn node(g: &Graph, n: &Node, p: &mut Point) -> Result<()> {
    match &n.op {
        Op::Unsupported { reason } => Err(node_err(n, reason.clone())),
        Op::If {
            then_branch,
            else_branch,
        } => {
            let cond = n
                .inputs
                .first()
                .copied()
                .flatten()
                .ok_or_else(|| node_err(n, "If without condition"))?;
            let known = g.values[cond]
                .constant
                .as_deref()
                .or_else(|| p.data.get(&cond))
                .map(|t| t.bytes().first().copied().unwrap_or(0) != 0);
            let mut tp = p.clone();
            let then_ok = block(g, then_branch, &mut tp);
            let mut ep = p.clone();
            let else_ok = block(g, else_branch, &mut ep);
            let (first, second, first_ok, second_ok, first_b, second_b) = match known {
                Some(false) => (ep, tp, else_ok, then_ok, else_branch, then_branch),
                _ => (tp, ep, then_ok, else_ok, then_branch, else_branch),
            };
            // The branch that runs at this point (or, when unknown, the first
            // one that sizes successfully) defines the If outputs.
            let (chosen, chosen_b) = match (&first_ok, &second_ok, known) {
                (Ok(()), _, _) => (first.clone(), first_b),
                (Err(_), Ok(()), None) => (second.clone(), second_b),
                (Err(_), _, _) => {
                    return first_ok.map_err(|e| node_err(n, format!("in branch: {e}")));
                }
            };
            // Keep the sizes of both branches (the other may run for other
            // inputs), then set the outputs from the chosen one.
            for pt in [&first, &second] {
                for (v, s) in &pt.shapes {
                    p.shapes.entry(*v).or_insert(*s);
                }
                for (v, b) in &pt.bounds {
                    p.bounds.entry(*v).or_insert(*b);
                }
                for (v, s) in &pt.scratch {
                    p.scratch.entry(*v).or_insert(*s);
                }
            }
            for (&src, &dst) in chosen_b.outputs.iter().zip(&n.outputs) {
                if let Some(s) = shape_of(g, src, &chosen) {
                    p.shapes.insert(dst, s);
                } else if let Some(&b) = chosen.bounds.get(&src) {
                    p.bounds.insert(dst, b);
                }
                if let Some(t) = g.values[src]
                    .constant
                    .as_deref()
                    .or_else(|| chosen.data.get(&src))
                {
                    p.data.insert(dst, t.clone());
                }
            }
            Ok(())
        }
        Op::Kernel(k) | Op::View(k) => {
            if let Some(b) = unknown_shape_input(g, n, p)? {
                // A copy or a view of a value whose shape is only bounded:
                // the same bound holds for the output.
                for &o in &n.outputs {
                    p.bounds.insert(o, b);
                }
                return Ok(());
            }
            let mut refs: Vec<Option<TensorRef<'_>>> = Vec::with_capacity(n.inputs.len());
            let mut all_data = true;
            for inp in &n.inputs {
                let Some(v) = *inp else {
                    refs.push(None);
                    continue;
                };
                let dtype = g.values[v].dtype.unwrap_or(DType::F32);
                if let Some(t) = g.values[v].constant.as_deref().or_else(|| p.data.get(&v)) {
                    refs.push(Some(t.view().map_err(|e| node_err(n, e.to_string()))?));
                } else {
                    all_data = false;
                    let s = shape_of(g, v, p).ok_or_else(|| {
                        node_err(
                            n,
                            format!("input `{}` has no known shape", g.values[v].name),
                        )
                    })?;
                    refs.push(Some(TensorRef::shape_only(dtype, s)));
                }
            }
            let mut shapes = vec![Shape::SCALAR; n.outputs.len()];
            match k.infer(&refs, &mut shapes) {
                Ok(()) => {}
                Err(e @ KernelError::NeedsData { .. }) => {
                    let (scratch, bounds) = bounded_outputs(g, n, k.as_ref(), &refs, e)?;
                    if let Some(&o) = n.outputs.first() {
                        p.scratch.insert(o, scratch);
                    }
                    p.bounds.extend(n.outputs.iter().copied().zip(bounds));
                    return Ok(());
                }
                Err(e) => return Err(node_err(n, e.to_string())),
            }
            if let Some(&o) = n.outputs.first() {
                let scratch = k.scratch_bytes(&refs, &shapes);
                p.scratch.insert(o, scratch);
            }
            for (&o, s) in n.outputs.iter().zip(&shapes) {
                check_addressable(g, o, s)?;
                p.shapes.insert(o, *s);
            }
            let shape_only_op = kernel_of::<ShapeOf>(n).is_some() || kernel_of::<Size>(n).is_some();
            let small = shapes
                .iter()
                .fold(0usize, |acc, s| acc.saturating_add(s.numel()))
                <= MAX_EVAL_ELEMS;
            if (all_data || shape_only_op) && small {
                let dtypes: Vec<DType> = n
                    .outputs
                    .iter()
                    .map(|&o| g.values[o].dtype.unwrap_or(DType::F32))
                    .collect();
                if let Ok(ts) = eval_kernel(k.as_ref(), &refs, &dtypes) {
                    for (&o, t) in n.outputs.iter().zip(ts) {
                        p.data.insert(o, t);
                    }
                }
            }
            Ok(())
        }
    }
}

/// The bound of a node input whose shape is unknown (only bounded), when the
/// node is a copy or a view that keeps the element count; an error for any
/// other node reading such a value.
fn unknown_shape_input(g: &Graph, n: &Node, p: &Point) -> Result<Option<usize>> {
    let Some(b) = n.inputs.iter().flatten().find_map(|v| {
        (shape_of(g, *v, p).is_none())
            .then(|| p.bounds.get(v).copied())
            .flatten()
    }) else {
        return Ok(None);
    };
    // Views, copies, casts and elementwise kernels whose other operands are
    // single elements (or the same value) keep the element count of input 0.
    let first = n.inputs.first().copied().flatten();
    let others_ok = n
        .inputs
        .iter()
        .skip(1)
        .flatten()
        .all(|&v| Some(v) == first || shape_of(g, v, p).is_some_and(|s| s.numel() == 1));
    let keeps_count = match &n.op {
        Op::View(_) => true,
        Op::Kernel(k) => {
            // The output copy of a model output that is an input's view
            // is an `Identity` kernel (not a view).
            kernel_of::<Identity>(n).is_some()
                || kernel_of::<Cast>(n).is_some()
                || kernel_of::<CastLike>(n).is_some()
                || (k.elementwise() && others_ok)
        }
        _ => false,
    };
    if keeps_count && first.is_some_and(|v| p.bounds.contains_key(&v)) {
        return Ok(Some(b));
    }
    Err(node_err(
        n,
        "an input's shape depends on values that are only known at run time \
         (the output of a data-dependent node), and this operator cannot be sized after it",
    ))
}

/// The fully fixed shape the model file declares for a value, if any.
fn declared_shape(g: &Graph, v: ValueId) -> Option<Shape> {
    let dims: Option<Vec<usize>> = g.values[v]
        .declared
        .as_ref()?
        .iter()
        .map(|d| match d {
            DeclaredDim::Fixed(n) => Some(*n),
            DeclaredDim::Dynamic(_) => None,
        })
        .collect();
    Shape::new(&dims?).ok()
}

/// Sizes the outputs of a node whose output shape depends on values unknown
/// at build time: from the kernel's element-count bounds, else from the
/// fixed shapes the model declares for all of the node's outputs (a
/// declaration the run-time capacity check enforces). `needs` is the error
/// to report when neither exists. Returns the scratch bytes and the bound of
/// each output.
fn bounded_outputs(
    g: &Graph,
    n: &Node,
    k: &dyn Kernel,
    refs: &[Option<TensorRef<'_>>],
    needs: KernelError,
) -> Result<(usize, Vec<usize>)> {
    let mut bounds = vec![0usize; n.outputs.len()];
    let bounded = k
        .max_output_elems(refs, &mut bounds)
        .map_err(|e| node_err(n, e.to_string()))?;
    let declared: Option<Vec<Shape>> = n.outputs.iter().map(|&o| declared_shape(g, o)).collect();
    let shapes: Vec<Shape> = match (bounded, declared) {
        (false, Some(d)) => {
            bounds = d.iter().map(Shape::numel).collect();
            d
        }
        (true, _) => bounds
            .iter()
            .map(|&b| Shape::new(&[b]))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| node_err(n, e.to_string()))?,
        (false, None) => {
            return Err(node_err(
                n,
                format!(
                    "{needs} at build time, its size has no bound, and the model declares no \
                     fixed shape for it"
                ),
            ));
        }
    };
    // Scratch is sized for the declared shapes, or as if each output were a
    // flat tensor of its bound.
    Ok((k.scratch_bytes(refs, &shapes), bounds))
}

/// Sample points for sizing: upper bounds, lower bounds, midpoint.
pub fn sizing_points(dims: &[Vec<Dim>]) -> Vec<Vec<Vec<usize>>> {
    let at = |f: &dyn Fn(&Dim) -> usize| -> Vec<Vec<usize>> {
        dims.iter().map(|d| d.iter().map(f).collect()).collect()
    };
    let mut pts = vec![
        at(&Dim::max),
        at(&Dim::min),
        // Bounds are non-empty (the toml refuses `n <= 0`); saturating all
        // the same, so a bound built in code cannot underflow here.
        at(&|d: &Dim| d.min() + d.max().saturating_sub(d.min()) / 2),
    ];
    pts.dedup();
    pts
}
