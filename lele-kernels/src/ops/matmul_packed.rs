//! `MatMul` by a constant weight the compiler packed ahead of time.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::prepacked::{Prepacked, packed_len};
use crate::ops::gemm::{
    Epilogue, MatRef, check_f32, check_residual, f32_in, f32_out, scratch_f32, sgemm_packed_b,
    sgemm_packed_b_softmax, sgemm_scratch_len, softmax_slots_len,
};
use crate::ops::unary::{
    Activation, add_slice_in_place, exp_shifted_in_place, max_of, scale_in_place,
};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "MatMul";

/// `Y = act(A·W (+ bias)) (+ residual)` with `W` a `k × n` matrix stored
/// in the panel layout of [`crate::ops::gemm::prepacked`] (what `MatMul`
/// and `MatMulBias` with a constant 2-D weight become), so no call packs
/// it, and `act` an activation fused from the node after it (a
/// transformer's GELU after its first feed-forward product).
///
/// Inputs: `A` (`[..., k]`, at least 1-D), the packed `W` (1-D, exactly
/// [`packed_len`]`(k, n)` floats), optional `bias` (`n` floats), optional
/// residual of `Y`'s exact shape. Output: `Y` (`[..., n]`: `A`'s shape with
/// the last dim `n`, as `MatMul` gives for a 2-D right operand).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulPacked {
    /// Depth: rows of `W`, the last dim of `A`.
    pub k: usize,
    /// Columns of `W`, the last dim of `Y`.
    pub n: usize,
    /// Applied to each finished row segment after the bias, before the
    /// residual.
    pub activation: Activation,
    /// After everything else, each row of `Y` (its last axis) is replaced
    /// by its softmax (a classifier's output layer and the `Softmax` after
    /// it, fused).
    pub softmax: bool,
}
crate::to_rust_struct!(ops::matmul_packed::MatMulPacked {
    k,
    n,
    activation,
    softmax
});

fn bad(msg: &'static str) -> KernelError {
    KernelError::Shape { op: OP, msg }
}

impl MatMulPacked {
    /// Rows of the product (every leading dim of `A` folded) and `Y`'s shape.
    fn dims(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(usize, Shape), KernelError> {
        let a = input(inputs, 0, OP)?;
        let w = input(inputs, 1, OP)?;
        check_f32(a, OP)?;
        check_f32(w, OP)?;
        let r = a.shape.rank();
        if r == 0 || a.shape.dim(r - 1) != self.k {
            return Err(bad("the last dim of A must be the weight's depth"));
        }
        if w.shape.numel() != packed_len(self.k, self.n) {
            return Err(bad("the packed weight has the wrong length"));
        }
        let mut y = Shape::new(&a.shape.dims()[..r - 1])?;
        y.push(self.n)?;
        if let Some(bias) = opt_input(inputs, 2) {
            check_f32(bias, OP)?;
            if bias.shape.numel() != self.n || bias.shape.rank() > 1 {
                return Err(bad(
                    "bias must be a vector as long as the output's last dim",
                ));
            }
        }
        check_residual(inputs, 3, &y, OP)?;
        Ok((a.shape.dims()[..r - 1].iter().product(), y))
    }
}

impl Kernel for MatMulPacked {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (_, y) = self.dims(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: OP,
            msg: "no output",
        })? = y;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match self.dims(inputs) {
            Ok((m, _)) => {
                let slots = match self.softmax {
                    true => softmax_slots_len(m, self.n),
                    false => 0,
                };
                4 * (sgemm_scratch_len(m, self.n, self.k) + slots)
            }
            Err(_) => 0,
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        // Each output sums A's last dim of products.
        let out = outputs.first().map_or(0, |s| s.numel());
        crate::kernel::product_flops(out, crate::kernel::last_dim(inputs, 0))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (m, _) = self.dims(inputs)?;
        let (k, n) = (self.k, self.n);
        let a = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let w = Prepacked::new(w, k, n).ok_or(KernelError::Buffer { op: OP })?;
        let bias = opt_input(inputs, 2).map(|b| f32_in(b, OP)).transpose()?;
        let residual = opt_input(inputs, 3).map(|r| f32_in(r, OP)).transpose()?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if n == 0 || y.len() != m * n || a.len() != m * k {
            return match y.is_empty() {
                true => Ok(()),
                false => Err(KernelError::Buffer { op: OP }),
            };
        }
        // Bias, activation and residual are applied to each finished row
        // segment of Y while it is in cache (not by passes over Y).
        let activation = self.activation;
        let add = |seg: &mut [f32], at: usize| {
            if let Some(b) = bias {
                add_slice_in_place(seg, &b[at % n..]);
            }
            if activation != Activation::None {
                activation.apply_in_place(seg);
            }
            if let Some(r) = residual {
                add_slice_in_place(seg, &r[at..]);
            }
        };
        let fused = bias.is_some() || residual.is_some() || activation != Activation::None;
        let epilogue: Option<Epilogue<'_>> = match fused {
            true => Some(&add),
            false => None,
        };
        let len = sgemm_scratch_len(m, n, k);
        if self.softmax {
            let s = scratch_f32(scratch, len + softmax_slots_len(m, n), OP)?;
            let (s, slots) = s.split_at_mut(len);
            let a = MatRef::row_major(a, k);
            if sgemm_packed_b_softmax(m, n, k, a, &w, y, s, slots, epilogue)? {
                return Ok(());
            }
            // Not a product the fused form takes: the product, then each
            // row's softmax in place (the `Softmax` kernel's passes).
            sgemm_packed_b(m, n, k, 1.0, a, &w, 0.0, y, n, s, epilogue)?;
            crate::threads::for_rows(y, n, &|_, rows| {
                for row in rows.chunks_exact_mut(n) {
                    let sum = exp_shifted_in_place(row, max_of(row));
                    scale_in_place(row, 1.0 / sum);
                }
            });
            return Ok(());
        }
        let s = scratch_f32(scratch, len, OP)?;
        sgemm_packed_b(
            m,
            n,
            k,
            1.0,
            MatRef::row_major(a, k),
            &w,
            0.0,
            y,
            n,
            s,
            epilogue,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::prepacked::pack_into;
    use crate::ops::matmul::{MatMul, MatMulBias};
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn packed(w: &[f32], k: usize, n: usize) -> Vec<f32> {
        let mut p = vec![f32::NAN; packed_len(k, n)];
        assert!(pack_into(MatRef::row_major(w, n), k, n, &mut p));
        p
    }

    /// The packed product equals `MatMul` / `MatMulBias` on the unpacked
    /// weight (same blocking, so equal to rounding of the block order):
    /// widths around the panel and micro-kernel widths, one row (the GEMV
    /// path), depths past one depth block, a 3-D and a 1-D `A`, with and
    /// without bias and residual.
    #[test]
    fn packed_matmul_equals_matmul() {
        let cases: &[(&[usize], usize)] = &[
            (&[1, 70], 45),
            (&[70], 33),
            (&[7, 300], 16),
            (&[2, 13, 129], 97),
            (&[40, 120], 300),
            (&[130, 520], 64),
            (&[3, 5], 1),
        ];
        for (ci, &(sa, n)) in cases.iter().enumerate() {
            let k = sa[sa.len() - 1];
            let a = rand_vec(sa.iter().product(), 1 + ci as u64);
            let w = rand_vec(k * n, 11 + ci as u64);
            let bias = rand_vec(n, 21 + ci as u64);
            let wp = packed(&w, k, n);
            let kernel = MatMulPacked {
                k,
                n,
                activation: Activation::None,
                softmax: false,
            };
            let plain = run(&MatMul, &[Some(t(&a, sa)), Some(t(&w, &[k, n]))], 1).unwrap();
            let got = run(&kernel, &[Some(t(&a, sa)), Some(t(&wp, &[wp.len()]))], 1).unwrap();
            assert_eq!(got[0].0, plain[0].0, "case {ci}");
            assert_close(&got[0].1, &plain[0].1, 1e-5);
            let r = rand_vec(plain[0].1.len(), 31 + ci as u64);
            let y = &plain[0].0;
            let fused = run(
                &MatMulBias,
                &[
                    Some(t(&a, sa)),
                    Some(t(&w, &[k, n])),
                    Some(t(&bias, &[n])),
                    Some(t(&r, y)),
                ],
                1,
            )
            .unwrap();
            let got = run(
                &kernel,
                &[
                    Some(t(&a, sa)),
                    Some(t(&wp, &[wp.len()])),
                    Some(t(&bias, &[n])),
                    Some(t(&r, y)),
                ],
                1,
            )
            .unwrap();
            assert_close(&got[0].1, &fused[0].1, 1e-5);
            // Residual only, bias only.
            let got = run(
                &kernel,
                &[
                    Some(t(&a, sa)),
                    Some(t(&wp, &[wp.len()])),
                    None,
                    Some(t(&r, y)),
                ],
                1,
            )
            .unwrap();
            let want: Vec<f32> = plain[0].1.iter().zip(&r).map(|(p, r)| p + r).collect();
            assert_close(&got[0].1, &want, 1e-5);
            let got = run(
                &kernel,
                &[
                    Some(t(&a, sa)),
                    Some(t(&wp, &[wp.len()])),
                    Some(t(&bias, &[n])),
                ],
                1,
            )
            .unwrap();
            let want: Vec<f32> = (0..want.len())
                .map(|i| plain[0].1[i] + bias[i % n])
                .collect();
            assert_close(&got[0].1, &want, 1e-5);
        }
    }

    /// A fused activation gives bit for bit what the standalone kernel
    /// gives on the biased product, and the residual is added after it:
    /// widths with partial vectors and panels, depths past one block, a
    /// product that splits into several row blocks.
    #[test]
    fn fused_activation_equals_the_standalone_kernel() {
        use crate::ops::unary::{GeluErf, Swish, Unary, UnaryOp};
        let acts: [(Activation, &dyn Kernel); 3] = [
            (Activation::Gelu, &GeluErf {}),
            (Activation::Relu, &Unary { op: UnaryOp::Relu }),
            (Activation::Swish, &Swish { alpha: 1.0 }),
        ];
        for (ci, &(m, k, n)) in [(3, 5, 17), (130, 300, 45), (7, 40, 1030)]
            .iter()
            .enumerate()
        {
            let a = rand_vec(m * k, 1 + ci as u64);
            // Spread the outputs over the activations' interesting range.
            let w: Vec<f32> = rand_vec(k * n, 2 + ci as u64)
                .iter()
                .map(|v| v * 3.0)
                .collect();
            let bias = rand_vec(n, 3 + ci as u64);
            let r = rand_vec(m * n, 4 + ci as u64);
            let wp = packed(&w, k, n);
            for &(activation, standalone) in &acts {
                let plain = MatMulPacked {
                    k,
                    n,
                    activation: Activation::None,
                    softmax: false,
                };
                let ins = [
                    Some(t(&a, &[m, k])),
                    Some(t(&wp, &[wp.len()])),
                    Some(t(&bias, &[n])),
                ];
                let biased = run(&plain, &ins, 1).unwrap();
                let want = run(standalone, &[Some(t(&biased[0].1, &[m, n]))], 1).unwrap();
                let fused = MatMulPacked {
                    k,
                    n,
                    activation,
                    softmax: false,
                };
                let got = run(&fused, &ins, 1).unwrap();
                let same =
                    |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same(&got[0].1, &want[0].1), "{activation:?} case {ci}");
                let with_residual = [ins[0], ins[1], ins[2], Some(t(&r, &[m, n]))];
                let got = run(&fused, &with_residual, 1).unwrap();
                let want: Vec<f32> = want[0].1.iter().zip(&r).map(|(y, r)| y + r).collect();
                assert!(
                    same(&got[0].1, &want),
                    "{activation:?} + residual, case {ci}"
                );
            }
        }
    }

    /// Operands that do not match the kernel's `k`/`n` are refused.
    #[test]
    fn packed_matmul_rejects_mismatches() {
        let (k, n) = (6, 40);
        let a = rand_vec(3 * k, 1);
        let wp = packed(&rand_vec(k * n, 2), k, n);
        let kernel = MatMulPacked {
            k,
            n,
            activation: Activation::None,
            softmax: false,
        };
        assert!(
            run(
                &kernel,
                &[Some(t(&a, &[3, k])), Some(t(&wp, &[wp.len()]))],
                1
            )
            .is_ok()
        );
        // Wrong depth of A, short weight, wrong bias and residual shapes.
        assert!(
            run(
                &kernel,
                &[Some(t(&a, &[k, 3])), Some(t(&wp, &[wp.len()]))],
                1
            )
            .is_err()
        );
        assert!(
            run(
                &kernel,
                &[Some(t(&a, &[3, k])), Some(t(&wp[1..], &[wp.len() - 1]))],
                1
            )
            .is_err()
        );
        let bias = rand_vec(n + 1, 3);
        let ins = [
            Some(t(&a, &[3, k])),
            Some(t(&wp, &[wp.len()])),
            Some(t(&bias, &[n + 1])),
        ];
        assert!(run(&kernel, &ins, 1).is_err());
        let r = rand_vec(3 * n, 4);
        let ins = [
            Some(t(&a, &[3, k])),
            Some(t(&wp, &[wp.len()])),
            None,
            Some(t(&r, &[n, 3])),
        ];
        assert!(run(&kernel, &ins, 1).is_err());
    }
}

#[cfg(all(test, feature = "std"))]
mod softmax_tests {
    use super::*;
    use crate::ops::gemm::prepacked::pack_into;
    use crate::ops::softmax::Softmax;
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// The product with its softmax fused equals the product then the
    /// `Softmax` kernel, to a few roundings of the exponentials: rows of
    /// one to 40 (the few-rows path, and above it the product then an
    /// in-place softmax), widths around the 256-column groups, with a bias
    /// and a GELU before the softmax; special rows (a NaN, +∞, all −∞, a
    /// −∞ group next to finite ones) give the plain kernel's special
    /// values; 1, 2 and 3 threads give the same bits.
    #[test]
    fn fused_softmax_equals_product_then_softmax() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let cases: &[(usize, usize, usize)] = &[
            (1, 5, 17),
            (3, 16, 255),
            (2, 120, 256),
            (5, 33, 257),
            (40, 120, 700),
            (20, 64, 1000),
            (60, 40, 300),
        ];
        for (ci, &(m, k, n)) in cases.iter().enumerate() {
            let mut a = rand_vec(m * k, 40 + ci as u64);
            for v in a.iter_mut() {
                *v *= 3.0;
            }
            let w = rand_vec(k * n, 50 + ci as u64);
            let bias = rand_vec(n, 60 + ci as u64);
            let mut wp = vec![f32::NAN; packed_len(k, n)];
            assert!(pack_into(MatRef::row_major(&w, n), k, n, &mut wp));
            for activation in [Activation::None, Activation::Gelu] {
                let plain = MatMulPacked {
                    k,
                    n,
                    activation,
                    softmax: false,
                };
                let fused = MatMulPacked {
                    softmax: true,
                    ..plain
                };
                let inputs = [
                    Some(t(&a, &[m, k])),
                    Some(t(&wp, &[wp.len()])),
                    Some(t(&bias, &[n])),
                ];
                let logits = run(&plain, &inputs, 1).unwrap();
                let want =
                    run(&Softmax { axis: -1 }, &[Some(t(&logits[0].1, &[m, n]))], 1).unwrap();
                let mut outs = Vec::new();
                for threads in [1, 2, 3] {
                    crate::threads::set_num_threads(threads);
                    outs.push(run(&fused, &inputs, 1).unwrap());
                }
                crate::threads::set_num_threads(1);
                assert_eq!(outs[0][0].0, vec![m, n]);
                for (i, o) in outs.iter().enumerate().skip(1) {
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&o[0].1),
                        bits(&outs[0][0].1),
                        "case {ci}: {} threads",
                        i + 1
                    );
                }
                for (j, (g, w)) in outs[0][0].1.iter().zip(&want[0].1).enumerate() {
                    assert!(close(*g, *w), "case {ci} {activation:?} at {j}: {g} vs {w}");
                }
            }
        }
        // Special rows through a weight of ones (each output column equals
        // the row's sum of A) and a bias that sets each column: row 0 has a
        // NaN, row 1 a +∞, row 2 all −∞, row 3 −∞ over its first group and
        // finite values after it.
        let (m, k, n) = (2, 1, 600);
        let a = vec![1.0f32; m * k];
        let w = vec![1.0f32; k * n];
        let mut wp = vec![f32::NAN; packed_len(k, n)];
        assert!(pack_into(MatRef::row_major(&w, n), k, n, &mut wp));
        for (row, expect) in [
            (0usize, "nan"),
            (1, "nan"),
            (2, "nan"),
            (3, "finite"),
            (4, "spread"),
        ] {
            let mut bias: Vec<f32> = (0..n).map(|j| (j % 7) as f32 - 3.0).collect();
            match row {
                0 => bias[300] = f32::NAN,
                1 => bias[5] = f32::INFINITY,
                2 => bias.fill(f32::NEG_INFINITY),
                3 => bias[..256].fill(f32::NEG_INFINITY),
                // Values 80 to 86 below their group's largest, whose
                // products with the group's factor (the next group's
                // largest is 10 higher) would be subnormal: 0, as the
                // plain softmax gives.
                _ => {
                    for (j, b) in bias[..256].iter_mut().enumerate() {
                        *b = if j == 0 { 0.0 } else { -80.0 - (j % 7) as f32 };
                    }
                    bias[300] = 10.0;
                }
            }
            let kernel = MatMulPacked {
                k,
                n,
                activation: Activation::None,
                softmax: true,
            };
            // Two equal rows: the few-rows product takes them (one row
            // runs the product, then the softmax in place).
            let inputs = [
                Some(t(&a, &[m, k])),
                Some(t(&wp, &[wp.len()])),
                Some(t(&bias, &[n])),
            ];
            let got = run(&kernel, &inputs, 1).unwrap();
            let logits: Vec<f32> = bias.iter().map(|b| b + 1.0).collect();
            let want = run(&Softmax { axis: -1 }, &[Some(t(&logits, &[1, n]))], 1).unwrap();
            let want: Vec<f32> = want[0].1.iter().chain(&want[0].1).copied().collect();
            for (j, (g, w)) in got[0].1.iter().zip(&want).enumerate() {
                let same = (g.is_nan() && w.is_nan()) || close(*g, *w);
                assert!(same, "special row {row} ({expect}) at {j}: {g} vs {w}");
            }
            match expect {
                "nan" => assert!(got[0].1.iter().all(|v| v.is_nan()), "row {row}"),
                "finite" => assert!(got[0].1[..256].iter().all(|&v| v == 0.0), "row {row}"),
                _ => assert!(
                    got[0].1.iter().all(|&v| v == 0.0 || v >= f32::MIN_POSITIVE),
                    "row {row}: a subnormal output"
                ),
            }
        }
    }

    /// Within the rounding of the exponentials' arguments: an output `w =
    /// e^(x − M) / S` comes from an argument of about `ln w`, rounded to
    /// its float (the fused form rounds two arguments, `x − shift` and
    /// `shift − M`), so the error grows with `|ln w|`; a few ulp besides.
    /// The fused form gives 0 where the plain one gives a subnormal.
    fn close(g: f32, w: f32) -> bool {
        if g == 0.0 && w.abs() < f32::MIN_POSITIVE {
            return true;
        }
        let (g, w) = (f64::from(g), f64::from(w));
        let ulp = f64::from(f32::EPSILON);
        (g - w).abs() <= w.abs() * (4.0 + 2.0 * w.abs().ln().abs()) * ulp
    }
}
