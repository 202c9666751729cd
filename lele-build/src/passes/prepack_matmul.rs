//! Constant `MatMul` and `Conv` weights stored packed.
//!
//! A `MatMul` (or fused `MatMulBias`, or a `Gemm` that is one: a Linear
//! layer's `x·Wᵀ + b`) whose right operand is a constant 2-D f32 weight
//! becomes a [`MatMulPacked`] reading a copy of the weight
//! in the GEMM's panel layout ([`lele_kernels::ops::gemm::prepacked`]),
//! written into the weights blob here, at build time: no call re-packs
//! it (for a 40-row product against an 18710-column weight, that copy
//! was as long as the product itself).
use lele_kernels::DType;
use lele_kernels::ops::gemm::MatRef;
use lele_kernels::ops::gemm::prepacked::{pack_into, packed_len};
use lele_kernels::ops::matmul::{Gemm, MatMul, MatMulBias};
use lele_kernels::ops::matmul_packed::MatMulPacked;
use lele_kernels::ops::unary::Activation;

use super::matching::{kernel_of, runs};
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
/// `MIN_COLUMNS` wide (and an f32 left operand) into a
/// [`MatMulPacked`]: `MatMul`, `MatMulBias` and the `Gemm`s of
/// `product` (a `transB` weight is transposed as it is packed). Returns
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
        let Some(values) = wt.to_f32s() else {
            continue;
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passes::test_graph::{f32_const, node};

    use lele_kernels::DType;
    use lele_kernels::ops::matmul::{Gemm, MatMul, MatMulBias};
    use lele_kernels::ops::matmul_packed::MatMulPacked;

    use crate::ir::{Graph, ValueId};

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
}
