//! `ScatterND` with constant indices as block copies: streaming models
//! write their caches with one index tuple per element (a 4-D cache update
//! of 5,280 elements reads 169 KB of indices every call). The copies those
//! indices amount to are computed here once — runs contiguous in both the
//! data and the updates — and the node reads that short table instead
//! (`ScatterNd::runs`).
use std::collections::HashMap;

use lele_kernels::ops::gather::{ScatterNd, ScatterReduction};
use lele_kernels::{DType, Shape, TensorRef};

use super::matching::kernel_of;
use crate::ir::{Graph, Op, Tensor, ValueId};

/// The table replaces the indices only when it is at least this many times
/// smaller.
const MIN_SHRINK: usize = 4;

/// The shape of `v`, the same at every sizing point.
fn fixed_shape(shapes: &[HashMap<ValueId, Shape>], v: ValueId) -> Option<Shape> {
    let first = *shapes.first()?.get(&v)?;
    shapes
        .iter()
        .all(|s| s.get(&v) == Some(&first))
        .then_some(first)
}

/// Rewrites every eligible `ScatterND` of the main block; returns how many.
pub fn add_scatter_runs(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let mut count = 0;
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        let Some(k) = kernel_of::<ScatterNd>(n) else {
            continue;
        };
        if k.runs || k.reduction != ScatterReduction::None {
            continue;
        }
        let (Some(&Some(data)), Some(&Some(idx)), Some(&Some(upd))) =
            (n.inputs.first(), n.inputs.get(1), n.inputs.get(2))
        else {
            continue;
        };
        let Some(indices) = &g.values[idx].constant else {
            continue;
        };
        let (Some(ds), Some(us)) = (fixed_shape(shapes, data), fixed_shape(shapes, upd)) else {
            continue;
        };
        let Ok(idx_view) = indices.view() else {
            continue;
        };
        let dtype = |v: ValueId| g.values[v].dtype.unwrap_or(DType::F32);
        let inputs = [
            Some(TensorRef::shape_only(dtype(data), ds)),
            Some(idx_view),
            Some(TensorRef::shape_only(dtype(upd), us)),
        ];
        let mut table: Vec<i64> = Vec::new();
        let mut fits = true;
        let found = ScatterNd::copy_runs(&inputs, |d, s, len| {
            match (i64::try_from(d), i64::try_from(s), i64::try_from(len)) {
                (Ok(d), Ok(s), Ok(len)) => table.extend([d, s, len]),
                _ => fits = false,
            }
        });
        // Invalid indices stay as they are: the kernel reports them at run
        // time, as before.
        if found.is_err() || !fits || table.is_empty() {
            continue;
        }
        let index_bytes = idx_view.data.len();
        if table.len() * 8 * MIN_SHRINK > index_bytes {
            continue;
        }
        let Some(t) = Tensor::from_values::<i64>(&[table.len() / 3, 3], &table) else {
            continue;
        };
        let name = format!("{}::copy_runs", n.name);
        let id = g.add_constant(&name, t);
        let node = &mut g.main.nodes[i];
        node.inputs[1] = Some(id);
        node.op = Op::Kernel(Box::new(ScatterNd {
            reduction: ScatterReduction::None,
            runs: true,
        }));
        count += 1;
    }
    count
}
