//! ONNX `Trilu`: keeps the upper or lower triangle of the last two dims.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Trilu";

/// Inputs: `input` (rank ≥ 2, any dtype), optional `k` (int64 scalar,
/// default 0). Element `(i, j)` of each matrix is kept when `j - i >= k`
/// (`upper`) or `j - i <= k` (lower), else set to zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trilu {
    /// Keep the upper triangle (else the lower one).
    pub upper: bool,
}
crate::to_rust_struct!(ops::trilu::Trilu { upper });

impl Kernel for Trilu {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "input rank must be at least 2",
            });
        }
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = x.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let k = match opt_input(inputs, 1) {
            Some(t) => t.scalar_i64(OP)?,
            None => 0,
        };
        let out = output(outputs, 0, OP)?;
        if out.dtype != x.dtype || out.data.len() != x.data.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        let dims = x.shape.dims();
        let (rows, cols) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        let es = x.dtype.size();
        let row_bytes = cols * es;
        if row_bytes == 0 || rows == 0 {
            return Ok(());
        }
        for (r, (src, dst)) in x
            .data
            .chunks_exact(row_bytes)
            .zip(out.data.chunks_exact_mut(row_bytes))
            .enumerate()
        {
            let i = (r % rows) as i64;
            for j in 0..cols {
                let keep = if self.upper {
                    j as i64 - i >= k
                } else {
                    j as i64 - i <= k
                };
                let (a, b) = (j * es, (j + 1) * es);
                if keep {
                    dst[a..b].copy_from_slice(&src[a..b]);
                } else {
                    dst[a..b].fill(0);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    fn run(upper: bool, k: i64, rows: usize, cols: usize) -> Vec<f32> {
        let x: Vec<f32> = (1..=(2 * rows * cols)).map(|v| v as f32).collect();
        let shape = Shape::new(&[2, rows, cols]).unwrap();
        let kt = [k];
        let inputs = [
            Some(TensorRef::new(DType::F32, shape, bytemuck::cast_slice(&x)).unwrap()),
            Some(TensorRef::new(DType::I64, Shape::SCALAR, bytemuck::cast_slice(&kt)).unwrap()),
        ];
        let mut y = vec![0f32; x.len()];
        let mut outs =
            [TensorMut::new(DType::F32, shape, bytemuck::cast_slice_mut(&mut y)).unwrap()];
        Trilu { upper }.run(&inputs, &mut outs, &mut []).unwrap();
        y
    }

    #[test]
    fn matches_a_reference_on_odd_shapes() {
        for (rows, cols) in [(3, 5), (5, 3), (1, 7), (4, 4)] {
            for k in [-4, -1, 0, 2, 9] {
                for upper in [true, false] {
                    let y = run(upper, k, rows, cols);
                    for (n, &v) in y.iter().enumerate() {
                        let (i, j) = (((n / cols) % rows) as i64, (n % cols) as i64);
                        let keep = if upper { j - i >= k } else { j - i <= k };
                        let want = if keep { (n + 1) as f32 } else { 0.0 };
                        assert_eq!(v, want, "upper={upper} k={k} {rows}x{cols} at {n}");
                    }
                }
            }
        }
    }
}
