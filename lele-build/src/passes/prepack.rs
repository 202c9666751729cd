//! Constant `MatMul` and `Conv` weights stored packed.
//!
//! A `MatMul` (or fused `MatMulBias`, or a `Gemm` that is one: a Linear
//! layer's `x·Wᵀ + b`) whose right operand is a constant 2-D f32 weight
//! becomes a [`MatMulPacked`] reading a copy of the weight
//! in the GEMM's panel layout ([`lele_kernels::ops::gemm::prepacked`]),
//! written into the weights blob here, at build time: no call re-packs
//! it (for a 40-row product against an 18710-column weight, that copy
//! was as long as the product itself).
use std::collections::HashMap;

use lele_kernels::ops::conv::{Conv, ConvPackedWeights, ConvWinograd};
use lele_kernels::ops::gemm::MatRef;
use lele_kernels::ops::gemm::prepacked::{pack_into, packed_len};
use lele_kernels::ops::matmul::{Gemm, MatMul, MatMulBias};
use lele_kernels::ops::matmul_packed::MatMulPacked;
use lele_kernels::ops::softmax::Softmax;
use lele_kernels::ops::unary::Activation;
use lele_kernels::{DType, Shape};

use super::fold_conv::{fuse_following_activation, fuse_into_producer};
use super::fuse::{kernel_of, runs};
use crate::ir::{Graph, Op, Tensor, ValueId};

/// Narrower weights are left alone (a product that narrow runs as dot
/// products, which read `B` as it is).
const MIN_COLUMNS: usize = 16;

/// The operands of a product by a constant weight, as [`MatMulPacked`]
/// takes them.
struct Product {
    /// The left operand.
    a: ValueId,
    /// The constant weight.
    w: ValueId,
    /// The weight is stored `n × k` (a `Gemm` with `transB`).
    transposed: bool,
    /// The inputs after the weight: bias, residual.
    rest: Vec<Option<ValueId>>,
    /// The bias is `rest[0]`, a constant stored as one row (`[1, n]`):
    /// the packed product takes it as a vector.
    bias_row: bool,
}

/// Node `i` as a product [`MatMulPacked`] can compute, when it is one:
/// `MatMul`, `MatMulBias`, or a `Gemm` with `A` as it is, `alpha = 1` and
/// either no `C` or a constant f32 `C` of `[n]` or `[1, n]` with
/// `beta = 1` (a Linear layer's bias).
fn product(g: &Graph, i: usize) -> Option<Product> {
    let n = &g.main.nodes[i];
    let plain = runs(n, &MatMul) && n.inputs.len() == 2;
    let biased = kernel_of::<MatMulBias>(n).is_some() && (3..=4).contains(&n.inputs.len());
    let (a, w) = (n.inputs.first().copied()??, n.inputs.get(1).copied()??);
    if plain || biased {
        return Some(Product {
            a,
            w,
            transposed: false,
            rest: n.inputs[2..].to_vec(),
            bias_row: false,
        });
    }
    let gemm = kernel_of::<Gemm>(n)?;
    if gemm.trans_a || gemm.alpha != 1.0 || n.inputs.len() > 3 {
        return None;
    }
    let transposed = gemm.trans_b;
    let Some(c) = n.inputs.get(2).copied().flatten() else {
        return Some(Product {
            a,
            w,
            transposed,
            rest: Vec::new(),
            bias_row: false,
        });
    };
    let cols = *g.values[w]
        .constant
        .as_ref()?
        .dims
        .get(usize::from(!transposed))?;
    let ct = g.values[c].constant.as_ref()?;
    if gemm.beta != 1.0 || ct.dtype != DType::F32 {
        return None;
    }
    let bias_row = match *ct.dims.as_slice() {
        [len] if len == cols => false,
        [1, len] if len == cols => true,
        _ => return None,
    };
    Some(Product {
        a,
        w,
        transposed,
        rest: vec![Some(c)],
        bias_row,
    })
}

/// Rewrites every main-block product by a constant 2-D f32 weight at least
/// [`MIN_COLUMNS`] wide (and an f32 left operand) into a
/// [`MatMulPacked`]: `MatMul`, `MatMulBias` and the `Gemm`s of
/// [`product`] (a `transB` weight is transposed as it is packed). Returns
/// how many. A single row (a GEMV) reads the packed weight as fast as a
/// row-major one.
pub fn prepack_matmul_weights(g: &mut Graph) -> usize {
    let mut count = 0;
    for i in 0..g.main.nodes.len() {
        let Some(Product {
            a,
            w,
            transposed,
            mut rest,
            bias_row,
        }) = product(g, i)
        else {
            continue;
        };
        let Some(wt) = g.values[w].constant.as_ref() else {
            continue;
        };
        let &[rows, cols] = wt.dims.as_slice() else {
            continue;
        };
        let (k, cols) = if transposed {
            (cols, rows)
        } else {
            (rows, cols)
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
        let b = if transposed {
            MatRef::transposed(&values, k)
        } else {
            MatRef::row_major(&values, cols)
        };
        let mut packed = vec![0f32; packed_len(k, cols)];
        if !pack_into(b, k, cols, &mut packed) {
            continue;
        }
        let Some(t) = Tensor::from_values::<f32>(&[packed.len()], &packed) else {
            continue;
        };
        if bias_row && let Some(Some(c)) = rest.first().copied() {
            let row = g.values[c].constant.as_ref().map(|ct| ct.bytes().to_vec());
            let Some(vector) = row.and_then(|b| Tensor::from_bytes(DType::F32, &[cols], &b)) else {
                continue;
            };
            let name = format!("{}.vector", g.values[c].name);
            rest[0] = Some(g.add_constant(&name, vector));
        }
        let name = format!("{}.packed", g.values[w].name);
        let wp = g.add_constant(&name, t);
        let node = &mut g.main.nodes[i];
        node.inputs = [Some(a), Some(wp)].into_iter().chain(rest).collect();
        node.op = Op::Kernel(Box::new(MatMulPacked {
            k,
            n: cols,
            activation: Activation::None,
            softmax: false,
        }));
        count += 1;
    }
    count
}

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
///   output has at most [`FEW_POSITIONS`] output positions.
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
        let values: Vec<f32> = wt
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, OutDType};

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
                assert_eq!(
                    *p,
                    MatMulPacked {
                        k: 3,
                        n: 40,
                        activation: Activation::None,
                        softmax: false,
                    }
                );
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

    fn gemm(alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Box<Gemm> {
        Box::new(Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        })
    }

    /// A `Gemm` with `transB` (a Linear layer) is packed as the `k × n`
    /// product it computes, its bias kept (a `[1, n]` bias as a vector);
    /// one with `alpha`, `beta`, `transA` or a full `C` is left alone.
    #[test]
    fn packs_a_gemm_that_is_a_linear_layer() {
        let mut g = Graph::default();
        let x = g.add_value("x", Some(DType::F32));
        // W stored n × k = 20 × 3: element (p, j) of the product's k × n
        // weight is j·3 + p.
        let w = f32_const(&mut g, "w", &[20, 3]);
        let w_kn = f32_const(&mut g, "w_kn", &[3, 20]);
        let bias = f32_const(&mut g, "bias", &[20]);
        let bias_row = f32_const(&mut g, "bias_row", &[1, 20]);
        let full_c = f32_const(&mut g, "full_c", &[4, 20]);
        let outs: Vec<ValueId> = (0..8)
            .map(|i| g.add_value(&format!("y{i}"), Some(DType::F32)))
            .collect();
        g.main.nodes = vec![
            node("Gemm", gemm(1.0, 1.0, false, true), &[x, w, bias], outs[0]),
            node(
                "Gemm",
                gemm(1.0, 1.0, false, true),
                &[x, w, bias_row],
                outs[1],
            ),
            node("Gemm", gemm(1.0, 1.0, false, false), &[x, w_kn], outs[2]),
            node("Gemm", gemm(2.0, 1.0, false, true), &[x, w, bias], outs[3]),
            node("Gemm", gemm(1.0, 0.5, false, true), &[x, w, bias], outs[4]),
            node("Gemm", gemm(1.0, 1.0, true, true), &[x, w, bias], outs[5]),
            node(
                "Gemm",
                gemm(1.0, 1.0, false, true),
                &[x, w, full_c],
                outs[6],
            ),
            node("Gemm", gemm(1.0, 1.0, false, true), &[x, x], outs[7]),
        ];
        assert_eq!(prepack_matmul_weights(&mut g), 3);
        for (i, node) in g.main.nodes.iter().enumerate() {
            let packed = kernel_of::<MatMulPacked>(node);
            assert_eq!(packed.is_some(), i < 3, "node {i}");
            assert_eq!(kernel_of::<Gemm>(node).is_some(), i >= 3, "node {i}");
            let Some(p) = packed else { continue };
            assert_eq!(
                *p,
                MatMulPacked {
                    k: 3,
                    n: 20,
                    activation: Activation::None,
                    softmax: false,
                }
            );
            let wp = g.values[node.inputs[1].unwrap()].constant.as_ref().unwrap();
            let vals = wp.to_f64s().unwrap();
            assert_eq!(vals.len(), 2 * 3 * 16);
            // Row p of panel q holds columns 16q.. of row p of the k × n
            // weight: W[j][p] for the transposed ones, W_kn[p][j] = p·20 + j
            // for the other.
            let want = |p: usize, j: usize| if i < 2 { j * 3 + p } else { p * 20 + j } as f64;
            for p in 0..3 {
                for j in 0..20 {
                    let at = (j / 16) * 3 * 16 + p * 16 + j % 16;
                    assert_eq!(vals[at], want(p, j), "node {i} ({p}, {j})");
                }
                for j in 20..32 {
                    assert_eq!(vals[16 * 3 + p * 16 + j % 16], 0.0);
                }
            }
        }
        assert_eq!(g.main.nodes[0].inputs[2], Some(bias));
        let vector = g.main.nodes[1].inputs[2].unwrap();
        let vt = g.values[vector].constant.as_ref().unwrap();
        assert_eq!(vt.dims, [20]);
        assert_eq!(
            vt.to_f64s().unwrap(),
            (0..20).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(g.main.nodes[2].inputs.len(), 2);
    }

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
