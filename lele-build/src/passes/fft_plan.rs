//! FFT plans computed at build time: a `DFT` or `STFT` whose transform
//! length is the same at every sizing point gets the plan of that length
//! (its sines and cosines) as a constant input, so `forward` does not
//! recompute them on every call.
use std::collections::HashMap;

use lele_kernels::ops::signal::dft::{DFT_PLAN_INPUT, Dft};
use lele_kernels::ops::signal::fft;
use lele_kernels::ops::signal::stft::{STFT_PLAN_INPUT, Stft};
use lele_kernels::{DType, KernelError, Shape, TensorRef};

use super::matching::kernel_of;
use crate::ir::{Graph, Node, Tensor, ValueId};

/// Plans above this many floats (a transform of about 3 million points)
/// are left to the kernel, which builds them in scratch.
const MAX_PLAN_FLOATS: usize = 1 << 24;

/// A node that transforms, and where its plan input goes.
#[derive(Clone, Copy)]
enum Transform {
    Dft(Dft),
    Stft(Stft),
}

impl Transform {
    fn of(n: &Node) -> Option<Transform> {
        kernel_of::<Dft>(n)
            .map(|&k| Transform::Dft(k))
            .or_else(|| kernel_of::<Stft>(n).map(|&k| Transform::Stft(k)))
    }

    fn plan_input(self) -> usize {
        match self {
            Transform::Dft(_) => DFT_PLAN_INPUT,
            Transform::Stft(_) => STFT_PLAN_INPUT,
        }
    }

    fn len(self, inputs: &[Option<TensorRef<'_>>]) -> Result<usize, KernelError> {
        match self {
            Transform::Dft(k) => k.transform_len(inputs),
            Transform::Stft(k) => k.transform_len(inputs),
        }
    }
}

/// The transform length of node `n` under the value shapes `shapes`, when
/// its length-deciding inputs are constants or shapes.
fn transform_len(
    g: &Graph,
    n: &Node,
    shapes: &HashMap<ValueId, Shape>,
    t: Transform,
) -> Option<usize> {
    let mut refs = Vec::with_capacity(n.inputs.len());
    for v in &n.inputs {
        refs.push(match v {
            None => None,
            Some(v) => Some(match &g.values[*v].constant {
                Some(t) => t.view().ok()?,
                None => {
                    let dtype = g.values[*v].dtype.unwrap_or(DType::F32);
                    TensorRef::shape_only(dtype, *shapes.get(v)?)
                }
            }),
        });
    }
    t.len(&refs).ok()
}

/// Adds the plan input of every signal node of the main block whose length
/// is known; returns how many got one.
pub fn add_fft_plans(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let mut count = 0;
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        let Some(t) = Transform::of(n) else { continue };
        let plan_input = t.plan_input();
        let lens: Option<Vec<usize>> = shapes.iter().map(|s| transform_len(g, n, s, t)).collect();
        let Some(lens) = lens else { continue };
        let Some(&len) = lens.first() else { continue };
        if lens.iter().any(|&l| l != len) || n.inputs.len() > plan_input {
            continue;
        }
        // Bounded before planning: factoring a hostile length near 2^62
        // would take seconds.
        if len > MAX_PLAN_FLOATS {
            continue;
        }
        let Some(floats) = fft::plan_len(len).filter(|&f| f <= MAX_PLAN_FLOATS) else {
            continue;
        };
        let mut plan = vec![0f32; floats];
        let mut work = vec![fft::Complex::ZERO; fft::work_len(len).unwrap_or(0)];
        if fft::build_plan(len, &mut plan, &mut work).is_none() {
            continue;
        }
        let Some(t) = Tensor::from_values::<f32>(&[floats], &plan) else {
            continue;
        };
        let name = format!("{}::fft_plan", n.name);
        let id = g.add_constant(&name, t);
        let inputs = &mut g.main.nodes[i].inputs;
        inputs.resize(plan_input, None);
        inputs.push(Some(id));
        count += 1;
    }
    count
}
