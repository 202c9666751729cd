//! An activation after a convolution (or a transposed one) joins it: the
//! kernel applies it to each block of the output as it is produced.
use super::matching::*;
use crate::ir::Graph;
use lele_kernels::ops::conv::{Conv, ConvTranspose};
use lele_kernels::ops::unary::Activation;

/// Fuses activations into the convolutions (and transposed ones) before
/// them; returns how many.
pub fn fuse_conv_activation(g: &mut Graph) -> usize {
    fuse_following_activation(
        g,
        |_, conv: &Conv| conv.activation == Activation::None,
        |conv, activation| Box::new(Conv { activation, ..conv }),
        |_, activation| format!("Conv+{activation:?}"),
    ) + fuse_following_activation(
        g,
        |_, conv: &ConvTranspose| conv.activation == Activation::None,
        |conv, activation| Box::new(ConvTranspose { activation, ..conv }),
        |_, activation| format!("ConvTranspose+{activation:?}"),
    )
}
