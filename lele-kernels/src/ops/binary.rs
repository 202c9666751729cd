//! Elementwise binary operators with NumPy broadcasting (Add, Mul, Equal,
//! And, BitShift…) and the variadic Sum/Mean/Max/Min.
use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::broadcast::{Rows, broadcast_all, broadcast_copy, zip2};
use crate::ops::dtype_dispatch::{dispatch, dispatch_num};
use crate::ops::num::Num;
use crate::ops::unary::{map_f32, zip_f32};
use crate::shape::{Shape, broadcast};
use crate::tensor::{TensorMut, TensorRef};

/// The operation of a [`Binary`] kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b` (integers wrap).
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`; integer division truncates toward zero (0 on division by zero).
    Div,
    /// `a ** b`; output dtype is the base's, the exponent may be any numeric dtype.
    Pow,
    /// ONNX `Mod` with `fmod=0`: remainder with the sign of the divisor.
    Mod,
    /// ONNX `Mod` with `fmod=1`: remainder with the sign of the dividend.
    FMod,
    /// NaN-propagating maximum.
    Max,
    /// NaN-propagating minimum.
    Min,
    /// `a == b` (Bool output).
    Equal,
    /// `a < b` (Bool output).
    Less,
    /// `a > b` (Bool output).
    Greater,
    /// `a <= b` (Bool output).
    LessOrEqual,
    /// `a >= b` (Bool output).
    GreaterOrEqual,
    /// Logical and of Bool tensors.
    And,
    /// Logical or of Bool tensors.
    Or,
    /// Logical xor of Bool tensors.
    Xor,
    /// `BitShift` with `direction="LEFT"` (shifts past the width give 0).
    BitShiftLeft,
    /// `BitShift` with `direction="RIGHT"`.
    BitShiftRight,
    /// Bitwise and of integers.
    BitwiseAnd,
    /// Bitwise or of integers.
    BitwiseOr,
    /// Bitwise xor of integers.
    BitwiseXor,
    /// ONNX `PRelu`: `a` where `a >= 0`, else `a * b` (`b` is the slope).
    PRelu,
}
crate::to_rust_enum!(ops::binary::BinaryOp {
    PRelu,
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Mod,
    FMod,
    Max,
    Min,
    Equal,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
    And,
    Or,
    Xor,
    BitShiftLeft,
    BitShiftRight,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor
});

impl BinaryOp {
    /// Whether the output is Bool (comparisons and logical ops).
    pub fn bool_output(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::Less
                | BinaryOp::Greater
                | BinaryOp::LessOrEqual
                | BinaryOp::GreaterOrEqual
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
        )
    }

    /// The output dtype for an input-0 dtype.
    pub fn output_dtype(self, a: DType) -> DType {
        if self.bool_output() { DType::Bool } else { a }
    }
}

/// An elementwise binary operator: inputs `A`, `B` (broadcast), output `C`.
/// The output dtype is Bool for comparisons/logic, else the dtype of `A`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Binary {
    /// The operation.
    pub op: BinaryOp,
}
crate::to_rust_struct!(ops::binary::Binary { op });

const OP: &str = "Binary";

/// Fewest output elements of a broadcast f32 operation split over the
/// threads. A split of an SE scale over 192×6×80 used to lose, and slowed
/// the convolution after it too, so the bound was 128K; with the depthwise
/// layer before it split by channels the same way, the split wins (the SE
/// scales gain and the convolutions after them do not lose).
#[cfg(feature = "std")]
const BROADCAST_PARALLEL_MIN: usize = 1 << 15;

impl Kernel for Binary {
    fn elementwise(&self) -> bool {
        // Comparisons and logic ops produce booleans; Pow may mix dtypes but
        // its output has input 0's dtype.
        !self.op.bool_output()
    }

    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let a = input(inputs, 0, OP)?;
        let b = input(inputs, 1, OP)?;
        let s = broadcast(&a.shape, &b.shape, OP)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let a = input(inputs, 0, OP)?;
        let b = input(inputs, 1, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(a, OP)?;
        check_data(b, OP)?;
        let shape = broadcast(&a.shape, &b.shape, OP)?;
        check_out(out, self.op.output_dtype(a.dtype), &shape, OP)?;
        if self.op != BinaryOp::Pow && a.dtype != b.dtype {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: a.dtype,
                found: b.dtype,
            });
        }
        #[cfg(feature = "std")]
        if a.shape == b.shape
            && a.dtype == DType::F32
            && matches!(
                self.op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            )
        {
            // Same shapes (a residual add, a gate): flat chunks over the
            // threads when long.
            let (x, y) = (a.typed::<f32>(OP)?, b.typed::<f32>(OP)?);
            let o = out.typed::<f32>(OP)?;
            if x.len() != o.len() || y.len() != o.len() {
                return Err(KernelError::Buffer { op: OP });
            }
            let op = self.op;
            crate::threads::for_chunks(o, &|s, part| {
                let end = s + part.len();
                same_shape_f32(op, &x[s..end], &y[s..end], part);
            });
            return Ok(());
        }
        let rows = Rows::new([&a.shape, &b.shape], &shape, OP)?;
        if a.dtype == DType::F32
            && matches!(
                self.op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            )
        {
            // Broadcast f32 arithmetic (a per-channel scale or shift):
            // on a large tensor the output's rows split over the threads.
            let (x, y) = (a.typed::<f32>(OP)?, b.typed::<f32>(OP)?);
            let o = out.typed::<f32>(OP)?;
            let op = self.op;
            let part_rows = |first: usize, part: &mut [f32]| {
                let count = part.len() / rows.row_len().max(1);
                match op {
                    BinaryOp::Add => arith_rows_f32(&rows, first, count, x, y, part, |p, q| p + q),
                    BinaryOp::Sub => arith_rows_f32(&rows, first, count, x, y, part, |p, q| p - q),
                    BinaryOp::Mul => arith_rows_f32(&rows, first, count, x, y, part, |p, q| p * q),
                    _ => arith_rows_f32(&rows, first, count, x, y, part, |p, q| p / q),
                }
            };
            #[cfg(feature = "std")]
            if shape.numel() >= BROADCAST_PARALLEL_MIN {
                crate::threads::for_rows(o, rows.row_len(), &part_rows);
                return Ok(());
            }
            part_rows(0, o);
            return Ok(());
        }
        binary(self.op, &rows, a, b, out)
    }
}

/// `o = x op y` elementwise (Add, Sub, Mul or Div), the arithmetic of
/// [`arith`] for f32, at the CPU's vector width ([`zip_f32`]).
#[cfg(feature = "std")]
fn same_shape_f32(op: BinaryOp, x: &[f32], y: &[f32], o: &mut [f32]) {
    match op {
        BinaryOp::Add => zip_f32(x, y, o, |p, q| p + q),
        BinaryOp::Sub => zip_f32(x, y, o, |p, q| p - q),
        BinaryOp::Mul => zip_f32(x, y, o, |p, q| p * q),
        _ => zip_f32(x, y, o, |p, q| p / q),
    }
}

/// Broadcast f32 arithmetic `f` over output rows `first..first + count`
/// (`out` holds those rows): a row whose operands are a run and a single
/// value (a per-channel scale or shift) or two runs goes through the
/// vectorized [`map_f32`] / [`zip_f32`], any other element by element.
fn arith_rows_f32(
    rows: &Rows<2>,
    first: usize,
    count: usize,
    x: &[f32],
    y: &[f32],
    out: &mut [f32],
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let start = first * rows.row_len();
    rows.for_each_in(first, count, |o, n, [ox, oy], [sx, sy]| {
        let dst = &mut out[o - start..o - start + n];
        match (sx, sy) {
            (1, 1) => zip_f32(&x[ox..ox + n], &y[oy..oy + n], dst, f),
            (1, 0) => {
                let q = y[oy];
                map_f32(&x[ox..ox + n], dst, |p| f(p, q));
            }
            (0, 1) => {
                let p = x[ox];
                map_f32(&y[oy..oy + n], dst, |q| f(p, q));
            }
            // Both broadcast along the row (inner strides are 0 or 1).
            _ => dst.fill(f(x[ox], y[oy])),
        }
    });
}

fn binary(
    op: BinaryOp,
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    use BinaryOp::*;
    match op {
        Add | Sub | Mul | Div | Mod | FMod | Max | Min | PRelu => {
            dispatch_num!(a.dtype, OP, |T| arith::<T>(op, rows, a, b, out))
        }
        Pow => dispatch!(a.dtype, OP, [F32 => f32, F64 => f64, F16 => f16, BF16 => bf16,
            I32 => i32, I64 => i64, I8 => i8, I16 => i16, U8 => u8, U16 => u16, U32 => u32, U64 => u64],
            |T| pow_base::<T>(rows, a, b, out)),
        Equal | Less | Greater | LessOrEqual | GreaterOrEqual => {
            if a.dtype == DType::Bool {
                compare::<u8>(op, rows, a, b, out)
            } else {
                dispatch_num!(a.dtype, OP, |T| compare::<T>(op, rows, a, b, out))
            }
        }
        And | Or | Xor => {
            let (x, y) = (a.as_bool(OP)?, b.as_bool(OP)?);
            let o = out.typed::<u8>(OP)?;
            match op {
                And => zip2(rows, x, y, o, |p, q| ((p != 0) & (q != 0)) as u8),
                Or => zip2(rows, x, y, o, |p, q| ((p != 0) | (q != 0)) as u8),
                _ => zip2(rows, x, y, o, |p, q| ((p != 0) ^ (q != 0)) as u8),
            }
            Ok(())
        }
        BitShiftLeft | BitShiftRight | BitwiseAnd | BitwiseOr | BitwiseXor => {
            if a.dtype == DType::Bool {
                if matches!(op, BitShiftLeft | BitShiftRight) {
                    return Err(KernelError::UnsupportedDType {
                        op: OP,
                        dtype: a.dtype,
                    });
                }
                return bits::<u8>(op, rows, a, b, out);
            }
            dispatch!(a.dtype, OP, [I8 => i8, U8 => u8, I16 => i16, U16 => u16,
                I32 => i32, U32 => u32, I64 => i64, U64 => u64],
                |T| bits::<T>(op, rows, a, b, out))
        }
    }
}

fn arith<T: Num>(
    op: BinaryOp,
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, y) = (a.typed::<T>(OP)?, b.typed::<T>(OP)?);
    let o = out.typed::<T>(OP)?;
    match op {
        BinaryOp::Add => zip2(rows, x, y, o, T::add),
        BinaryOp::Sub => zip2(rows, x, y, o, T::sub),
        BinaryOp::Mul => zip2(rows, x, y, o, T::mul),
        BinaryOp::Div => zip2(rows, x, y, o, T::div),
        BinaryOp::Mod => zip2(rows, x, y, o, T::rem_py),
        BinaryOp::FMod => zip2(rows, x, y, o, T::fmod),
        BinaryOp::Max => zip2(rows, x, y, o, T::max_nan),
        BinaryOp::Min => zip2(rows, x, y, o, T::min_nan),
        BinaryOp::PRelu => zip2(
            rows,
            x,
            y,
            o,
            |p, q| {
                if p < T::default() { p.mul(q) } else { p }
            },
        ),
        _ => {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "not an arithmetic operation",
            });
        }
    }
    Ok(())
}

fn compare<T: Num>(
    op: BinaryOp,
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, y) = (a.typed::<T>(OP)?, b.typed::<T>(OP)?);
    let o = out.typed::<u8>(OP)?;
    match op {
        BinaryOp::Equal => zip2(rows, x, y, o, |p, q| (p == q) as u8),
        BinaryOp::Less => zip2(rows, x, y, o, |p, q| (p < q) as u8),
        BinaryOp::Greater => zip2(rows, x, y, o, |p, q| (p > q) as u8),
        BinaryOp::LessOrEqual => zip2(rows, x, y, o, |p, q| (p <= q) as u8),
        _ => zip2(rows, x, y, o, |p, q| (p >= q) as u8),
    }
    Ok(())
}

/// Integer bit operations.
trait Bits: Num {
    fn shl(self, s: Self) -> Self;
    fn shr(self, s: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
}

macro_rules! impl_bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline]
            fn shl(self, s: Self) -> Self {
                #[allow(unused_comparisons)]
                let ok = s >= 0 && (s as u128) < <$t>::BITS as u128;
                if ok { self << (s as u32) } else { 0 }
            }
            #[inline]
            fn shr(self, s: Self) -> Self {
                #[allow(unused_comparisons)]
                let ok = s >= 0 && (s as u128) < <$t>::BITS as u128;
                #[allow(unused_comparisons)]
                let neg = self < 0;
                if ok { self >> (s as u32) } else if neg { !0 } else { 0 }
            }
            #[inline] fn and(self, o: Self) -> Self { self & o }
            #[inline] fn or(self, o: Self) -> Self { self | o }
            #[inline] fn xor(self, o: Self) -> Self { self ^ o }
        }
    )*};
}
impl_bits!(i8, u8, i16, u16, i32, u32, i64, u64);

fn bits<T: Bits>(
    op: BinaryOp,
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, y) = (a.typed::<T>(OP)?, b.typed::<T>(OP)?);
    let o = out.typed::<T>(OP)?;
    match op {
        BinaryOp::BitShiftLeft => zip2(rows, x, y, o, T::shl),
        BinaryOp::BitShiftRight => zip2(rows, x, y, o, T::shr),
        BinaryOp::BitwiseAnd => zip2(rows, x, y, o, T::and),
        BinaryOp::BitwiseOr => zip2(rows, x, y, o, T::or),
        _ => zip2(rows, x, y, o, T::xor),
    }
    Ok(())
}

fn pow_base<A: Num>(
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    if a.dtype == DType::F32 && b.dtype == DType::F32 {
        return pow_f32(rows, a, b, out);
    }
    let x = a.typed::<A>(OP)?;
    let o = out.typed::<A>(OP)?;
    // The exponent is read through `dyn Exponents`: one loop per base
    // type rather than one per (base, exponent) pair of the 144.
    dispatch_num!(b.dtype, OP, |E| {
        pow_generic::<A>(rows, x, &b.typed::<E>(OP)?, o);
        Ok(())
    })
}

/// An exponent as [`pow_scalar`] needs it.
#[derive(Clone, Copy)]
enum Exponent {
    /// From an integer tensor.
    Int(i128),
    /// From a float tensor.
    Float(f64),
}

/// Element `i` of an exponent tensor of any numeric type.
trait Exponents {
    fn at(&self, i: usize) -> Exponent;
}

impl<E: Num> Exponents for &[E] {
    #[inline]
    fn at(&self, i: usize) -> Exponent {
        let e = self[i];
        if E::FLOAT {
            Exponent::Float(e.to_f64())
        } else {
            Exponent::Int(e.to_i128())
        }
    }
}

/// `x` to the power `e`: an integer base to a non-negative integer
/// exponent by repeated multiplication (wrapping on overflow),
/// everything else in f64.
#[inline]
fn pow_scalar<A: Num>(x: A, e: Exponent) -> A {
    match e {
        Exponent::Int(e) if !A::FLOAT && e >= 0 => {
            let base = x.to_i128() as i64;
            let e = e.min(u32::MAX as i128) as u32;
            A::from_i128(base.wrapping_pow(e) as i128)
        }
        Exponent::Int(e) => A::from_f64(x.to_f64().powf(e as f64)),
        Exponent::Float(e) => A::from_f64(x.to_f64().powf(e)),
    }
}

fn pow_generic<A: Num>(rows: &Rows<2>, x: &[A], e: &dyn Exponents, o: &mut [A]) {
    rows.for_each(|off, n, [ox, oe], [sx, se]| {
        let y = &mut o[off..off + n];
        for (j, y) in y.iter_mut().enumerate() {
            *y = pow_scalar(x[ox + j * sx], e.at(oe + j * se));
        }
    });
}

fn pow_f32(
    rows: &Rows<2>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, y) = (a.typed::<f32>(OP)?, b.typed::<f32>(OP)?);
    let o = out.typed::<f32>(OP)?;
    // Common exponents of decomposed normalizations and activations, each
    // its own loop (called through a function pointer, the square was slow
    // enough per element to show in a small model's profile).
    use crate::ops::unary::map_f32;
    let scalar = (y.len() == 1 && x.len() == o.len()).then(|| y[0]);
    match scalar {
        Some(2.0) => map_f32(x, o, |v| v * v),
        Some(1.0) => o.copy_from_slice(x),
        Some(3.0) => map_f32(x, o, |v| v * v * v),
        Some(0.5) => map_f32(x, o, f32::sqrt),
        _ => zip2(rows, x, y, o, f32::powf),
    }
    Ok(())
}

/// The operation of a [`Variadic`] kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariadicOp {
    /// ONNX `Sum`.
    Sum,
    /// ONNX `Mean`.
    Mean,
    /// ONNX `Max` (NaN-propagating).
    Max,
    /// ONNX `Min` (NaN-propagating).
    Min,
}
crate::to_rust_enum!(ops::binary::VariadicOp {
    Sum,
    Mean,
    Max,
    Min
});

/// ONNX Sum/Mean/Max/Min over any number (≥ 1) of broadcast inputs of one
/// dtype; the output has that dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variadic {
    /// The operation.
    pub op: VariadicOp,
}
crate::to_rust_struct!(ops::binary::Variadic { op });

const VOP: &str = "Variadic";

impl Kernel for Variadic {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        input(inputs, 0, VOP)?;
        let s = broadcast_all(inputs.iter().flatten().map(|t| &t.shape), VOP)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: VOP, index: 0 })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let first = input(inputs, 0, VOP)?;
        let shape = broadcast_all(inputs.iter().flatten().map(|t| &t.shape), VOP)?;
        let out = output(outputs, 0, VOP)?;
        check_out(out, first.dtype, &shape, VOP)?;
        for t in inputs.iter().flatten() {
            check_data(t, VOP)?;
            if t.dtype != first.dtype {
                return Err(KernelError::DTypeMismatch {
                    op: VOP,
                    expected: first.dtype,
                    found: t.dtype,
                });
            }
        }
        dispatch_num!(first.dtype, VOP, |T| variadic::<T>(
            self.op, inputs, &shape, out
        ))
    }
}

fn variadic<T: Num>(
    op: VariadicOp,
    inputs: &[Option<TensorRef<'_>>],
    shape: &Shape,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let o = out.typed::<T>(VOP)?;
    let mut n = 0usize;
    for t in inputs.iter().flatten() {
        let x = t.typed::<T>(VOP)?;
        let rows = Rows::new([&t.shape], shape, VOP)?;
        if n == 0 {
            broadcast_copy(&rows, x, o);
        } else {
            let f: fn(T, T) -> T = match op {
                VariadicOp::Sum | VariadicOp::Mean => T::add,
                VariadicOp::Max => T::max_nan,
                VariadicOp::Min => T::min_nan,
            };
            rows.for_each(|off, len, [ox], [sx]| {
                let y = &mut o[off..off + len];
                if sx == 1 {
                    for (y, &v) in y.iter_mut().zip(&x[ox..ox + len]) {
                        *y = f(*y, v);
                    }
                } else {
                    let v = x[ox];
                    for y in y.iter_mut() {
                        *y = f(*y, v);
                    }
                }
            });
        }
        n += 1;
    }
    if op == VariadicOp::Mean && n > 1 {
        let d = T::from_f64(n as f64);
        for y in o.iter_mut() {
            *y = y.div(d);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
