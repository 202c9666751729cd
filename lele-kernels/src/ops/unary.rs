//! Elementwise unary operators and activations (Relu, Exp, Erf, Gelu, Clip…).
//!
//! f32 paths are written as straight loops that the compiler vectorizes;
//! `exp`, `sigmoid`, `tanh` and `erf` use polynomial/rational
//! approximations (within a few ulp), with a scalar fix-up for out-of-range
//! inputs. f16/bf16 are computed through f32 in stack-sized chunks.
use core::ops::{Add, Div, Mul, Neg, Sub};

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::broadcast::{Num, check_data, check_out, dispatch};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

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
    /// Whether x is NaN (Bool output).
    IsNaN,
    /// Whether x is ±infinity (Bool output).
    IsInf,
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
    IsNaN,
    IsInf,
    HardSwish,
    Mish,
    Gelu,
    Identity
});

impl UnaryOp {
    /// The output dtype for an input dtype.
    pub fn output_dtype(self, x: DType) -> DType {
        match self {
            UnaryOp::IsNaN | UnaryOp::IsInf => DType::Bool,
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
            UnaryOp::IsNaN | UnaryOp::IsInf => {
                dispatch!(x.dtype, OP, [F32 => f32, F64 => f64, F16 => f16, BF16 => bf16], |T| {
                    let (xv, y) = (x.typed::<T>(OP)?, out.typed::<u8>(OP)?);
                    for (y, &v) in y.iter_mut().zip(xv) {
                        let v = v.to_f64();
                        *y = if op == UnaryOp::IsNaN { v.is_nan() } else { v.is_infinite() } as u8;
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
    f32_fn: impl Fn(&[f32], &mut [f32]),
    f64_fn: impl Fn(&[f64], &mut [f64]),
) -> Result<(), KernelError> {
    match x.dtype {
        DType::F32 => f32_fn(x.typed::<f32>(OP)?, out.typed::<f32>(OP)?),
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

/// Floating-point element types with the math the activations need.
pub(crate) trait Real:
    Num
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn c(v: f64) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_even(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $erf:path) => {
        impl Real for $t {
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            impl_real!(@fwd $t; exp exp_m1 ln ln_1p sqrt abs tanh floor ceil sin cos tan asin
                acos atan sinh cosh asinh acosh atanh);
        }
    };
    (@fwd $t:ty; $($f:ident)*) => {
        $(#[inline(always)] fn $f(self) -> Self { <$t>::$f(self) })*
    };
}
impl_real!(f32, erf_f32);
impl_real!(f64, erf_f64);

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
        UnaryOp::Identity | UnaryOp::Not | UnaryOp::IsNaN | UnaryOp::IsInf => map(x, y, |v| v),
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

/// f32 implementation: fast paths for the hot transcendental ops, the
/// generic code otherwise.
fn apply_f32(op: UnaryOp, x: &[f32], y: &mut [f32]) {
    match op {
        UnaryOp::Exp => exp_slice(x, y),
        UnaryOp::Sigmoid => sigmoid_slice(x, y),
        UnaryOp::Tanh => map(x, y, tanh_fast),
        UnaryOp::Erf => map(x, y, erf_f32),
        UnaryOp::Gelu => {
            map(x, y, |v| {
                0.5 * v * (1.0 + erf_f32(v * core::f32::consts::FRAC_1_SQRT_2))
            });
            // Cancellation in 1 + erf amplifies the erf error for x < -1.
            for (y, &v) in y.iter_mut().zip(x) {
                if v < -1.0 {
                    *y = gelu_f64(v as f64) as f32;
                }
            }
        }
        _ => apply(op, x, y),
    }
}

// ---------------------------------------------------------------------------
// f32 approximations.

/// `e^x` for `x` in [-87, 88] (callers fix up other inputs); ~1 ulp.
#[inline(always)]
fn exp_core(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const MAGIC: f32 = 12582912.0; // 1.5 * 2^23: rounds to an integer
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = x - n * LN2_HI - n * LN2_LO;
    // Taylor polynomial of degree 7 on |r| <= ln2/2.
    let p = 1.0 / 5040.0;
    let p = p * r + 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    let scale = f32::from_bits((ni.wrapping_add(127) << 23) as u32);
    p * scale
}

fn exp_slice(x: &[f32], y: &mut [f32]) {
    map(x, y, exp_core);
    for (y, &v) in y.iter_mut().zip(x) {
        if v.is_nan() || v <= -87.0 || v >= 88.0 {
            *y = v.exp();
        }
    }
}

fn sigmoid_slice(x: &[f32], y: &mut [f32]) {
    map(x, y, |v| {
        let e = exp_core(-v.abs());
        let r = 1.0 / (1.0 + e);
        if v >= 0.0 { r } else { e * r }
    });
    for (y, &v) in y.iter_mut().zip(x) {
        if v.is_nan() || v <= -87.0 {
            *y = sigmoid(v);
        }
    }
}

/// tanh as a 13/6 rational function (few ulp, ~3e-7 relative).
#[inline(always)]
fn tanh_fast(x: f32) -> f32 {
    const A: [f32; 7] = [
        4.893_524_6e-3,
        6.372_619_3e-4,
        1.485_722_4e-5,
        5.122_297e-8,
        -8.604_672e-11,
        2.000_188e-13,
        -2.760_768_5e-16,
    ];
    const B: [f32; 4] = [4.893_525e-3, 2.268_434_6e-3, 1.185_347_1e-4, 1.198_258_4e-6];
    let c = x.clamp(-7.905_311, 7.905_311);
    let x2 = c * c;
    let p = ((((((A[6] * x2 + A[5]) * x2 + A[4]) * x2 + A[3]) * x2 + A[2]) * x2 + A[1]) * x2
        + A[0])
        * c;
    let q = ((B[3] * x2 + B[2]) * x2 + B[1]) * x2 + B[0];
    let r = p / q;
    if x.abs() < 4e-4 { x } else { r }
}

/// f32 erf: a 13/8 rational function evaluated in f64 (~1.5 ulp).
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    const A: [f64; 7] = [
        -1.609_603_332_624_15e-2,
        -2.954_599_808_540_25e-3,
        -7.349_906_303_268_55e-4,
        -5.692_506_394_623_46e-5,
        -2.101_024_020_825_08e-6,
        2.770_681_424_959_02e-8,
        -2.726_142_258_013_06e-10,
    ];
    const B: [f64; 5] = [
        -1.426_473_905_141_89e-2,
        -7.373_329_167_204_68e-3,
        -1.682_826_974_382_03e-3,
        -2.133_740_552_789_05e-4,
        -1.456_607_184_649_96e-5,
    ];
    let c = (x as f64).clamp(-4.0, 4.0);
    let x2 = c * c;
    let p = ((((((A[6] * x2 + A[5]) * x2 + A[4]) * x2 + A[3]) * x2 + A[2]) * x2 + A[1]) * x2
        + A[0])
        * c;
    let q = (((B[4] * x2 + B[3]) * x2 + B[2]) * x2 + B[1]) * x2 + B[0];
    (p / q) as f32
}

/// f64 erf: a series (|x| < 2.5) or erfc continued fraction (|x| < 6).
pub(crate) fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        // erf(a) = 2/sqrt(pi) e^{-a^2} sum_n (2a^2)^n a / (1*3*...*(2n+1))
        let a2 = a * a;
        let mut term = a;
        let mut sum = a;
        let mut k = 1.0;
        for _ in 0..200 {
            k += 2.0;
            term *= 2.0 * a2 / k;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        core::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        1.0 - erfc_cf(a)
    } else {
        1.0
    };
    r.copysign(x)
}

/// erfc for `a >= 2` by its continued fraction
/// `e^{-a^2}/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))`.
fn erfc_cf(a: f64) -> f64 {
    let mut t = a;
    for n in (1..=100).rev() {
        t = a + (n as f64 * 0.5) / t;
    }
    (-a * a).exp() / (core::f64::consts::PI.sqrt() * t)
}

/// Exact GELU in f64, using erfc in the negative tail.
fn gelu_f64(v: f64) -> f64 {
    if v < -3.0 {
        0.5 * v * erfc_cf(-v * core::f64::consts::FRAC_1_SQRT_2)
    } else {
        0.5 * v * (1.0 + erf_f64(v * core::f64::consts::FRAC_1_SQRT_2))
    }
}

// ---------------------------------------------------------------------------
// Parameterised activations.

#[derive(Clone, Copy)]
enum Param {
    HardSigmoid(f32, f32),
    LeakyRelu(f32),
    Elu(f32),
    Selu(f32, f32),
    Celu(f32),
    ThresholdedRelu(f32),
    GeluTanh,
}

fn apply_param<T: Real>(p: Param, x: &[T], y: &mut [T]) {
    let zero = T::ZERO;
    let one = T::ONE;
    match p {
        Param::HardSigmoid(a, b) => {
            let (a, b) = (T::c(a as f64), T::c(b as f64));
            map(x, y, |v| hard_sigmoid(v, a, b))
        }
        Param::LeakyRelu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v < zero { a * v } else { v })
        }
        Param::Elu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v < zero { a * v.exp_m1() } else { v })
        }
        Param::Selu(a, g) => {
            let (a, g) = (T::c(a as f64), T::c(g as f64));
            map(x, y, |v| {
                if v > zero {
                    g * v
                } else {
                    g * (a * v.exp() - a)
                }
            })
        }
        Param::Celu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| {
                let pos = if v > zero { v } else { zero };
                let neg = a * (v / a).exp_m1();
                pos + if neg < zero { neg } else { zero }
            })
        }
        Param::ThresholdedRelu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v > a { v } else { zero })
        }
        Param::GeluTanh => {
            let k = T::c((2.0 / core::f64::consts::PI).sqrt());
            let c = T::c(0.044715);
            let half = T::c(0.5);
            map(x, y, |v| {
                half * v * (one + (k * (v + c * v * v * v)).tanh())
            })
        }
    }
}

fn run_param(
    p: Param,
    op: &'static str,
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let x = input(inputs, 0, op)?;
    let out = output(outputs, 0, op)?;
    check_data(x, op)?;
    check_out(out, x.dtype, &x.shape, op)?;
    let f32_fn = |a: &[f32], b: &mut [f32]| match p {
        Param::GeluTanh => map(a, b, |v| {
            let k = 0.797_884_6_f32;
            0.5 * v * (1.0 + tanh_fast(k * (v + 0.044715 * v * v * v)))
        }),
        _ => apply_param(p, a, b),
    };
    float_map(x, out, f32_fn, |a, b| apply_param(p, a, b)).map_err(|e| match e {
        KernelError::UnsupportedDType { dtype, .. } => KernelError::UnsupportedDType { op, dtype },
        e => e,
    })
}

macro_rules! param_kernel {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident),* } => $p:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: f32,)*
        }
        crate::to_rust_struct!(ops::unary::$name { $($field),* });

        impl Kernel for $name {
            fn infer(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [Shape],
            ) -> Result<(), KernelError> {
                same_shape(inputs, outputs, stringify!($name))
            }

            fn run(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [TensorMut<'_>],
                _scratch: &mut [u8],
            ) -> Result<(), KernelError> {
                #[allow(unused_variables)]
                let $name { $($field),* } = *self;
                run_param($p, stringify!($name), inputs, outputs)
            }
        }
    };
}

param_kernel!(
    /// ONNX `HardSigmoid`: `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        /// Slope (default 0.2).
        alpha,
        /// Offset (default 0.5).
        beta
    } => Param::HardSigmoid(alpha, beta)
);
param_kernel!(
    /// ONNX `LeakyRelu`: `x` for `x >= 0`, else `alpha * x`.
    LeakyRelu {
        /// Negative slope (default 0.01).
        alpha
    } => Param::LeakyRelu(alpha)
);
param_kernel!(
    /// ONNX `Elu`: `x` for `x >= 0`, else `alpha * (e^x - 1)`.
    Elu {
        /// Scale of the negative part (default 1).
        alpha
    } => Param::Elu(alpha)
);
param_kernel!(
    /// ONNX `Selu`: `gamma * x` for `x > 0`, else `gamma * (alpha * e^x - alpha)`.
    Selu {
        /// Default 1.67326319217681884765625.
        alpha,
        /// Default 1.05070102214813232421875.
        gamma
    } => Param::Selu(alpha, gamma)
);
param_kernel!(
    /// ONNX `Celu`: `max(0, x) + min(0, alpha * (e^(x/alpha) - 1))`.
    Celu {
        /// Default 1.
        alpha
    } => Param::Celu(alpha)
);
param_kernel!(
    /// ONNX `ThresholdedRelu`: `x` for `x > alpha`, else 0.
    ThresholdedRelu {
        /// Threshold (default 1).
        alpha
    } => Param::ThresholdedRelu(alpha)
);
param_kernel!(
    /// ONNX `Gelu` with `approximate="tanh"`.
    GeluTanh {} => Param::GeluTanh
);

/// ONNX `Clip`: inputs `input`, optional scalar `min`, optional scalar `max`
/// (same dtype as `input`); any numeric dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clip;
crate::to_rust_struct!(ops::unary::Clip {});

impl Kernel for Clip {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape(inputs, outputs, "Clip")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Clip";
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(x, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let lo = opt_input(inputs, 1).filter(|t| t.numel() > 0 || t.shape.rank() == 0);
        let hi = opt_input(inputs, 2).filter(|t| t.numel() > 0 || t.shape.rank() == 0);
        crate::ops::broadcast::dispatch_num!(x.dtype, OP, |T| {
            let scalar = |t: Option<&TensorRef<'_>>| -> Result<Option<T>, KernelError> {
                match t {
                    None => Ok(None),
                    Some(t) => {
                        let v = t.typed::<T>(OP)?;
                        if v.len() != 1 {
                            return Err(KernelError::Shape {
                                op: OP,
                                msg: "min/max must be scalars",
                            });
                        }
                        Ok(Some(v[0]))
                    }
                }
            };
            let (lo, hi) = (scalar(lo)?, scalar(hi)?);
            let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
            match (lo, hi) {
                (Some(l), Some(h)) => map(xv, y, |v| {
                    let v = if v < l { l } else { v };
                    if v > h { h } else { v }
                }),
                (Some(l), None) => map(xv, y, |v| if v < l { l } else { v }),
                (None, Some(h)) => map(xv, y, |v| if v > h { h } else { v }),
                (None, None) => y.copy_from_slice(xv),
            }
            Ok(())
        })
    }
}

/// ONNX `Shrink`: `x + bias` for `x < -lambd`, `x - bias` for `x > lambd`,
/// else 0. Any numeric dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shrink {
    /// Default 0.
    pub bias: f32,
    /// Default 0.5.
    pub lambd: f32,
}
crate::to_rust_struct!(ops::unary::Shrink { bias, lambd });

impl Kernel for Shrink {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape(inputs, outputs, "Shrink")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Shrink";
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(x, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let (bias, lambd) = (self.bias as f64, self.lambd as f64);
        crate::ops::broadcast::dispatch_num!(x.dtype, OP, |T| {
            let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
            map(xv, y, |v| {
                let f = v.to_f64();
                if f < -lambd {
                    T::from_f64(f + bias)
                } else if f > lambd {
                    T::from_f64(f - bias)
                } else {
                    T::ZERO
                }
            });
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::broadcast::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn un(op: UnaryOp, x: &Owned) -> Owned {
        run1(&Unary { op }, &[Some(x)], op.output_dtype(x.dtype)).unwrap()
    }

    fn close(a: f64, b: f64, rtol: f64, atol: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs()
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn f32_fast_paths_match_f64_reference() {
        // Odd length to exercise loop tails; includes extremes and NaN.
        let mut xs: Vec<f32> = (0..2001).map(|i| (i as f32 - 1000.0) * 0.0123).collect();
        xs.extend([
            -120.0,
            -88.5,
            -87.1,
            -1e-6,
            1e-7,
            0.0,
            -0.0,
            87.9,
            88.5,
            100.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        let x = Owned::new(&[xs.len()], &xs);
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let checks: [(UnaryOp, fn(f64) -> f64, f64); 5] = [
            (UnaryOp::Exp, f64::exp, 3e-7),
            (UnaryOp::Sigmoid, sig, 3e-7),
            (UnaryOp::Tanh, f64::tanh, 5e-7),
            (UnaryOp::Erf, erf_f64, 2.5e-7),
            (UnaryOp::Gelu, gelu_f64, 5e-7),
        ];
        for (op, f, rtol) in checks {
            let got = un(op, &x).to::<f32>();
            for (&g, &v) in got.iter().zip(&xs) {
                let want = f(v as f64) as f32 as f64;
                assert!(
                    close(g as f64, want, rtol, 1e-37),
                    "{op:?}({v}) = {g}, want {want}"
                );
            }
        }
    }

    #[test]
    fn erf_f64_accuracy() {
        // math.erf values
        let cases = [
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.6, 0.9997639655834707),
            (3.5, 0.9999992569016276),
            (-1.3, -0.9340079449406524),
            (1e-10, 1.1283791670955126e-10),
        ];
        for (x, want) in cases {
            let got = erf_f64(x);
            assert!(
                (got - want).abs() <= 3e-15 * want.abs(),
                "erf({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn misc_ops() {
        let xs = [-2.5f64, -1.5, -0.5, 0.5, 1.5, 2.5, 0.0, f64::NAN];
        let x = Owned::new(&[8], &xs);
        let round = un(UnaryOp::Round, &x).to::<f64>();
        assert_eq!(&round[..7], &[-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 0.0]);
        let sign = un(UnaryOp::Sign, &x).to::<f64>();
        assert_eq!(&sign[..7], &[-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 0.0]);
        assert!(sign[7].is_nan());
        assert_eq!(un(UnaryOp::IsNaN, &x).to::<u8>(), [0, 0, 0, 0, 0, 0, 0, 1]);
        let relu = un(UnaryOp::Relu, &x).to::<f64>();
        assert_eq!(&relu[..7], &[0.0, 0.0, 0.0, 0.5, 1.5, 2.5, 0.0]);
        let inf = Owned::new(&[3], &[f32::INFINITY, f32::NEG_INFINITY, 1.0]);
        assert_eq!(un(UnaryOp::IsInf, &inf).to::<u8>(), [1, 1, 0]);
        let sp = un(
            UnaryOp::Softplus,
            &Owned::new(&[3], &[0.0f32, 100.0, -100.0]),
        )
        .to::<f32>();
        assert!((sp[0] - 2f32.ln()).abs() < 1e-7 && sp[1] == 100.0 && sp[2] > 0.0);
        let hs = un(UnaryOp::HardSwish, &Owned::new(&[3], &[-4.0f32, 1.0, 4.0])).to::<f32>();
        assert_eq!(hs, [0.0, 1.0 * (1.0 / 6.0 + 0.5), 4.0]);
        let ints = Owned::new(&[4], &[-3i64, 0, 5, i64::MIN]);
        assert_eq!(un(UnaryOp::Abs, &ints).to::<i64>(), [3, 0, 5, i64::MIN]);
        assert_eq!(un(UnaryOp::Neg, &ints).to::<i64>(), [3, 0, -5, i64::MIN]);
        assert_eq!(un(UnaryOp::Sign, &ints).to::<i64>(), [-1, 0, 1, -1]);
        assert_eq!(un(UnaryOp::Relu, &ints).to::<i64>(), [0, 0, 5, 0]);
        let b = Owned::boolean(&[2], &[true, false]);
        assert_eq!(un(UnaryOp::Not, &b).to::<u8>(), [0, 1]);
        assert!(run1(&Unary { op: UnaryOp::Exp }, &[Some(&ints)], DType::I64).is_err());
        let h = Owned::new(
            &[3],
            &[f16::from_f32(0.0), f16::from_f32(1.0), f16::from_f32(-2.0)],
        );
        let e: Vec<f32> = un(UnaryOp::Exp, &h)
            .to::<f16>()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        assert_eq!(
            e,
            [
                1.0,
                f16::from_f32(1f32.exp()).to_f32(),
                f16::from_f32((-2f32).exp()).to_f32()
            ]
        );
    }

    #[test]
    fn parameterised() {
        let xs = [-2.0f32, -0.5, 0.0, 0.3, 2.0];
        let x = Owned::new(&[5], &xs);
        let r = |k: &dyn Fn(&Owned) -> Owned| k(&x).to::<f32>();
        let lr = r(&|x| run1(&LeakyRelu { alpha: 0.1 }, &[Some(x)], DType::F32).unwrap());
        assert_eq!(lr, [-0.2, -0.05, 0.0, 0.3, 2.0]);
        let hs = r(&|x| {
            run1(
                &HardSigmoid {
                    alpha: 0.2,
                    beta: 0.5,
                },
                &[Some(x)],
                DType::F32,
            )
            .unwrap()
        });
        let want: Vec<f32> = xs
            .iter()
            .map(|v| (0.2 * v + 0.5f32).clamp(0.0, 1.0))
            .collect();
        assert_eq!(hs, want);
        let elu = r(&|x| run1(&Elu { alpha: 1.0 }, &[Some(x)], DType::F32).unwrap());
        assert!((elu[0] - ((-2f32).exp() - 1.0)).abs() < 1e-7 && elu[4] == 2.0);
        let tr = r(&|x| run1(&ThresholdedRelu { alpha: 0.2 }, &[Some(x)], DType::F32).unwrap());
        assert_eq!(tr, [0.0, 0.0, 0.0, 0.3, 2.0]);
        let celu = r(&|x| run1(&Celu { alpha: 2.0 }, &[Some(x)], DType::F32).unwrap());
        assert!((celu[0] - 2.0 * ((-1f32).exp() - 1.0)).abs() < 1e-6 && celu[3] == 0.3);
        let selu = r(&|x| {
            run1(
                &Selu {
                    alpha: 1.5,
                    gamma: 2.0,
                },
                &[Some(x)],
                DType::F32,
            )
            .unwrap()
        });
        assert!((selu[1] - 2.0 * 1.5 * ((-0.5f32).exp() - 1.0)).abs() < 1e-6 && selu[4] == 4.0);
        let gt = r(&|x| run1(&GeluTanh {}, &[Some(x)], DType::F32).unwrap());
        for (g, v) in gt.iter().zip(xs) {
            let v = v as f64;
            let w = 0.5
                * v
                * (1.0
                    + ((2.0 / core::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh());
            assert!((*g as f64 - w).abs() < 1e-6);
        }
        let sh = r(&|x| {
            run1(
                &Shrink {
                    bias: 0.5,
                    lambd: 1.0,
                },
                &[Some(x)],
                DType::F32,
            )
            .unwrap()
        });
        assert_eq!(sh, [-1.5, 0.0, 0.0, 0.0, 1.5]);
        // Clip with scalars, one bound, none; ints.
        let lo = Owned::new(&[], &[-1.0f32]);
        let hi = Owned::new(&[], &[1.0f32]);
        let c = run1(&Clip, &[Some(&x), Some(&lo), Some(&hi)], DType::F32).unwrap();
        assert_eq!(c.to::<f32>(), [-1.0, -0.5, 0.0, 0.3, 1.0]);
        let c = run1(&Clip, &[Some(&x), None, Some(&hi)], DType::F32).unwrap();
        assert_eq!(c.to::<f32>(), [-2.0, -0.5, 0.0, 0.3, 1.0]);
        let xi = Owned::new(&[3], &[-5i32, 3, 9]);
        let loi = Owned::new(&[], &[0i32]);
        let c = run1(&Clip, &[Some(&xi), Some(&loi)], DType::I32).unwrap();
        assert_eq!(c.to::<i32>(), [0, 3, 9]);
    }
}
