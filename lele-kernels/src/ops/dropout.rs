//! ONNX `Dropout` when it is deterministic: inference, or training mode with
//! a zero ratio. The output is the input and the mask is all true.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Dropout";

/// Inputs: `data`, optional `ratio` (float scalar, default 0.5), optional
/// `training_mode` (bool scalar, default false). Outputs: `output` and an
/// optional Bool `mask`. Training mode with a non-zero ratio draws random
/// numbers and is reported as an error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout;
crate::to_rust_struct!(ops::dropout::Dropout {});

impl Kernel for Dropout {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        outputs.fill(x.shape);
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let training = match opt_input(inputs, 2) {
            Some(t) => t.as_bool(OP)?.first().is_some_and(|&b| b != 0),
            None => false,
        };
        if training {
            let ratio = match opt_input(inputs, 1) {
                Some(t) => t.scalar_f64(OP)?,
                None => 0.5,
            };
            if ratio != 0.0 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "training-mode dropout with a non-zero ratio is random and not supported",
                });
            }
        }
        let [out, rest @ ..] = outputs else {
            return Err(KernelError::MissingInput { op: OP, index: 0 });
        };
        if out.dtype != x.dtype || out.data.len() != x.data.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        out.data.copy_from_slice(x.data);
        if let Some(mask) = rest.first_mut() {
            if mask.dtype != DType::Bool || mask.data.len() != x.numel() {
                return Err(KernelError::Buffer { op: OP });
            }
            mask.data.fill(1);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run_kernel};

    #[test]
    fn inference_and_zero_ratio_copy_with_a_full_mask() {
        let x = Owned::new(&[3], &[1.5f32, -2.0, 3.25]);
        for (training, ratio) in [(false, 0.5f32), (true, 0.0)] {
            let r = Owned::new(&[], &[ratio]);
            let t = Owned::boolean(&[], &[training]);
            let outs = run_kernel(
                &Dropout,
                &[Some(&x), Some(&r), Some(&t)],
                &[DType::F32, DType::Bool],
            )
            .unwrap();
            assert_eq!(outs[0].to::<f32>(), [1.5, -2.0, 3.25]);
            assert_eq!(outs[1].to::<u8>(), [1, 1, 1]);
        }
        let r = Owned::new(&[], &[0.25f32]);
        let t = Owned::boolean(&[], &[true]);
        assert!(run_kernel(&Dropout, &[Some(&x), Some(&r), Some(&t)], &[DType::F32]).is_err());
    }
}
