//! Graph passes: dtype inference, constant folding, dead-code elimination
//! and sizing (shape inference at the input bounds).
pub mod dtypes;
pub mod eval;
pub mod fold;
pub mod fold_conv;
pub mod fuse;
pub mod fuse_attention;
pub mod prepack;
pub mod sizing;
pub mod subnormal;
pub mod widen;

pub use dtypes::infer_dtypes;
pub use fold::{bypass_identities, eliminate_dead_code, fold_constants};
pub use fold_conv::{fold_conv_affine, fuse_conv_activation, fuse_conv_scalar_affine};
pub use fuse::{
    fuse_gelu, fuse_hardswish, fuse_layer_norm, fuse_matmul_bias, fuse_residual_add, fuse_silu,
};
pub use fuse_attention::fuse_attention;
pub use prepack::{
    fuse_packed_matmul_activation, fuse_packed_matmul_softmax, prepack_conv_weights,
    prepack_matmul_weights,
};
pub use sizing::{Sizes, size_graph};
pub use subnormal::flush_subnormal_weights;
pub use widen::widen_half_precision;
