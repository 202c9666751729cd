//! ONNX `ReverseSequence`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "ReverseSequence";

/// Inputs `input` (rank ≥ 2, any dtype) and `sequence_lens` (int64,
/// `[batch]`). For each batch entry `b`, the first `sequence_lens[b]`
/// slices along `time_axis` are reversed; the rest are copied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReverseSequence {
    /// The time axis (0 or 1).
    pub time_axis: usize,
    /// The batch axis (1 or 0).
    pub batch_axis: usize,
}
crate::to_rust_struct!(ops::reverse_sequence::ReverseSequence {
    time_axis,
    batch_axis
});

impl Kernel for ReverseSequence {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let r = x.shape.rank();
        if r < 2 || self.time_axis > 1 || self.batch_axis > 1 || self.time_axis == self.batch_axis {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "needs rank >= 2 and time/batch axes 0 and 1",
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
        check_data(x, OP)?;
        let lens = input(inputs, 1, OP)?;
        let dims = x.shape.dims();
        let (steps, batch) = (dims[self.time_axis], dims[self.batch_axis]);
        if lens.numel() != batch {
            return Err(KernelError::Shape {
                op: OP,
                msg: "sequence_lens must have one value per batch entry",
            });
        }
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let st: [usize; MAX_RANK] = x.shape.strides();
        let row = st[1] * x.dtype.size();
        // Read in place of an allocation; batch sizes beyond this are an error.
        let mut lv = [0i64; 4096];
        if batch > lv.len() {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "more than 4096 batch entries",
            });
        }
        let n = lens.read_i64s(OP, &mut lv)?;
        for (b, &l) in lv[..n].iter().enumerate() {
            let l = usize::try_from(l)
                .ok()
                .filter(|&l| l <= steps)
                .ok_or(KernelError::IndexOutOfRange { op: OP })?;
            for t in 0..steps {
                let src_t = if t < l { l - 1 - t } else { t };
                let at = |t: usize| {
                    let (i0, i1) = if self.time_axis == 0 { (t, b) } else { (b, t) };
                    (i0 * st[0] + i1 * st[1]) * x.dtype.size()
                };
                let (d, s) = (at(t), at(src_t));
                out.data[d..d + row].copy_from_slice(&x.data[s..s + row]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::test_util::{Owned, run_kernel};

    #[test]
    fn reverses_each_prefix_along_time() {
        // time-major [4 steps, 2 batch, 1]: batch 0 reverses 3, batch 1 reverses 1.
        let x = Owned::new(&[4, 2, 1], &[0i32, 10, 1, 11, 2, 12, 3, 13]);
        let lens = Owned::new(&[2], &[3i64, 1]);
        let k = ReverseSequence {
            time_axis: 0,
            batch_axis: 1,
        };
        let y = run_kernel(&k, &[Some(&x), Some(&lens)], &[DType::I32]).unwrap();
        assert_eq!(y[0].to::<i32>(), [2, 10, 1, 11, 0, 12, 3, 13]);
        // batch-major [2 batch, 3 steps].
        let x = Owned::new(&[2, 3], &[0f32, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let lens = Owned::new(&[2], &[2i64, 3]);
        let k = ReverseSequence {
            time_axis: 1,
            batch_axis: 0,
        };
        let y = run_kernel(&k, &[Some(&x), Some(&lens)], &[DType::F32]).unwrap();
        assert_eq!(y[0].to::<f32>(), [1.0, 0.0, 2.0, 5.0, 4.0, 3.0]);
    }
}
