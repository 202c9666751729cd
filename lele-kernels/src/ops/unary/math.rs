//! Float math for the activations: the [`Real`] trait and fast f32
//! approximations of `exp`, `sigmoid`, `tanh` and `erf`.
use core::ops::{Add, Div, Mul, Neg, Sub};

use super::vector::{self, Pointwise, VectorOp};
use super::{map, sigmoid};
use crate::ops::num::Num;

mod gelu_table;
pub(crate) use gelu_table::{GELU_PHI, GELU_TABLE_BIAS, GELU_TABLE_FIRST_CENTRE, GELU_TABLE_SCALE};

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

/// The coefficients of `r²` to `r⁶` of `1 + r + c₂r² + … + c₆r⁶ ≈ e^r` on
/// `|r| <= ln2/2`, fitted here by iteratively reweighted least squares for
/// the relative error: 3.9e-9 in exact arithmetic with these f32 values,
/// below the 7.0e-9 of the degree-7 Taylor polynomial it replaced, with one
/// multiply-add less. In f32 the roundings dominate either way.
pub(crate) const EXP_POLY: [f32; 5] = [
    0.499_999_94,
    0.166_665_21,
    0.041_668_39,
    0.008_368_71,
    0.001_381_461_3,
];

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
    // Estrin's scheme (as the vector code): a third of Horner's chain of
    // dependent steps, which bounds the vector loops.
    let [c2, c3, c4, c5, c6] = EXP_POLY;
    let r2 = r * r;
    let a = c3 * r + c2;
    let b = c5 * r + c4;
    let q = c6 * r2 + b;
    let q = q * r2 + a;
    let p = q * r2 + (r + 1.0);
    let scale = f32::from_bits((ni.wrapping_add(127) << 23) as u32);
    p * scale
}

pub(super) fn exp_slice(x: &[f32], y: &mut [f32]) {
    if !vector::apply(VectorOp::Exp, x, y) {
        exp_scalar(x, y)
    }
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

/// Below this, [`exp_shifted`] gives 0: `e^d` would be under about 1.4
/// times the smallest normal float.
pub(crate) const EXP_SHIFTED_FLUSH: f32 = -87.0;

/// `y = e^(x - shift)` with the vectorized exp, softmax's numerators;
/// returns the sum of `y`.
///
/// A difference `x - shift` below [`EXP_SHIFTED_FLUSH`] gives exactly 0
/// instead of a value under 2^-125: next to the row's largest numerator
/// (1) it changes no normalized result, while computing it would take a
/// microcode assist per vector on x86 (BERT-style masks put -10000 on every
/// padding key, so every row of an attention has such lanes).
pub(crate) fn exp_shifted(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    if let Some(sum) = vector::exp_shifted(x, y, shift) {
        return sum;
    }
    // Summed chunk by chunk, as [`exp_shifted_in_place`] must: the two give
    // the same bits, so a softmax computed in place equals the kernel's.
    let mut sum = 0.0;
    for (x, y) in x.chunks(EXP_CHUNK).zip(y.chunks_mut(EXP_CHUNK)) {
        sum += exp_shifted_scalar(x, y, shift);
    }
    sum
}

/// Floats per chunk of the portable [`exp_shifted`] sums.
const EXP_CHUNK: usize = 256;

/// [`exp_shifted`] over `y` in place (a softmax row's numerators written
/// over its logits); returns the sum. On a vector backend the same loop;
/// else a stack chunk of 256 floats at a time, the sum added chunk by
/// chunk.
pub(crate) fn exp_shifted_in_place(y: &mut [f32], shift: f32) -> f32 {
    if let Some(sum) = vector::exp_shifted_in_place(y, shift) {
        return sum;
    }
    let mut tmp = [0f32; EXP_CHUNK];
    let mut sum = 0.0;
    for chunk in y.chunks_mut(EXP_CHUNK) {
        let x = &mut tmp[..chunk.len()];
        x.copy_from_slice(chunk);
        sum += exp_shifted_scalar(x, chunk, shift);
    }
    sum
}

/// The largest element of `x`, ignoring NaN (`-inf` when empty or all NaN).
pub(crate) fn max_of(x: &[f32]) -> f32 {
    vector::max_of(x).unwrap_or_else(|| max_of_scalar(x))
}

/// An additive mask over a block of softmax rows: row `i`, column `j` is
/// `data[start + i·row_stride + j·col_stride]` (strides 0 along broadcast
/// axes).
#[derive(Clone, Copy)]
pub(crate) struct MaskRows<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) start: usize,
    pub(crate) row_stride: usize,
    pub(crate) col_stride: usize,
}

/// Softmax numerators of the rows of `scores` (`t` floats each) in place,
/// each row first offset by its mask row when there is one (the sum going
/// to `shifted`, of at least `t` floats), and the reciprocal of each row's
/// sum into `norms` (an attention head's probabilities, left
/// unnormalized). Row by row as [`max_of`] and [`exp_shifted`] compute it,
/// on every path; on a vector backend with a mask contiguous along the
/// row (or none) in one loop without a dispatch per row.
pub(crate) fn softmax_rows(
    scores: &mut [f32],
    t: usize,
    mask: Option<MaskRows<'_>>,
    shifted: &mut [f32],
    norms: &mut [f32],
) {
    if t == 0 {
        return;
    }
    if mask.is_none_or(|m| m.col_stride == 1) {
        let rows = mask.map(|m| (m.data, m.start, m.row_stride));
        if vector::softmax_rows(&mut *scores, t, rows, &mut *shifted, &mut *norms) {
            return;
        }
    }
    let shifted = &mut shifted[..t];
    for (i, (row, norm)) in scores.chunks_exact_mut(t).zip(norms.iter_mut()).enumerate() {
        match mask {
            Some(m) if m.col_stride == 1 => {
                let mask_row = &m.data[m.start + i * m.row_stride..][..t];
                for ((o, &v), &a) in shifted.iter_mut().zip(row.iter()).zip(mask_row) {
                    *o = v + a;
                }
            }
            Some(m) => {
                let base = m.start + i * m.row_stride;
                for (j, (o, &v)) in shifted.iter_mut().zip(row.iter()).enumerate() {
                    *o = v + m.data[base + j * m.col_stride];
                }
            }
            None => shifted.copy_from_slice(row),
        }
        let top = max_of(shifted);
        *norm = 1.0 / exp_shifted(shifted, row, top);
    }
}

/// Portable [`max_of`]: eight running maxima so the loop vectorizes.
pub(super) fn max_of_scalar(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let blocks = x.chunks_exact(8);
    let rest = blocks.remainder();
    for b in blocks {
        for (a, &v) in acc.iter_mut().zip(b) {
            *a = if v > *a { v } else { *a };
        }
    }
    acc.iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// `y *= r` in place (softmax's normalization).
pub(crate) fn scale_in_place(y: &mut [f32], r: f32) {
    if vector::pointwise(Pointwise::Scale(r), y) {
        return;
    }
    y.iter_mut().for_each(|v| *v *= r);
}

/// Portable [`exp_shifted`] (also the reference of the vector version).
pub(super) fn exp_shifted_scalar(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    map(x, y, |v| v - shift);
    for v in y.iter_mut() {
        let d = *v;
        *v = if d < EXP_SHIFTED_FLUSH {
            0.0
        } else if d.is_nan() || d <= -87.0 || d >= 88.0 {
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
    if !vector::apply(VectorOp::Swish(alpha), x, y) {
        swish_scalar(alpha, x, y)
    }
}

/// Portable [`swish_slice`] (also the reference of the vector versions).
pub(super) fn swish_scalar(alpha: f32, x: &[f32], y: &mut [f32]) {
    // One division, no sign split (see `lanes::sigmoid_denominator`).
    map(x, y, |v| v / (1.0 + exp_core(v * -alpha)));
    for (y, &v) in y.iter_mut().zip(x) {
        let z = alpha * v;
        if z.is_nan() || z <= -87.0 {
            *y = v * sigmoid(z);
        }
    }
}

pub(crate) fn sigmoid_slice(x: &[f32], y: &mut [f32]) {
    if !vector::apply(VectorOp::Sigmoid, x, y) {
        sigmoid_scalar(x, y)
    }
}

/// Portable [`sigmoid_slice`] (also the reference of the vector versions).
pub(super) fn sigmoid_scalar(x: &[f32], y: &mut [f32]) {
    map(x, y, |v| 1.0 / (1.0 + exp_core(-v)));
    for (y, &v) in y.iter_mut().zip(x) {
        if v.is_nan() {
            *y = sigmoid(v);
        } else if v <= -87.0 {
            *y = sigmoid_far(v);
        }
    }
}

/// `sigmoid(v)` for `v <= -87`: `e^v` (`1 + e^v` rounds to 1), which is
/// below or near the smallest normal float. The steps of the vector
/// exponential (fused multiply-adds, the same polynomial) for `v` clamped
/// at -104 (below, `e^v` rounds to zero), then `p · 2^n` as one rounding:
/// `p · 2^(n + 64)` is exact, the product by `2^-64` rounds once, as
/// AVX-512's `scalef` does. The vector kernels compute these lanes the
/// same way (a probability map's background, whole tensors of them, stays
/// on the vector path).
pub(super) fn sigmoid_far(v: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const MAGIC: f32 = 12582912.0;
    let x = v.max(-104.0);
    let t = x.mul_add(LOG2E, MAGIC);
    let n = t - MAGIC;
    let r = (-n).mul_add(0.693_145_75, x);
    let r = (-n).mul_add(1.428_606_8e-6, r);
    let [c2, c3, c4, c5, c6] = EXP_POLY;
    let r2 = r * r;
    let a = c3.mul_add(r, c2);
    let b = c5.mul_add(r, c4);
    let q = c6.mul_add(r2, b);
    let q = q.mul_add(r2, a);
    let p = q.mul_add(r2, r + 1.0);
    // n is in [-150, -125] here, n + 64 a normal exponent.
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let up = f32::from_bits((ni.wrapping_add(64 + 127) << 23) as u32);
    (p * up) * f32::from_bits((127 - 64) << 23)
}

/// `(tanh(x) - x)/x³` as a polynomial in `x²` (constant term first) for
/// `|x|` below [`TANH_SPLIT`], fitted here by iteratively reweighted least
/// squares for the relative error of `tanh`: 4.4e-9 in exact arithmetic.
pub(crate) const TANH_SMALL: [f32; 5] = [
    -0.3333328,
    0.13331442,
    -0.053739715,
    0.020639082,
    -0.0057049817,
];

/// Where [`tanh_f32`] switches from its polynomial to `1 - 2/(e^{2|x|} + 1)`
/// (above it the subtraction loses less than a bit: tanh > 0.55).
pub(crate) const TANH_SPLIT: f32 = 0.625;

/// f32 tanh (about an ulp; the tests hold it to 2e-7 relative): an odd
/// polynomial near zero, `1 - 2/(e^{2|x|} + 1)` with the sign put back
/// elsewhere. Branch-free but for the final selects, so maps over slices
/// vectorize; plain multiply-adds (no `mul_add`, which is a library call on
/// targets without FMA).
#[inline(always)]
pub(super) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    let c = TANH_SMALL;
    let q = (((c[4] * x2 + c[3]) * x2 + c[2]) * x2 + c[1]) * x2 + c[0];
    let small = x + x * x2 * q;
    // tanh(20) is 1 in f32; the clamp keeps e^{2a} finite.
    let t = exp_core(2.0 * a.min(20.0));
    let big = (1.0 - 2.0 / (t + 1.0)).copysign(x);
    if a < TANH_SPLIT {
        small
    } else if a.is_nan() {
        x
    } else {
        big
    }
}

/// `2/√π` split in two floats: `erf(x) ≈ x·2/√π` near zero, so the
/// leading term is applied with both parts.
pub(crate) const ERF_C0: [f32; 2] = {
    let hi = core::f64::consts::FRAC_2_SQRT_PI as f32;
    [hi, (core::f64::consts::FRAC_2_SQRT_PI - hi as f64) as f32]
};

/// `(erf(x)/x - 2/√π)/x²` as a polynomial in `x²` (constant term first)
/// for `|x| < 1`, fitted here by iteratively reweighted least squares for
/// the relative error of erf: 1.3e-9 in exact arithmetic.
pub(crate) const ERF_SMALL: [f32; 6] = [
    -0.3761263,
    0.112836175,
    -0.026854908,
    0.0051901443,
    -0.000802464,
    7.89804e-5,
];

/// `|x|` from which `erf` rounds to ±1 in f32 (`erfc(4) < 2^-25`).
pub(crate) const ERF_ONE: f32 = 4.0;

/// f32 erf (about an ulp; the tests hold it to 1.2e-7 relative): the odd
/// polynomial `x·(2/√π + x²·R(x²))` ([`ERF_SMALL`]) for `|x| < 1`, else `±(1 - erfc(|x|))` with
/// `erfc(z) = e^{-z²}·u·S(u)`, `u = 1/(1 + z/2)`, `S` the polynomial GELU
/// uses ([`erfc_scaled`]). There `erfc ≤ 0.16`, so the subtraction costs
/// no accuracy.
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    if a < 1.0 {
        let (x2, c) = (x * x, ERF_SMALL);
        let x4 = x2 * x2;
        let lo = c[1].mul_add(x2, c[0]);
        let mid = c[3].mul_add(x2, c[2]);
        let hi = c[5].mul_add(x2, c[4]);
        let r = hi.mul_add(x4, mid).mul_add(x4, lo);
        // x·2/√π rounded once, the rest (at most a quarter of it) added.
        return x.mul_add(ERF_C0[0], x * x2.mul_add(r, ERF_C0[1]));
    }
    if a.is_nan() {
        return x;
    }
    let z = a.min(ERF_ONE);
    let u = 1.0 / z.mul_add(0.5, 1.0);
    let erfc = exp_core(-(z * z)) * u * erfc_scaled(u);
    (1.0 - erfc).copysign(x)
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

/// `S(u)` ([`GELU_S`]) by Estrin's scheme, as the vector code.
#[inline(always)]
fn erfc_scaled(u: f32) -> f32 {
    let (u2, c) = (u * u, GELU_S);
    let u4 = u2 * u2;
    let p = |i: usize| c[i + 1].mul_add(u, c[i]);
    let q0 = p(2).mul_add(u2, p(0));
    let q4 = p(6).mul_add(u2, p(4));
    let lo = q4.mul_add(u4, q0);
    (p(8) * u4).mul_add(u4, lo)
}

/// Below this GELU is -0 (`|GELU(x)| < 8e-38`, and `Φ(x)` is subnormal).
pub(crate) const GELU_LOW: f32 = -13.0;

/// Above this `Φ(x)` rounds to 1 in f32 (`1 - Φ(9) ≈ 1e-19`), so GELU is
/// `x`; the tail is computed at this bound, where it is still normal.
pub(crate) const GELU_HIGH: f32 = 9.0;

/// `1/(2√2)`: `u = 1/(1 + z/2)` with `z = |x|/√2`.
pub(crate) const GELU_D: f32 = 0.353_553_4;

/// `GELU(x) = x·Φ(x)` in f32 by its tail form (what [`gelu_f32`] computes
/// outside its table, and the AVX2 code everywhere), `Φ` the standard
/// normal CDF, from
/// `erfc(|x|/√2) = e^{-x²/2} · S(u) · u` without cancellation on either
/// side: `Φ = erfc/2` for `x < 0` (the tail keeps its relative accuracy,
/// where `x/2·(1 + erf(x/√2))` loses it) and `1 - erfc/2` above. `x²/2` is
/// carried exactly as a sum of two floats (an FMA gives the low part) and
/// `u` with its rounding residue, so the tail's error stays at a few ulp
/// (the tests hold it to 5e-7 relative). Non-finite inputs take the f64
/// reference.
///
/// Below [`GELU_LOW`] the result is -0 and above [`GELU_HIGH`] it is `x`,
/// computed from the bound (where `Φ` already rounds to 1): there the
/// tail would leave the normal range, which costs a microcode assist per
/// vector on x86 (a 384→768 convolution with GELU whose outputs spread to
/// ±20 ran several times slower). Only the sliver just above the low
/// bound, whose results are still normal, computes subnormal intermediates.
#[inline(always)]
pub(crate) fn gelu_tail_form(x: f32) -> f32 {
    if !x.is_finite() {
        return gelu_f64(x as f64) as f32;
    }
    if x < GELU_LOW {
        return -0.0;
    }
    let x_in = x;
    let x = x.min(GELU_HIGH);
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
    let q = e * u * erfc_scaled(u);
    let tail = 0.5 * q.mul_add(corr, q);
    x_in * if x < 0.0 { tail } else { 1.0 - tail }
}

/// The interval of [`GELU_PHI`] that holds `x` and `x`'s offset from its
/// centre, or `None` outside [-4, 4) (and for NaN). The interval comes from
/// `x·4 + 16` rounded once, so near a boundary it may be the neighbour,
/// whose polynomial holds there too; the vector code finds the same one.
#[inline(always)]
pub(crate) fn gelu_table_position(x: f32) -> Option<(usize, f32)> {
    let f = x.mul_add(GELU_TABLE_SCALE, GELU_TABLE_BIAS);
    if !(0.0..32.0).contains(&f) {
        return None;
    }
    let i = f as usize;
    let centre = (i as f32).mul_add(1.0 / GELU_TABLE_SCALE, GELU_TABLE_FIRST_CENTRE);
    Some((i, x - centre))
}

/// `GELU(x) = x·Φ(x)` in f32: on [-4, 4) (where nearly all of a model's
/// pre-activations lie) `x` times [`GELU_PHI`]'s polynomial for its
/// interval (Horner's scheme), with no exponential and no division; elsewhere
/// [`gelu_tail_form`]. Relative error within 5e-7 of the f64 reference on
/// both sides (the tests sweep the whole range). The AVX-512 code computes
/// exactly this; the AVX2 code computes [`gelu_tail_form`] everywhere
/// (eight-lane lookups into 32-entry tables cost it more than they save).
#[inline(always)]
pub(crate) fn gelu_f32(x: f32) -> f32 {
    match gelu_table_position(x) {
        Some((i, t)) => {
            let c = &GELU_PHI;
            let mut p = c[6][i];
            for row in c[..6].iter().rev() {
                p = p.mul_add(t, row[i]);
            }
            x * p
        }
        None => gelu_tail_form(x),
    }
}

/// `y = tanh(x)` by [`tanh_f32`] (vectorized when the CPU allows).
pub(crate) fn tanh_slice(x: &[f32], y: &mut [f32]) {
    if !vector::apply(VectorOp::Tanh, x, y) {
        map(x, y, tanh_f32)
    }
}

/// `y = erf(x)` (vectorized when the CPU allows).
pub(super) fn erf_slice(x: &[f32], y: &mut [f32]) {
    if !vector::apply(VectorOp::Erf, x, y) {
        map(x, y, erf_f32)
    }
}

/// `y = GELU(x)` by [`gelu_f32`], vectorized when the CPU allows (where
/// the table lookup is not one instruction, the vector code keeps the tail
/// form everywhere: see `lanes::gelu`).
pub(crate) fn gelu_slice(x: &[f32], y: &mut [f32]) {
    if !vector::apply(VectorOp::Gelu, x, y) {
        map(x, y, gelu_f32)
    }
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
