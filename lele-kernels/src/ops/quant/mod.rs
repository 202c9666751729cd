//! ONNX quantization operators: `QuantizeLinear`, `DequantizeLinear`,
//! `DynamicQuantizeLinear`, `MatMulInteger`, `QLinearMatMul`, `ConvInteger`
//! and `QLinearConv`.
//!
//! Quantized values are 8- and 16-bit integers (`DequantizeLinear` also
//! reads `int32`); float8, 4-bit and 2-bit formats are not supported.
//! Rounding is round-half-to-even followed by saturation to the output
//! type's range, as in the ONNX reference implementation.
use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::shape::{Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

mod conv;
mod matmul;
#[cfg(test)]
mod tests;

pub use conv::{ConvInteger, QConvAttrs, QLinearConv};
pub use matmul::{MatMulInteger, QLinearMatMul};

// ---------------------------------------------------------------------------
// Shared helpers.

/// The elements of a numeric tensor, read as `f64`.
#[derive(Clone, Copy)]
pub(crate) enum Vals<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    F64(&'a [f64]),
    I8(&'a [i8]),
    U8(&'a [u8]),
    I16(&'a [i16]),
    U16(&'a [u16]),
    I32(&'a [i32]),
}

impl<'a> Vals<'a> {
    /// Views `t`; errors for dtypes no quantization operator reads.
    pub(crate) fn new(t: &TensorRef<'a>, op: &'static str) -> Result<Self, KernelError> {
        Ok(match t.dtype {
            DType::F32 => Vals::F32(t.typed(op)?),
            DType::F16 => Vals::F16(t.typed(op)?),
            DType::BF16 => Vals::BF16(t.typed(op)?),
            DType::F64 => Vals::F64(t.typed(op)?),
            DType::I8 => Vals::I8(t.typed(op)?),
            DType::U8 => Vals::U8(t.typed(op)?),
            DType::I16 => Vals::I16(t.typed(op)?),
            DType::U16 => Vals::U16(t.typed(op)?),
            DType::I32 => Vals::I32(t.typed(op)?),
            dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
        })
    }

    /// Element `i` (0 when out of range, which validated callers never hit).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> f64 {
        fn at<T: Copy>(s: &[T], i: usize, f: impl Fn(T) -> f64) -> f64 {
            s.get(i).map_or(0.0, |&v| f(v))
        }
        match self {
            Vals::F32(s) => at(s, i, f64::from),
            Vals::F16(s) => at(s, i, f16::to_f64),
            Vals::BF16(s) => at(s, i, bf16::to_f64),
            Vals::F64(s) => at(s, i, |v| v),
            Vals::I8(s) => at(s, i, f64::from),
            Vals::U8(s) => at(s, i, f64::from),
            Vals::I16(s) => at(s, i, f64::from),
            Vals::U16(s) => at(s, i, f64::from),
            Vals::I32(s) => at(s, i, f64::from),
        }
    }
}

/// An optional zero point: `None` reads as 0.
#[inline]
pub(crate) fn zp_at(zp: &Option<Vals<'_>>, i: usize) -> f64 {
    zp.as_ref().map_or(0.0, |z| z.get(i))
}

/// Round half to even (exact for every `f64`, no `std` needed).
#[inline]
pub(crate) fn rint(v: f64) -> f64 {
    const TWO52: f64 = 4_503_599_627_370_496.0;
    if v.is_nan() || v >= TWO52 || v <= -TWO52 {
        v
    } else if v >= 0.0 {
        (v + TWO52) - TWO52
    } else {
        (v - TWO52) + TWO52
    }
}

/// Range `[min, max]` of a quantized integer dtype.
pub(crate) fn qrange(d: DType, op: &'static str) -> Result<(f64, f64), KernelError> {
    Ok(match d {
        DType::I8 => (-128.0, 127.0),
        DType::U8 => (0.0, 255.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::U16 => (0.0, 65535.0),
        dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
    })
}

/// A quantized integer output buffer.
pub(crate) enum QOut<'a> {
    I8(&'a mut [i8]),
    U8(&'a mut [u8]),
    I16(&'a mut [i16]),
    U16(&'a mut [u16]),
}

impl<'a> QOut<'a> {
    /// Views `t` (int8, uint8, int16 or uint16).
    pub(crate) fn new(t: &'a mut TensorMut<'_>, op: &'static str) -> Result<Self, KernelError> {
        Ok(match t.dtype {
            DType::I8 => QOut::I8(t.typed(op)?),
            DType::U8 => QOut::U8(t.typed(op)?),
            DType::I16 => QOut::I16(t.typed(op)?),
            DType::U16 => QOut::U16(t.typed(op)?),
            dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
        })
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            QOut::I8(s) => s.len(),
            QOut::U8(s) => s.len(),
            QOut::I16(s) => s.len(),
            QOut::U16(s) => s.len(),
        }
    }

    /// Stores `v` (already rounded and clamped to the dtype's range; NaN
    /// stores 0).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, v: f64) {
        // `as` saturates and maps NaN to 0; callers clamp first.
        match self {
            QOut::I8(s) => {
                if let Some(o) = s.get_mut(i) {
                    *o = v as i8;
                }
            }
            QOut::U8(s) => {
                if let Some(o) = s.get_mut(i) {
                    *o = v as u8;
                }
            }
            QOut::I16(s) => {
                if let Some(o) = s.get_mut(i) {
                    *o = v as i16;
                }
            }
            QOut::U16(s) => {
                if let Some(o) = s.get_mut(i) {
                    *o = v as u16;
                }
            }
        }
    }
}

/// Rounds an already rounded value `q` plus a zero point and saturates it
/// to `[lo, hi]`. NaN saturates to `lo` (what the ONNX reference produces).
#[inline]
pub(crate) fn saturate(q: f64, (lo, hi): (f64, f64)) -> f64 {
    if q.is_nan() { lo } else { q.clamp(lo, hi) }
}

/// Precision of a floating-point computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prec {
    F16,
    BF16,
    F32,
    F64,
}

impl Prec {
    fn of(d: DType) -> Prec {
        match d {
            DType::F16 => Prec::F16,
            DType::BF16 => Prec::BF16,
            DType::F32 => Prec::F32,
            _ => Prec::F64,
        }
    }

    /// NumPy's promotion of two operand dtypes (integers promote to f64).
    fn promote(a: DType, b: DType) -> Prec {
        match (Prec::of(a), Prec::of(b)) {
            (x, y) if x == y => x,
            (Prec::F64, _) | (_, Prec::F64) => Prec::F64,
            _ => Prec::F32,
        }
    }

    /// Rounds `v` to this precision (to nearest, ties to even).
    #[inline]
    fn round(self, v: f64) -> f64 {
        match self {
            Prec::F64 => v,
            Prec::F32 => v as f32 as f64,
            Prec::F16 => f64_to_f16(v).to_f64(),
            Prec::BF16 => f64_to_bf16(v).to_f64(),
        }
    }
}

/// `v` rounded to `f32` toward zero, with the last bit set when inexact
/// ("round to odd"): rounding that to a narrower float (float16, bfloat16)
/// to nearest then equals rounding `v` directly, without double rounding.
#[inline]
pub(crate) fn f32_round_to_odd(v: f64) -> f32 {
    let r = v as f32;
    if !r.is_finite() || r as f64 == v {
        return r;
    }
    // `r` is the nearest f32; step toward zero if it rounded away from it.
    let mut bits = r.to_bits();
    if (r as f64).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `v` rounded to float16 (to nearest, ties to even).
#[inline]
pub(crate) fn f64_to_f16(v: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(v))
}

/// `v` rounded to bfloat16 (to nearest, ties to even).
#[inline]
pub(crate) fn f64_to_bf16(v: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(v))
}

/// How a scale (or zero point) tensor maps onto the elements of `x`,
/// viewed as `[outer, d, inner]` around the quantization axis.
#[derive(Clone, Copy, Debug)]
struct QLayout {
    outer: usize,
    d: usize,
    inner: usize,
    per: Per,
}

#[derive(Clone, Copy, Debug)]
enum Per {
    /// One scale.
    Tensor,
    /// One scale per index along the axis.
    Axis,
    /// Scale shape `[outer, s, inner]`, each scale covering `b` indices.
    Block { s: usize, b: usize },
}

impl QLayout {
    fn new(
        x: &Shape,
        scale: &Shape,
        axis: i64,
        block_size: usize,
        op: &'static str,
    ) -> Result<QLayout, KernelError> {
        if scale.numel() == 1 {
            return Ok(QLayout {
                outer: 1,
                d: 1,
                inner: x.numel(),
                per: Per::Tensor,
            });
        }
        let ax = normalize_axis(axis, x.rank(), op)?;
        let dims = x.dims();
        let outer: usize = dims[..ax].iter().product();
        let inner: usize = dims[ax + 1..].iter().product();
        let d = dims[ax];
        let per = if block_size == 0 {
            if scale.rank() != 1 || scale.dim(0) != d {
                return Err(KernelError::Shape {
                    op,
                    msg: "a per-axis scale must be 1-D with the length of the axis",
                });
            }
            Per::Axis
        } else {
            let sd = scale.dims();
            let same_others = sd.len() == dims.len()
                && sd
                    .iter()
                    .zip(dims)
                    .enumerate()
                    .all(|(i, (a, b))| i == ax || a == b);
            let s = if same_others { sd[ax] } else { 0 };
            if !same_others || s.saturating_mul(block_size) < d {
                return Err(KernelError::Shape {
                    op,
                    msg: "a blocked scale must have the input's shape except along the axis, with enough blocks",
                });
            }
            Per::Block { s, b: block_size }
        };
        Ok(QLayout {
            outer,
            d,
            inner,
            per,
        })
    }

    /// Index of the scale of element `(o, j, r)`.
    #[inline]
    fn param(&self, o: usize, j: usize, r: usize) -> usize {
        match self.per {
            Per::Tensor => 0,
            Per::Axis => j,
            Per::Block { s, b } => (o * s + j / b) * self.inner + r,
        }
    }

    /// Calls `f(element index, scale index)` for every element.
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let mut i = 0;
        for o in 0..self.outer {
            for j in 0..self.d {
                for r in 0..self.inner {
                    f(i, self.param(o, j, r));
                    i += 1;
                }
            }
        }
    }
}

/// Checks that a zero point has as many elements as its scale.
fn check_zp(
    scale: &TensorRef<'_>,
    zp: Option<&TensorRef<'_>>,
    op: &'static str,
) -> Result<(), KernelError> {
    match zp {
        Some(z) if z.numel() != scale.numel() => Err(KernelError::Shape {
            op,
            msg: "zero point and scale have different shapes",
        }),
        _ => Ok(()),
    }
}

fn set_out(outputs: &mut [Shape], i: usize, s: Shape, op: &'static str) -> Result<(), KernelError> {
    *outputs
        .get_mut(i)
        .ok_or(KernelError::MissingInput { op, index: i })? = s;
    Ok(())
}

// ---------------------------------------------------------------------------
// QuantizeLinear.

/// ONNX `QuantizeLinear`: `y = saturate(round(x / y_scale) + y_zero_point)`.
///
/// Inputs: `x` (float32, float16, bfloat16 or int32), `y_scale` (same
/// choices), optional `y_zero_point` (int8, uint8, int16 or uint16; its dtype
/// is the output's). The scale is a scalar (per tensor), a 1-D tensor along
/// `axis` (per axis), or, with `block_size > 0`, the input's shape with the
/// axis divided into blocks. The division is done in the NumPy promotion of
/// the `x` and `y_scale` dtypes, or in `precision` when given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantizeLinear {
    /// Quantization axis (per-axis and blocked quantization).
    pub axis: i64,
    /// Block size along `axis`; 0 for per-tensor or per-axis quantization.
    pub block_size: usize,
    /// Precision of the division (`F32`, `F16`, `BF16`); `None` follows the
    /// operands' dtypes.
    pub precision: Option<DType>,
}
crate::to_rust_struct!(ops::quant::QuantizeLinear {
    axis,
    block_size,
    precision
});

impl Kernel for QuantizeLinear {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "QuantizeLinear";
        let x = input(inputs, 0, OP)?;
        let s = input(inputs, 1, OP)?;
        QLayout::new(&x.shape, &s.shape, self.axis, self.block_size, OP)?;
        check_zp(s, opt_input(inputs, 2), OP)?;
        set_out(outputs, 0, x.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "QuantizeLinear";
        let xt = input(inputs, 0, OP)?;
        let st = input(inputs, 1, OP)?;
        let zt = opt_input(inputs, 2);
        let lay = QLayout::new(&xt.shape, &st.shape, self.axis, self.block_size, OP)?;
        check_zp(st, zt, OP)?;
        for t in [Some(xt), Some(st)].into_iter().flatten() {
            if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::I32) {
                return Err(KernelError::UnsupportedDType {
                    op: OP,
                    dtype: t.dtype,
                });
            }
        }
        let prec = match self.precision {
            Some(p) => Prec::of(p),
            None => Prec::promote(xt.dtype, st.dtype),
        };
        let x = Vals::new(xt, OP)?;
        let s = Vals::new(st, OP)?;
        let zp = zt.map(|z| Vals::new(z, OP)).transpose()?;
        let y = output(outputs, 0, OP)?;
        if let Some(z) = zt
            && z.dtype != y.dtype
        {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: y.dtype,
                found: z.dtype,
            });
        }
        let range = qrange(y.dtype, OP)?;
        let mut y = QOut::new(y, OP)?;
        if y.len() != xt.numel() {
            return Err(KernelError::Buffer { op: OP });
        }
        lay.for_each(|i, p| {
            let q = prec.round(prec.round(x.get(i)) / prec.round(s.get(p)));
            y.set(i, saturate(rint(q) + zp_at(&zp, p), range));
        });
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// DequantizeLinear.

/// ONNX `DequantizeLinear`: `y = (x - x_zero_point) * x_scale`.
///
/// Inputs: `x` (int8, uint8, int16, uint16 or int32), `x_scale` (float32,
/// float16 or bfloat16), optional `x_zero_point` (dtype of `x`). Scale
/// layouts as in [`QuantizeLinear`]. The output dtype (float32, float16 or
/// bfloat16) is the scale's or the `output_dtype` attribute's; the product is
/// computed in float32 (float64 for int32 inputs with a zero point, as the
/// ONNX reference does) and then rounded to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DequantizeLinear {
    /// Quantization axis (per-axis and blocked quantization).
    pub axis: i64,
    /// Block size along `axis`; 0 for per-tensor or per-axis quantization.
    pub block_size: usize,
}
crate::to_rust_struct!(ops::quant::DequantizeLinear { axis, block_size });

impl Kernel for DequantizeLinear {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "DequantizeLinear";
        let x = input(inputs, 0, OP)?;
        let s = input(inputs, 1, OP)?;
        QLayout::new(&x.shape, &s.shape, self.axis, self.block_size, OP)?;
        check_zp(s, opt_input(inputs, 2), OP)?;
        set_out(outputs, 0, x.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "DequantizeLinear";
        let xt = input(inputs, 0, OP)?;
        let st = input(inputs, 1, OP)?;
        let zt = opt_input(inputs, 2);
        let lay = QLayout::new(&xt.shape, &st.shape, self.axis, self.block_size, OP)?;
        check_zp(st, zt, OP)?;
        if !matches!(
            xt.dtype,
            DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
        ) {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: xt.dtype,
            });
        }
        if !matches!(st.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: st.dtype,
            });
        }
        if let Some(z) = zt
            && z.dtype != xt.dtype
        {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: xt.dtype,
                found: z.dtype,
            });
        }
        let x = Vals::new(xt, OP)?;
        let s = Vals::new(st, OP)?;
        let zp = zt.map(|z| Vals::new(z, OP)).transpose()?;
        // int32 minus an int32 zero point is a float64 difference in the
        // reference; every other product is exact in f64 and rounds to f32.
        let via_f32 = !(xt.dtype == DType::I32 && zp.is_some());
        let x32 = xt.dtype == DType::I32;
        let value = |i: usize, p: usize| -> f64 {
            let xv = if x32 {
                x.get(i) as f32 as f64
            } else {
                x.get(i)
            };
            let v = (xv - zp_at(&zp, p)) * s.get(p);
            if via_f32 { v as f32 as f64 } else { v }
        };
        let y = output(outputs, 0, OP)?;
        if y.numel() != xt.numel() {
            return Err(KernelError::Buffer { op: OP });
        }
        match y.dtype {
            DType::F32 => {
                let y = y.typed::<f32>(OP)?;
                lay.for_each(|i, p| {
                    if let Some(o) = y.get_mut(i) {
                        *o = value(i, p) as f32;
                    }
                });
            }
            DType::F16 => {
                let y = y.typed::<f16>(OP)?;
                lay.for_each(|i, p| {
                    if let Some(o) = y.get_mut(i) {
                        let v = value(i, p);
                        *o = if via_f32 {
                            f16::from_f32(v as f32)
                        } else {
                            f64_to_f16(v)
                        };
                    }
                });
            }
            DType::BF16 => {
                let y = y.typed::<bf16>(OP)?;
                lay.for_each(|i, p| {
                    if let Some(o) = y.get_mut(i) {
                        let v = value(i, p);
                        *o = if via_f32 {
                            bf16::from_f32(v as f32)
                        } else {
                            f64_to_bf16(v)
                        };
                    }
                });
            }
            dtype => return Err(KernelError::UnsupportedDType { op: OP, dtype }),
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear.

/// ONNX `DynamicQuantizeLinear`: quantizes a float32 tensor to uint8 with a
/// scale and zero point computed from its range (extended to include 0).
///
/// Input: `x` (float32). Outputs: `y` (uint8, shape of `x`), `y_scale`
/// (float32 scalar), `y_zero_point` (uint8 scalar). NaN elements are
/// ignored by the range computation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamicQuantizeLinear;
crate::to_rust_struct!(ops::quant::DynamicQuantizeLinear {});

impl Kernel for DynamicQuantizeLinear {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "DynamicQuantizeLinear";
        let x = input(inputs, 0, OP)?;
        set_out(outputs, 0, x.shape, OP)?;
        if outputs.len() > 1 {
            set_out(outputs, 1, Shape::SCALAR, OP)?;
        }
        if outputs.len() > 2 {
            set_out(outputs, 2, Shape::SCALAR, OP)?;
        }
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "DynamicQuantizeLinear";
        let x = input(inputs, 0, OP)?.typed::<f32>(OP)?;
        let (mut lo, mut hi) = (0f32, 0f32);
        for &v in x {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let scale = if hi == lo { 1.0 } else { hi - lo } / 255.0;
        let zp = rint((0.0 - lo / scale).clamp(0.0, 255.0) as f64) as f32;
        let y = output(outputs, 0, OP)?.typed::<u8>(OP)?;
        if y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        for (o, &v) in y.iter_mut().zip(x) {
            let q = rint((v / scale) as f64) as f32 + zp;
            *o = saturate(q as f64, (0.0, 255.0)) as u8;
        }
        if let Some(t) = outputs.get_mut(1)
            && let Some(o) = t.typed::<f32>(OP)?.first_mut()
        {
            *o = scale;
        }
        if let Some(t) = outputs.get_mut(2)
            && let Some(o) = t.typed::<u8>(OP)?.first_mut()
        {
            *o = zp as u8;
        }
        Ok(())
    }
}
