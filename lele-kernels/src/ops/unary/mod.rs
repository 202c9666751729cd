//! Elementwise unary operators and activations (Relu, Exp, Erf, Gelu, Clip…).
//!
//! f32 paths are written as straight loops that the compiler vectorizes;
//! `exp`, `sigmoid`, `tanh`, `erf` and GELU use polynomial approximations
//! (within a few ulp), with a scalar fix-up for out-of-range inputs; their
//! vector forms (`vector`, `vector/lanes.rs`) are written once over the SIMD layer
//! and run on the best backend the CPU has. f16/bf16 are computed through f32 in stack-sized chunks.
use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

mod activation;
mod math;
mod params;
#[cfg(test)]
mod tests;
mod vector;

pub use activation::Activation;
pub(crate) use activation::pointwise_tail;
pub(crate) use activation::{add_in_place, add_slice_in_place};
pub(crate) use math::{
    MaskRows, exp_shifted, exp_shifted_in_place, max_of, scale_in_place, sigmoid_slice,
    softmax_rows, tanh_slice,
};
use math::{Real, erf_slice, exp_slice, gelu_f64, tanh_f32};
pub use params::{
    Celu, Clip, Elu, GeluErf, GeluTanh, HardSigmoid, LeakyRelu, Selu, Shrink, Swish,
    ThresholdedRelu,
};

/// The operation of a [`Unary`] kernel (ONNX operator of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `max(x, 0)` (floats and signed integers).
    Relu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// Absolute value (integers wrap).
    Abs,
    /// Negation (integers wrap).
    Neg,
    /// `1 / x`.
    Reciprocal,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// Round half to even.
    Round,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Tangent.
    Tan,
    /// Arcsine.
    Asin,
    /// Arccosine.
    Acos,
    /// Arctangent.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// Error function.
    Erf,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// Logical not of a Bool tensor.
    Not,
    /// Bitwise not of an integer tensor.
    BitwiseNot,
    /// Whether x is NaN (Bool output).
    IsNaN,
    /// Whether x is ±infinity (Bool output).
    IsInf,
    /// Whether x is +infinity (Bool output; `IsInf` with `detect_negative=0`).
    IsPosInf,
    /// Whether x is -infinity (Bool output; `IsInf` with `detect_positive=0`).
    IsNegInf,
    /// `x * max(0, min(1, x / 6 + 1/2))`.
    HardSwish,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x/2 * (1 + erf(x / sqrt(2)))` (`approximate="none"`).
    Gelu,
    /// Copy.
    Identity,
}
crate::to_rust_enum!(ops::unary::UnaryOp {
    Relu,
    Sigmoid,
    Tanh,
    Exp,
    Log,
    Sqrt,
    Abs,
    Neg,
    Reciprocal,
    Floor,
    Ceil,
    Round,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Sign,
    Softplus,
    Softsign,
    Not,
    BitwiseNot,
    IsNaN,
    IsInf,
    IsPosInf,
    IsNegInf,
    HardSwish,
    Mish,
    Gelu,
    Identity
});

impl UnaryOp {
    /// The output dtype for an input dtype.
    pub fn output_dtype(self, x: DType) -> DType {
        match self {
            UnaryOp::IsNaN | UnaryOp::IsInf | UnaryOp::IsPosInf | UnaryOp::IsNegInf => DType::Bool,
            _ => x,
        }
    }
}

/// An elementwise unary operator: input `X`, output `Y` of the same shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unary {
    /// The operation.
    pub op: UnaryOp,
}
crate::to_rust_struct!(ops::unary::Unary { op });

const OP: &str = "Unary";

fn same_shape(
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [Shape],
    op: &'static str,
) -> Result<(), KernelError> {
    let x = input(inputs, 0, op)?;
    *outputs
        .first_mut()
        .ok_or(KernelError::MissingInput { op, index: 0 })? = x.shape;
    Ok(())
}

impl Kernel for Unary {
    fn elementwise(&self) -> bool {
        // Not, IsNaN and IsInf change the dtype.
        !matches!(
            self.op,
            UnaryOp::Not | UnaryOp::IsNaN | UnaryOp::IsInf | UnaryOp::IsPosInf | UnaryOp::IsNegInf
        )
    }

    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape(inputs, outputs, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(x, OP)?;
        check_out(out, self.op.output_dtype(x.dtype), &x.shape, OP)?;
        let op = self.op;
        match op {
            UnaryOp::Identity => {
                out.data.copy_from_slice(x.data);
                Ok(())
            }
            UnaryOp::Not => {
                let (xv, y) = (x.as_bool(OP)?, out.typed::<u8>(OP)?);
                for (y, &v) in y.iter_mut().zip(xv) {
                    *y = (v == 0) as u8;
                }
                Ok(())
            }
            UnaryOp::BitwiseNot => {
                dispatch!(x.dtype, OP, [I8 => i8, I16 => i16, I32 => i32, I64 => i64,
                    U8 => u8, U16 => u16, U32 => u32, U64 => u64], |T| {
                    let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
                    for (y, &v) in y.iter_mut().zip(xv) {
                        *y = !v;
                    }
                    Ok(())
                })
            }
            UnaryOp::IsNaN | UnaryOp::IsInf | UnaryOp::IsPosInf | UnaryOp::IsNegInf => {
                dispatch!(x.dtype, OP, [F32 => f32, F64 => f64, F16 => f16, BF16 => bf16], |T| {
                    let (xv, y) = (x.typed::<T>(OP)?, out.typed::<u8>(OP)?);
                    for (y, &v) in y.iter_mut().zip(xv) {
                        let v = v.to_f64();
                        *y = match op {
                            UnaryOp::IsNaN => v.is_nan(),
                            UnaryOp::IsPosInf => v == f64::INFINITY,
                            UnaryOp::IsNegInf => v == f64::NEG_INFINITY,
                            _ => v.is_infinite(),
                        } as u8;
                    }
                    Ok(())
                })
            }
            UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sign if !x.dtype.is_float() => {
                dispatch!(x.dtype, OP, [I8 => i8, I16 => i16, I32 => i32, I64 => i64,
                    U8 => u8, U16 => u16, U32 => u32, U64 => u64], |T| {
                    let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
                    int_unary::<T>(op, xv, y);
                    Ok(())
                })
            }
            _ => float_map(x, out, |a, b| apply_f32(op, a, b), |a, b| apply(op, a, b)),
        }
    }
}

/// Runs a float elementwise function: f32 and f64 directly, f16/bf16
/// through f32 in chunks.
fn float_map(
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f32_fn: impl Fn(&[f32], &mut [f32]) + Sync,
    f64_fn: impl Fn(&[f64], &mut [f64]),
) -> Result<(), KernelError> {
    match x.dtype {
        DType::F32 => {
            let (xs, ys) = (x.typed::<f32>(OP)?, out.typed::<f32>(OP)?);
            if xs.len() != ys.len() {
                return Err(KernelError::Buffer { op: OP });
            }
            // Long tensors in chunks over the threads (the vector loops
            // give every element the same arithmetic wherever it sits).
            #[cfg(feature = "std")]
            crate::threads::for_chunks(ys, &|s, part| f32_fn(&xs[s..s + part.len()], part));
            #[cfg(not(feature = "std"))]
            f32_fn(xs, ys);
        }
        DType::F64 => f64_fn(x.typed::<f64>(OP)?, out.typed::<f64>(OP)?),
        DType::F16 => through_f32(x.typed::<f16>(OP)?, out.typed::<f16>(OP)?, f32_fn),
        DType::BF16 => through_f32(x.typed::<bf16>(OP)?, out.typed::<bf16>(OP)?, f32_fn),
        dtype => return Err(KernelError::UnsupportedDType { op: OP, dtype }),
    }
    Ok(())
}

fn through_f32<H: Num>(x: &[H], y: &mut [H], f: impl Fn(&[f32], &mut [f32])) {
    const CHUNK: usize = 256;
    let mut a = [0f32; CHUNK];
    let mut b = [0f32; CHUNK];
    for (xc, yc) in x.chunks(CHUNK).zip(y.chunks_mut(CHUNK)) {
        let n = xc.len();
        for (a, v) in a.iter_mut().zip(xc) {
            *a = v.to_f64() as f32;
        }
        f(&a[..n], &mut b[..n]);
        for (y, &v) in yc.iter_mut().zip(&b[..n]) {
            *y = H::from_f64(v as f64);
        }
    }
}

fn int_unary<T: Num>(op: UnaryOp, x: &[T], y: &mut [T]) {
    let zero = T::ZERO;
    let neg = |v: T| zero.sub(v);
    match op {
        UnaryOp::Relu => map(x, y, |v| if v < zero { zero } else { v }),
        UnaryOp::Abs => map(x, y, |v| if v < zero { neg(v) } else { v }),
        UnaryOp::Neg => map(x, y, neg),
        _ => map(x, y, |v| {
            if v > zero {
                T::ONE
            } else if v < zero {
                neg(T::ONE)
            } else {
                zero
            }
        }),
    }
}

#[inline(always)]
fn map<T: Copy, U>(x: &[T], y: &mut [U], f: impl Fn(T) -> U) {
    for (y, &v) in y.iter_mut().zip(x) {
        *y = f(v);
    }
}

/// Generic (f32/f64) implementation of every float unary op.
fn apply<T: Real>(op: UnaryOp, x: &[T], y: &mut [T]) {
    let zero = T::ZERO;
    let one = T::ONE;
    let half = T::c(0.5);
    match op {
        UnaryOp::Relu => map(x, y, |v| if v < zero { zero } else { v }),
        UnaryOp::Sigmoid => map(x, y, sigmoid),
        UnaryOp::Tanh => map(x, y, T::tanh),
        UnaryOp::Exp => map(x, y, T::exp),
        UnaryOp::Log => map(x, y, T::ln),
        UnaryOp::Sqrt => map(x, y, T::sqrt),
        UnaryOp::Abs => map(x, y, T::abs),
        UnaryOp::Neg => map(x, y, |v| -v),
        UnaryOp::Reciprocal => map(x, y, |v| one / v),
        UnaryOp::Floor => map(x, y, T::floor),
        UnaryOp::Ceil => map(x, y, T::ceil),
        UnaryOp::Round => map(x, y, T::round_even),
        UnaryOp::Sin => map(x, y, T::sin),
        UnaryOp::Cos => map(x, y, T::cos),
        UnaryOp::Tan => map(x, y, T::tan),
        UnaryOp::Asin => map(x, y, T::asin),
        UnaryOp::Acos => map(x, y, T::acos),
        UnaryOp::Atan => map(x, y, T::atan),
        UnaryOp::Sinh => map(x, y, T::sinh),
        UnaryOp::Cosh => map(x, y, T::cosh),
        UnaryOp::Asinh => map(x, y, T::asinh),
        UnaryOp::Acosh => map(x, y, T::acosh),
        UnaryOp::Atanh => map(x, y, T::atanh),
        UnaryOp::Erf => map(x, y, T::erf),
        UnaryOp::Sign => map(x, y, |v| {
            if v > zero {
                one
            } else if v < zero {
                -one
            } else {
                v
            }
        }),
        UnaryOp::Softplus => map(x, y, softplus),
        UnaryOp::Softsign => map(x, y, |v| v / (one + v.abs())),
        UnaryOp::HardSwish => map(x, y, |v| v * hard_sigmoid(v, T::c(1.0 / 6.0), half)),
        UnaryOp::Mish => map(x, y, |v| v * softplus(v).tanh()),
        UnaryOp::Gelu => map(x, y, |v| T::c(gelu_f64(v.to_f64()))),
        // Handled before dispatching to floats.
        UnaryOp::Identity
        | UnaryOp::Not
        | UnaryOp::BitwiseNot
        | UnaryOp::IsNaN
        | UnaryOp::IsInf
        | UnaryOp::IsPosInf
        | UnaryOp::IsNegInf => map(x, y, |v| v),
    }
}

#[inline(always)]
fn sigmoid<T: Real>(v: T) -> T {
    // Stable for both signs.
    let e = (-v.abs()).exp();
    let r = T::ONE / (T::ONE + e);
    if v >= T::ZERO { r } else { e * r }
}

#[inline(always)]
fn softplus<T: Real>(v: T) -> T {
    let m = if v > T::ZERO { v } else { T::ZERO };
    if v.is_nan() {
        return v;
    }
    m + (-v.abs()).exp().ln_1p()
}

#[inline(always)]
fn hard_sigmoid<T: Real>(v: T, alpha: T, beta: T) -> T {
    let t = alpha * v + beta;
    let t = if t > T::ONE { T::ONE } else { t };
    if t < T::ZERO { T::ZERO } else { t }
}

/// [`map`] over f32, compiled for the best vector backend the CPU has (the
/// loop then vectorizes at its width instead of the baseline's four).
pub(crate) fn map_f32(x: &[f32], y: &mut [f32], f: impl Fn(f32) -> f32) {
    vector::compiled_for_isa(|| map(x, y, &f)).unwrap_or_else(|()| map(x, y, f))
}

/// `o[i] = f(x[i], y[i])` over f32 (up to the shortest length), compiled
/// as [`map_f32`].
pub(crate) fn zip_f32(x: &[f32], y: &[f32], o: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    vector::compiled_for_isa(|| zip(x, y, o, &f)).unwrap_or_else(|()| zip(x, y, o, f))
}

/// `o[i] = f(x[i], y[i])` (up to the shortest length).
#[inline(always)]
fn zip(x: &[f32], y: &[f32], o: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    for ((o, &p), &q) in o.iter_mut().zip(x).zip(y) {
        *o = f(p, q);
    }
}

/// Slices shorter than this skip the ISA dispatch of the in-place maps
/// (one vector: the loop is as short either way).
const SHORT: usize = 16;

/// `y[i] = f(y[i])` over f32 in place, compiled for the best vector
/// backend (an epilogue's pass over a finished segment; `f` does the same
/// arithmetic at any vector width).
pub(crate) fn map_in_place_f32(y: &mut [f32], f: impl Fn(f32) -> f32) {
    if y.len() < SHORT {
        // The same per-element arithmetic without the dispatch (a
        // convolution over a few frames calls this once per channel).
        y.iter_mut().for_each(|v| *v = f(*v));
        return;
    }
    vector::compiled_for_isa(|| y.iter_mut().for_each(|v| *v = f(*v)))
        .unwrap_or_else(|()| y.iter_mut().for_each(|v| *v = f(*v)));
}

/// `y[i] = f(y[i], r[i])` over f32 in place (up to the shorter length),
/// compiled as [`map_in_place_f32`]: an epilogue's pass that also adds a
/// residual.
pub(crate) fn zip_in_place_f32(y: &mut [f32], r: &[f32], f: impl Fn(f32, f32) -> f32) {
    if y.len() < SHORT {
        y.iter_mut().zip(r).for_each(|(v, &x)| *v = f(*v, x));
        return;
    }
    vector::compiled_for_isa(|| y.iter_mut().zip(r).for_each(|(v, &x)| *v = f(*v, x)))
        .unwrap_or_else(|()| y.iter_mut().zip(r).for_each(|(v, &x)| *v = f(*v, x)));
}

/// f32 implementation: fast paths for the hot transcendental ops, the
/// generic code otherwise.
fn apply_f32(op: UnaryOp, x: &[f32], y: &mut [f32]) {
    match op {
        UnaryOp::Exp => exp_slice(x, y),
        UnaryOp::Sigmoid => sigmoid_slice(x, y),
        UnaryOp::Tanh => math::tanh_slice(x, y),
        UnaryOp::Erf => erf_slice(x, y),
        UnaryOp::Gelu => math::gelu_slice(x, y),
        _ => apply(op, x, y),
    }
}
