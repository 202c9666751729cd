//! ONNX `Einsum`. Two f32 inputs run as a loop of matrix products through
//! the GEMM (`products`); anything else (one input, three or more, other
//! dtypes) runs as a direct loop over every label assignment: each output
//! element sums, over the labels missing from the output, the product of
//! the inputs at their indices, accumulating in f64. A label repeated
//! within one input walks its diagonal in both (their strides add up).
mod products;

use products::Products;

use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::gemm::scratch_f32;
use crate::ops::num::Num;
use crate::shape::{IntList, MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Einsum";
/// Most inputs an equation may have.
pub const MAX_INPUTS: usize = 4;
/// Most distinct labels an equation may use.
const MAX_LABELS: usize = 2 * MAX_RANK;

/// ONNX `Einsum` with the equation compiled to label ids. `spec` is
/// `[n_inputs, rank_0, labels_0…, rank_1, labels_1…, out_rank, out_labels…]`
/// with labels numbered from 0 (ellipses already expanded by the compiler).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Einsum {
    /// The encoded equation.
    pub spec: IntList,
}
crate::to_rust_struct!(ops::einsum::Einsum { spec });

/// The decoded equation.
struct Plan {
    n_inputs: usize,
    /// Labels of each input's axes.
    inputs: [[usize; MAX_RANK]; MAX_INPUTS],
    ranks: [usize; MAX_INPUTS],
    out: [usize; MAX_RANK],
    out_rank: usize,
    /// Size of each label (after checking the inputs agree).
    size: [usize; MAX_LABELS],
    n_labels: usize,
}

impl Einsum {
    /// Encodes an equation: `inputs` holds each input's label ids.
    pub fn new(inputs: &[&[usize]], out: &[usize]) -> Result<Einsum, KernelError> {
        let mut v = [0i64; 2 * MAX_RANK];
        let mut n = 0;
        let mut push = |x: usize| -> Result<(), KernelError> {
            let slot = v.get_mut(n).ok_or(KernelError::Invalid {
                op: OP,
                msg: "equation too long",
            })?;
            *slot = x as i64;
            n += 1;
            Ok(())
        };
        if inputs.len() > MAX_INPUTS {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "too many inputs",
            });
        }
        push(inputs.len())?;
        for labels in inputs.iter().copied().chain([out]) {
            push(labels.len())?;
            for &l in labels {
                if l >= MAX_LABELS {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "too many distinct labels",
                    });
                }
                push(l)?;
            }
        }
        Ok(Einsum {
            spec: IntList::new(&v[..n])?,
        })
    }

    fn plan(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
        let bad = KernelError::Invalid {
            op: OP,
            msg: "malformed equation",
        };
        let s = self.spec.as_slice();
        let mut it = s
            .iter()
            .map(|&x| usize::try_from(x).map_err(|_| bad.clone()));
        let mut next = || it.next().unwrap_or(Err(bad.clone()));
        let n_inputs = next()?;
        if n_inputs > MAX_INPUTS || n_inputs != inputs.len() {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "input count does not match the equation",
            });
        }
        let mut p = Plan {
            n_inputs,
            inputs: [[0; MAX_RANK]; MAX_INPUTS],
            ranks: [0; MAX_INPUTS],
            out: [0; MAX_RANK],
            out_rank: 0,
            size: [usize::MAX; MAX_LABELS],
            n_labels: 0,
        };
        for k in 0..n_inputs {
            let x = input(inputs, k, OP)?;
            let r = next()?;
            if r != x.shape.rank() || r > MAX_RANK {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "input rank does not match the equation",
                });
            }
            p.ranks[k] = r;
            for a in 0..r {
                let l = next()?;
                if l >= MAX_LABELS {
                    return Err(bad);
                }
                p.inputs[k][a] = l;
                p.n_labels = p.n_labels.max(l + 1);
                let d = x.shape.dim(a);
                match p.size[l] {
                    usize::MAX => p.size[l] = d,
                    s if s == d => {}
                    // Size-1 axes broadcast.
                    1 => p.size[l] = d,
                    _ if d == 1 => {}
                    _ => {
                        return Err(KernelError::Shape {
                            op: OP,
                            msg: "a label has different sizes",
                        });
                    }
                }
            }
        }
        p.out_rank = next()?;
        if p.out_rank > MAX_RANK {
            return Err(bad);
        }
        for a in 0..p.out_rank {
            let l = next()?;
            if l >= p.n_labels || p.size[l] == usize::MAX {
                return Err(bad);
            }
            p.out[a] = l;
        }
        Ok(p)
    }
}

impl Einsum {
    /// Element stride of each label in each input (repeated labels add up,
    /// which walks the diagonal; size-1 axes broadcast with stride 0), and
    /// in the output (row-major, last).
    fn strides(
        &self,
        p: &Plan,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<[[usize; MAX_LABELS]; MAX_INPUTS + 1], KernelError> {
        let mut strides = [[0usize; MAX_LABELS]; MAX_INPUTS + 1];
        for k in 0..p.n_inputs {
            let x = input(inputs, k, OP)?;
            let st = x.shape.strides();
            for a in 0..p.ranks[k] {
                if x.shape.dim(a) != 1 {
                    strides[k][p.inputs[k][a]] += st[a];
                }
            }
        }
        let mut acc = 1usize;
        for a in (0..p.out_rank).rev() {
            let l = p.out[a];
            if p.size[l] != 1 {
                strides[MAX_INPUTS][l] = acc;
            }
            acc = acc.saturating_mul(p.size[l]);
        }
        Ok(strides)
    }

    /// The products a two-input f32 equation of plan `p` runs as, if it
    /// does.
    fn products(
        &self,
        p: &Plan,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<Option<Products>, KernelError> {
        let all_f32 =
            (0..p.n_inputs).all(|k| input(inputs, k, OP).is_ok_and(|x| x.dtype == DType::F32));
        if p.n_inputs != 2 || !all_f32 {
            return Ok(None);
        }
        let s = self.strides(p, inputs)?;
        Ok(Products::new(p, &[s[0], s[1], s[MAX_INPUTS]]))
    }
}

impl Kernel for Einsum {
    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match self.plan(inputs).and_then(|p| self.products(&p, inputs)) {
            Ok(Some(pr)) => pr.scratch_len().saturating_mul(4),
            _ => 0,
        }
    }

    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = self.plan(inputs)?;
        let dims: [usize; MAX_RANK] = core::array::from_fn(|a| p.size[p.out[a]]);
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? =
            Shape::new(&dims[..p.out_rank])?;
        Ok(())
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        // One product of the operands per assignment of every label.
        self.plan(inputs).map_or(0, |p| {
            let assignments = p.size[..p.n_labels]
                .iter()
                .fold(1u64, |a, &v| a.saturating_mul(v as u64));
            assignments.saturating_mul(inputs.len().max(1) as u64)
        })
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let p = self.plan(inputs)?;
        if let Some(pr) = self.products(&p, inputs)? {
            let a = input(inputs, 0, OP)?;
            let b = input(inputs, 1, OP)?;
            check_data(a, OP)?;
            check_data(b, OP)?;
            let dims: [usize; MAX_RANK] = core::array::from_fn(|i| p.size[p.out[i]]);
            let out = output(outputs, 0, OP)?;
            check_out(out, DType::F32, &Shape::new(&dims[..p.out_rank])?, OP)?;
            let scratch = scratch_f32(scratch, pr.scratch_len(), OP)?;
            return pr.run(
                a.typed::<f32>(OP)?,
                b.typed::<f32>(OP)?,
                out.typed::<f32>(OP)?,
                scratch,
            );
        }
        let x0 = input(inputs, 0, OP)?;
        let mut xs: [Option<TensorRef<'_>>; MAX_INPUTS] = [None; MAX_INPUTS];
        for (k, slot) in xs.iter_mut().enumerate().take(p.n_inputs) {
            let x = input(inputs, k, OP)?;
            check_data(x, OP)?;
            if x.dtype != x0.dtype {
                return Err(KernelError::DTypeMismatch {
                    op: OP,
                    expected: x0.dtype,
                    found: x.dtype,
                });
            }
            *slot = Some(*x);
        }
        let out = output(outputs, 0, OP)?;
        let dims: [usize; MAX_RANK] = core::array::from_fn(|a| p.size[p.out[a]]);
        check_out(out, x0.dtype, &Shape::new(&dims[..p.out_rank])?, OP)?;
        let strides = self.strides(&p, inputs)?;
        // Labels in loop order: output labels first, then the summed ones.
        let mut order = [0usize; MAX_LABELS];
        let mut n_order = 0;
        for &l in &p.out[..p.out_rank] {
            if !order[..n_order].contains(&l) {
                order[n_order] = l;
                n_order += 1;
            }
        }
        let n_out_labels = n_order;
        for l in 0..p.n_labels {
            if p.size[l] != usize::MAX && !order[..n_order].contains(&l) {
                order[n_order] = l;
                n_order += 1;
            }
        }
        let inner: usize = order[n_out_labels..n_order]
            .iter()
            .map(|&l| p.size[l])
            .product();
        dispatch_num!(x0.dtype, OP, |T| {
            let mut data: [&[T]; MAX_INPUTS] = [&[]; MAX_INPUTS];
            for k in 0..p.n_inputs {
                let x = xs[k].ok_or(KernelError::MissingInput { op: OP, index: k })?;
                data[k] = x.typed::<T>(OP)?;
            }
            let y = out.typed::<T>(OP)?;
            let mut idx = [0usize; MAX_LABELS];
            for yv in y.iter_mut() {
                let mut acc = 0f64;
                for _ in 0..inner {
                    let mut prod = 1f64;
                    for k in 0..p.n_inputs {
                        let off: usize = (0..p.n_labels).map(|l| idx[l] * strides[k][l]).sum();
                        prod *= data[k][off].to_f64();
                    }
                    acc += prod;
                    advance(&mut idx, &order[n_out_labels..n_order], &p.size);
                }
                *yv = T::from_f64(acc);
                advance(&mut idx, &order[..n_out_labels], &p.size);
            }
            Ok(())
        })
    }
}

/// Steps the odometer over `labels` (last label fastest).
fn advance(idx: &mut [usize; MAX_LABELS], labels: &[usize], size: &[usize; MAX_LABELS]) {
    for &l in labels.iter().rev() {
        idx[l] += 1;
        if idx[l] < size[l] {
            return;
        }
        idx[l] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::test_util::{Owned, run_kernel};

    #[test]
    fn batch_matmul_transpose_trace_and_sum() {
        // bij,bjk->bik with b=2, i=3, j=5, k=2 against a direct loop.
        let a: Vec<f32> = (0..30).map(|v| v as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..20).map(|v| (v % 7) as f32 - 2.0).collect();
        let (xa, xb) = (Owned::new(&[2, 3, 5], &a), Owned::new(&[2, 5, 2], &b));
        let k = Einsum::new(&[&[0, 1, 2], &[0, 2, 3]], &[0, 1, 3]).unwrap();
        let y = run_kernel(&k, &[Some(&xa), Some(&xb)], &[DType::F32]).unwrap();
        let mut want = vec![0f32; 12];
        for bb in 0..2 {
            for i in 0..3 {
                for kk in 0..2 {
                    for j in 0..5 {
                        want[(bb * 3 + i) * 2 + kk] +=
                            a[(bb * 3 + i) * 5 + j] * b[(bb * 5 + j) * 2 + kk];
                    }
                }
            }
        }
        assert_eq!(y[0].dims(), &[2, 3, 2]);
        assert_eq!(y[0].to::<f32>(), want);
        // ij->ji
        let x = Owned::new(&[2, 3], &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let t = Einsum::new(&[&[0, 1]], &[1, 0]).unwrap();
        let y = run_kernel(&t, &[Some(&x)], &[DType::F64]).unwrap();
        assert_eq!(y[0].to::<f64>(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        // ii-> (trace) and ij->i (row sums)
        let m = Owned::new(&[3, 3], &[1i32, 2, 3, 4, 5, 6, 7, 8, 9]);
        let tr = Einsum::new(&[&[0, 0]], &[]).unwrap();
        assert_eq!(
            run_kernel(&tr, &[Some(&m)], &[DType::I32]).unwrap()[0].to::<i32>(),
            [15]
        );
        let rs = Einsum::new(&[&[0, 1]], &[0]).unwrap();
        assert_eq!(
            run_kernel(&rs, &[Some(&m)], &[DType::I32]).unwrap()[0].to::<i32>(),
            [6, 15, 24]
        );
    }
}
