//! Convolution weights stored in the layout their kernel reads: Winograd's
//! transformed tiles, or packed for the GEMM's left operand.
use lele_kernels::ops::conv::{Conv, ConvPackedWeights, ConvWinograd};
use lele_kernels::{DType, Shape};
use std::collections::HashMap;

use super::matching::kernel_of;
use crate::ir::{Graph, Op, Tensor, ValueId};

/// Output positions up to which a convolution keeps its row-major weight
/// (the GEMM's narrow products: dot products against B's columns).
const FEW_POSITIONS: usize = 8;

/// Rewrites every main-block `Conv` (lele's own) with a constant f32
/// weight into one reading a transformed copy of it, when either applies:
/// - a dense 3×3 convolution of unit strides and dilations with enough
///   input channels ([`ConvWinograd::applies`]) runs as Winograd
///   `F(2×2, 3×3)` or `F(4×4, 3×3)`, its weight transformed here: 4×4
///   tiles where [`ConvWinograd::tile_for`] picks them for the largest
///   output plane over `shapes` (the graph sized at each sizing point),
///   or for any plane when no point knows the output's shape;
/// - one the GEMM runs for any input (more output channels per group than
///   the direct path takes: 128 for a 1×1 kernel, 64 for larger ones)
///   reads its weight packed for the GEMM's left operand
///   ([`ConvPackedWeights`]), unless every sizing point that knows its
///   output has at most `FEW_POSITIONS` output positions.
///
/// Returns how many.
pub fn prepack_conv_weights(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    let mut count = 0;
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        let Some(&conv) = kernel_of::<Conv>(n) else {
            continue;
        };
        let Some(Some(w)) = n.inputs.get(1).copied() else {
            continue;
        };
        let Some(wt) = g.values[w].constant.as_ref() else {
            continue;
        };
        let winograd = ConvWinograd::applies(&conv, &wt.dims);
        if wt.dtype != DType::F32 || !(winograd || ConvPackedWeights::applies(conv.group, &wt.dims))
        {
            continue;
        }
        // Over at most 8 output positions at every sizing point that knows
        // the output (an SE block's 1×1 convolutions at 1×1), the GEMM's
        // dot products read a row-major weight in place; a packed one ran
        // the blocked product, a 16-column tile for one column, and was
        // markedly slower.
        let few_positions = n.outputs.first().is_some_and(|&y| {
            let mut areas = shapes
                .iter()
                .filter_map(|s| match s.get(&y)?.dims() {
                    &[_, _, oh, ow] => Some(oh * ow),
                    _ => None,
                })
                .peekable();
            areas.peek().is_some() && areas.all(|a| a <= FEW_POSITIONS)
        });
        if !winograd && few_positions {
            continue;
        }
        let Some(values) = wt.to_f32s() else {
            continue;
        };
        let dims = wt.dims.clone();
        let (t, suffix, op): (_, _, Box<dyn crate::ops::OpKernel>) = if winograd {
            // The largest output plane over the sizing points that know it.
            let out_area = n.outputs.first().and_then(|&y| {
                let areas = shapes.iter().filter_map(|s| match s.get(&y)?.dims() {
                    &[_, _, oh, ow] => Some(oh * ow),
                    _ => None,
                });
                areas.max()
            });
            let tile = ConvWinograd::tile_for(&dims, out_area);
            let (Some(u), Some(udims)) = (
                ConvWinograd::pack_for(tile, &dims, &values),
                ConvWinograd::packed_dims_for(tile, &dims),
            ) else {
                continue;
            };
            let m = dims[0];
            let op = Box::new(ConvWinograd { conv, m });
            (Tensor::from_values::<f32>(&udims, &u), "winograd", op)
        } else {
            let Some(packed) = ConvPackedWeights::pack(conv.group, &dims, &values) else {
                continue;
            };
            let op = Box::new(ConvPackedWeights { conv });
            (Tensor::from_values::<f32>(&dims, &packed), "packed", op)
        };
        let Some(t) = t else {
            continue;
        };
        let name = format!("{}.{suffix}", g.values[w].name);
        let wp = g.add_constant(&name, t);
        let node = &mut g.main.nodes[i];
        node.inputs[1] = Some(wp);
        node.op = Op::Kernel(op);
        count += 1;
    }
    count
}
