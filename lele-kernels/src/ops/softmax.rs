//! `Softmax` and `LogSoftmax` (opset-13 semantics: along one axis).
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out, scratch_f32};
use crate::ops::unary::{exp_shifted, max_of, scale_in_place};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};
use crate::threads;

/// `(outer, len, inner)` of `shape` split around `axis`.
fn split(
    inputs: &[Option<TensorRef<'_>>],
    axis: i64,
    op: &'static str,
) -> Result<(Shape, usize, usize, usize), KernelError> {
    let x = input(inputs, 0, op)?;
    check_f32(x, op)?;
    let s = x.shape;
    if s.rank() == 0 {
        // A scalar is a single-element axis.
        return Ok((s, 1, 1, 1));
    }
    let a = s.axis(axis, op)?;
    // A zero dim keeps the count small while one side overflows.
    let product = |d: &[usize]| {
        d.iter()
            .try_fold(1usize, |p, &x| p.checked_mul(x))
            .ok_or(KernelError::Invalid {
                op,
                msg: "element count overflows",
            })
    };
    let outer = product(&s.dims()[..a])?;
    let inner = product(&s.dims()[a + 1..])?;
    Ok((s, outer, s.dim(a), inner))
}

fn infer_same(
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [Shape],
    axis: i64,
    op: &'static str,
) -> Result<(), KernelError> {
    let (s, ..) = split(inputs, axis, op)?;
    *outputs.first_mut().ok_or(KernelError::Invalid {
        op,
        msg: "no output",
    })? = s;
    Ok(())
}

fn scratch_for(inputs: &[Option<TensorRef<'_>>], axis: i64, op: &'static str) -> usize {
    match split(inputs, axis, op) {
        Ok((_, _, _, inner)) if inner > 1 => inner.saturating_mul(12),
        _ => 0,
    }
}

/// Softmax (or LogSoftmax) of one contiguous row.
fn softmax_row(xr: &[f32], yr: &mut [f32], log: bool) {
    let m = max_of(xr);
    let sum = exp_shifted(xr, yr, m);
    if log {
        let ls = sum.ln();
        for (o, &v) in yr.iter_mut().zip(xr) {
            *o = v - m - ls;
        }
    } else {
        scale_in_place(yr, 1.0 / sum);
    }
}

/// Shared driver: `log` selects LogSoftmax.
fn softmax_run(
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
    scratch: &mut [u8],
    axis: i64,
    log: bool,
    op: &'static str,
) -> Result<(), KernelError> {
    let (_, outer, len, inner) = split(inputs, axis, op)?;
    let x = f32_in(input(inputs, 0, op)?, op)?;
    let y = f32_out(output(outputs, 0, op)?, op)?;
    let block = len * inner;
    if x.len() != outer * block || y.len() != x.len() {
        return Err(KernelError::Buffer { op });
    }
    if x.is_empty() {
        return Ok(());
    }
    if inner == 1 {
        // Rows are independent: split over the threads when there are
        // enough elements (each row is computed the same way wherever it runs).
        threads::for_rows(y, len, &|first, ys| {
            let xs = &x[first * len..][..ys.len()];
            for (xr, yr) in xs.chunks_exact(len).zip(ys.chunks_exact_mut(len)) {
                softmax_row(xr, yr, log);
            }
        });
        return Ok(());
    }
    let s = scratch_f32(scratch, 3 * inner, op)?;
    let (mx, rest) = s.split_at_mut(inner);
    let (sum, shifted) = rest.split_at_mut(inner);
    for (xb, yb) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
        mx.fill(f32::NEG_INFINITY);
        for xr in xb.chunks_exact(inner) {
            for (m, &v) in mx.iter_mut().zip(xr) {
                *m = m.max(v);
            }
        }
        sum.fill(0.0);
        for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
            // Row by row with the vectorized exp: shift, exponentiate, add
            // into the running sums.
            for ((d, &v), &m) in shifted.iter_mut().zip(xr).zip(mx.iter()) {
                *d = v - m;
            }
            exp_shifted(shifted, yr, 0.0);
            for (s, &e) in sum.iter_mut().zip(yr.iter()) {
                *s += e;
            }
        }
        if log {
            for (s, m) in sum.iter_mut().zip(mx.iter()) {
                *s = m + s.ln();
            }
            for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
                for ((o, &v), s) in yr.iter_mut().zip(xr).zip(sum.iter()) {
                    *o = v - s;
                }
            }
        } else {
            sum.iter_mut().for_each(|s| *s = 1.0 / *s);
            for yr in yb.chunks_exact_mut(inner) {
                for (o, r) in yr.iter_mut().zip(sum.iter()) {
                    *o *= r;
                }
            }
        }
    }
    Ok(())
}

/// ONNX `Softmax` along `axis` (numerically stable).
///
/// Input: `input`. Output: `output`, same shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Softmax {
    /// The normalized axis (negative counts from the end).
    pub axis: i64,
}
crate::to_rust_struct!(ops::softmax::Softmax { axis });

impl Kernel for Softmax {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        infer_same(inputs, outputs, self.axis, "Softmax")
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        scratch_for(inputs, self.axis, "Softmax")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        softmax_run(inputs, outputs, scratch, self.axis, false, "Softmax")
    }
}

/// ONNX `LogSoftmax` along `axis` (numerically stable).
///
/// Input: `input`. Output: `output`, same shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogSoftmax {
    /// The normalized axis (negative counts from the end).
    pub axis: i64,
}
crate::to_rust_struct!(ops::softmax::LogSoftmax { axis });

impl Kernel for LogSoftmax {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        infer_same(inputs, outputs, self.axis, "LogSoftmax")
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        scratch_for(inputs, self.axis, "LogSoftmax")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        softmax_run(inputs, outputs, scratch, self.axis, true, "LogSoftmax")
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn naive(x: &[f32], dims: &[usize], axis: usize, log: bool) -> Vec<f32> {
        let outer: usize = dims[..axis].iter().product();
        let len = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let mut y = vec![0f32; x.len()];
        for o in 0..outer {
            for i in 0..inner {
                let idx = |l: usize| (o * len + l) * inner + i;
                let m = (0..len).map(|l| x[idx(l)] as f64).fold(f64::MIN, f64::max);
                let s: f64 = (0..len).map(|l| (x[idx(l)] as f64 - m).exp()).sum();
                for l in 0..len {
                    let v = x[idx(l)] as f64 - m;
                    y[idx(l)] = if log { v - s.ln() } else { v.exp() / s } as f32;
                }
            }
        }
        y
    }

    #[test]
    fn all_axes() {
        // Short rows, and rows long enough for the vector body plus a tail
        // (37 and 19 elements) along every axis.
        for dims in [[3, 4, 5], [2, 37, 19]] {
            let n = dims.iter().product();
            let x: Vec<f32> = rand_vec(n, 1).iter().map(|v| v * 30.0).collect();
            for axis in -3i64..3 {
                let a = if axis < 0 { axis + 3 } else { axis } as usize;
                for log in [false, true] {
                    let out = if log {
                        run(&LogSoftmax { axis }, &[Some(t(&x, &dims))], 1).unwrap()
                    } else {
                        run(&Softmax { axis }, &[Some(t(&x, &dims))], 1).unwrap()
                    };
                    assert_eq!(out[0].0, dims.to_vec());
                    assert_close(&out[0].1, &naive(&x, &dims, a, log), 1e-5);
                }
            }
            assert!(run(&Softmax { axis: 3 }, &[Some(t(&x, &dims))], 1).is_err());
        }
    }

    /// Rows split over threads give the one-thread result bit for bit.
    #[cfg(feature = "std")]
    #[test]
    fn rows_split_over_threads_match_one_thread() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // 9 rows (not a multiple of 2 or 3 threads) of 5003 elements: more
        // than the elements a split needs.
        let dims = [9, 5003];
        let x: Vec<f32> = rand_vec(dims[0] * dims[1], 7)
            .iter()
            .map(|v| v * 40.0)
            .collect();
        let want = naive(&x, &dims, 1, false);
        let want_log = naive(&x, &dims, 1, true);
        crate::threads::set_num_threads(1);
        let one = run(&Softmax { axis: 1 }, &[Some(t(&x, &dims))], 1).unwrap();
        let one_log = run(&LogSoftmax { axis: -1 }, &[Some(t(&x, &dims))], 1).unwrap();
        assert_close(&one[0].1, &want, 1e-5);
        assert_close(&one_log[0].1, &want_log, 1e-5);
        for threads in [2, 3] {
            crate::threads::set_num_threads(threads);
            let got = run(&Softmax { axis: 1 }, &[Some(t(&x, &dims))], 1).unwrap();
            let got_log = run(&LogSoftmax { axis: -1 }, &[Some(t(&x, &dims))], 1).unwrap();
            assert_eq!(got[0].1, one[0].1, "{threads} threads");
            assert_eq!(got_log[0].1, one_log[0].1, "{threads} threads");
        }
        crate::threads::set_num_threads(1);
    }

    #[test]
    fn numpy_literal_and_large_values() {
        // import numpy as np
        // x = np.array([[1, 2, 3], [1000, 1000, 1000]], dtype=np.float32)
        // e = np.exp(x - x.max(1, keepdims=True)); print((e / e.sum(1, keepdims=True)).ravel())
        // -> [0.09003057 0.24472848 0.66524094 0.33333334 0.33333334 0.33333334]
        let x = [1f32, 2., 3., 1000., 1000., 1000.];
        let out = run(&Softmax { axis: -1 }, &[Some(t(&x, &[2, 3]))], 1).unwrap();
        assert_close(
            &out[0].1,
            &[
                0.09003057, 0.24472848, 0.66524094, 0.33333334, 0.33333334, 0.33333334,
            ],
            1e-6,
        );
        // np.log of the above: [-2.407606, -1.4076059, -0.40760595, -1.0986123, ...]
        let out = run(&LogSoftmax { axis: 1 }, &[Some(t(&x, &[2, 3]))], 1).unwrap();
        assert_close(
            &out[0].1,
            &[
                -2.407606,
                -1.4076059,
                -0.40760595,
                -1.0986123,
                -1.0986123,
                -1.0986123,
            ],
            1e-6,
        );
    }
}
