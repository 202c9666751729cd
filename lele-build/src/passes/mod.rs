//! Graph passes: dtype inference, constant folding, fusions, weight
//! prepacking, dead-code elimination and sizing (shape inference at the
//! input bounds). [`pipeline`] names them in the order a build runs them.
pub mod conv_activation;
pub mod conv_affine;
pub mod conv_scalar_affine;
pub mod dead_code;
pub mod dtypes;
pub mod eval;
pub mod fft_plan;
pub mod fold;
pub mod fuse_attention;
pub mod gelu;
pub mod hardswish;
pub mod identities;
pub mod layer_norm;
pub(crate) mod matching;
pub mod matmul_bias;
pub mod packed_activation;
pub mod packed_softmax;
pub mod pipeline;
pub mod prepack_conv;
pub mod prepack_matmul;
pub mod residual_add;
pub mod scatter_runs;
pub mod silu;
pub mod sizing;
pub mod subnormal;
#[cfg(test)]
mod test_graph;
pub mod widen;

pub use conv_activation::fuse_conv_activation;
pub use conv_affine::fold_conv_affine;
pub use conv_scalar_affine::fuse_conv_scalar_affine;
pub use dead_code::eliminate_dead_code;
pub use dtypes::infer_dtypes;
pub use fft_plan::add_fft_plans;
pub use fold::{fold_constants, fold_to_fixed_point};
pub use fuse_attention::fuse_attention;
pub use gelu::fuse_gelu;
pub use hardswish::fuse_hardswish;
pub use identities::{bypass_identities, identities_from_noops};
pub use layer_norm::fuse_layer_norm;
pub use matmul_bias::fuse_matmul_bias;
pub use packed_activation::fuse_packed_matmul_activation;
pub use packed_softmax::fuse_packed_matmul_softmax;
pub use prepack_conv::prepack_conv_weights;
pub use prepack_matmul::prepack_matmul_weights;
pub use residual_add::fuse_residual_add;
pub use scatter_runs::add_scatter_runs;
pub use silu::fuse_silu;
pub use sizing::{Sizes, size_graph, sizing_points};
pub use subnormal::flush_subnormal_weights;
pub use widen::widen_half_precision;

use crate::ir::{Block, Graph, Op};

/// Runs `pass` on the main block, then on the blocks of every `If` branch
/// (nested ones too), each in turn put in the main block's place. A
/// branch's results count as model outputs meanwhile, so the pass keeps
/// them as a node's output (the passes match chains within one block and
/// count readers over the blocks inside it; a branch's values are read
/// only there or returned). Silero VAD runs its whole network inside a
/// branch, which got no fusion before. Returns the sum of what the runs
/// return.
pub fn in_every_block(g: &mut Graph, pass: &mut dyn FnMut(&mut Graph) -> usize) -> usize {
    pass(g) + in_branches(g, pass)
}

/// [`in_every_block`] for the branches of the main block's `If` nodes.
fn in_branches(g: &mut Graph, pass: &mut dyn FnMut(&mut Graph) -> usize) -> usize {
    let mut total = 0;
    for i in 0..g.main.nodes.len() {
        for then in [true, false] {
            let Op::If {
                then_branch,
                else_branch,
            } = &mut g.main.nodes[i].op
            else {
                continue;
            };
            let branch = std::mem::take(if then { then_branch } else { else_branch });
            let outer = std::mem::replace(&mut g.main, branch);
            let model_outputs = g.outputs.len();
            g.outputs.extend(g.main.outputs.iter().copied());
            total += pass(g) + in_branches(g, pass);
            g.outputs.truncate(model_outputs);
            let branch: Block = std::mem::replace(&mut g.main, outer);
            if let Op::If {
                then_branch,
                else_branch,
            } = &mut g.main.nodes[i].op
            {
                *(if then { then_branch } else { else_branch }) = branch;
            }
        }
    }
    total
}
