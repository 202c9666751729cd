//! ONNX `Det`: determinants of square matrices by LU decomposition with
//! partial pivoting, in f64.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Det";

/// Input `X` `[*, M, M]` (float); output `[*]`, one determinant per matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Det;
crate::to_rust_struct!(ops::det::Det {});

fn plan(x: &TensorRef<'_>) -> Result<(Shape, usize), KernelError> {
    let d = x.shape.dims();
    let r = d.len();
    if r < 2 || d[r - 1] != d[r - 2] {
        return Err(KernelError::Shape {
            op: OP,
            msg: "X must be [*, M, M]",
        });
    }
    Ok((Shape::new(&d[..r - 2])?, d[r - 1]))
}

/// Determinant of the `m`×`m` matrix in `a` (overwritten).
fn det_lu(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..m {
        let p = (c..m)
            .max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs()))
            .unwrap_or(c);
        if a[p * m + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..m {
                a.swap(p * m + k, c * m + k);
            }
            det = -det;
        }
        let pivot = a[c * m + c];
        det *= pivot;
        for i in c + 1..m {
            let f = a[i * m + c] / pivot;
            for k in c..m {
                a[i * m + k] -= f * a[c * m + k];
            }
        }
    }
    det
}

impl Kernel for Det {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _) = plan(input(inputs, 0, OP)?)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = s;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match inputs.first() {
            Some(Some(x)) => plan(x).map_or(0, |(_, m)| 8 * m * m),
            _ => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let (s, m) = plan(x)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &s, OP)?;
        let a: &mut [f64] = scratch
            .get_mut(..8 * m * m)
            .and_then(|b| bytemuck::try_cast_slice_mut(b).ok())
            .ok_or(KernelError::Buffer { op: OP })?;
        dispatch!(x.dtype, OP, [F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16], |T| {
            let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
            for (k, yv) in y.iter_mut().enumerate() {
                for (d, &v) in a.iter_mut().zip(&xv[k * m * m..(k + 1) * m * m]) {
                    *d = v.to_f64();
                }
                *yv = T::from_f64(det_lu(a, m));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::test_util::{Owned, run_kernel};

    #[test]
    fn determinants_of_a_batch() {
        // [[1,2],[3,4]] → -2; a 3×3 needing a row swap → 18; singular → 0.
        let x = Owned::new(&[2, 2, 2], &[1.0f32, 2.0, 3.0, 4.0, 2.0, 4.0, 1.0, 2.0]);
        let y = run_kernel(&Det, &[Some(&x)], &[DType::F32]).unwrap();
        assert_eq!(y[0].to::<f32>(), [-2.0, 0.0]);
        let x = Owned::new(&[3, 3], &[0.0f64, 2.0, 1.0, 3.0, 0.0, 0.0, 1.0, 1.0, 4.0]);
        let y = run_kernel(&Det, &[Some(&x)], &[DType::F64]).unwrap();
        // 0·(0−0) − 2·(12−0) + 1·(3−0) = −21
        assert!((y[0].to::<f64>()[0] + 21.0).abs() < 1e-12);
    }
}
