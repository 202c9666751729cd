//! The softmax over the last axis after a prepacked product (a
//! classifier's output layer) joins it: each finished row is replaced by
//! its softmax.
use lele_kernels::Shape;
use lele_kernels::ops::matmul_packed::MatMulPacked;
use lele_kernels::ops::softmax::Softmax;
use std::collections::HashMap;

use super::matching::kernel_of;
use super::matching::*;
use crate::ir::{Graph, ValueId};

/// Fuses the softmax after a packed product into it (a text recognizer's
/// output layer and its softmax over the classes): a [`MatMulPacked`]
/// whose f32 output only a `Softmax` (lele's own) over its last axis reads,
/// and is not a model output, exponentiates each finished block of its
/// output while it is cached and scales it once its row's total is known,
/// so no pass reads the logits back; the `Softmax` node goes. The axis is
/// the last when it is -1, or when every sizing point gives the product's
/// output that many dims. Returns how many.
pub fn fuse_packed_matmul_softmax(g: &mut Graph, shapes: &[HashMap<ValueId, Shape>]) -> usize {
    fuse_into_producer(
        g,
        |_, p: &MatMulPacked| !p.softmax,
        |s, out| {
            let softmax = kernel_of::<Softmax>(s)?;
            let last = softmax.axis == -1
                || (softmax.axis >= 0
                    && !shapes.is_empty()
                    && shapes.iter().all(|at| {
                        at.get(&out)
                            .is_some_and(|sh| sh.rank() as i64 == softmax.axis + 1)
                    }));
            last.then_some(())
        },
        |product, ()| {
            Box::new(MatMulPacked {
                softmax: true,
                ..product
            })
        },
        |old, ()| format!("{old}+Softmax"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Graph, ValueId};
    use crate::passes::test_graph::{f32_const, node};
    use crate::passes::*;
    use lele_kernels::ops::matmul::{MatMul, MatMulBias};
    use lele_kernels::ops::matmul_packed::MatMulPacked;
    use lele_kernels::{DType, Shape};
    use std::collections::HashMap;

    /// The softmax over the last axis after a packed product joins it; one
    /// over another axis, one after a product read twice, and a product
    /// that is a model output stay apart. Axis 1 counts as the last only
    /// when every sizing point gives the product's output two dims.
    #[test]
    fn fuses_the_softmax_after_a_packed_product() {
        let mut g = Graph::default();
        let x = g.add_value("x", Some(DType::F32));
        let w = f32_const(&mut g, "w", &[3, 40]);
        let bias = f32_const(&mut g, "bias", &[40]);
        let ys: Vec<ValueId> = (0..5)
            .map(|i| g.add_value(&format!("y{i}"), Some(DType::F32)))
            .collect();
        let zs: Vec<ValueId> = (0..6)
            .map(|i| g.add_value(&format!("z{i}"), Some(DType::F32)))
            .collect();
        let softmax = |axis| Box::new(Softmax { axis });
        g.main.nodes = vec![
            // Fused: the last axis, one reader.
            node("MatMul+Add", Box::new(MatMulBias), &[x, w, bias], ys[0]),
            node("Softmax", softmax(-1), &[ys[0]], zs[0]),
            // Axis 0 of a 2-D output.
            node("MatMul", Box::new(MatMul), &[x, w], ys[1]),
            node("Softmax", softmax(0), &[ys[1]], zs[1]),
            // A second reader.
            node("MatMul", Box::new(MatMul), &[x, w], ys[2]),
            node("Softmax", softmax(-1), &[ys[2]], zs[2]),
            node("Softmax", softmax(-1), &[ys[2]], zs[3]),
            // A model output.
            node("MatMul", Box::new(MatMul), &[x, w], ys[3]),
            node("Softmax", softmax(-1), &[ys[3]], zs[4]),
            // Axis 1, the last at every sizing point: fused.
            node("MatMul", Box::new(MatMul), &[x, w], ys[4]),
            node("Softmax", softmax(1), &[ys[4]], zs[5]),
        ];
        g.outputs = vec![zs[0], ys[3]];
        assert_eq!(prepack_matmul_weights(&mut g), 5);
        let two_dims = |v: ValueId| (v, Shape::new(&[2, 40]).unwrap());
        let shapes: Vec<HashMap<ValueId, Shape>> = (0..2)
            .map(|_| ys.iter().map(|&v| two_dims(v)).collect())
            .collect();
        // Without sizing points only the axis written as -1 is known to be
        // the last; with them, axis 1 too.
        assert_eq!(fuse_packed_matmul_softmax(&mut g, &[]), 1);
        assert_eq!(fuse_packed_matmul_softmax(&mut g, &shapes), 1);
        let ops: Vec<&str> = g.main.nodes.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(
            ops,
            [
                "MatMul+Add+Softmax",
                "MatMul",
                "Softmax",
                "MatMul",
                "Softmax",
                "Softmax",
                "MatMul",
                "Softmax",
                "MatMul+Softmax"
            ]
        );
        assert_eq!(g.main.nodes[0].outputs, [zs[0]]);
        assert_eq!(g.main.nodes[8].outputs, [zs[5]]);
        assert_eq!(
            kernel_of::<MatMulPacked>(&g.main.nodes[0]).map(|p| p.softmax),
            Some(true)
        );
        // A second run finds nothing left to fuse.
        assert_eq!(fuse_packed_matmul_softmax(&mut g, &shapes), 0);
    }
}
