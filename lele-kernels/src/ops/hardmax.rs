//! `Hardmax`: 1 at the first maximum along an axis, 0 elsewhere.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Hardmax";

/// ONNX `Hardmax` for float32, float64, float16 and bfloat16.
///
/// Opset 13: along the single dim `axis`. Before opset 13 (`coerce_2d`):
/// along all dims `axis..` flattened together. The first maximum wins; a
/// NaN counts as the maximum.
///
/// Input: `input`. Output: `output`, same shape and dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardmax {
    /// The axis (negative counts from the end).
    pub axis: i64,
    /// Flatten dims `axis..` into one (opsets 1 and 11).
    pub coerce_2d: bool,
}
crate::to_rust_struct!(ops::hardmax::Hardmax { axis, coerce_2d });

impl Hardmax {
    /// `(outer, axis size, inner)`.
    fn dims(&self, s: &Shape) -> Result<(usize, usize, usize), KernelError> {
        let d = s.dims();
        if self.coerce_2d {
            // Opset 11 allows axis == rank (an empty trailing block).
            let a = if self.axis == d.len() as i64 {
                d.len()
            } else {
                s.axis(self.axis, OP)?
            };
            Ok((d[..a].iter().product(), d[a..].iter().product(), 1))
        } else {
            let a = s.axis(self.axis, OP)?;
            Ok((d[..a].iter().product(), d[a], d[a + 1..].iter().product()))
        }
    }
}

fn hardmax<T: Num>(x: &[T], y: &mut [T], n: usize, inner: usize) {
    let block = n * inner;
    for (xb, yb) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
        yb.fill(T::ZERO);
        for i in 0..inner {
            let mut best = i;
            for j in 1..n {
                let m = xb[best];
                if m.is_nan() {
                    break;
                }
                let v = xb[j * inner + i];
                if v > m || v.is_nan() {
                    best = j * inner + i;
                }
            }
            yb[best] = T::ONE;
        }
    }
}

impl Kernel for Hardmax {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        self.dims(&x.shape)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: OP,
            msg: "expected 1 output",
        })? = x.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let xt = input(inputs, 0, OP)?;
        let (_, n, inner) = self.dims(&xt.shape)?;
        let yt = output(outputs, 0, OP)?;
        dispatch!(xt.dtype, OP, [F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16], |T| {
            let x = xt.typed::<T>(OP)?;
            let y = yt.typed::<T>(OP)?;
            if y.len() != x.len() {
                return Err(KernelError::Buffer { op: OP });
            }
            if n * inner > 0 {
                hardmax(x, y, n, inner);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Hardmax along `axis` of a `[2, 3, 4]` tensor by index arithmetic.
    fn naive(x: &[f32], axis: usize) -> Vec<f32> {
        let dims = [2, 3, 4];
        let strides = [12, 4, 1];
        let mut y = vec![0f32; 24];
        for (i, _) in x.iter().enumerate() {
            let c = [i / 12, (i / 4) % 3, i % 4];
            if c[axis] != 0 {
                continue;
            }
            let mut best = i;
            for j in 1..dims[axis] {
                let k = i + j * strides[axis];
                if x[k] > x[best] {
                    best = k;
                }
            }
            y[best] = 1.0;
        }
        y
    }

    #[test]
    fn hardmax_axes_and_ties() {
        let mut x = rand_vec(24, 3);
        x[5] = x[1]; // a tie along axis 1 / 2 somewhere
        for axis in 0..3 {
            let k = Hardmax {
                axis: axis as i64 - 3,
                coerce_2d: false,
            };
            let out = run(&k, &[Some(t(&x, &[2, 3, 4]))], 1).unwrap();
            assert_eq!(out[0].1, naive(&x, axis), "axis {axis}");
        }
        // onnx/backend/test/case/node/hardmax.py, export_hardmax_one_hot:
        // [[1, 1, 1, 0]] -> [[1, 0, 0, 0]]
        let x = [1f32, 1., 1., 0.];
        let k = Hardmax {
            axis: -1,
            coerce_2d: false,
        };
        assert_eq!(
            run(&k, &[Some(t(&x, &[1, 4]))], 1).unwrap()[0].1,
            vec![1., 0., 0., 0.]
        );
        // NaN wins; coerce_2d flattens the trailing dims.
        let x = [0f32, f32::NAN, 5., 1., 2., 3.];
        let k = Hardmax {
            axis: 0,
            coerce_2d: true,
        };
        assert_eq!(
            run(&k, &[Some(t(&x, &[2, 3]))], 1).unwrap()[0].1,
            vec![0., 1., 0., 0., 0., 0.]
        );
        let k = Hardmax {
            axis: 1,
            coerce_2d: true,
        };
        assert_eq!(
            run(&k, &[Some(t(&x, &[2, 3]))], 1).unwrap()[0].1,
            vec![0., 1., 0., 0., 0., 1.]
        );
        assert!(
            run(
                &Hardmax {
                    axis: 3,
                    coerce_2d: false
                },
                &[Some(t(&x, &[2, 3]))],
                1
            )
            .is_err()
        );
    }
}
