//! The compiler's passes in the order they run, as data.
//!
//! A [`Round`] is a list of named [`Pass`]es that share one shape cache:
//! the graph is sized at every sizing point once, when the round starts,
//! if one of its passes asks for shapes. The rewrites inside a round keep
//! the value ids of everything they do not remove, so the cache stays
//! true for the values still in the graph. [`run`] goes through the rounds
//! and reports what each pass rewrote.
//!
//! To add a pass: write it in its own file under `passes/`, then name it
//! in the round where its inputs are ready (after the folding, for a
//! pattern that checks constant values; in [`SIZED`], for one that needs
//! shapes).
use std::collections::HashMap;

use lele_kernels::Shape;

use super::*;
use crate::config::Dim;
use crate::error::Result;
use crate::extend::Extensions;
use crate::ir::{Graph, ValueId};

/// The shapes of the graph's values at each sizing point that sized.
pub type PointShapes = [HashMap<ValueId, Shape>];

/// What a pass is given besides the graph.
pub struct Context<'a> {
    /// The resolved dims of each model input (the sizing points come
    /// from their bounds).
    pub dims: &'a [Vec<Dim>],
    /// A `build.rs` user's node patterns.
    pub ext: &'a Extensions,
}

/// Which sizing points a [`Run::Sized`] pass needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Points {
    /// All of them: the pass is skipped when the graph fails to size at
    /// any point (its rewrite must hold for every allowed input).
    Every,
    /// Those that sized (a point where sizing fails has no valid input,
    /// such as a feature extractor given fewer samples than one frame).
    Sized,
}

/// How a pass runs.
pub enum Run {
    /// Once over the whole graph (all blocks are its business).
    Graph(fn(&mut Graph, &Context<'_>) -> Result<usize>),
    /// In every block: the main one, then each `If` branch (nested too).
    EveryBlock(fn(&mut Graph) -> usize),
    /// In every block, given the round's shapes at the sizing points.
    Sized(Points, fn(&mut Graph, &PointShapes) -> usize),
}

/// One named graph rewrite; it returns how many rewrites it made.
pub struct Pass {
    /// Its name in reports (kebab case).
    pub name: &'static str,
    /// How it runs.
    pub run: Run,
}

/// Passes that run in order and share one shape cache.
pub struct Round {
    /// Its name in reports.
    pub name: &'static str,
    /// The passes, in order.
    pub passes: &'static [Pass],
}

const fn pass(name: &'static str, run: Run) -> Pass {
    Pass { name, run }
}

const DEAD_CODE: Pass = pass(
    "eliminate-dead-code",
    Run::Graph(|g, _| {
        eliminate_dead_code(g);
        Ok(0)
    }),
);

/// Types every value, widens half-precision inputs of f32-only kernels,
/// applies the user's patterns and turns no-op nodes into identities that
/// readers are then wired past.
pub const PREPARE: Round = Round {
    name: "prepare",
    passes: &[
        pass(
            "infer-dtypes",
            Run::Graph(|g, _| infer_dtypes(g).map(|()| 0)),
        ),
        pass(
            "widen-half-precision",
            Run::Graph(|g, _| Ok(widen_half_precision(g))),
        ),
        pass(
            "user-patterns",
            Run::Graph(|g, cx| cx.ext.apply_patterns(g)),
        ),
        pass(
            "identities-from-noops",
            Run::Graph(|g, _| Ok(identities_from_noops(g))),
        ),
        pass(
            "bypass-identities",
            Run::Graph(|g, _| Ok(bypass_identities(g))),
        ),
    ],
};

/// SiLU before anything else (its `Sigmoid` would otherwise be folded
/// into nothing it could match).
pub const SILU: Round = Round {
    name: "silu",
    passes: &[pass("fuse-silu", Run::EveryBlock(fuse_silu))],
};

/// Constants folded until nothing changes (`constant_folding`, the
/// default).
pub const FOLD: Round = Round {
    name: "fold",
    passes: &[
        pass(
            "fold-constants",
            Run::Graph(|g, cx| fold_to_fixed_point(g, cx.dims)),
        ),
        // After folding, so the per-channel operands it checks are values.
        pass("fold-conv-affine", Run::EveryBlock(fold_conv_affine)),
    ],
};

/// The activations (so a HardSwish chain is one node), normalizations and
/// biases, then those after a convolution into it.
pub const FUSE: Round = Round {
    name: "fuse",
    passes: &[
        pass("fuse-hardswish", Run::EveryBlock(fuse_hardswish)),
        pass("fuse-gelu", Run::EveryBlock(fuse_gelu)),
        pass("fuse-layer-norm", Run::EveryBlock(fuse_layer_norm)),
        pass("fuse-matmul-bias", Run::EveryBlock(fuse_matmul_bias)),
        pass(
            "fuse-conv-activation",
            Run::EveryBlock(fuse_conv_activation),
        ),
        pass(
            "fuse-conv-scalar-affine",
            Run::EveryBlock(fuse_conv_scalar_affine),
        ),
    ],
};

/// Dead code removed, for a build without folding (whose last round
/// [`FUSE`] is).
pub const CLEANUP: Round = Round {
    name: "cleanup",
    passes: &[DEAD_CODE],
};

/// The rewrites that need shapes. The residual joins after the
/// activation and affine the producer took; the weights are packed after
/// every fusion into the product (bias, residual), then the activation
/// and softmax after a packed product join it (the activation first: it
/// comes first in the graph).
pub const SIZED: Round = Round {
    name: "sized",
    passes: &[
        pass(
            "fuse-residual-add",
            Run::Sized(Points::Every, fuse_residual_add),
        ),
        pass("fuse-attention", Run::Sized(Points::Every, fuse_attention)),
        pass(
            "prepack-matmul-weights",
            Run::EveryBlock(prepack_matmul_weights),
        ),
        pass(
            "fuse-packed-matmul-activation",
            Run::EveryBlock(fuse_packed_matmul_activation),
        ),
        pass(
            "fuse-packed-matmul-softmax",
            Run::Sized(Points::Every, fuse_packed_matmul_softmax),
        ),
        pass(
            "prepack-conv-weights",
            Run::Sized(Points::Sized, prepack_conv_weights),
        ),
        pass("add-fft-plans", Run::Sized(Points::Sized, add_fft_plans)),
        pass(
            "add-scatter-runs",
            Run::Sized(Points::Sized, add_scatter_runs),
        ),
        DEAD_CODE,
    ],
};

/// `[codegen] flush_subnormal_weights`: after every other round, on the
/// weights as the kernels will read them (packed ones included).
pub const FLUSH_SUBNORMALS: Round = Round {
    name: "flush-subnormals",
    passes: &[
        pass(
            "flush-subnormal-weights",
            Run::Graph(|g, _| Ok(flush_subnormal_weights(g))),
        ),
        DEAD_CODE,
    ],
};

/// The rounds of a build: with constant folding (the default) or without.
pub fn rounds(constant_folding: bool) -> &'static [Round] {
    if constant_folding {
        &[PREPARE, SILU, FOLD, FUSE, SIZED]
    } else {
        &[PREPARE, SILU, FUSE, CLEANUP]
    }
}

/// What one pass rewrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassReport {
    /// The round's name.
    pub round: &'static str,
    /// The pass's name.
    pub pass: &'static str,
    /// How many rewrites it made (0 for passes that do not count).
    pub rewrites: usize,
}

/// The shapes at the sizing points, computed once per round.
struct ShapeCache {
    /// The shapes at each point that sized, in point order.
    sized: Vec<HashMap<ValueId, Shape>>,
    /// Whether every point sized.
    every: bool,
}

impl ShapeCache {
    fn new(g: &Graph, dims: &[Vec<Dim>]) -> Self {
        let points = sizing_points(dims);
        let n = points.len();
        let sized: Vec<_> = points
            .into_iter()
            .filter_map(|p| size_graph(g, &[p]).ok().map(|s| s.shapes))
            .collect();
        ShapeCache {
            every: sized.len() == n,
            sized,
        }
    }

    /// The shapes a pass needing `which` points is given, or `None` when
    /// it must be skipped.
    fn for_points(&self, which: Points) -> Option<&PointShapes> {
        (self.every || which == Points::Sized).then_some(self.sized.as_slice())
    }
}

/// Runs `rounds` on `g`; returns what each pass rewrote, in order.
pub fn run(g: &mut Graph, rounds: &[Round], cx: &Context<'_>) -> Result<Vec<PassReport>> {
    let mut report = Vec::new();
    for round in rounds {
        let needs_shapes = round.passes.iter().any(|p| matches!(p.run, Run::Sized(..)));
        let cache = needs_shapes.then(|| ShapeCache::new(g, cx.dims));
        for p in round.passes {
            let rewrites = match &p.run {
                Run::Graph(f) => f(g, cx)?,
                Run::EveryBlock(f) => in_every_block(g, &mut |g: &mut Graph| f(g)),
                Run::Sized(which, f) => match cache.as_ref().and_then(|c| c.for_points(*which)) {
                    Some(shapes) => in_every_block(g, &mut |g: &mut Graph| f(g, shapes)),
                    None => 0,
                },
            };
            report.push(PassReport {
                round: round.name,
                pass: p.name,
                rewrites,
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::passes::test_graph::node;
    use lele_kernels::DType;
    use lele_kernels::ops::binary::{Binary, BinaryOp};
    use lele_kernels::ops::unary::{Swish, Unary, UnaryOp};

    #[test]
    fn pass_names_are_unique_within_a_round() {
        for fold in [true, false] {
            for round in rounds(fold).iter().chain([&FLUSH_SUBNORMALS]) {
                let mut names: Vec<_> = round.passes.iter().map(|p| p.name).collect();
                names.sort_unstable();
                let n = names.len();
                names.dedup();
                assert_eq!(names.len(), n, "round {}", round.name);
            }
        }
    }

    /// `x · sigmoid(x)` through the whole pipeline: the report lists every
    /// pass of every round in order, the SiLU fusion counts one rewrite,
    /// and the graph is left with the one fused node.
    #[test]
    fn run_reports_every_pass_in_order() {
        let mut g = Graph::default();
        let [x, s, y] = ["x", "s", "y"].map(|n| g.add_value(n, Some(DType::F32)));
        g.values[x].declared = Some(vec![crate::ir::DeclaredDim::Fixed(4)]);
        g.inputs.push(x);
        g.outputs.push(y);
        let sigmoid = Unary {
            op: UnaryOp::Sigmoid,
        };
        g.main
            .nodes
            .push(node("Sigmoid", Box::new(sigmoid), &[x], s));
        let mul = Binary { op: BinaryOp::Mul };
        g.main.nodes.push(node("Mul", Box::new(mul), &[x, s], y));
        let dims = vec![vec![Dim::Fixed(4)]];
        let ext = Extensions::default();
        let cx = Context {
            dims: &dims,
            ext: &ext,
        };
        let report = run(&mut g, rounds(true), &cx).unwrap();
        let expected: Vec<_> = rounds(true)
            .iter()
            .flat_map(|r| r.passes.iter().map(|p| (r.name, p.name)))
            .collect();
        let got: Vec<_> = report.iter().map(|r| (r.round, r.pass)).collect();
        assert_eq!(got, expected);
        let silu = report.iter().find(|r| r.pass == "fuse-silu").unwrap();
        assert_eq!(silu.rewrites, 1);
        assert_eq!(g.main.nodes.len(), 1);
        let Op::Kernel(k) = &g.main.nodes[0].op else {
            panic!("not a kernel")
        };
        let any: &dyn std::any::Any = k.as_ref();
        assert_eq!(any.downcast_ref::<Swish>(), Some(&Swish { alpha: 1.0 }));
    }
}
