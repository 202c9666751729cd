//! Subnormal weights flushed to zero (`[codegen] flush_subnormal_weights`).
//!
//! A subnormal float (nonzero, below 2^-126 in magnitude) costs a microcode
//! assist per vector instruction that reads it on x86 cores, about a
//! hundred times an ordinary multiply-add. A weight tensor full of them
//! stalls its whole product: two 768→384 1×1 convolutions of a text
//! detector, whose weights are largely subnormal, took most of the model's
//! time (in ONNX Runtime too). A product `w·x` by such a weight is below
//! `2^-126·|x|`, far under the rounding of any sum it joins unless the
//! activations are near f32's overflow, so zero is the weight's value to
//! every practical purpose. Only the multiplicands of products are
//! touched (a subnormal constant elsewhere, such as a `Max` floor, keeps
//! its exact meaning); a weight another node also reads is copied.
use lele_kernels::DType;
use lele_kernels::ops::conv::{Conv, ConvPackedWeights, ConvTranspose, ConvWinograd};
use lele_kernels::ops::matmul::{Gemm, MatMul, MatMulBias};
use lele_kernels::ops::matmul_packed::MatMulPacked;
use lele_kernels::ops::rnn::{Gru, Lstm, Rnn};

use super::matching::kernel_of;
use crate::ir::{Graph, Node, Tensor};

/// The inputs of `n` that are multiplied into a sum, by the kernel it
/// runs: the weights of convolutions (plain, prepacked, Winograd or
/// transposed), both operands of products (plain, with bias, prepacked,
/// `Gemm`) and the weight matrices of recurrent layers. Other kernels, and
/// a user's override of any of these, have none.
fn multiplicand_inputs(n: &Node) -> &'static [usize] {
    if kernel_of::<Conv>(n).is_some()
        || kernel_of::<ConvPackedWeights>(n).is_some()
        || kernel_of::<ConvWinograd>(n).is_some()
        || kernel_of::<ConvTranspose>(n).is_some()
    {
        &[1]
    } else if kernel_of::<MatMul>(n).is_some()
        || kernel_of::<MatMulBias>(n).is_some()
        || kernel_of::<MatMulPacked>(n).is_some()
        || kernel_of::<Gemm>(n).is_some()
    {
        &[0, 1]
    } else if kernel_of::<Lstm>(n).is_some()
        || kernel_of::<Gru>(n).is_some()
        || kernel_of::<Rnn>(n).is_some()
    {
        &[1, 2]
    } else {
        &[]
    }
}

/// Whether `v` is a nonzero float below the smallest normal in magnitude.
fn is_subnormal(v: f32) -> bool {
    v != 0.0 && v.abs() < f32::MIN_POSITIVE
}

/// `t` with its subnormal values zeroed and how many there were, when `t`
/// is float32 and has any.
fn flushed(t: &Tensor) -> Option<(Tensor, usize)> {
    if t.dtype != DType::F32 {
        return None;
    }
    let mut out = t.clone();
    let mut count = 0;
    for b in out.bytes_mut().chunks_exact_mut(4) {
        if is_subnormal(f32::from_le_bytes([b[0], b[1], b[2], b[3]])) {
            b.copy_from_slice(&0f32.to_le_bytes());
            count += 1;
        }
    }
    (count > 0).then_some((out, count))
}

/// Zeroes the subnormal values of every constant float32 weight of a
/// main-block convolution, product or recurrent layer (see
/// `multiplicand_inputs`), reading a flushed copy where needed. Returns
/// how many values were zeroed.
pub fn flush_subnormal_weights(g: &mut Graph) -> usize {
    let mut total = 0;
    for i in 0..g.main.nodes.len() {
        for &slot in multiplicand_inputs(&g.main.nodes[i]) {
            let Some(Some(w)) = g.main.nodes[i].inputs.get(slot).copied() else {
                continue;
            };
            let Some((t, count)) = g.values[w].constant.as_deref().and_then(flushed) else {
                continue;
            };
            let name = format!("{}.flushed", g.values[w].name);
            let wf = g.add_constant(&name, t);
            g.main.nodes[i].inputs[slot] = Some(wf);
            total += count;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ValueId;
    use crate::passes::test_graph::node;
    use lele_kernels::ops::binary::{Binary, BinaryOp};
    use lele_kernels::ops::norm::LayerNormalization;

    fn values(g: &Graph, v: ValueId) -> Vec<f32> {
        g.values[v]
            .constant
            .as_ref()
            .unwrap()
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }

    fn binary(op: BinaryOp) -> Box<dyn crate::ops::OpKernel> {
        Box::new(Binary { op })
    }

    #[test]
    fn subnormal_weights_of_products_are_zeroed_and_other_constants_kept() {
        let tiny = f32::MIN_POSITIVE;
        let sub = [
            tiny / 2.0,
            -tiny / 4.0,
            f32::from_bits(1),
            -f32::from_bits(1),
        ];
        // Normal neighbours of the subnormals, zeros of both signs, specials.
        let w_vals = [
            sub[0],
            1.5,
            sub[1],
            tiny,
            -tiny,
            0.0,
            -0.0,
            sub[2],
            f32::INFINITY,
            sub[3],
            f32::NAN,
            1e-30,
        ];
        let mut g = Graph::default();
        let x = g.add_value("x", Some(DType::F32));
        let w = g.add_constant("w", Tensor::from_values::<f32>(&[2, 6], &w_vals).unwrap());
        let floor = g.add_constant(
            "floor",
            Tensor::from_values::<f32>(&[1], &[sub[0]]).unwrap(),
        );
        let [y, z, m] = ["y", "z", "m"].map(|n| g.add_value(n, Some(DType::F32)));
        g.main
            .nodes
            .push(node("MatMul", Box::new(MatMul), &[x, w], y));
        // The same weight read by a node that is not a product, and a
        // subnormal constant of an elementwise op: both left as they are.
        g.main
            .nodes
            .push(node("Add", binary(BinaryOp::Add), &[w, y], z));
        g.main
            .nodes
            .push(node("Max", binary(BinaryOp::Max), &[z, floor], m));
        assert_eq!(flush_subnormal_weights(&mut g), 4);
        let wf = g.main.nodes[0].inputs[1].unwrap();
        assert_ne!(wf, w);
        let got = values(&g, wf);
        for (i, (&old, &new)) in w_vals.iter().zip(&got).enumerate() {
            if is_subnormal(old) {
                assert_eq!(new.to_bits(), 0, "value {i}");
            } else {
                assert!(
                    old.to_bits() == new.to_bits() || (old.is_nan() && new.is_nan()),
                    "value {i}: {old} became {new}"
                );
            }
        }
        assert_eq!(g.main.nodes[1].inputs[0], Some(w));
        assert_eq!(values(&g, w)[0].to_bits(), sub[0].to_bits());
        assert_eq!(g.main.nodes[2].inputs[1], Some(floor));
        // Nothing left to flush: a second run changes nothing.
        assert_eq!(flush_subnormal_weights(&mut g), 0);
        assert_eq!(g.main.nodes[0].inputs[1], Some(wf));
    }

    #[test]
    fn multiplicands_by_kernel_not_by_label() {
        let [x, y] = [0, 1];
        let kernels: [(&str, Box<dyn crate::ops::OpKernel>, &[usize]); 6] = [
            ("MatMul+Add+Add", Box::new(MatMulBias), &[0, 1]),
            (
                "Gemm",
                Box::new(Gemm {
                    alpha: 1.0,
                    beta: 1.0,
                    trans_a: false,
                    trans_b: true,
                }),
                &[0, 1],
            ),
            (
                "LSTM",
                Box::new(Lstm {
                    hidden_size: 4,
                    direction: lele_kernels::ops::rnn::Direction::Forward,
                    layout: 0,
                    clip: None,
                    input_forget: false,
                }),
                &[1, 2],
            ),
            // A label saying `Conv` or `MatMul` does not make a product.
            ("Conv+Swish+Add", binary(BinaryOp::Add), &[]),
            (
                "MatMul",
                Box::new(LayerNormalization {
                    axis: -1,
                    epsilon: 1e-5,
                }),
                &[],
            ),
            ("Max", binary(BinaryOp::Max), &[]),
        ];
        for (label, kernel, want) in kernels {
            assert_eq!(
                multiplicand_inputs(&node(label, kernel, &[x], y)),
                want,
                "{label}"
            );
        }
    }
}
