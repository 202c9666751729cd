//! Float math for the activations: the [`Real`] trait and fast f32
//! approximations of `exp`, `sigmoid`, `tanh` and `erf`.
use core::ops::{Add, Div, Mul, Neg, Sub};

use super::{map, sigmoid};
use crate::ops::broadcast::Num;

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

/// Whether the AVX2+FMA activations can run here.
#[cfg(target_arch = "x86_64")]
fn use_avx2() -> bool {
    use crate::ops::gemm::{Isa, best_isa};
    matches!(best_isa(), Isa::Avx2 | Isa::Avx512)
}

pub(super) fn exp_slice(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { super::x86::exp(x, y) };
    }
    exp_scalar(x, y)
}

/// Portable [`exp_slice`] (also the reference of the vector versions).
pub(super) fn exp_scalar(x: &[f32], y: &mut [f32]) {
    map(x, y, exp_core);
    for (y, &v) in y.iter_mut().zip(x) {
        if v.is_nan() || v <= -87.0 || v >= 88.0 {
            *y = v.exp();
        }
    }
}

/// `y = e^(x - shift)` with the vectorized exp; returns the sum of `y`.
pub(crate) fn exp_shifted(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { super::x86::exp_shifted(x, y, shift) };
    }
    exp_shifted_scalar(x, y, shift)
}

/// Portable [`exp_shifted`] (also the reference of the vector version).
pub(super) fn exp_shifted_scalar(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    map(x, y, |v| v - shift);
    for v in y.iter_mut() {
        let d = *v;
        *v = if d.is_nan() || d <= -87.0 || d >= 88.0 {
            d.exp()
        } else {
            exp_core(d)
        };
    }
    y.iter().sum()
}

/// `y = x · sigmoid(alpha · x)` (Swish / SiLU) in one pass, with the same
/// exponential as [`sigmoid_slice`].
pub(super) fn swish_slice(alpha: f32, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { super::x86::swish(alpha, x, y) };
    }
    swish_scalar(alpha, x, y)
}

/// Portable [`swish_slice`] (also the reference of the vector versions).
pub(super) fn swish_scalar(alpha: f32, x: &[f32], y: &mut [f32]) {
    map(x, y, |v| {
        let z = alpha * v;
        let e = exp_core(-z.abs());
        let r = 1.0 / (1.0 + e);
        v * if z >= 0.0 { r } else { e * r }
    });
    for (y, &v) in y.iter_mut().zip(x) {
        let z = alpha * v;
        if z.is_nan() || z <= -87.0 {
            *y = v * sigmoid(z);
        }
    }
}

pub(super) fn sigmoid_slice(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { super::x86::sigmoid(x, y) };
    }
    sigmoid_scalar(x, y)
}

/// Portable [`sigmoid_slice`] (also the reference of the vector versions).
pub(super) fn sigmoid_scalar(x: &[f32], y: &mut [f32]) {
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
pub(super) fn tanh_fast(x: f32) -> f32 {
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

/// Numerator coefficients of [`erf_f32`] (odd polynomial in `x`, by powers
/// of `x²` from the constant term up).
pub(crate) const ERF_P: [f64; 7] = [
    -1.609_603_332_624_15e-2,
    -2.954_599_808_540_25e-3,
    -7.349_906_303_268_55e-4,
    -5.692_506_394_623_46e-5,
    -2.101_024_020_825_08e-6,
    2.770_681_424_959_02e-8,
    -2.726_142_258_013_06e-10,
];
/// Denominator coefficients of [`erf_f32`] (by powers of `x²`).
pub(crate) const ERF_Q: [f64; 5] = [
    -1.426_473_905_141_89e-2,
    -7.373_329_167_204_68e-3,
    -1.682_826_974_382_03e-3,
    -2.133_740_552_789_05e-4,
    -1.456_607_184_649_96e-5,
];

/// f32 erf: a 13/8 rational function evaluated in f64 (~1.5 ulp).
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let (a, b) = (ERF_P, ERF_Q);
    let c = (x as f64).clamp(-4.0, 4.0);
    let x2 = c * c;
    let p = ((((((a[6] * x2 + a[5]) * x2 + a[4]) * x2 + a[3]) * x2 + a[2]) * x2 + a[1]) * x2
        + a[0])
        * c;
    let q = (((b[4] * x2 + b[3]) * x2 + b[2]) * x2 + b[1]) * x2 + b[0];
    (p / q) as f32
}

/// `S(u) = erfc(z)·e^{z²}·(1 + z/2)` as a polynomial in `u = 1/(1 + z/2)`
/// (constant term first), fitted here by iteratively reweighted least
/// squares for the relative error over `z` in [0, 9.5]: 1.7e-8 in exact
/// arithmetic, about 1.4e-7 evaluated in f32 with FMA. `S` runs from 1 at
/// `z = 0` to `1/(2√π)` as `z → ∞`, so its polynomial has no
/// cancellation to speak of.
pub(crate) const GELU_S: [f32; 10] = [
    0.2820606,
    0.2829378,
    0.23793514,
    0.22901668,
    -0.10878948,
    0.44147465,
    -0.6950393,
    0.44816512,
    -0.13161251,
    0.01385126,
];

/// `1/(2√2)`: `u = 1/(1 + z/2)` with `z = |x|/√2`.
pub(crate) const GELU_D: f32 = 0.353_553_4;

/// `GELU(x) = x·Φ(x)` in f32, `Φ` the standard normal CDF, from
/// `erfc(|x|/√2) = e^{-x²/2} · S(u) · u` without cancellation on either
/// side: `Φ = erfc/2` for `x < 0` (the tail keeps its relative accuracy,
/// where `x/2·(1 + erf(x/√2))` loses it) and `1 - erfc/2` above. `x²/2` is
/// carried exactly as a sum of two floats (an FMA gives the low part) and
/// `u` with its rounding residue, so the tail's error stays at a few ulp
/// (the tests hold it to 5e-7 relative). Non-finite inputs take the f64
/// reference.
#[inline(always)]
pub(crate) fn gelu_f32(x: f32) -> f32 {
    if !x.is_finite() {
        return gelu_f64(x as f64) as f32;
    }
    let abs = x.abs();
    // d = 1 + |x|/(2√2) and its rounding residue (d - 1 is exact).
    let d = abs.mul_add(GELU_D, 1.0);
    let d_lo = abs.mul_add(GELU_D, -(d - 1.0));
    let u = 1.0 / d;
    // x² = sq + sq_lo.
    let sq = x * x;
    let sq_lo = x.mul_add(x, -sq);
    let e = exp_core((-0.5 * sq).max(-87.0));
    // First-order corrections: u's division and d's rounding, the low part
    // of x²/2.
    let r = (-u).mul_add(d, 1.0);
    let corr = (-u).mul_add(d_lo, r);
    let corr = (-0.5f32).mul_add(sq_lo, corr);
    // S(u) by Estrin's scheme, as the vector code.
    let (u2, c) = (u * u, GELU_S);
    let u4 = u2 * u2;
    let p = |i: usize| c[i + 1].mul_add(u, c[i]);
    let q0 = p(2).mul_add(u2, p(0));
    let q4 = p(6).mul_add(u2, p(4));
    let lo = q4.mul_add(u4, q0);
    let s = (p(8) * u4).mul_add(u4, lo);
    let q = e * u * s;
    let tail = 0.5 * q.mul_add(corr, q);
    x * if x < 0.0 { tail } else { 1.0 - tail }
}

/// `y = erf(x)` (vectorized when the CPU allows).
pub(super) fn erf_slice(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { super::x86::erf(x, y) };
    }
    map(x, y, erf_f32)
}

/// `y = GELU(x)` by [`gelu_f32`] (vectorized when the CPU allows).
pub(super) fn gelu_slice(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::gemm::{Isa, best_isa};
        match best_isa() {
            // SAFETY: AVX-512F (with AVX2 and FMA) was detected.
            Isa::Avx512 => return unsafe { super::x86::gelu_avx512(x, y) },
            // SAFETY: AVX2 and FMA were detected.
            Isa::Avx2 => return unsafe { super::x86::gelu(x, y) },
            Isa::Scalar => {}
        }
    }
    map(x, y, gelu_f32)
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
pub(super) fn gelu_f64(v: f64) -> f64 {
    if v < -3.0 {
        0.5 * v * erfc_cf(-v * core::f64::consts::FRAC_1_SQRT_2)
    } else {
        0.5 * v * (1.0 + erf_f64(v * core::f64::consts::FRAC_1_SQRT_2))
    }
}
