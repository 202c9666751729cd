//! Memory planning: where every value lives at run time (a model input, the
//! weights blob or an arena region), liveness over the linearized schedule,
//! and offsets in one arena so that values whose lifetimes do not overlap
//! share memory. Views (Reshape, Squeeze, …) share their input's storage,
//! and the pieces of a Concat or Split may live inside the whole (see
//! `plan/pieces.rs`).
mod pieces;

use std::collections::HashMap;

use crate::ir::{Block, Graph, Node, Op, ValueId};
use crate::passes::Sizes;

/// Alignment of arena regions and weights.
pub const ALIGN: usize = 64;

/// Where a value's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Model input number `k`.
    Input(usize),
    /// Weights blob at this offset.
    Weight(usize),
    /// Arena region owned by this root value.
    Arena(ValueId),
}

/// The memory plan.
#[derive(Debug, Default)]
pub struct Plan {
    /// Storage of each value used at run time.
    pub storage: HashMap<ValueId, Storage>,
    /// Arena offset and capacity of each root value.
    pub regions: HashMap<ValueId, (usize, usize)>,
    /// Scratch region (offset, capacity) per node, keyed by first output.
    pub scratch: HashMap<ValueId, (usize, usize)>,
    /// Total arena bytes.
    pub arena_bytes: usize,
    /// The weights blob.
    pub weights: Vec<u8>,
    /// Runtime shape slot of each value.
    pub slots: HashMap<ValueId, usize>,
    /// Outputs of elementwise nodes that overwrite their input 0 in place.
    pub in_place: std::collections::HashSet<ValueId>,
    /// Concat and Split nodes whose pieces live inside the whole, so they
    /// move nothing, by first output.
    pub pieces_in_place: HashMap<ValueId, PiecesInPlace>,
}

/// A Concat or Split whose pieces the plan laid out back to back inside
/// the whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PiecesInPlace {
    /// The node's axis.
    pub axis: i64,
    /// A Concat (the output is the whole) rather than a Split (input 0 is).
    pub joined: bool,
}

impl Plan {
    /// Number of shape slots.
    pub fn n_slots(&self) -> usize {
        self.slots.len()
    }
}

struct Live {
    def: usize,
    last: usize,
}

struct Planner<'g> {
    g: &'g Graph,
    sizes: &'g Sizes,
    uses: Uses,
    pieces: pieces::Pieces,
    plan: Plan,
    index: usize,
    live: HashMap<ValueId, Live>,
    scratch_live: Vec<(ValueId, usize, usize)>,
    weight_dedup: HashMap<u64, Vec<(usize, usize)>>,
}

fn hash_bytes(b: &[u8]) -> u64 {
    // FNV-1a over the bytes; collisions are resolved by comparing bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Where each value is last read, per group of values sharing bytes through
/// view nodes (keyed by the group's first value), in the planner's linear
/// order.
#[derive(Default)]
struct Uses {
    view_root: HashMap<ValueId, ValueId>,
    last: HashMap<ValueId, usize>,
    index: usize,
}

impl Uses {
    fn root(&self, v: ValueId) -> ValueId {
        let mut r = v;
        while let Some(&p) = self.view_root.get(&r) {
            r = p;
        }
        r
    }

    fn read(&mut self, v: ValueId) {
        let r = self.root(v);
        let e = self.last.entry(r).or_insert(0);
        *e = (*e).max(self.index);
    }

    fn block(&mut self, b: &Block) {
        for n in &b.nodes {
            self.index += 1;
            for &i in n.inputs.iter().flatten() {
                self.read(i);
            }
            match &n.op {
                Op::View(_) => {
                    if let (Some(Some(src)), Some(&out)) = (n.inputs.first(), n.outputs.first()) {
                        self.view_root.insert(out, *src);
                    }
                }
                Op::If {
                    then_branch,
                    else_branch,
                } => {
                    for br in [then_branch, else_branch] {
                        self.block(br);
                        self.index += 1;
                        for &o in &br.outputs {
                            self.read(o);
                        }
                    }
                    self.index += 1;
                }
                _ => {}
            }
        }
    }
}

impl Planner<'_> {
    /// An elementwise node may overwrite input 0 when nothing reads input 0
    /// (or a view of it) afterwards, it is not a model output, it lives in
    /// the arena, and the output has its dtype and shape.
    fn can_run_in_place(&self, n: &Node, k: &dyn crate::ops::OpKernel) -> bool {
        if !k.elementwise() || n.outputs.len() != 1 {
            return false;
        }
        let Some(Some(src)) = n.inputs.first().copied() else {
            return false;
        };
        let out = n.outputs[0];
        let group = self.uses.root(src);
        if self.pieces.in_tree(group) || self.pieces.in_tree(out) {
            // Overwriting a piece would change the whole, or the reverse.
            return false;
        }
        let g = self.g;
        let is_output = g.outputs.iter().any(|&o| self.uses.root(o) == group);
        let in_arena = matches!(self.plan.storage.get(&src), Some(Storage::Arena(_)));
        let same_type = g.values[src].dtype == g.values[out].dtype;
        let same_shape = match (self.sizes.shapes.get(&src), self.sizes.shapes.get(&out)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
        let same_bytes = self.sizes.max_bytes.get(&src) == self.sizes.max_bytes.get(&out);
        // Every other operand must be same-shaped or a single element.
        let others_ok = n.inputs[1..].iter().flatten().all(|&v| {
            if self.uses.root(v) == group {
                return false;
            }
            let s = self.sizes.shapes.get(&v);
            let c = g.values[v].constant.as_ref().and_then(|t| t.shape().ok());
            match s.copied().or(c) {
                Some(shape) => Some(&shape) == self.sizes.shapes.get(&out) || shape.numel() == 1,
                None => false,
            }
        });
        in_arena
            && !is_output
            && same_type
            && same_shape
            && same_bytes
            && others_ok
            && self.uses.last.get(&group).copied() == Some(self.index)
    }

    fn root(&self, v: ValueId) -> Option<ValueId> {
        match self.plan.storage.get(&v) {
            Some(Storage::Arena(r)) => Some(*r),
            _ => None,
        }
    }

    fn use_value(&mut self, v: ValueId) {
        self.ensure_storage(v);
        self.slot(v);
        if let Some(r) = self.root(v)
            && let Some(l) = self.live.get_mut(&r)
        {
            l.last = l.last.max(self.index);
        }
    }

    fn slot(&mut self, v: ValueId) {
        let n = self.plan.slots.len();
        self.plan.slots.entry(v).or_insert(n);
    }

    fn ensure_storage(&mut self, v: ValueId) {
        if self.plan.storage.contains_key(&v) {
            return;
        }
        if let Some(t) = &self.g.values[v].constant {
            let bytes = t.bytes();
            let h = hash_bytes(bytes);
            let existing = self.weight_dedup.get(&h).and_then(|list| {
                list.iter()
                    .find(|(off, len)| {
                        *len == bytes.len() && &self.plan.weights[*off..*off + *len] == bytes
                    })
                    .map(|(off, _)| *off)
            });
            let off = match existing {
                Some(off) => off,
                None => {
                    let off = self.plan.weights.len().next_multiple_of(ALIGN);
                    self.plan.weights.resize(off, 0);
                    self.plan.weights.extend_from_slice(bytes);
                    self.weight_dedup
                        .entry(h)
                        .or_default()
                        .push((off, bytes.len()));
                    off
                }
            };
            self.plan.storage.insert(v, Storage::Weight(off));
        } else if let Some(k) = self.g.inputs.iter().position(|&i| i == v) {
            self.plan.storage.insert(v, Storage::Input(k));
        }
    }

    fn define(&mut self, v: ValueId) {
        self.plan.storage.insert(v, Storage::Arena(v));
        self.slot(v);
        self.live.insert(
            v,
            Live {
                def: self.index,
                last: self.index,
            },
        );
    }

    fn block(&mut self, b: &Block) {
        for n in &b.nodes {
            self.node(n);
        }
    }

    fn node(&mut self, n: &Node) {
        self.index += 1;
        match &n.op {
            Op::View(_) => {
                for &i in n.inputs.iter().flatten() {
                    self.use_value(i);
                }
                let src = n.inputs.first().copied().flatten();
                if let (Some(src), Some(&out)) = (src, n.outputs.first()) {
                    let st = self.plan.storage.get(&src).copied();
                    if let Some(st) = st {
                        self.plan.storage.insert(out, st);
                    }
                    self.slot(out);
                }
            }
            Op::Kernel(k) if self.can_run_in_place(n, k.as_ref()) => {
                for &i in n.inputs.iter().flatten() {
                    self.use_value(i);
                }
                // can_run_in_place checked that input 0 exists and lives in the arena.
                let out = n.outputs[0];
                if let Some(Some(src)) = n.inputs.first()
                    && let Some(st) = self.plan.storage.get(src).copied()
                {
                    self.plan.storage.insert(out, st);
                }
                self.slot(out);
                self.plan.in_place.insert(out);
            }
            Op::Kernel(_) | Op::Unsupported { .. } => {
                for &i in n.inputs.iter().flatten() {
                    self.use_value(i);
                }
                for &o in &n.outputs {
                    self.define(o);
                }
                if let Some(&o) = n.outputs.first() {
                    self.scratch_live.push((o, self.index, self.index));
                }
            }
            Op::If {
                then_branch,
                else_branch,
            } => {
                for &i in n.inputs.iter().flatten() {
                    self.use_value(i);
                }
                for &o in &n.outputs {
                    self.define(o);
                }
                for br in [then_branch, else_branch] {
                    self.block(br);
                    self.index += 1;
                    for &o in &br.outputs {
                        self.use_value(o);
                    }
                }
                self.index += 1;
                for &o in &n.outputs {
                    if let Some(l) = self.live.get_mut(&o) {
                        l.last = l.last.max(self.index);
                    }
                }
            }
        }
    }
}

/// Plans storage for a graph whose nodes are final.
pub fn plan(g: &Graph, sizes: &Sizes) -> Plan {
    let mut uses = Uses::default();
    uses.block(&g.main);
    let pieces = pieces::find(g, sizes, &uses);
    let mut p = Planner {
        g,
        sizes,
        uses,
        pieces,
        plan: Plan::default(),
        index: 0,
        live: HashMap::new(),
        scratch_live: Vec::new(),
        weight_dedup: HashMap::new(),
    };
    for &i in &g.inputs {
        p.ensure_storage(i);
        p.slot(i);
    }
    p.block(&g.main);
    let end = p.index + 1;
    for &o in &g.outputs {
        p.use_value(o);
        if let Some(r) = p.root(o)
            && let Some(l) = p.live.get_mut(&r)
        {
            l.last = end;
        }
    }
    // Persistent values own their region across calls: live from before
    // the first node to after the last.
    for &v in &g.persistent {
        if let Some(r) = p.root(v)
            && let Some(l) = p.live.get_mut(&r)
        {
            l.def = 0;
            l.last = end;
        }
    }
    // A tree of pieces is placed as its root, live while any member is.
    let members: Vec<ValueId> = p.pieces.parent.keys().copied().collect();
    for &v in &members {
        let (root, _) = p.pieces.top(v);
        if let Some(l) = p.live.remove(&v) {
            let r = p.live.entry(root).or_insert(Live {
                def: l.def,
                last: l.last,
            });
            r.def = r.def.min(l.def);
            r.last = r.last.max(l.last);
        }
    }
    // Intervals to place: roots and scratch regions.
    struct Item {
        key: (bool, ValueId),
        size: usize,
        start: usize,
        end: usize,
    }
    let mut items: Vec<Item> = p
        .live
        .iter()
        .map(|(&v, l)| Item {
            key: (false, v),
            size: sizes
                .max_bytes
                .get(&v)
                .copied()
                .unwrap_or(0)
                .next_multiple_of(ALIGN),
            start: l.def,
            end: l.last,
        })
        .collect();
    for &(v, s, e) in &p.scratch_live {
        let size = sizes.scratch.get(&v).copied().unwrap_or(0);
        if size > 0 {
            items.push(Item {
                key: (true, v),
                size: size.next_multiple_of(ALIGN),
                start: s,
                end: e,
            });
        }
    }
    items.sort_by(|a, b| {
        b.size
            .cmp(&a.size)
            .then(a.start.cmp(&b.start))
            .then(a.key.cmp(&b.key))
    });
    let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new(); // off, size, start, end
    let mut total = 0usize;
    for it in &items {
        let mut conflicts: Vec<(usize, usize)> = placed
            .iter()
            .filter(|(_, _, s, e)| *s <= it.end && it.start <= *e)
            .map(|(o, sz, _, _)| (*o, *sz))
            .collect();
        conflicts.sort();
        let mut off = 0usize;
        // Saturating: sizes were checked against the arena cap one by one,
        // and a sum past `usize` must stay too large for it, not wrap.
        for (o, sz) in conflicts {
            if off.saturating_add(it.size) <= o {
                break;
            }
            off = off.max(o.saturating_add(sz));
        }
        placed.push((off, it.size, it.start, it.end));
        total = total.max(off.saturating_add(it.size));
        if it.key.0 {
            p.plan.scratch.insert(it.key.1, (off, it.size));
        } else {
            p.plan.regions.insert(it.key.1, (off, it.size));
        }
    }
    for &v in &members {
        let (root, off) = p.pieces.top(v);
        let base = p.plan.regions.get(&root).map_or(0, |r| r.0);
        let bytes = sizes.max_bytes.get(&v).copied().unwrap_or(0);
        p.plan.regions.insert(v, (base.saturating_add(off), bytes));
    }
    p.plan.pieces_in_place = std::mem::take(&mut p.pieces.elided);
    p.plan.arena_bytes = total.max(ALIGN);
    p.plan
}
