//! Generators: Range, ConstantOfShape, EyeLike.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_out, read_list};
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::num::Num;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

/// A scalar of any dtype: `bits` holds its little-endian bytes in the low
/// `dtype.size()` bytes (Bool: 0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarValue {
    /// Element type.
    pub dtype: DType,
    /// Raw bits, zero-extended.
    pub bits: u64,
}
crate::to_rust_struct!(ops::generate::ScalarValue { dtype, bits });

impl ScalarValue {
    /// ONNX's default `ConstantOfShape` value: f32 zero.
    pub const ZERO_F32: ScalarValue = ScalarValue {
        dtype: DType::F32,
        bits: 0,
    };

    /// A scalar from its little-endian bytes (`bytes.len() == dtype.size()`).
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> Result<ScalarValue, KernelError> {
        if bytes.len() != dtype.size() {
            return Err(KernelError::Buffer { op: "ScalarValue" });
        }
        let mut b = [0u8; 8];
        b[..bytes.len()].copy_from_slice(bytes);
        Ok(ScalarValue {
            dtype,
            bits: u64::from_le_bytes(b),
        })
    }

    /// An f32 scalar.
    pub fn f32(v: f32) -> ScalarValue {
        ScalarValue {
            dtype: DType::F32,
            bits: v.to_bits() as u64,
        }
    }

    /// An i64 scalar.
    pub fn i64(v: i64) -> ScalarValue {
        ScalarValue {
            dtype: DType::I64,
            bits: v as u64,
        }
    }

    /// The little-endian bytes of the value (`dtype.size()` of them).
    pub fn bytes(&self) -> [u8; 8] {
        self.bits.to_le_bytes()
    }
}

/// Fills `data` with copies of the `es`-byte pattern `pat`.
pub(crate) fn fill_pattern(data: &mut [u8], pat: &[u8]) {
    match pat.len() {
        1 => data.fill(pat[0]),
        n => {
            for c in data.chunks_exact_mut(n) {
                c.copy_from_slice(pat);
            }
        }
    }
}

/// ONNX `ConstantOfShape`: input `input` (1-D i64 shape); output filled
/// with `value` (whose dtype is the output dtype).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConstantOfShape {
    /// The fill value.
    pub value: ScalarValue,
}
crate::to_rust_struct!(ops::generate::ConstantOfShape { value });

impl ConstantOfShape {
    fn shape(inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "ConstantOfShape";
        let s = input(inputs, 0, OP)?;
        let (v, n) = read_list(s, OP)?;
        if n > MAX_RANK {
            return Err(KernelError::RankTooLarge(n));
        }
        let mut out = Shape::SCALAR;
        for &d in &v[..n] {
            if d < 0 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "negative dim",
                });
            }
            out.push(d as usize)?;
        }
        Ok(out)
    }
}

impl Kernel for ConstantOfShape {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = Self::shape(inputs)?;
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "ConstantOfShape",
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
        let s = Self::shape(inputs)?;
        let out = output(outputs, 0, "ConstantOfShape")?;
        check_out(out, self.value.dtype, &s, "ConstantOfShape")?;
        let b = self.value.bytes();
        fill_pattern(out.data, &b[..self.value.dtype.size()]);
        Ok(())
    }
}

/// ONNX `Range`: scalar inputs `start`, `limit`, `delta` of one numeric
/// dtype; output length `max(ceil((limit - start) / delta), 0)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range;
crate::to_rust_struct!(ops::generate::Range {});

fn range_len<T: Num>(start: T, limit: T, delta: T) -> Result<usize, KernelError> {
    const OP: &str = "Range";
    if T::FLOAT {
        let (s, l, d) = (start.to_f64(), limit.to_f64(), delta.to_f64());
        if d == 0.0 || !(s.is_finite() && l.is_finite() && d.is_finite()) {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "delta is 0 or a value is not finite",
            });
        }
        Ok(((l - s) / d).ceil().max(0.0) as usize)
    } else {
        let (s, l, d) = (start.to_i128(), limit.to_i128(), delta.to_i128());
        if d == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "delta is 0",
            });
        }
        let span = l - s;
        let (span, d) = if d > 0 { (span, d) } else { (-span, -d) };
        let n = (span + d - 1).div_euclid(d);
        Ok(n.max(0) as usize)
    }
}

impl Range {
    fn values<'a>(
        inputs: &[Option<TensorRef<'a>>],
    ) -> Result<(TensorRef<'a>, TensorRef<'a>, TensorRef<'a>), KernelError> {
        const OP: &str = "Range";
        let s = *input(inputs, 0, OP)?;
        let l = *input(inputs, 1, OP)?;
        let d = *input(inputs, 2, OP)?;
        for t in [&s, &l, &d] {
            if t.numel() != 1 {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "inputs must be scalars",
                });
            }
            if t.dtype != s.dtype {
                return Err(KernelError::DTypeMismatch {
                    op: OP,
                    expected: s.dtype,
                    found: t.dtype,
                });
            }
        }
        Ok((s, l, d))
    }
}

impl Kernel for Range {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "Range";
        let (s, l, d) = Self::values(inputs)?;
        let n = dispatch_num!(s.dtype, OP, |T| range_len::<T>(
            s.typed::<T>(OP)?[0],
            l.typed::<T>(OP)?[0],
            d.typed::<T>(OP)?[0]
        ))?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = Shape::new(&[n])?;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Range";
        let (s, l, d) = Self::values(inputs)?;
        let out = output(outputs, 0, OP)?;
        dispatch_num!(s.dtype, OP, |T| {
            let (a, lim, dl) = (
                s.typed::<T>(OP)?[0],
                l.typed::<T>(OP)?[0],
                d.typed::<T>(OP)?[0],
            );
            let n = range_len(a, lim, dl)?;
            check_out(out, s.dtype, &Shape::new(&[n])?, OP)?;
            let y = out.typed::<T>(OP)?;
            // Like the ONNX reference: start + i * delta (no accumulated error).
            if T::FLOAT {
                let (a, dl) = (a.to_f64(), dl.to_f64());
                for (i, y) in y.iter_mut().enumerate() {
                    *y = T::from_f64(a + i as f64 * dl);
                }
            } else {
                let (a, dl) = (a.to_i128(), dl.to_i128());
                for (i, y) in y.iter_mut().enumerate() {
                    *y = T::from_i128(a + i as i128 * dl);
                }
            }
            Ok(())
        })
    }
}

/// ONNX `EyeLike`: input 2-D `input` (only its shape is used); output of
/// the same shape with ones on diagonal `k`. The output dtype is the
/// output tensor's dtype (ONNX `dtype` attribute or the input's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EyeLike {
    /// Diagonal offset (positive = above the main diagonal).
    pub k: i64,
}
crate::to_rust_struct!(ops::generate::EyeLike { k });

impl Kernel for EyeLike {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "EyeLike")?;
        if x.shape.rank() != 2 {
            return Err(KernelError::Shape {
                op: "EyeLike",
                msg: "input must be 2-D",
            });
        }
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "EyeLike",
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
        const OP: &str = "EyeLike";
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        let dtype = out.dtype;
        check_out(out, dtype, &x.shape, OP)?;
        let (rows, cols) = (x.shape.dims()[0] as i64, x.shape.dims()[1] as i64);
        out.data.fill(0);
        let es = dtype.size();
        let mut one = [0u8; 8];
        if dtype == DType::Bool {
            one[0] = 1;
        } else {
            dispatch_num!(dtype, OP, |T| {
                one[..es].copy_from_slice(bytemuck::bytes_of(&T::ONE));
                Ok(())
            })?;
        }
        for r in 0..rows {
            let c = r + self.k;
            if (0..cols).contains(&c) {
                let o = ((r * cols + c) as usize) * es;
                out.data[o..o + es].copy_from_slice(&one[..es]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eyelike_places_ones_on_the_kth_diagonal() {
        use super::*;
        use crate::ops::test_util::{Owned, run_kernel};
        let x = Owned::new(&[3, 4], &[0i32; 12]);
        for (k, dtype) in [(1i64, DType::I64), (-1, DType::F32), (5, DType::U8)] {
            let y = run_kernel(&EyeLike { k }, &[Some(&x)], &[dtype]).unwrap();
            let mut want = vec![0f64; 12];
            for i in 0..3i64 {
                let j = i + k;
                if (0..4).contains(&j) {
                    want[(i * 4 + j) as usize] = 1.0;
                }
            }
            let got: Vec<f64> = match dtype {
                DType::I64 => y[0].to::<i64>().iter().map(|&v| v as f64).collect(),
                DType::F32 => y[0].to::<f32>().iter().map(|&v| v as f64).collect(),
                _ => y[0].to::<u8>().iter().map(|&v| v as f64).collect(),
            };
            assert_eq!(got, want, "k={k}");
        }
    }

    use super::*;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn range<T: crate::dtype::Elem>(s: T, l: T, d: T) -> Result<Owned, KernelError> {
        let (s, l, d) = (
            Owned::new(&[], &[s]),
            Owned::new(&[], &[l]),
            Owned::new(&[], &[d]),
        );
        run1(&Range, &[Some(&s), Some(&l), Some(&d)], T::DTYPE)
    }

    #[test]
    fn ranges() {
        // np.arange(3, 10, 3), np.arange(10, 4, -2), np.arange(0, 1, 0.3)
        assert_eq!(range(3i64, 10, 3).unwrap().to::<i64>(), [3, 6, 9]);
        assert_eq!(range(10i32, 4, -2).unwrap().to::<i32>(), [10, 8, 6]);
        assert_eq!(range(5i64, 1, 1).unwrap().to::<i64>(), Vec::<i64>::new());
        let f = range(0.0f32, 1.0, 0.3).unwrap().to::<f32>();
        assert_eq!(f.len(), 4);
        assert!((f[3] - 0.9).abs() < 1e-6);
        assert!(range(0i64, 5, 0).is_err());
        // Blind inference needs the values.
        let t = TensorRef::shape_only(DType::I64, Shape::SCALAR);
        let mut o = [Shape::SCALAR];
        assert!(matches!(
            Range.infer(&[Some(t), Some(t), Some(t)], &mut o),
            Err(KernelError::NeedsData { .. })
        ));
    }

    #[test]
    fn constant_of_shape_and_eye() {
        let s = Owned::new(&[2], &[2i64, 3]);
        let k = ConstantOfShape {
            value: ScalarValue::f32(1.5),
        };
        let y = run1(&k, &[Some(&s)], DType::F32).unwrap();
        assert_eq!(
            (y.dims(), y.to::<f32>()),
            (&[2usize, 3][..], [1.5f32; 6].to_vec())
        );
        let k = ConstantOfShape {
            value: ScalarValue::i64(-7),
        };
        assert_eq!(
            run1(&k, &[Some(&s)], DType::I64).unwrap().to::<i64>(),
            [-7; 6]
        );
        let k = ConstantOfShape {
            value: ScalarValue::from_bytes(DType::Bool, &[1]).unwrap(),
        };
        assert_eq!(
            run1(&k, &[Some(&s)], DType::Bool).unwrap().to::<u8>(),
            [1; 6]
        );
        let e = Owned::new(&[0], &[0i64; 0]);
        let y = run1(
            &ConstantOfShape {
                value: ScalarValue::ZERO_F32,
            },
            &[Some(&e)],
            DType::F32,
        );
        assert_eq!(y.unwrap().dims(), &[] as &[usize]);
        let x = Owned::new(&[3, 4], &[0i32; 12]);
        let y = run1(&EyeLike { k: 1 }, &[Some(&x)], DType::F32)
            .unwrap()
            .to::<f32>();
        let mut want = [0f32; 12];
        want[1] = 1.0;
        want[6] = 1.0;
        want[11] = 1.0;
        assert_eq!(y, want);
        let y = run1(&EyeLike { k: -2 }, &[Some(&x)], DType::I64)
            .unwrap()
            .to::<i64>();
        assert_eq!(y.iter().sum::<i64>(), 1);
        assert_eq!(y[8], 1);
    }
}
