//! Constant `MatMul` and `Conv` weights stored packed.
//!
//! A `MatMul` (or fused `MatMulBias`) whose right operand is a constant
//! 2-D f32 weight becomes a [`MatMulPacked`] reading a copy of the weight
//! in the GEMM's panel layout ([`lele_kernels::ops::gemm::prepacked`]),
//! written into the weights blob here, at build time: no call re-packs
//! it (for a 40-row product against an 18710-column weight, that copy
//! was as long as the product itself).
use lele_kernels::DType;
use lele_kernels::ops::conv::{Conv, ConvPackedWeights, ConvWinograd};
use lele_kernels::ops::gemm::MatRef;
use lele_kernels::ops::gemm::prepacked::{pack_into, packed_len};
use lele_kernels::ops::matmul::{MatMul, MatMulBias};
use lele_kernels::ops::matmul_packed::MatMulPacked;

use super::fuse::{kernel_of, runs};
use crate::ir::{Graph, Op, Tensor};

/// Narrower weights are left alone (a product that narrow runs as dot
/// products, which read `B` as it is).
const MIN_COLUMNS: usize = 16;

/// Rewrites every main-block `MatMul`/`MatMulBias` with a constant 2-D f32
/// weight at least [`MIN_COLUMNS`] wide (and an f32 left operand); returns
/// how many. A single row (a GEMV) reads the packed weight as fast as a
/// row-major one.
pub fn prepack_matmul_weights(g: &mut Graph) -> usize {
    let mut count = 0;
    for i in 0..g.main.nodes.len() {
        let n = &g.main.nodes[i];
        let plain = runs(n, "MatMul", &MatMul) && n.inputs.len() == 2;
        let biased = kernel_of::<MatMulBias>(n).is_some() && (3..=4).contains(&n.inputs.len());
        if !plain && !biased {
            continue;
        }
        let (Some(a), Some(w)) = (n.inputs[0], n.inputs[1]) else {
            continue;
        };
        let Some(wt) = g.values[w].constant.as_ref() else {
            continue;
        };
        let &[k, cols] = wt.dims.as_slice() else {
            continue;
        };
        if wt.dtype != DType::F32
            || g.values[a].dtype != Some(DType::F32)
            || cols < MIN_COLUMNS
            || k == 0
        {
            continue;
        }
        let values: Vec<f32> = wt
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let mut packed = vec![0f32; packed_len(k, cols)];
        if !pack_into(MatRef::row_major(&values, cols), k, cols, &mut packed) {
            continue;
        }
        let Some(t) = Tensor::from_values::<f32>(&[packed.len()], &packed) else {
            continue;
        };
        let name = format!("{}.packed", g.values[w].name);
        let wp = g.add_constant(&name, t);
        let node = &mut g.main.nodes[i];
        node.inputs[1] = Some(wp);
        node.op = Op::Kernel(Box::new(MatMulPacked { k, n: cols }));
        count += 1;
    }
    count
}

/// Rewrites every main-block `Conv` (lele's own) with a constant f32
/// weight into one reading a transformed copy of it, when either applies:
/// - a dense 3×3 convolution of unit strides and dilations with enough
///   input channels ([`ConvWinograd::applies`]) runs as Winograd
///   `F(2×2, 3×3)`, its weight transformed here;
/// - one the GEMM runs for any input (more than 128 output channels per
///   group) reads its weight packed for the GEMM's left operand
///   ([`ConvPackedWeights`]).
///
/// Returns how many.
pub fn prepack_conv_weights(g: &mut Graph) -> usize {
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
        let values: Vec<f32> = wt
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let dims = wt.dims.clone();
        let (t, suffix, op): (_, _, Box<dyn crate::ops::OpKernel>) = if winograd {
            let (Some(u), Some(udims)) = (
                ConvWinograd::pack(&dims, &values),
                ConvWinograd::packed_dims(&dims),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, OutDType, ValueId};

    fn f32_const(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
        let vals: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|i| i as f32)
            .collect();
        g.add_constant(name, Tensor::from_values::<f32>(dims, &vals).unwrap())
    }

    fn node(
        op: &str,
        kernel: Box<dyn crate::ops::OpKernel>,
        ins: &[ValueId],
        out: ValueId,
    ) -> Node {
        Node {
            name: format!("{op}_{out}"),
            op_type: op.into(),
            domain: String::new(),
            op: Op::Kernel(kernel),
            inputs: ins.iter().map(|&v| Some(v)).collect(),
            outputs: vec![out],
            out_dtypes: vec![OutDType::Input(0)],
        }
    }

    /// Packs a constant 2-D weight of `MatMul` and `MatMulBias` (values in
    /// the panel layout), and leaves a narrow weight, a weight that is not
    /// constant and a 3-D weight alone.
    #[test]
    fn packs_constant_matmul_weights() {
        let mut g = Graph::default();
        let x = g.add_value("x", Some(DType::F32));
        let w = f32_const(&mut g, "w", &[3, 40]);
        let narrow = f32_const(&mut g, "narrow", &[3, 8]);
        let w3 = f32_const(&mut g, "w3", &[2, 3, 40]);
        let bias = f32_const(&mut g, "bias", &[40]);
        let outs: Vec<ValueId> = (0..5)
            .map(|i| g.add_value(&format!("y{i}"), Some(DType::F32)))
            .collect();
        g.main.nodes = vec![
            node("MatMul", Box::new(MatMul), &[x, w], outs[0]),
            node("MatMul+Add", Box::new(MatMulBias), &[x, w, bias], outs[1]),
            node("MatMul", Box::new(MatMul), &[x, narrow], outs[2]),
            node("MatMul", Box::new(MatMul), &[x, x], outs[3]),
            node("MatMul", Box::new(MatMul), &[x, w3], outs[4]),
        ];
        let n = prepack_matmul_weights(&mut g);
        assert_eq!(n, 2);
        for (i, node) in g.main.nodes.iter().enumerate() {
            let packed = kernel_of::<MatMulPacked>(node);
            assert_eq!(packed.is_some(), i < 2, "node {i}");
            if let Some(p) = packed {
                assert_eq!(*p, MatMulPacked { k: 3, n: 40 });
                let wp = g.values[node.inputs[1].unwrap()].constant.as_ref().unwrap();
                let vals = wp.to_f64s().unwrap();
                // Three panels of 16 columns, 3 rows each.
                assert_eq!(vals.len(), 3 * 3 * 16);
                // Row 1 of panel 1 holds columns 16..32 of row 1.
                assert_eq!(vals[3 * 16 + 16], 40.0 + 16.0);
                assert_eq!(vals[3 * 16 + 16 + 15], 40.0 + 31.0);
                // Row 1 of panel 2 holds columns 32..40 of row 1, then zeros.
                assert_eq!(vals[2 * 3 * 16 + 16], 40.0 + 32.0);
                assert_eq!(vals[2 * 3 * 16 + 16 + 7], 40.0 + 39.0);
                assert_eq!(vals[2 * 3 * 16 + 16 + 8], 0.0);
            }
        }
        assert_eq!(g.main.nodes[1].inputs.len(), 3);
    }
}
