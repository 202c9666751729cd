//! `Concat` and `Split` (byte copies, any dtype).
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::ops::access::{check_data, check_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Concat`: joins all inputs (same dtype, same dims except `axis`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Concat {
    /// The joined axis (negative counts from the end).
    pub axis: i64,
}
crate::to_rust_struct!(ops::concat::Concat { axis });

/// The product of `dims` (times `scale`), or an error past usize: a zero dim
/// elsewhere keeps a tensor empty while a part of its shape overflows.
fn checked_product(dims: &[usize], scale: usize, op: &'static str) -> Result<usize, KernelError> {
    dims.iter()
        .try_fold(scale, |p, &d| p.checked_mul(d))
        .ok_or(KernelError::Invalid {
            op,
            msg: "element count overflows",
        })
}

impl Concat {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize), KernelError> {
        const OP: &str = "Concat";
        let first = input(inputs, 0, OP)?;
        let axis = first.shape.axis(self.axis, OP)?;
        let mut out = first.shape;
        out.dims_mut()[axis] = 0;
        for (i, t) in inputs.iter().enumerate() {
            let t = t
                .as_ref()
                .ok_or(KernelError::MissingInput { op: OP, index: i })?;
            if t.shape.rank() != out.rank() || t.dtype != first.dtype {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "inputs differ in rank or dtype",
                });
            }
            for (d, (&a, &b)) in t.shape.dims().iter().zip(first.shape.dims()).enumerate() {
                if d != axis && a != b {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "inputs differ outside the concat axis",
                    });
                }
            }
            let sum = out.dims()[axis].checked_add(t.shape.dims()[axis]);
            out.dims_mut()[axis] = sum.ok_or(KernelError::Invalid {
                op: OP,
                msg: "concatenated dim overflows",
            })?;
        }
        Ok((out, axis))
    }
}

impl Kernel for Concat {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _) = self.shape(inputs)?;
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "Concat",
            index: 0,
        })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Concat";
        let (shape, axis) = self.shape(inputs)?;
        let out = outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })?;
        let dtype = input(inputs, 0, OP)?.dtype;
        check_out(out, dtype, &shape, OP)?;
        let es = dtype.size();
        let outer = checked_product(&shape.dims()[..axis], 1, OP)?;
        let inner = checked_product(&shape.dims()[axis + 1..], es, OP)?;
        let out_row = checked_product(&[shape.dims()[axis]], inner, OP)?;
        for t in inputs.iter().flatten() {
            check_data(t, OP)?;
        }
        // Output bytes `start..start + part.len()`: the pieces of each
        // input's rows that land there.
        let fill = |start: usize, part: &mut [u8]| {
            let mut col = 0;
            for t in inputs.iter().flatten() {
                let w = t.shape.dims()[axis] * inner;
                let src = Rows {
                    data: t.data,
                    stride: w,
                    col: 0,
                };
                copy_rows(src, out_row, col, w, outer, start, part);
                col += w;
            }
        };
        if out.data.len() >= PARALLEL_COPY_BYTES {
            // Large joins (a detector's feature maps) are copied by every
            // thread, each into its own range of the output.
            crate::threads::for_chunks(out.data, &fill);
        } else {
            fill(0, out.data);
        }
        Ok(())
    }
}

/// Rows of a source: row `o`'s bytes start at `o·stride + col`.
#[derive(Clone, Copy)]
struct Rows<'a> {
    data: &'a [u8],
    stride: usize,
    col: usize,
}

/// Copies `w` bytes of each of the `outer` rows of `src` to bytes
/// `o·dst_stride + dst_col ..` of a destination, writing only the pieces
/// that fall in its bytes `start..start + part.len()` (held in `part`).
fn copy_rows(
    src: Rows<'_>,
    dst_stride: usize,
    dst_col: usize,
    w: usize,
    outer: usize,
    start: usize,
    part: &mut [u8],
) {
    let end = start + part.len();
    // (An empty destination has no rows.)
    let Some(first) = start.checked_div(dst_stride) else {
        return;
    };
    for o in first..end.div_ceil(dst_stride).min(outer) {
        let at = o * dst_stride + dst_col;
        let (lo, hi) = (at.max(start), (at + w).min(end));
        if lo < hi {
            let from = o * src.stride + src.col + lo - at;
            part[lo - start..hi - start].copy_from_slice(&src.data[from..from + hi - lo]);
        }
    }
}

/// Smallest output [`Concat`] (or output of [`Split`]) copied over the
/// threads: below it, a copy is shorter than waking the workers.
const PARALLEL_COPY_BYTES: usize = 1 << 18;

/// ONNX `Split`: inputs `input`, optional `split` (i64 sizes). Without
/// `split` the axis is cut into `outputs.len()` parts of size
/// `ceil(dim / n)`, the last one smaller (opset 18 rule).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The split axis.
    pub axis: i64,
    /// ONNX `num_outputs` (0 when absent; the output count is used).
    pub num_outputs: usize,
}
crate::to_rust_struct!(ops::concat::Split { axis, num_outputs });

impl Split {
    /// Sizes of the parts along the axis, into `sizes`; returns the axis.
    fn sizes(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        n: usize,
        sizes: &mut [usize],
    ) -> Result<usize, KernelError> {
        const OP: &str = "Split";
        let x = input(inputs, 0, OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        let dim = x.shape.dims()[axis];
        if n == 0 || n > sizes.len() {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "bad number of outputs",
            });
        }
        match opt_input(inputs, 1).filter(|t| t.numel() > 0) {
            Some(t) => {
                if t.numel() != n {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "split length differs from the output count",
                    });
                }
                let mut v = [0i64; 64];
                if n > v.len() {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "too many outputs",
                    });
                }
                t.read_i64s(OP, &mut v)?;
                let mut total = 0usize;
                for (s, &x) in sizes.iter_mut().zip(&v[..n]) {
                    if x < 0 {
                        return Err(KernelError::Invalid {
                            op: OP,
                            msg: "negative split size",
                        });
                    }
                    *s = x as usize;
                    total = total.checked_add(*s).ok_or(KernelError::Invalid {
                        op: OP,
                        msg: "split sizes overflow",
                    })?;
                }
                if total != dim {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "split sizes do not sum to the dim",
                    });
                }
            }
            None => {
                let chunk = dim.div_ceil(n);
                if chunk * (n - 1) > dim {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "dim too small for an equal split into this many outputs",
                    });
                }
                let mut left = dim;
                for s in sizes[..n].iter_mut() {
                    *s = chunk.min(left);
                    left -= *s;
                }
            }
        }
        Ok(axis)
    }
}

const MAX_OUTPUTS: usize = 64;

impl Kernel for Split {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "Split")?;
        let mut sizes = [0usize; MAX_OUTPUTS];
        let axis = self.sizes(inputs, outputs.len(), &mut sizes)?;
        for (o, &s) in outputs.iter_mut().zip(&sizes) {
            *o = x.shape;
            o.dims_mut()[axis] = s;
        }
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // Each part is a subset of the input.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, "Split")?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Split";
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let mut sizes = [0usize; MAX_OUTPUTS];
        let axis = self.sizes(inputs, outputs.len(), &mut sizes)?;
        let dims = x.shape.dims();
        let outer = checked_product(&dims[..axis], 1, OP)?;
        let inner = checked_product(&dims[axis + 1..], x.dtype.size(), OP)?;
        let in_row = checked_product(&[dims[axis]], inner, OP)?;
        let mut col = 0;
        for (out, &s) in outputs.iter_mut().zip(&sizes) {
            let mut shape = x.shape;
            shape.dims_mut()[axis] = s;
            check_out(out, x.dtype, &shape, OP)?;
            let w = s * inner;
            // Output bytes `start..start + part.len()` (whole or part rows).
            let src = Rows {
                data: x.data,
                stride: in_row,
                col,
            };
            let fill = |start: usize, part: &mut [u8]| copy_rows(src, w, 0, w, outer, start, part);
            if out.data.len() >= PARALLEL_COPY_BYTES {
                // As in Concat: each thread copies its own range.
                crate::threads::for_chunks(out.data, &fill);
            } else {
                fill(0, out.data);
            }
            col += w;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::test_util::{Owned, run_kernel, run1};
    use alloc::vec::Vec;

    #[test]
    fn concat_axes() {
        let a = Owned::new(&[2, 2], &[1i64, 2, 3, 4]);
        let b = Owned::new(&[2, 1], &[5i64, 6]);
        let c = Owned::new(&[2, 3], &[7i64, 8, 9, 10, 11, 12]);
        let y = run1(
            &Concat { axis: -1 },
            &[Some(&a), Some(&b), Some(&c)],
            DType::I64,
        )
        .unwrap();
        assert_eq!(y.dims(), &[2, 6]);
        assert_eq!(y.to::<i64>(), [1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12]);
        let y = run1(&Concat { axis: 0 }, &[Some(&a), Some(&a)], DType::I64).unwrap();
        assert_eq!(y.to::<i64>(), [1, 2, 3, 4, 1, 2, 3, 4]);
        let e = Owned::new(&[2, 0], &[0i64; 0]);
        let y = run1(&Concat { axis: 1 }, &[Some(&e), Some(&b)], DType::I64).unwrap();
        assert_eq!(y.to::<i64>(), [5, 6]);
        assert!(run1(&Concat { axis: 0 }, &[Some(&a), Some(&b)], DType::I64).is_err());
        let h = Owned::new(&[3], &[half::f16::ONE; 3]);
        let y = run1(&Concat { axis: 0 }, &[Some(&h), Some(&h)], DType::F16).unwrap();
        assert_eq!(y.dims(), &[6]);
    }

    /// Outputs past the parallel threshold, split over 1–3 threads, along
    /// an outer axis (few long rows) and the last axis (many short ones,
    /// cut mid-row by the chunk boundaries): every element from its input.
    #[cfg(feature = "std")]
    #[test]
    fn large_concats_over_threads_copy_every_element() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let base = [2usize, 9, 97, 131];
        for (axis, sizes) in [(1usize, [3usize, 5, 1]), (3, [70, 131, 5])] {
            let parts: Vec<(Vec<usize>, Vec<f32>)> = sizes
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    let mut dims = base.to_vec();
                    dims[axis] = d;
                    let n: usize = dims.iter().product();
                    (dims, (0..n).map(|v| (i * 1_000_000 + v) as f32).collect())
                })
                .collect();
            let owned: Vec<Owned> = parts.iter().map(|(d, v)| Owned::new(d, v)).collect();
            let ins: Vec<Option<&Owned>> = owned.iter().map(Some).collect();
            // The expected output, element by element.
            let mut dims = base.to_vec();
            dims[axis] = sizes.iter().sum();
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis + 1..].iter().product();
            let mut want = Vec::new();
            for o in 0..outer {
                for (d, v) in &parts {
                    let w = d[axis] * inner;
                    want.extend_from_slice(&v[o * w..(o + 1) * w]);
                }
            }
            assert!(4 * want.len() >= PARALLEL_COPY_BYTES);
            for threads in [1, 2, 3] {
                crate::threads::set_num_threads(threads);
                let y = run1(&Concat { axis: axis as i64 }, &ins, DType::F32).unwrap();
                assert_eq!(y.dims(), &dims[..]);
                assert!(y.to::<f32>() == want, "axis {axis}, {threads} threads");
            }
        }
        crate::threads::set_num_threads(1);
    }

    /// Split outputs past the parallel threshold, over 1–3 threads, along
    /// an outer axis and the last one: each part equals its slice.
    #[cfg(feature = "std")]
    #[test]
    fn large_splits_over_threads_copy_every_element() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dims = [2usize, 9, 97, 206];
        let n: usize = dims.iter().product();
        let data: Vec<f32> = (0..n).map(|v| v as f32).collect();
        let x = Owned::new(&dims, &data);
        for axis in [1usize, 3] {
            let parts = if axis == 1 {
                [3usize, 5, 1]
            } else {
                [70, 131, 5]
            };
            let sizes = Owned::new(&[3], &parts.map(|p| p as i64));
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis + 1..].iter().product();
            for threads in [1, 2, 3] {
                crate::threads::set_num_threads(threads);
                let outs = run_kernel(
                    &Split {
                        axis: axis as i64,
                        num_outputs: 0,
                    },
                    &[Some(&x), Some(&sizes)],
                    &[DType::F32; 3],
                )
                .unwrap();
                let mut col = 0;
                for (out, &p) in outs.iter().zip(&parts) {
                    let mut want = Vec::new();
                    for o in 0..outer {
                        let row = &data[o * dims[axis] * inner..][..dims[axis] * inner];
                        want.extend_from_slice(&row[col * inner..(col + p) * inner]);
                    }
                    assert!(out.to::<f32>() == want, "axis {axis}, {threads} threads");
                    col += p;
                }
            }
        }
        crate::threads::set_num_threads(1);
    }

    #[test]
    fn split_sizes() {
        let data: Vec<f32> = (0..14).map(|v| v as f32).collect();
        let x = Owned::new(&[2, 7], &data);
        // Equal split, uneven: ceil(7/3) = 3 -> [3, 3, 1]
        let outs = run_kernel(
            &Split {
                axis: 1,
                num_outputs: 3,
            },
            &[Some(&x)],
            &[DType::F32; 3],
        )
        .unwrap();
        assert_eq!(outs[0].dims(), &[2, 3]);
        assert_eq!(outs[2].dims(), &[2, 1]);
        assert_eq!(outs[0].to::<f32>(), [0.0, 1.0, 2.0, 7.0, 8.0, 9.0]);
        assert_eq!(outs[2].to::<f32>(), [6.0, 13.0]);
        let s = Owned::new(&[2], &[5i64, 2]);
        let outs = run_kernel(
            &Split {
                axis: -1,
                num_outputs: 0,
            },
            &[Some(&x), Some(&s)],
            &[DType::F32; 2],
        )
        .unwrap();
        assert_eq!(outs[1].to::<f32>(), [5.0, 6.0, 12.0, 13.0]);
        let outs = run_kernel(
            &Split {
                axis: 0,
                num_outputs: 2,
            },
            &[Some(&x)],
            &[DType::F32; 2],
        )
        .unwrap();
        assert_eq!(outs[1].to::<f32>(), data[7..]);
        let bad = Owned::new(&[2], &[5i64, 3]);
        assert!(
            run_kernel(
                &Split {
                    axis: 1,
                    num_outputs: 0
                },
                &[Some(&x), Some(&bad)],
                &[DType::F32; 2]
            )
            .is_err()
        );
    }
}
