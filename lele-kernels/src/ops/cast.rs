//! `Cast` and `CastLike` between every supported dtype.
//!
//! Semantics follow NumPy `astype`: floats → integers truncate toward zero
//! (then wrap to the target width; NaN gives 0), integers → integers wrap,
//! anything → Bool is `x != 0`, Bool → numbers is 0/1, f16/bf16 round to
//! nearest even.
use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Cast`: input `input`, output of dtype `to` and the same shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cast {
    /// Target dtype.
    pub to: DType,
}
crate::to_rust_struct!(ops::cast::Cast { to });

const OP: &str = "Cast";

impl Kernel for Cast {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
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
        let out = output(outputs, 0, OP)?;
        check_out(out, self.to, &x.shape, OP)?;
        cast_tensor(x, out)
    }
}

/// ONNX `CastLike`: inputs `input` and `target_type`; the output has the
/// dtype of `target_type` (whose values are not read) and the shape of
/// `input`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CastLike;
crate::to_rust_struct!(ops::cast::CastLike {});

impl Kernel for CastLike {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        input(inputs, 1, "CastLike")?;
        Cast { to: DType::F32 }.infer(inputs, outputs)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let to = input(inputs, 1, "CastLike")?.dtype;
        Cast { to }.run(inputs, outputs, scratch)
    }
}

/// Converts `x` into `out` (same element count, `out.dtype` target).
pub fn cast_tensor(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    check_data(x, OP)?;
    if x.numel() != out.numel() {
        return Err(KernelError::Shape {
            op: OP,
            msg: "element counts differ",
        });
    }
    if x.dtype == out.dtype {
        out.data.copy_from_slice(x.data);
        return Ok(());
    }
    let src = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    dispatch!(src, OP, [F32 => f32, F64 => f64, F16 => f16, BF16 => bf16,
        I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64],
        |S| cast_from::<S>(x, out))
}

fn cast_from<S: Num>(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let xv: &[S] = bytemuck::try_cast_slice(x.data).map_err(|_| KernelError::Buffer { op: OP })?;
    if out.dtype == DType::Bool {
        let y = out.typed::<u8>(OP)?;
        for (y, &v) in y.iter_mut().zip(xv) {
            *y = if S::FLOAT {
                v.to_f64() != 0.0
            } else {
                v.to_i128() != 0
            } as u8;
        }
        return Ok(());
    }
    dispatch!(out.dtype, OP, [F32 => f32, F64 => f64, F16 => f16, BF16 => bf16,
    I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64],
    |D| {
        let y = out.typed::<D>(OP)?;
        convert::<S, D>(xv, y);
        Ok(())
    })
}

#[inline]
fn convert<S: Num, D: Num>(x: &[S], y: &mut [D]) {
    if S::DTYPE == DType::F32 && D::DTYPE == DType::F16 {
        // Direct rounding (no f64 detour needed, same result, faster).
        for (y, &v) in y.iter_mut().zip(x) {
            let v: f32 = bytemuck::cast(v);
            *y = bytemuck::cast(f16::from_f32(v));
        }
    } else if S::FLOAT {
        for (y, &v) in y.iter_mut().zip(x) {
            *y = D::from_f64(v.to_f64());
        }
    } else {
        for (y, &v) in y.iter_mut().zip(x) {
            *y = D::from_i128(v.to_i128());
        }
    }
}

/// ONNX `BitCast`: reinterprets the little-endian bytes of `input` as dtype
/// `to` of the same width; the shape is unchanged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitCast {
    /// Target dtype (same size as the input's).
    pub to: DType,
}
crate::to_rust_struct!(ops::cast::BitCast { to });

impl Kernel for BitCast {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "BitCast")?;
        if x.dtype.size() != self.to.size() {
            return Err(KernelError::Invalid {
                op: "BitCast",
                msg: "source and target dtypes differ in width",
            });
        }
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "BitCast",
            index: 0,
        })? = x.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "BitCast")?;
        check_data(x, "BitCast")?;
        let out = output(outputs, 0, "BitCast")?;
        check_out(out, self.to, &x.shape, "BitCast")?;
        if out.data.len() != x.data.len() {
            return Err(KernelError::Buffer { op: "BitCast" });
        }
        // Bytes are stored in the machine's order; ONNX defines BitCast on
        // little-endian bytes, which is the same thing on every target lele
        // supports (x86_64, aarch64, wasm32).
        out.data.copy_from_slice(x.data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bitcast_keeps_the_bits() {
        use super::*;
        use crate::ops::test_util::{Owned, run_kernel};
        let x = Owned::new(&[3], &[1.0f32, -2.5, f32::NAN]);
        let y = run_kernel(&BitCast { to: DType::I32 }, &[Some(&x)], &[DType::I32]).unwrap();
        let want: Vec<i32> = [1.0f32, -2.5, f32::NAN]
            .iter()
            .map(|v| v.to_bits() as i32)
            .collect();
        assert_eq!(y[0].to::<i32>(), want);
        assert!(run_kernel(&BitCast { to: DType::I64 }, &[Some(&x)], &[DType::I64]).is_err());
    }

    use super::*;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn cast(x: &Owned, to: DType) -> Owned {
        run1(&Cast { to }, &[Some(x)], to).unwrap()
    }

    #[test]
    fn float_to_int_and_bool() {
        // np.array([-2.7, -0.5, 0, 0.5, 2.7, 300.0, nan]).astype(...)
        let x = Owned::new(&[6], &[-2.7f32, -0.5, 0.0, 0.5, 2.7, 300.0]);
        assert_eq!(cast(&x, DType::I64).to::<i64>(), [-2, 0, 0, 0, 2, 300]);
        assert_eq!(cast(&x, DType::I32).to::<i32>(), [-2, 0, 0, 0, 2, 300]);
        assert_eq!(cast(&x, DType::U8).to::<u8>(), [254, 0, 0, 0, 2, 44]);
        assert_eq!(cast(&x, DType::Bool).to::<u8>(), [1, 1, 0, 1, 1, 1]);
        let d = cast(&x, DType::F64).to::<f64>();
        assert_eq!(d[0], -2.7f32 as f64);
        let h = cast(&x, DType::F16).to::<f16>();
        assert_eq!(h[4], f16::from_f32(2.7));
        let b = cast(&x, DType::BF16).to::<bf16>();
        assert_eq!(b[5], bf16::from_f32(300.0));
        let back = cast(&Owned::new(&[6], &h), DType::F32).to::<f32>();
        assert_eq!(back[4], f16::from_f32(2.7).to_f32());
    }

    #[test]
    fn int_conversions() {
        let x = Owned::new(&[4], &[-1i64, 256, i64::MAX, 3]);
        assert_eq!(cast(&x, DType::U8).to::<u8>(), [255, 0, 255, 3]);
        assert_eq!(cast(&x, DType::I32).to::<i32>(), [-1, 256, -1, 3]);
        assert_eq!(
            cast(&x, DType::U64).to::<u64>(),
            [u64::MAX, 256, i64::MAX as u64, 3]
        );
        assert_eq!(
            cast(&x, DType::F32).to::<f32>(),
            [-1.0, 256.0, i64::MAX as f32, 3.0]
        );
        let b = Owned::boolean(&[3], &[true, false, true]);
        assert_eq!(cast(&b, DType::F32).to::<f32>(), [1.0, 0.0, 1.0]);
        assert_eq!(cast(&b, DType::I64).to::<i64>(), [1, 0, 1]);
        let same = cast(&x, DType::I64).to::<i64>();
        assert_eq!(same, x.to::<i64>());
        let like = Owned::new(&[1], &[0.0f64]);
        let y = run1(&CastLike, &[Some(&x), Some(&like)], DType::F64).unwrap();
        assert_eq!(y.to::<f64>()[..2], [-1.0, 256.0]);
        let empty: Vec<i32> = Vec::new();
        let e = Owned::new(&[0, 3], &empty);
        assert_eq!(cast(&e, DType::F32).dims(), &[0, 3]);
    }
}
