//! The vector forms of `math.rs`'s f32 activations, written once over
//! [`Simd`]: the same algorithms (range reduction by `ln 2`, the degree-6
//! polynomial, the exponent built from the rounded multiple; both branches
//! of `tanh` and `erf` computed and blended), one vector at a time. Each
//! returns its result and the bits of the lanes that need the scalar path
//! (out of the polynomial's range, NaN): the loops in `vector.rs` fix
//! those lanes with the scalar function.
//!
//! Results agree with the scalar code to rounding (FMA contractions
//! differ); every backend does the same operations in the same order, so
//! AVX-512 and AVX2 give the same bits (the tests check it), and an element
//! gets the same bits wherever it sits in a slice.
//!
//! No closures here or in the loops that call these: a closure is a
//! function of its own, compiled without the backend's target features, and
//! when the compiler leaves one out of line every intrinsic in it becomes a
//! call. Only `#[inline(always)]` functions reliably land in the backend's
//! entry point.
use super::super::math::{
    ERF_C0, ERF_ONE, ERF_SMALL, EXP_POLY, EXP_SHIFTED_FLUSH, GELU_D, GELU_HIGH, GELU_LOW, GELU_PHI,
    GELU_S, GELU_TABLE_BIAS, GELU_TABLE_FIRST_CENTRE, GELU_TABLE_SCALE, TANH_SMALL, TANH_SPLIT,
};
use crate::simd::Simd;

/// `e^x = p · 2^n`: the polynomial `p` of the reduced argument (about
/// [0.7, 1.42]) and the whole number `n`, for `x` in [-87, 88] (or -104
/// for [`sigmoid_far`]). `exact`: every step one fused rounding, as the
/// scalar [`super::super::math::sigmoid_far`] (which must match bit for
/// bit); else [`Simd::mul_add_approx`] steps, the same on FMA backends and
/// far cheaper on wasm.
#[inline(always)]
fn exp_parts<S: Simd>(s: S, x: S::F32, exact: bool) -> (S::F32, S::F32) {
    let magic = s.splat(12582912.0);
    let t = madd(s, exact, x, s.splat(core::f32::consts::LOG2_E), magic);
    let n = s.sub(t, magic);
    let neg_n = s.xor(n, s.splat(-0.0));
    let r = madd(s, exact, neg_n, s.splat(0.693_145_75), x);
    let r = madd(s, exact, neg_n, s.splat(1.428_606_8e-6), r);
    // Estrin's scheme, as the scalar code: Horner's seven dependent steps
    // bound the loops.
    let [c2, c3, c4, c5, c6] = EXP_POLY;
    let r2 = s.mul(r, r);
    let a = madd(s, exact, s.splat(c3), r, s.splat(c2));
    let b = madd(s, exact, s.splat(c5), r, s.splat(c4));
    let lo = s.add(r, s.splat(1.0));
    let q = madd(s, exact, s.splat(c6), r2, b);
    let q = madd(s, exact, q, r2, a);
    (madd(s, exact, q, r2, lo), n)
}

/// `a · b + c`: fused when `exact`, else [`Simd::mul_add_approx`].
#[inline(always)]
fn madd<S: Simd>(s: S, exact: bool, a: S::F32, b: S::F32, c: S::F32) -> S::F32 {
    if exact {
        s.mul_add(a, b, c)
    } else {
        s.mul_add_approx(a, b, c)
    }
}

/// `e^x` for `x` already clamped to [-87, 88].
#[inline(always)]
pub(super) fn exp_clamped<S: Simd>(s: S, x: S::F32) -> S::F32 {
    let (p, n) = exp_parts(s, x, false);
    s.ldexp(p, n)
}

/// [`super::super::math::sigmoid_far`] (`e^z` for `z <= -87`, clamped at -104;
/// other lanes are meaningless) with no arithmetic that produces a
/// subnormal, which costs a microcode assist per vector on many x86 cores:
/// below `2^-125` a float's bits, read as an integer, count steps of
/// `2^-149`, so `p · 2^n` rounded to that grid is `p · 2^(n + 149)` (exact,
/// normal) rounded to an integer, ties to even, the rounding `p · 2^n`
/// itself would get.
#[inline(always)]
fn sigmoid_far<S: Simd>(s: S, z: S::F32) -> S::F32 {
    let (p, n) = exp_parts(s, s.max(z, s.splat(-104.0)), true);
    s.round_to_bits(s.ldexp(p, s.add(n, s.splat(149.0))))
}

/// `e^v`, lanes below -104 zero (the exact result rounds to zero there, as
/// `f32::exp` gives: masked attention scores of -10000 stay in the vector);
/// lanes in [-104, -87], at or above 88, or NaN flagged.
#[inline(always)]
pub(super) fn exp<S: Simd>(s: S, v: S::F32) -> (S::F32, u32) {
    let lo = s.splat(-87.0);
    let hi = s.splat(88.0);
    let clamped = s.min(s.max(v, lo), hi);
    let zero = s.lt(v, s.splat(-104.0));
    let out = s.mask_or(
        s.mask_or(s.mask_and_not(zero, s.le(v, lo)), s.ge(v, hi)),
        s.unordered(v, v),
    );
    let e = s.clear(zero, exp_clamped(s, clamped));
    (e, s.bits(out))
}

/// `e^d` for softmax's numerators: lanes below [`EXP_SHIFTED_FLUSH`] give
/// 0 (no lane underflows, so none takes a microcode assist); lanes at or
/// above 88 and NaN flagged.
#[inline(always)]
pub(super) fn exp_flushed<S: Simd>(s: S, d: S::F32) -> (S::F32, u32) {
    let lo = s.splat(EXP_SHIFTED_FLUSH);
    let hi = s.splat(88.0);
    let clamped = s.min(s.max(d, lo), hi);
    let zero = s.lt(d, lo);
    let out = s.mask_or(s.ge(d, hi), s.unordered(d, d));
    let e = s.clear(zero, exp_clamped(s, clamped));
    (e, s.bits(out))
}

/// `1 + e^w`, the denominator of `sigmoid(-w)`, with `w` clamped to
/// [-87, 87] for the exponential, and the lanes that need the scalar path
/// (`w >= 87`, that is `sigmoid`'s argument `<= -87`, or NaN).
///
/// `sigmoid(z) = 1 / (1 + e^-z)` and `z · sigmoid(z) = z / (1 + e^-z)` then
/// take one division and no sign split: for `z < 0` the exponential exceeds
/// one and its rounding error is damped, not amplified, by the sum.
#[inline(always)]
fn sigmoid_denominator<S: Simd>(s: S, w: S::F32) -> (S::F32, S::Mask) {
    let bad = s.not_lt(w, s.splat(87.0));
    // Clamped at 87, where the flagged lanes start: their quotients stay
    // normal (a subnormal quotient costs several cycles per lane).
    let e = exp_clamped(s, s.min(s.max(w, s.splat(-87.0)), s.splat(87.0)));
    (s.add(s.splat(1.0), e), bad)
}

/// `sigmoid(z)`: lanes at or below -87 through [`sigmoid_far`], only NaN
/// lanes flagged.
#[inline(always)]
pub(super) fn sigmoid<S: Simd>(s: S, z: S::F32) -> (S::F32, u32) {
    let (d, bad) = sigmoid_denominator(s, s.xor(z, s.splat(-0.0)));
    let v = s.div(s.splat(1.0), d);
    if s.bits(bad) == 0 {
        return (v, 0);
    }
    let far = s.le(z, s.splat(-87.0));
    (
        s.select(far, sigmoid_far(s, z), v),
        s.bits(s.unordered(z, z)),
    )
}

/// `x · sigmoid(alpha · x)` (`neg_alpha` = `-alpha`).
#[inline(always)]
pub(super) fn swish<S: Simd>(s: S, neg_alpha: S::F32, x: S::F32) -> (S::F32, u32) {
    let (d, bad) = sigmoid_denominator(s, s.mul(x, neg_alpha));
    (s.div(x, d), s.bits(bad))
}

/// The sign bit of each lane and its magnitude: the odd functions
/// compute on `|x|` and put the sign back.
#[inline(always)]
fn sign_and_abs<S: Simd>(s: S, x: S::F32) -> (S::F32, S::F32) {
    let minus_zero = s.splat(-0.0);
    (s.and(x, minus_zero), s.and_not(minus_zero, x))
}

/// [`super::super::math::tanh_f32`], both branches computed and blended; NaN
/// lanes flagged.
#[inline(always)]
pub(super) fn tanh<S: Simd>(s: S, x: S::F32) -> (S::F32, u32) {
    let one = s.splat(1.0);
    let (sign, abs) = sign_and_abs(s, x);
    let x2 = s.mul(x, x);
    let k = TANH_SMALL;
    let mut q = s.splat(k[4]);
    for &a in k[..4].iter().rev() {
        q = s.add(s.mul(q, x2), s.splat(a));
    }
    let small = s.add(x, s.mul(s.mul(x, x2), q));
    let t = exp_clamped(s, s.mul(s.splat(2.0), s.min(abs, s.splat(20.0))));
    let big = s.sub(one, s.div(s.splat(2.0), s.add(t, one)));
    let big = s.or(big, sign);
    let r = s.select(s.lt(abs, s.splat(TANH_SPLIT)), small, big);
    (r, s.bits(s.unordered(x, x)))
}

/// `S(u)` of [`GELU_S`] by Estrin's scheme (short dependency chains), the
/// order of the scalar code.
#[inline(always)]
fn erfc_scaled<S: Simd>(s: S, u: S::F32) -> S::F32 {
    let u2 = s.mul(u, u);
    let u4 = s.mul(u2, u2);
    let k = GELU_S;
    let p0 = s.mul_add_approx(s.splat(k[1]), u, s.splat(k[0]));
    let p2 = s.mul_add_approx(s.splat(k[3]), u, s.splat(k[2]));
    let p4 = s.mul_add_approx(s.splat(k[5]), u, s.splat(k[4]));
    let p6 = s.mul_add_approx(s.splat(k[7]), u, s.splat(k[6]));
    let p8 = s.mul_add_approx(s.splat(k[9]), u, s.splat(k[8]));
    let q0 = s.mul_add_approx(p2, u2, p0);
    let q4 = s.mul_add_approx(p6, u2, p4);
    let lo = s.mul_add_approx(q4, u4, q0);
    s.mul_add_approx(s.mul(p8, u4), u4, lo)
}

/// [`super::super::math::erf_f32`], both of its branches computed and blended;
/// NaN lanes flagged.
#[inline(always)]
pub(super) fn erf<S: Simd>(s: S, x: S::F32) -> (S::F32, u32) {
    let one = s.splat(1.0);
    let (sign, abs) = sign_and_abs(s, x);
    // |x| < 1: x·(2/√π + x²·R(x²)).
    let x2 = s.mul(x, x);
    let x4 = s.mul(x2, x2);
    let k = ERF_SMALL;
    let lo = s.mul_add_approx(s.splat(k[1]), x2, s.splat(k[0]));
    let mid = s.mul_add_approx(s.splat(k[3]), x2, s.splat(k[2]));
    let hi = s.mul_add_approx(s.splat(k[5]), x2, s.splat(k[4]));
    let r = s.mul_add_approx(s.mul_add_approx(hi, x4, mid), x4, lo);
    let rest = s.mul(x, s.mul_add_approx(x2, r, s.splat(ERF_C0[1])));
    let small = s.mul_add(x, s.splat(ERF_C0[0]), rest);
    // Else ±(1 - e^{-z²}·u·S(u)).
    let z = s.min(abs, s.splat(ERF_ONE));
    let u = s.div(one, s.mul_add_approx(z, s.splat(0.5), one));
    let e = exp_clamped(s, s.sub(s.splat(0.0), s.mul(z, z)));
    let erfc = s.mul(s.mul(e, u), erfc_scaled(s, u));
    let big = s.or(s.sub(one, erfc), sign);
    let r = s.select(s.lt(abs, one), small, big);
    (r, s.bits(s.unordered(x, x)))
}

/// [`super::super::math::gelu_tail_form`], lane for lane; non-finite lanes
/// flagged.
#[inline(always)]
fn gelu_tail<S: Simd>(s: S, x_in: S::F32) -> (S::F32, u32) {
    let one = s.splat(1.0);
    // Bad lanes are judged by the input. The rest are computed at most at
    // the high bound (`min` returns its second operand, NaN, when either
    // is NaN), and lanes below the low bound at 0, whose result is then
    // dropped (at the bound itself the tail is already subnormal).
    let bad = s.not_lt(s.and_not(s.splat(-0.0), x_in), s.splat(f32::INFINITY));
    let low = s.lt(x_in, s.splat(GELU_LOW));
    let x = s.clear(low, s.min(s.splat(GELU_HIGH), x_in));
    let abs = s.and_not(s.splat(-0.0), x);
    // d = 1 + |x|/(2√2) and its rounding residue (d - 1 is exact).
    let d = s.mul_add(abs, s.splat(GELU_D), one);
    let d_lo = s.product_residue(abs, s.splat(GELU_D), s.sub(d, one));
    let u = s.div(one, d);
    // x² = sq + sq_lo.
    let sq = s.mul(x, x);
    let sq_lo = s.product_residue(x, x, sq);
    let e = exp_clamped(s, s.max(s.mul(sq, s.splat(-0.5)), s.splat(-87.0)));
    // First-order corrections: u's division and d's rounding, the low part
    // of x²/2.
    let r = s.neg_product_residue(u, d, one);
    let corr = s.neg_mul_add(u, d_lo, r);
    let corr = s.neg_mul_add(s.splat(0.5), sq_lo, corr);
    let q = s.mul(s.mul(e, u), erfc_scaled(s, u));
    let tail = s.mul(s.splat(0.5), s.mul_add(q, corr, q));
    let phi = s.select(s.lt(x, s.splat(0.0)), tail, s.sub(one, tail));
    // Below the low bound: x·0 = -0.
    let phi = s.clear(low, phi);
    (s.mul(x_in, phi), s.bits(bad))
}

/// `Φ(x)` from [`GELU_PHI`] and the lanes outside the table
/// ([`super::super::math::gelu_table_position`] and the polynomial of
/// [`super::super::math::gelu_f32`], lane for lane; those lanes hold garbage).
#[inline(always)]
fn gelu_phi<S: Simd>(s: S, x: S::F32) -> (S::F32, S::Mask) {
    let f = s.mul_add(x, s.splat(GELU_TABLE_SCALE), s.splat(GELU_TABLE_BIAS));
    // Inside is 0 <= f < 32, false for NaN (as the scalar range test).
    let outside = s.mask_or(s.lt(f, s.splat(0.0)), s.not_lt(f, s.splat(32.0)));
    // Inside, truncation is the scalar `f as usize`; outside the index is
    // garbage, and the lookups read only its low five bits.
    let idx = s.trunc_i32(f);
    let centre = s.mul_add(
        s.i32_to_f32(idx),
        s.splat(1.0 / GELU_TABLE_SCALE),
        s.splat(GELU_TABLE_FIRST_CENTRE),
    );
    let t = s.sub(x, centre);
    let mut p = s.lookup32(&GELU_PHI[6], idx);
    for row in GELU_PHI[..6].iter().rev() {
        p = s.mul_add(p, t, s.lookup32(row, idx));
    }
    (p, outside)
}

/// `GELU(x)`; non-finite lanes flagged (the scalar path is then
/// [`super::super::math::gelu_tail_form`]). Where the table lookup is one
/// instruction, [`super::super::math::gelu_f32`] lane for lane: the piecewise
/// polynomial on [-4, 4) (no exponential, no division), the tail form only
/// when a lane lies outside. Elsewhere the tail form everywhere, which
/// costs less than a lookup built of several instructions.
#[inline(always)]
pub(super) fn gelu<S: Simd>(s: S, x: S::F32) -> (S::F32, u32) {
    if !S::FAST_LOOKUP32 {
        return gelu_tail(s, x);
    }
    let (phi, outside) = gelu_phi(s, x);
    let y = s.mul(x, phi);
    if s.bits(outside) == 0 {
        return (y, 0);
    }
    let (tail, bad) = gelu_tail(s, x);
    (s.select(outside, tail, y), bad)
}
