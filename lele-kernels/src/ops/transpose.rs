//! `Transpose`: dims of size 1 are dropped and axes that stay adjacent are
//! merged, so e.g. NCHW→NHWC becomes a batched 2-D transpose, done in
//! cache-friendly tiles.
#![allow(clippy::needless_range_loop)]
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::{IntList, MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Transpose`: output dim `i` is input dim `perm[i]`; an empty `perm`
/// reverses the dims.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transpose {
    /// The permutation (empty = reverse).
    pub perm: IntList,
}
crate::to_rust_struct!(ops::transpose::Transpose { perm });

const OP: &str = "Transpose";

/// Validates `perm` against `rank` (empty = reverse).
fn resolve_perm(perm: &IntList, rank: usize) -> Result<[usize; MAX_RANK], KernelError> {
    let mut p = [0usize; MAX_RANK];
    if perm.len == 0 {
        for (i, v) in p[..rank].iter_mut().enumerate() {
            *v = rank - 1 - i;
        }
        return Ok(p);
    }
    if perm.len != rank {
        return Err(KernelError::Invalid {
            op: OP,
            msg: "perm length differs from the rank",
        });
    }
    let mut seen = [false; MAX_RANK];
    for (i, &a) in perm.as_slice().iter().enumerate() {
        let a = crate::shape::normalize_axis(a, rank, OP)?;
        if seen[a] {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "perm repeats an axis",
            });
        }
        seen[a] = true;
        p[i] = a;
    }
    Ok(p)
}

impl Transpose {
    fn out_shape(&self, x: &Shape) -> Result<Shape, KernelError> {
        let p = resolve_perm(&self.perm, x.rank())?;
        let mut out = *x;
        for i in 0..x.rank() {
            out.dims_mut()[i] = x.dims()[p[i]];
        }
        Ok(out)
    }
}

impl Kernel for Transpose {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = self.out_shape(&x.shape)?;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let shape = self.out_shape(&x.shape)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let perm = resolve_perm(&self.perm, x.shape.rank())?;
        let plan = Plan::new(x.shape.dims(), &perm[..x.shape.rank()]);
        dispatch_size!(x.dtype, OP, |T| {
            let src = raw::<T>(x, OP)?;
            let dst = raw_mut::<T>(out, OP)?;
            plan.run(src, dst);
            Ok(())
        })
    }
}

/// A collapsed transpose: output dims and the input stride of each.
struct Plan {
    rank: usize,
    dims: [usize; MAX_RANK],
    in_strides: [usize; MAX_RANK],
}

impl Plan {
    fn new(in_dims: &[usize], perm: &[usize]) -> Plan {
        // Drop size-1 dims.
        let mut keep_idx = [usize::MAX; MAX_RANK];
        let mut kd = [0usize; MAX_RANK];
        let mut k = 0;
        for (i, &d) in in_dims.iter().enumerate() {
            if d != 1 {
                keep_idx[i] = k;
                kd[k] = d;
                k += 1;
            }
        }
        let mut p = [0usize; MAX_RANK];
        let mut n = 0;
        for &a in perm {
            if keep_idx[a] != usize::MAX {
                p[n] = keep_idx[a];
                n += 1;
            }
        }
        // Merge runs of input axes that stay consecutive in the output.
        // group_of_in[a] = merged group for input axis a.
        let mut starts = [false; MAX_RANK];
        for j in 0..n {
            starts[j] = j == 0 || p[j] != p[j - 1] + 1;
        }
        // Merged input dims in input order: a group starts at an input axis
        // that starts an output run.
        let mut group_dim = [1usize; MAX_RANK];
        let mut group_of_in = [0usize; MAX_RANK];
        let mut g = 0;
        let mut in_group_start = [false; MAX_RANK];
        for j in 0..n {
            if starts[j] {
                in_group_start[p[j]] = true;
            }
        }
        for a in 0..k {
            if a > 0 && in_group_start[a] {
                g += 1;
            }
            group_of_in[a] = g;
            group_dim[g] *= kd[a];
        }
        let ngroups = if k == 0 { 0 } else { g + 1 };
        // Strides of the merged input.
        let mut gstride = [0usize; MAX_RANK];
        let mut acc = 1;
        for gi in (0..ngroups).rev() {
            gstride[gi] = acc;
            acc *= group_dim[gi];
        }
        let mut plan = Plan {
            rank: 0,
            dims: [1; MAX_RANK],
            in_strides: [0; MAX_RANK],
        };
        for j in 0..n {
            if starts[j] {
                let gi = group_of_in[p[j]];
                plan.dims[plan.rank] = group_dim[gi];
                plan.in_strides[plan.rank] = gstride[gi];
                plan.rank += 1;
            }
        }
        if plan.rank == 0 {
            plan.rank = 1;
            plan.in_strides[0] = 1;
        }
        plan
    }

    fn run<T: Copy>(&self, src: &[T], dst: &mut [T]) {
        let r = self.rank;
        if self.dims[..r].contains(&0) || dst.is_empty() {
            return;
        }
        if self.in_strides[r - 1] == 1 {
            // Last dim contiguous in both: row copies.
            let n = self.dims[r - 1];
            self.outer(r - 1, |o, i| {
                dst[o * n..o * n + n].copy_from_slice(&src[i..i + n])
            });
            return;
        }
        // The output axis that reads input-contiguous data.
        let j = (0..r).find(|&a| self.in_strides[a] == 1).unwrap_or(r - 1);
        let (rows, cols) = (self.dims[j], self.dims[r - 1]);
        let col_stride = self.in_strides[r - 1];
        // Output stride of axis j (in elements).
        let out_j: usize = self.dims[j + 1..r].iter().product();
        const TILE: usize = 32;
        // Iterate over every axis except j and the last.
        let mut idx = [0usize; MAX_RANK];
        let mut out_st = [0usize; MAX_RANK];
        let mut acc = 1;
        for a in (0..r).rev() {
            out_st[a] = acc;
            acc *= self.dims[a];
        }
        loop {
            let mut ob = 0;
            let mut ib = 0;
            for a in 0..r {
                if a != j && a != r - 1 {
                    ob += idx[a] * out_st[a];
                    ib += idx[a] * self.in_strides[a];
                }
            }
            for r0 in (0..rows).step_by(TILE) {
                let r1 = (r0 + TILE).min(rows);
                for c0 in (0..cols).step_by(TILE) {
                    let c1 = (c0 + TILE).min(cols);
                    for row in r0..r1 {
                        let o = ob + row * out_j;
                        let i = ib + row;
                        for (c, d) in dst[o + c0..o + c1].iter_mut().enumerate() {
                            *d = src[i + (c0 + c) * col_stride];
                        }
                    }
                }
            }
            // Advance the odometer over the other axes.
            let mut a = r;
            loop {
                if a == 0 {
                    return;
                }
                a -= 1;
                if a == j || a == r - 1 {
                    continue;
                }
                idx[a] += 1;
                if idx[a] < self.dims[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
    }

    /// Calls `f(out_row, in_offset)` for every index of the first `r` axes.
    fn outer(&self, r: usize, mut f: impl FnMut(usize, usize)) {
        let mut idx = [0usize; MAX_RANK];
        let mut off = 0;
        let mut row = 0;
        loop {
            f(row, off);
            row += 1;
            let mut a = r;
            loop {
                if a == 0 {
                    return;
                }
                a -= 1;
                idx[a] += 1;
                off += self.in_strides[a];
                if idx[a] < self.dims[a] {
                    break;
                }
                off -= self.in_strides[a] * self.dims[a];
                idx[a] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn reference(data: &[i32], dims: &[usize], perm: &[usize]) -> Vec<i32> {
        let r = dims.len();
        let s = Shape::new(dims).unwrap();
        let st = s.strides();
        let od: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let n: usize = od.iter().product();
        (0..n)
            .map(|mut i| {
                let mut off = 0;
                for a in (0..r).rev() {
                    off += (i % od[a]) * st[perm[a]];
                    i /= od[a];
                }
                data[off]
            })
            .collect()
    }

    #[test]
    fn matches_reference() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 5], &[1, 0]),
            (&[37, 45], &[1, 0]),
            (&[2, 3, 4], &[0, 2, 1]),
            (&[2, 3, 4], &[2, 1, 0]),
            (&[2, 3, 4], &[1, 0, 2]),
            (&[2, 33, 5, 7], &[0, 2, 3, 1]),
            (&[2, 3, 5, 7], &[0, 3, 1, 2]),
            (&[1, 3, 1, 7], &[3, 2, 1, 0]),
            (&[2, 1, 3, 2, 5], &[4, 0, 3, 1, 2]),
            (&[4], &[0]),
            (&[], &[]),
            (&[3, 0, 2], &[2, 1, 0]),
        ];
        for &(dims, perm) in cases {
            let n: usize = dims.iter().product();
            let data: Vec<i32> = (0..n as i32).collect();
            let x = Owned::new(dims, &data);
            let p: Vec<i64> = perm.iter().map(|&v| v as i64).collect();
            let t = Transpose {
                perm: IntList::new(&p).unwrap(),
            };
            let y = run1(&t, &[Some(&x)], DType::I32).unwrap();
            assert_eq!(
                y.to::<i32>(),
                reference(&data, dims, perm),
                "{dims:?} {perm:?}"
            );
            // Same through the 1-, 2- and 8-byte paths.
            let xb: Vec<u8> = data.iter().map(|&v| v as u8).collect();
            let yb = run1(&t, &[Some(&Owned::new(dims, &xb))], DType::U8).unwrap();
            let want: Vec<u8> = reference(&data, dims, perm)
                .iter()
                .map(|&v| v as u8)
                .collect();
            assert_eq!(yb.to::<u8>(), want);
            let xd: Vec<f64> = data.iter().map(|&v| v as f64).collect();
            let yd = run1(&t, &[Some(&Owned::new(dims, &xd))], DType::F64).unwrap();
            let want: Vec<f64> = reference(&data, dims, perm)
                .iter()
                .map(|&v| v as f64)
                .collect();
            assert_eq!(yd.to::<f64>(), want);
        }
    }

    #[test]
    fn default_and_invalid_perm() {
        let data: Vec<i32> = (0..24).collect();
        let x = Owned::new(&[2, 3, 4], &data);
        let y = run1(
            &Transpose {
                perm: IntList::EMPTY,
            },
            &[Some(&x)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(y.dims(), &[4, 3, 2]);
        assert_eq!(y.to::<i32>(), reference(&data, &[2, 3, 4], &[2, 1, 0]));
        let bad = Transpose {
            perm: IntList::new(&[0, 0, 1]).unwrap(),
        };
        assert!(run1(&bad, &[Some(&x)], DType::I32).is_err());
        let bad = Transpose {
            perm: IntList::new(&[0, 1]).unwrap(),
        };
        assert!(run1(&bad, &[Some(&x)], DType::I32).is_err());
    }
}
