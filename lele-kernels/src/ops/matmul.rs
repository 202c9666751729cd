//! `MatMul` and `Gemm`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{
    MatRef, check_f32, check_residual, f32_in, f32_out, scratch_f32, sgemm, sgemm_scratch_len,
};
use crate::shape::{MAX_RANK, Shape, broadcast};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `MatMul`: NumPy `matmul` semantics (1-D operands are promoted to
/// matrices and the added dim removed; leading batch dims broadcast).
///
/// Inputs: `A`, `B`. Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMul;
crate::to_rust_struct!(ops::matmul::MatMul {});

/// Shapes of a MatMul: batch dims of A, B and Y plus `m`, `n`, `k`.
struct MmDims {
    batch_a: Shape,
    batch_b: Shape,
    batch_y: Shape,
    m: usize,
    n: usize,
    k: usize,
}

fn mm_dims(a: &Shape, b: &Shape) -> Result<(MmDims, Shape), KernelError> {
    const OP: &str = "MatMul";
    if a.rank() == 0 || b.rank() == 0 {
        return Err(KernelError::Shape {
            op: OP,
            msg: "MatMul operands must have rank >= 1",
        });
    }
    let (m, ka, batch_a) = if a.rank() == 1 {
        (1, a.dim(0), Shape::SCALAR)
    } else {
        let r = a.rank();
        (a.dim(r - 2), a.dim(r - 1), Shape::new(&a.dims()[..r - 2])?)
    };
    let (kb, n, batch_b) = if b.rank() == 1 {
        (b.dim(0), 1, Shape::SCALAR)
    } else {
        let r = b.rank();
        (b.dim(r - 2), b.dim(r - 1), Shape::new(&b.dims()[..r - 2])?)
    };
    if ka != kb {
        return Err(KernelError::Shape {
            op: OP,
            msg: "inner dimensions differ",
        });
    }
    let batch_y = broadcast(&batch_a, &batch_b, OP)?;
    let mut y = batch_y;
    if a.rank() > 1 {
        y.push(m)?;
    }
    if b.rank() > 1 {
        y.push(n)?;
    }
    Ok((
        MmDims {
            batch_a,
            batch_b,
            batch_y,
            m,
            n,
            k: ka,
        },
        y,
    ))
}

/// Offset (in matrices) of batch index `idx` of `batch_y` inside a broadcast
/// operand with batch dims `batch`.
fn batch_offset(batch: &Shape, batch_y: &Shape, mut idx: usize) -> usize {
    let ry = batch_y.rank();
    let rb = batch.rank();
    let mut off = 0;
    let mut stride = 1;
    for d in (0..ry).rev() {
        let dy = batch_y.dim(d);
        let i = idx % dy;
        idx /= dy;
        if d + rb >= ry {
            let db = batch.dim(d + rb - ry);
            if db != 1 {
                off += i * stride;
            }
            stride *= db;
        }
    }
    off
}

impl MatMul {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(MmDims, Shape), KernelError> {
        let a = input(inputs, 0, "MatMul")?;
        let b = input(inputs, 1, "MatMul")?;
        check_f32(a, "MatMul")?;
        check_f32(b, "MatMul")?;
        mm_dims(&a.shape, &b.shape)
    }
}

impl Kernel for MatMul {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (_, y) = Self::dims(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "MatMul",
            msg: "no output",
        })? = y;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match Self::dims(inputs) {
            Ok((d, _)) => {
                // The folded case multiplies (batch*m) x k by k x n.
                let fold = d.batch_a.numel().max(1);
                // Folded rows past usize (a zero dim elsewhere): saturated,
                // which the arena cap refuses.
                match d.m.checked_mul(fold) {
                    Some(rows) => {
                        4 * sgemm_scratch_len(rows, d.n, d.k).max(sgemm_scratch_len(d.m, d.n, d.k))
                    }
                    None => usize::MAX,
                }
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
        let y = f32_out(output(outputs, 0, "MatMul")?, "MatMul")?;
        matmul_into(inputs, y, 0.0, scratch)
    }
}

/// `Y = A·B + beta·Y` (MatMul's broadcasting) into `y`.
fn matmul_into(
    inputs: &[Option<TensorRef<'_>>],
    y: &mut [f32],
    beta: f32,
    scratch: &mut [u8],
) -> Result<(), KernelError> {
    const OP: &str = "MatMul";
    let (d, _) = MatMul::dims(inputs)?;
    let a = f32_in(input(inputs, 0, OP)?, OP)?;
    let b = f32_in(input(inputs, 1, OP)?, OP)?;
    let (m, n, k) = (d.m, d.n, d.k);
    let nb = d.batch_y.numel();
    if y.len() != nb * m * n {
        return Err(KernelError::Buffer { op: OP });
    }
    if d.batch_b.numel() == 1 && d.batch_a.numel() == nb {
        // B is shared by every batch: one tall product.
        let mm = nb * m;
        let s = scratch_f32(scratch, sgemm_scratch_len(mm, n, k), OP)?;
        return sgemm(
            mm,
            n,
            k,
            1.0,
            MatRef::row_major(a, k),
            MatRef::row_major(b, n),
            beta,
            y,
            n,
            s,
        );
    }
    let s = scratch_f32(scratch, sgemm_scratch_len(m, n, k), OP)?;
    for bi in 0..nb {
        let oa = batch_offset(&d.batch_a, &d.batch_y, bi) * m * k;
        let ob = batch_offset(&d.batch_b, &d.batch_y, bi) * k * n;
        let av = a
            .get(oa..oa + m * k)
            .ok_or(KernelError::Buffer { op: OP })?;
        let bv = b
            .get(ob..ob + k * n)
            .ok_or(KernelError::Buffer { op: OP })?;
        sgemm(
            m,
            n,
            k,
            1.0,
            MatRef::row_major(av, k),
            MatRef::row_major(bv, n),
            beta,
            &mut y[bi * m * n..(bi + 1) * m * n],
            n,
            s,
        )?;
    }
    Ok(())
}

/// `MatMul` followed by adding a bias along the last axis (a fused
/// `Add(MatMul(A, B), bias)`, the Linear layers of transformer exports):
/// `Y` starts as the bias rows and the product accumulates into it, so no
/// separate pass over `Y` adds it.
///
/// Inputs: `A`, `B` (as [`MatMul`]), `bias` (`n` elements, `n` = the last
/// dim of `Y`, which must be at least 1-D), optionally a residual of `Y`'s
/// exact shape (a following `Add` fused too), which `Y` also starts from
/// (so the sum is rounded in another order than two separate adds).
/// Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulBias;
crate::to_rust_struct!(ops::matmul::MatMulBias {});

impl MatMulBias {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(MmDims, Shape), KernelError> {
        const OP: &str = "MatMul+Add";
        let (d, y) = MatMul::dims(inputs)?;
        let bias = input(inputs, 2, OP)?;
        check_f32(bias, OP)?;
        if y.rank() == 0 || bias.shape.numel() != d.n || bias.shape.rank() > 1 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "bias must be a vector as long as the output's last dim",
            });
        }
        check_residual(inputs, 3, &y, OP)?;
        Ok((d, y))
    }
}

impl Kernel for MatMulBias {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (_, y) = Self::dims(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "MatMul+Add",
            msg: "no output",
        })? = y;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        MatMul.scratch_bytes(&inputs[..inputs.len().min(2)], outputs)
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
        const OP: &str = "MatMul+Add";
        let (d, _) = Self::dims(inputs)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let residual = match opt_input(inputs, 3) {
            Some(r) => Some(f32_in(r, OP)?),
            None => None,
        };
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if d.n == 0 {
            return Ok(());
        }
        match residual {
            Some(r) if r.len() == y.len() => {
                for (row, r) in y.chunks_exact_mut(d.n).zip(r.chunks_exact(d.n)) {
                    for ((v, &b), &x) in row.iter_mut().zip(bias).zip(r) {
                        *v = b + x;
                    }
                }
            }
            Some(_) => return Err(KernelError::Buffer { op: OP }),
            None => {
                for row in y.chunks_exact_mut(d.n) {
                    row.copy_from_slice(bias);
                }
            }
        }
        matmul_into(&inputs[..2], y, 1.0, scratch)
    }
}

/// ONNX `Gemm`: `Y = alpha·op(A)·op(B) + beta·C` with `op` an optional
/// transpose; `C` is optional and unidirectionally broadcast to `(M, N)`.
///
/// Inputs: `A`, `B`, optional `C`. Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    /// Scale of `A·B`.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// Transpose `A` first.
    pub trans_a: bool,
    /// Transpose `B` first.
    pub trans_b: bool,
}
crate::to_rust_struct!(ops::matmul::Gemm {
    alpha,
    beta,
    trans_a,
    trans_b
});

impl Gemm {
    /// `(m, n, k)`.
    fn dims(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(usize, usize, usize), KernelError> {
        const OP: &str = "Gemm";
        let a = input(inputs, 0, OP)?;
        let b = input(inputs, 1, OP)?;
        check_f32(a, OP)?;
        check_f32(b, OP)?;
        if a.shape.rank() != 2 || b.shape.rank() != 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "Gemm operands must be matrices",
            });
        }
        let (m, ka) = if self.trans_a {
            (a.shape.dim(1), a.shape.dim(0))
        } else {
            (a.shape.dim(0), a.shape.dim(1))
        };
        let (kb, n) = if self.trans_b {
            (b.shape.dim(1), b.shape.dim(0))
        } else {
            (b.shape.dim(0), b.shape.dim(1))
        };
        if ka != kb {
            return Err(KernelError::Shape {
                op: OP,
                msg: "inner dimensions differ",
            });
        }
        if let Some(c) = opt_input(inputs, 2) {
            check_f32(c, OP)?;
            let ok = match c.shape.dims() {
                [] => true,
                [x] => *x == n || *x == 1,
                [r, x] => (*r == m || *r == 1) && (*x == n || *x == 1),
                _ => false,
            };
            if !ok {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "C cannot be broadcast to (M, N)",
                });
            }
        }
        Ok((m, n, ka))
    }
}

impl Kernel for Gemm {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (m, n, _) = self.dims(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "Gemm",
            msg: "no output",
        })? = Shape::new(&[m, n])?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        self.dims(inputs)
            .map(|(m, n, k)| 4 * sgemm_scratch_len(m, n, k))
            .unwrap_or(0)
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        self.dims(inputs).map_or(0, |(m, n, k)| {
            crate::kernel::product_flops(m.saturating_mul(n), k)
        })
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Gemm";
        let (m, n, k) = self.dims(inputs)?;
        let a = f32_in(input(inputs, 0, OP)?, OP)?;
        let b = f32_in(input(inputs, 1, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if y.len() != m * n {
            return Err(KernelError::Buffer { op: OP });
        }
        let mut beta = 0.0;
        if let Some(ct) = opt_input(inputs, 2) {
            let c = f32_in(ct, OP)?;
            let (rows, cols) = match ct.shape.dims() {
                [] => (1, 1),
                [x] => (1, *x),
                [r, x] => (*r, *x),
                _ => {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "bad C",
                    });
                }
            };
            for i in 0..m {
                let ci = if rows == 1 { 0 } else { i };
                for j in 0..n {
                    let cj = if cols == 1 { 0 } else { j };
                    y[i * n + j] = c[ci * cols + cj];
                }
            }
            beta = self.beta;
        }
        let am = if self.trans_a {
            MatRef::transposed(a, m)
        } else {
            MatRef::row_major(a, k)
        };
        let bm = if self.trans_b {
            MatRef::transposed(b, k)
        } else {
            MatRef::row_major(b, n)
        };
        let s = scratch_f32(scratch, sgemm_scratch_len(m, n, k), OP)?;
        sgemm(m, n, k, self.alpha, am, bm, beta, y, n, s)
    }
}

const _: () = assert!(MAX_RANK >= 3);

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Reference matmul over explicit (already broadcast) batch indices.
    fn naive_mm(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        y
    }

    #[test]
    fn matmul_shapes() {
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[3], &[3], &[]),
            (&[3], &[3, 4], &[4]),
            (&[2, 3], &[3], &[2]),
            (&[5, 2, 3], &[3, 4], &[5, 2, 4]),
            (&[2, 1, 2, 3], &[3, 3, 4], &[2, 3, 2, 4]),
            (&[2, 3], &[6, 3, 4], &[6, 2, 4]),
        ];
        for (sa, sb, sy) in cases {
            let a = vec![0f32; sa.iter().product()];
            let b = vec![0f32; sb.iter().product()];
            let out = run(&MatMul, &[Some(t(&a, sa)), Some(t(&b, sb))], 1).unwrap();
            assert_eq!(&out[0].0, sy);
        }
        let a = vec![0f32; 6];
        assert!(run(&MatMul, &[Some(t(&a, &[2, 3])), Some(t(&a, &[2, 3]))], 1).is_err());
    }

    #[test]
    fn matmul_broadcast_values() {
        // A: [2, 1, 3, 4], B: [3, 4, 5] -> Y: [2, 3, 3, 5]
        let a = rand_vec(2 * 3 * 4, 1);
        let b = rand_vec(3 * 4 * 5, 2);
        let out = run(
            &MatMul,
            &[Some(t(&a, &[2, 1, 3, 4])), Some(t(&b, &[3, 4, 5]))],
            1,
        )
        .unwrap();
        assert_eq!(out[0].0, vec![2, 3, 3, 5]);
        let y = &out[0].1;
        for i in 0..2 {
            for j in 0..3 {
                let want = naive_mm(&a[i * 12..(i + 1) * 12], &b[j * 20..(j + 1) * 20], 3, 5, 4);
                assert_close(&y[(i * 3 + j) * 15..(i * 3 + j + 1) * 15], &want, 1e-5);
            }
        }
        // Folded path: [4, 7, 9] x [9, 6].
        let a = rand_vec(4 * 7 * 9, 3);
        let b = rand_vec(9 * 6, 4);
        let out = run(&MatMul, &[Some(t(&a, &[4, 7, 9])), Some(t(&b, &[9, 6]))], 1).unwrap();
        assert_close(&out[0].1, &naive_mm(&a, &b, 28, 6, 9), 1e-5);
        // 1-D operands.
        let out = run(&MatMul, &[Some(t(&a[..9], &[9])), Some(t(&b, &[9, 6]))], 1).unwrap();
        assert_close(&out[0].1, &naive_mm(&a[..9], &b, 1, 6, 9), 1e-5);
        let out = run(&MatMul, &[Some(t(&b, &[6, 9])), Some(t(&a[..9], &[9]))], 1).unwrap();
        assert_close(&out[0].1, &naive_mm(&b, &a[..9], 6, 1, 9), 1e-5);
    }

    /// The fused bias equals MatMul then adding the bias to every row (and
    /// a fused residual, then adding that): the shared-B tall product
    /// (large enough to block over K), a batched one, 1-D operands, and a
    /// bias of the wrong length or a residual of another shape rejected.
    #[test]
    fn matmul_bias_equals_matmul_then_add() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 37, 300], &[300, 29]),
            (&[2, 5, 7], &[2, 7, 11]),
            (&[9], &[9, 6]),
            (&[6, 9], &[9]),
        ];
        for (ci, (sa, sb)) in cases.iter().enumerate() {
            let a = rand_vec(sa.iter().product(), 10 + ci as u64);
            let b = rand_vec(sb.iter().product(), 20 + ci as u64);
            let plain = run(&MatMul, &[Some(t(&a, sa)), Some(t(&b, sb))], 1).unwrap();
            let n = if sb.len() == 1 { 1 } else { sb[sb.len() - 1] };
            let bias = rand_vec(n, 30 + ci as u64);
            let fused = run(
                &MatMulBias,
                &[Some(t(&a, sa)), Some(t(&b, sb)), Some(t(&bias, &[n]))],
                1,
            )
            .unwrap();
            assert_eq!(fused[0].0, plain[0].0, "case {ci}");
            let want: Vec<f32> = plain[0]
                .1
                .iter()
                .enumerate()
                .map(|(i, &v)| v + bias[i % n])
                .collect();
            assert_close(&fused[0].1, &want, 1e-5);
            // With a residual of Y's shape (a second Add fused), and one
            // of another shape refused.
            let dims = &plain[0].0;
            let r = rand_vec(want.len(), 40 + ci as u64);
            let ins = |r: &[f32], d: &[usize]| {
                run(
                    &MatMulBias,
                    &[
                        Some(t(&a, sa)),
                        Some(t(&b, sb)),
                        Some(t(&bias, &[n])),
                        Some(t(r, d)),
                    ],
                    1,
                )
            };
            let with_r = ins(&r, dims).unwrap();
            let want_r: Vec<f32> = want.iter().zip(&r).map(|(w, r)| w + r).collect();
            assert_close(&with_r[0].1, &want_r, 1e-5);
            assert!(ins(&r[..n], &[n]).is_err() || want.len() == n, "case {ci}");
        }
        let a = rand_vec(6, 1);
        let wrong = rand_vec(4, 2);
        assert!(
            run(
                &MatMulBias,
                &[
                    Some(t(&a, &[2, 3])),
                    Some(t(&a, &[3, 2])),
                    Some(t(&wrong, &[4]))
                ],
                1
            )
            .is_err()
        );
    }

    #[test]
    fn matmul_numpy_literal() {
        // import numpy as np
        // a = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
        // b = np.arange(12, dtype=np.float32).reshape(2, 3, 2) - 5
        // print((a @ b).ravel().tolist())
        let a: Vec<f32> = (0..6).map(|x| x as f32 / 4.0).collect();
        let b: Vec<f32> = (0..12).map(|x| x as f32 - 5.0).collect();
        let out = run(&MatMul, &[Some(t(&a, &[2, 3])), Some(t(&b, &[2, 3, 2]))], 1).unwrap();
        assert_eq!(out[0].0, vec![2, 2, 2]);
        assert_close(
            &out[0].1,
            &[-1.25, -0.5, -8.0, -5.0, 3.25, 4.0, 10.0, 13.0],
            1e-6,
        );
    }

    #[test]
    fn gemm_variants() {
        let (m, n, k) = (5, 7, 3);
        let a = rand_vec(m * k, 5);
        let b = rand_vec(k * n, 6);
        let c = rand_vec(n, 7);
        let base = naive_mm(&a, &b, m, n, k);
        // Transposed copies.
        let mut at = vec![0f32; m * k];
        let mut bt = vec![0f32; k * n];
        for i in 0..m {
            for p in 0..k {
                at[p * m + i] = a[i * k + p];
            }
        }
        for p in 0..k {
            for j in 0..n {
                bt[j * k + p] = b[p * n + j];
            }
        }
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let g = Gemm {
                alpha: 0.5,
                beta: 2.0,
                trans_a: ta,
                trans_b: tb,
            };
            let (av, ash) = if ta { (&at, [k, m]) } else { (&a, [m, k]) };
            let (bv, bsh) = if tb { (&bt, [n, k]) } else { (&b, [k, n]) };
            let out = run(
                &g,
                &[Some(t(av, &ash)), Some(t(bv, &bsh)), Some(t(&c, &[n]))],
                1,
            )
            .unwrap();
            let want: Vec<f32> = (0..m * n).map(|i| 0.5 * base[i] + 2.0 * c[i % n]).collect();
            assert_eq!(out[0].0, vec![m, n]);
            assert_close(&out[0].1, &want, 1e-5);
            let out = run(&g, &[Some(t(av, &ash)), Some(t(bv, &bsh)), None], 1).unwrap();
            let want: Vec<f32> = base.iter().map(|x| 0.5 * x).collect();
            assert_close(&out[0].1, &want, 1e-5);
        }
        // Column-vector C of shape (M, 1).
        let g = Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        };
        let c = rand_vec(m, 8);
        let out = run(
            &g,
            &[
                Some(t(&a, &[m, k])),
                Some(t(&b, &[k, n])),
                Some(t(&c, &[m, 1])),
            ],
            1,
        )
        .unwrap();
        let want: Vec<f32> = (0..m * n).map(|i| base[i] + c[i / n]).collect();
        assert_close(&out[0].1, &want, 1e-5);
        let bad = rand_vec(3, 9);
        assert!(
            run(
                &g,
                &[
                    Some(t(&a, &[m, k])),
                    Some(t(&b, &[k, n])),
                    Some(t(&bad, &[3]))
                ],
                1
            )
            .is_err()
        );
    }
}
