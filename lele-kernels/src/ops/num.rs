//! Numeric element types with ONNX/NumPy arithmetic semantics.
use half::{bf16, f16};

use crate::dtype::Elem;

/// Numeric element types: conversions and arithmetic with ONNX/NumPy
/// semantics (integers wrap, integer division truncates, division by zero
/// yields 0 for integers instead of trapping).
pub trait Num: Elem + Copy {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Whether the type is a floating-point type.
    const FLOAT: bool;
    /// The value as `f64` (may round for 64-bit integers).
    fn to_f64(self) -> f64;
    /// From `f64`: rounding for floats, truncation toward zero then
    /// wrapping for integers (like NumPy `astype`).
    fn from_f64(v: f64) -> Self;
    /// The value as `i128` (floats are truncated toward zero).
    fn to_i128(self) -> i128;
    /// From `i128`: wrapping for integers, rounding for floats.
    fn from_i128(v: i128) -> Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// `self / o`.
    fn div(self, o: Self) -> Self;
    /// Remainder with the sign of the divisor (Python `%`).
    fn rem_py(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`).
    fn fmod(self, o: Self) -> Self;
    /// Whether the value is NaN.
    #[inline]
    fn is_nan(self) -> bool {
        #[allow(clippy::eq_op)]
        let r = self != self;
        r
    }
    /// NaN-propagating maximum.
    #[inline]
    fn max_nan(self, o: Self) -> Self {
        if self > o || self.is_nan() { self } else { o }
    }
    /// NaN-propagating minimum.
    #[inline]
    fn min_nan(self, o: Self) -> Self {
        if self < o || self.is_nan() { self } else { o }
    }
}

macro_rules! impl_num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const FLOAT: bool = false;
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { (v as i128) as $t }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_i128(v: i128) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline] fn div(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline] fn rem_py(self, o: Self) -> Self {
                if o == 0 { return 0; }
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                let fix = r != 0 && ((r < 0) != (o < 0));
                if fix { r.wrapping_add(o) } else { r }
            }
            #[inline] fn fmod(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_rem(o) } }
        }
    )*};
}
impl_num_int!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! impl_num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const FLOAT: bool = true;
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_i128(v: i128) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn rem_py(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) { r + o } else { r }
            }
            #[inline] fn fmod(self, o: Self) -> Self { self % o }
        }
    )*};
}
impl_num_float!(f32, f64);

macro_rules! impl_num_half {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            const FLOAT: bool = true;
            #[inline] fn to_f64(self) -> f64 { self.to_f64() }
            #[inline] fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            #[inline] fn to_i128(self) -> i128 { self.to_f32() as i128 }
            #[inline] fn from_i128(v: i128) -> Self { <$t>::from_f64(v as f64) }
            #[inline] fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline] fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline] fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            #[inline] fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline] fn rem_py(self, o: Self) -> Self { <$t>::from_f32(self.to_f32().rem_py(o.to_f32())) }
            #[inline] fn fmod(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() % o.to_f32()) }
        }
    )*};
}
impl_num_half!(f16, bf16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_semantics() {
        assert_eq!((-7i32).rem_py(3), 2);
        assert_eq!(7i32.rem_py(-3), -2);
        assert_eq!((-7i32).fmod(3), -1);
        assert_eq!((-7i64).div(2), -3);
        assert_eq!(5i64.div(0), 0);
        assert_eq!((-7.5f32).rem_py(2.0), 0.5);
        assert!(f32::NAN.max_nan(1.0).is_nan());
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert_eq!(u8::from_f64(-1.0), 255);
        assert_eq!(i32::from_f64(-2.7), -2);
    }
}
