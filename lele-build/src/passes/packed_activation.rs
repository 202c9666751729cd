//! The activation after a prepacked product (one without a residual: the
//! graph adds that after the product, before the activation) joins it.
use lele_kernels::ops::matmul_packed::MatMulPacked;
use lele_kernels::ops::unary::Activation;

use super::matching::*;
use crate::ir::Graph;

/// Fuses the activation after a packed product into it (GELU after a
/// transformer's first feed-forward product): a [`MatMulPacked`] without
/// activation or residual whose f32 output only a Relu, Sigmoid, Swish,
/// HardSwish or GELU node reads (and is not a model output) applies that
/// activation to each finished block of its output, and the activation
/// node goes. Returns how many.
pub fn fuse_packed_matmul_activation(g: &mut Graph) -> usize {
    fuse_following_activation(
        g,
        |n, p: &MatMulPacked| p.activation == Activation::None && n.inputs.len() <= 3,
        |p, activation| Box::new(MatMulPacked { activation, ..p }),
        |old, activation| format!("{old}+{activation:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passes::test_graph::{f32_const, node};
    use crate::passes::*;
    use lele_kernels::DType;
    use lele_kernels::ops::matmul::{MatMul, MatMulBias};
    use lele_kernels::ops::matmul_packed::MatMulPacked;

    use crate::ir::{Graph, ValueId};

    /// The activation after a packed product joins it when nothing else
    /// reads the product: not when the product has a second reader, a
    /// residual (added before the activation in the graph) or is a model
    /// output; the activation node goes.
    #[test]
    fn fuses_the_activation_after_a_packed_product() {
        use lele_kernels::ops::binary::{Binary, BinaryOp};
        use lele_kernels::ops::unary::{GeluErf, Unary, UnaryOp};
        let mut g = Graph::default();
        let x = g.add_value("x", Some(DType::F32));
        let w = f32_const(&mut g, "w", &[3, 40]);
        let bias = f32_const(&mut g, "bias", &[40]);
        let ys: Vec<ValueId> = (0..4)
            .map(|i| g.add_value(&format!("y{i}"), Some(DType::F32)))
            .collect();
        let zs: Vec<ValueId> = (0..5)
            .map(|i| g.add_value(&format!("z{i}"), Some(DType::F32)))
            .collect();
        let relu = || Box::new(Unary { op: UnaryOp::Relu });
        g.main.nodes = vec![
            // Fused: one reader.
            node("MatMul+Add", Box::new(MatMulBias), &[x, w, bias], ys[0]),
            node("Gelu", Box::new(GeluErf {}), &[ys[0]], zs[0]),
            // A second reader of y1.
            node("MatMul", Box::new(MatMul), &[x, w], ys[1]),
            node("Relu", relu(), &[ys[1]], zs[1]),
            node(
                "Add",
                Box::new(Binary { op: BinaryOp::Add }),
                &[ys[1], x],
                zs[2],
            ),
            // A residual.
            node("MatMul+Add", Box::new(MatMulBias), &[x, w, bias, x], ys[2]),
            node("Relu", relu(), &[ys[2]], zs[3]),
            // A model output.
            node("MatMul", Box::new(MatMul), &[x, w], ys[3]),
            node("Relu", relu(), &[ys[3]], zs[4]),
        ];
        g.outputs = vec![zs[0], ys[3]];
        assert_eq!(prepack_matmul_weights(&mut g), 4);
        assert_eq!(fuse_packed_matmul_activation(&mut g), 1);
        let first = &g.main.nodes[0];
        assert_eq!(first.op_type, "MatMul+Add+Gelu");
        assert_eq!(first.outputs, [zs[0]]);
        assert_eq!(
            kernel_of::<MatMulPacked>(first).map(|p| p.activation),
            Some(Activation::Gelu)
        );
        let ops: Vec<&str> = g.main.nodes.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(
            ops,
            [
                "MatMul+Add+Gelu",
                "MatMul",
                "Relu",
                "Add",
                "MatMul+Add",
                "Relu",
                "MatMul",
                "Relu"
            ]
        );
        // A second run finds nothing left to fuse.
        assert_eq!(fuse_packed_matmul_activation(&mut g), 0);
    }
}
