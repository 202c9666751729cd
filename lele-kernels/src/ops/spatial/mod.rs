//! Spatial and rearrangement operators: `GridSample`, `AffineGrid`,
//! `Col2Im`, `CenterCropPad`, `SpaceToDepth` and `DepthToSpace`.
use core::ops::{Add, Div, Mul, Neg, Sub};

pub mod affine_grid;
pub mod center_crop_pad;
pub mod col2im;
pub mod depth_space;
pub mod grid_sample;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_grid;

/// The float type coordinates and weights are computed in (`f32`, or `f64`
/// when a `f64` tensor is involved).
pub(crate) trait Coord:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// A constant.
    fn c(v: f64) -> Self;
    /// The value as `f64`.
    fn f64(self) -> f64;
    /// Largest integer not above.
    fn floor(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Round half to even (NumPy `rint`).
    fn rint(self) -> Self;
    /// Truncation toward zero to an integer (saturating, NaN → 0).
    fn trunc_i64(self) -> i64;
}

macro_rules! impl_coord {
    ($t:ty) => {
        impl Coord for $t {
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn rint(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn trunc_i64(self) -> i64 {
                self as i64
            }
        }
    };
}
impl_coord!(f32);
impl_coord!(f64);

pub(crate) use crate::kernel::set_out;
