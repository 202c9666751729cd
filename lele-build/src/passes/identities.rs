//! Identity views: no-op nodes become them, and readers are wired past
//! them to the value they copy.
use super::fold::identity_node;
use super::matching::kernel_of;
use crate::ir::{Block, Graph, Op, ValueId};
use lele_kernels::ops::cast::Cast;
use lele_kernels::ops::layout::Identity;
use lele_kernels::ops::slice::Slice;
use std::collections::{HashMap, HashSet};

/// Makes every reader of an `Identity` view's output read its input
/// instead, so patterns match across them (Paddle exports put one after
/// most convolutions: `Conv → Add → Identity → Relu`). Identities whose
/// output is a model output or a branch's result stay; the bypassed ones
/// are left for [`eliminate_dead_code`](super::eliminate_dead_code). Returns how many were bypassed.
pub fn bypass_identities(g: &mut Graph) -> usize {
    fn block_outputs(b: &Block, keep: &mut HashSet<ValueId>) {
        for n in &b.nodes {
            if let Op::If {
                then_branch,
                else_branch,
            } = &n.op
            {
                for br in [then_branch, else_branch] {
                    keep.extend(br.outputs.iter().copied());
                    block_outputs(br, keep);
                }
            }
        }
    }
    fn rewire(b: &mut Block, to: &dyn Fn(ValueId) -> ValueId) {
        for n in &mut b.nodes {
            for v in n.inputs.iter_mut().flatten() {
                *v = to(*v);
            }
            if let Op::If {
                then_branch,
                else_branch,
            } = &mut n.op
            {
                rewire(then_branch, to);
                rewire(else_branch, to);
            }
        }
    }
    let mut keep: HashSet<ValueId> = g.outputs.iter().copied().collect();
    block_outputs(&g.main, &mut keep);
    let mut source: HashMap<ValueId, ValueId> = HashMap::new();
    g.for_each_node(&mut |n| {
        if let (Some(Identity), &[Some(x)], &[y]) = (
            kernel_of::<Identity>(n),
            n.inputs.as_slice(),
            n.outputs.as_slice(),
        ) && !keep.contains(&y)
        {
            source.insert(y, x);
        }
    });
    // Through chains of identities to the first non-identity value.
    let root = |mut v: ValueId| {
        while let Some(&x) = source.get(&v) {
            v = x;
        }
        v
    };
    rewire(&mut g.main, &root);
    source.len()
}

/// Turns no-op nodes into `Identity` views, which [`bypass_identities`]
/// then removes: a `Cast` to its input's own element type, and a `Slice`
/// over whole axes (constant starts all 0, ends all at least 2⁶² — past
/// any dimension — and steps 1 or absent). Only nodes running lele's own
/// kernel, in every block. Silero VAD's STFT slices every frame twice and
/// casts float to float twice: five of its nodes a call. Returns how many
/// nodes became views.
pub fn identities_from_noops(g: &mut Graph) -> usize {
    fn walk(b: &mut Block, values: &[crate::ir::Value]) -> usize {
        let mut count = 0;
        for n in &mut b.nodes {
            if let Op::If {
                then_branch,
                else_branch,
            } = &mut n.op
            {
                count += walk(then_branch, values) + walk(else_branch, values);
                continue;
            }
            let (Some(Some(src)), &[dst]) = (n.inputs.first().copied(), n.outputs.as_slice())
            else {
                continue;
            };
            let constant = |i: usize| -> Option<Vec<i64>> {
                let v = n.inputs.get(i).copied().flatten()?;
                values[v].constant.as_ref()?.to_i64s()
            };
            let noop = if let Some(cast) = kernel_of::<Cast>(n) {
                values[src].dtype == Some(cast.to)
            } else if kernel_of::<Slice>(n).is_some() {
                let whole = || -> Option<bool> {
                    let (starts, ends) = (constant(1)?, constant(2)?);
                    let steps_one = match n.inputs.get(4).copied().flatten() {
                        Some(_) => constant(4)?.iter().all(|&s| s == 1),
                        None => true,
                    };
                    Some(
                        !starts.is_empty()
                            && starts.len() == ends.len()
                            && starts.iter().all(|&s| s == 0)
                            && ends.iter().all(|&e| e >= 1 << 62)
                            && steps_one,
                    )
                };
                whole().unwrap_or(false)
            } else {
                false
            };
            if noop {
                *n = identity_node(&n.name, src, dst);
                count += 1;
            }
        }
        count
    }
    let Graph { values, main, .. } = g;
    walk(main, values)
}
