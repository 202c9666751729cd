//! Concat and Split without copies.
//!
//! When the shapes are known at build time and every dimension before the
//! joined axis is 1, the inputs of a Concat are consecutive byte ranges of
//! its output, and the outputs of a Split consecutive byte ranges of its
//! input. The planner then lays the pieces out inside the whole: the
//! producers of a Concat's inputs write straight into its output, a Split's
//! outputs are read where its input lives, and neither node moves data at
//! run time (`rt::pieces_in_place` only sets the shapes and checks the
//! layout).
//!
//! Values laid out inside others form trees: a value has at most one
//! container (its `parent`, at a byte offset). Only tree roots are placed in
//! the arena, live from the first definition to the last read of any member,
//! and no member is ever overwritten in place. A piece is only placed at an
//! offset that is a multiple of [`ALIGN`], so every kernel still writes to
//! and reads from 64-byte aligned memory.
use std::any::Any;
use std::collections::{HashMap, HashSet};

use lele_kernels::DType;
use lele_kernels::ops::concat::{Concat, Split};

use super::{ALIGN, PiecesInPlace, Uses};
use crate::ir::{Graph, Op, ValueId};
use crate::passes::Sizes;

/// Which values live inside others, and the nodes that therefore move
/// nothing.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    /// Container and byte offset of each value laid out inside another.
    pub(super) parent: HashMap<ValueId, (ValueId, usize)>,
    /// Values that contain others.
    pub(super) containers: HashSet<ValueId>,
    /// Concat and Split nodes that move nothing, by first output.
    pub(super) elided: HashMap<ValueId, PiecesInPlace>,
}

impl Pieces {
    /// Whether `v` is part of a tree (contains or is contained).
    pub(super) fn in_tree(&self, v: ValueId) -> bool {
        self.parent.contains_key(&v) || self.containers.contains(&v)
    }

    /// The root of `v`'s tree and `v`'s byte offset in it.
    pub(super) fn top(&self, v: ValueId) -> (ValueId, usize) {
        let (mut r, mut off) = (v, 0);
        while let Some(&(p, o)) = self.parent.get(&r) {
            r = p;
            off += o;
        }
        (r, off)
    }

    fn link(&mut self, child: ValueId, container: ValueId, off: usize) {
        self.parent.insert(child, (container, off));
        self.containers.insert(container);
    }
}

/// What the analysis reads.
struct Facts<'a> {
    g: &'a Graph,
    sizes: &'a Sizes,
    uses: &'a Uses,
    /// Outputs of kernel nodes of the main block: values that own their
    /// arena bytes (until an in-place node borrows them, which members
    /// never are).
    owned: HashSet<ValueId>,
    /// View groups (by root) holding a model output.
    escaping: HashSet<ValueId>,
}

impl Facts<'_> {
    /// Bytes of `v` when its shape is fixed.
    fn bytes(&self, v: ValueId) -> Option<usize> {
        if !self.sizes.fixed.contains(&v) {
            return None;
        }
        let dtype = self.g.values[v].dtype.unwrap_or(DType::F32);
        Some(self.sizes.shapes.get(&v)?.numel() * dtype.size())
    }

    /// Whether every dimension of fixed-shape `v` before `axis` is 1; the
    /// normalized axis.
    fn outermost(&self, v: ValueId, axis: i64) -> Option<usize> {
        let shape = self.sizes.shapes.get(&v)?;
        let axis = shape.axis(axis, "Concat").ok()?;
        shape.dims()[..axis].iter().all(|&d| d == 1).then_some(axis)
    }

    /// The owner of `v`'s bytes (through views) when it may be laid out
    /// inside another value: owned, not a model output, fixed size.
    fn movable(&self, v: ValueId) -> Option<ValueId> {
        let owner = self.uses.root(v);
        (self.owned.contains(&owner)
            && !self.escaping.contains(&owner)
            && self.bytes(owner).is_some()
            && self.bytes(owner) == self.bytes(v))
        .then_some(owner)
    }
}

/// Finds the Concat and Split nodes of the main block that can move
/// nothing, and lays their pieces out.
pub(super) fn find(g: &Graph, sizes: &Sizes, uses: &Uses) -> Pieces {
    let owned = g
        .main
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Kernel(_)))
        .flat_map(|n| n.outputs.iter().copied())
        .collect();
    let escaping = g.outputs.iter().map(|&o| uses.root(o)).collect();
    let facts = Facts {
        g,
        sizes,
        uses,
        owned,
        escaping,
    };
    let mut pieces = Pieces::default();
    for n in &g.main.nodes {
        let Op::Kernel(k) = &n.op else { continue };
        let any: &dyn Any = k.as_ref();
        let elided = if let Some(c) = any.downcast_ref::<Concat>() {
            let inputs: Option<Vec<ValueId>> = n.inputs.iter().copied().collect();
            let joined = match (inputs, n.outputs.as_slice()) {
                (Some(inputs), [out]) => join(&facts, &mut pieces, &inputs, *out, c.axis),
                _ => false,
            };
            joined.then_some(PiecesInPlace {
                axis: c.axis,
                joined: true,
            })
        } else if let Some(s) = any.downcast_ref::<Split>()
            && let Some(Some(input)) = n.inputs.first()
            && split(&facts, &mut pieces, *input, &n.outputs, s.axis)
        {
            Some(PiecesInPlace {
                axis: s.axis,
                joined: false,
            })
        } else {
            None
        };
        if let (Some(e), Some(&first)) = (elided, n.outputs.first()) {
            pieces.elided.insert(first, e);
        }
    }
    pieces
}

/// Lays the outputs of a Split of `input` out inside it, if they can be.
fn split(f: &Facts<'_>, p: &mut Pieces, input: ValueId, outputs: &[ValueId], axis: i64) -> bool {
    let Some(owner) = f.movable(input) else {
        return false;
    };
    if f.outermost(input, axis).is_none() {
        return false;
    }
    let mut offsets = Vec::with_capacity(outputs.len());
    let mut at = 0usize;
    for &o in outputs {
        let Some(b) = f.bytes(o) else { return false };
        if f.escaping.contains(&o) || p.in_tree(o) || !at.is_multiple_of(ALIGN) {
            return false;
        }
        offsets.push(at);
        at += b;
    }
    if Some(at) != f.bytes(input) {
        return false;
    }
    for (&o, off) in outputs.iter().zip(offsets) {
        p.link(o, owner, off);
    }
    true
}

/// Lays the inputs of a Concat into `out` out inside it, if they can be.
fn join(f: &Facts<'_>, p: &mut Pieces, inputs: &[ValueId], out: ValueId, axis: i64) -> bool {
    let Some(out_bytes) = f.bytes(out) else {
        return false;
    };
    if !f.owned.contains(&out) || p.in_tree(out) || f.outermost(out, axis).is_none() {
        return false;
    }
    // Where each tree root holding an input has to go: (root, offset, size).
    let mut roots: Vec<(ValueId, usize, usize)> = Vec::new();
    let mut at = 0usize;
    for &v in inputs {
        let (Some(owner), Some(b)) = (f.movable(v), f.bytes(v)) else {
            return false;
        };
        if b == 0 || !at.is_multiple_of(ALIGN) {
            return false;
        }
        let (root, inside) = p.top(owner);
        let Some(root_at) = at.checked_sub(inside) else {
            return false;
        };
        let Some(root_bytes) = f.bytes(root) else {
            return false;
        };
        match roots.iter().find(|r| r.0 == root) {
            Some(&(_, placed, _)) if placed != root_at => return false,
            Some(_) => {}
            None => {
                if root == out || f.movable(root) != Some(root) {
                    return false;
                }
                roots.push((root, root_at, root_bytes));
            }
        }
        at += b;
    }
    if at != out_bytes {
        return false;
    }
    // Each root's bytes must fit in the output and not overlap another's.
    roots.sort_by_key(|r| r.1);
    let mut end = 0usize;
    for &(_, start, size) in &roots {
        if start < end || start + size > out_bytes {
            return false;
        }
        end = start + size;
    }
    for (root, start, _) in roots {
        p.link(root, out, start);
    }
    true
}
