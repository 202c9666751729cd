//! AVX2+FMA versions of the hot f32 activations (`exp`, `sigmoid`, Swish,
//! `tanh`, `erf` and GELU), and an AVX-512 GELU.
//!
//! Same algorithm as the scalar code in `math.rs` (range reduction by
//! `ln 2`, degree-6 polynomial, exponent bits from the rounded multiple),
//! eight lanes at a time (the tail through a padded block); lanes outside
//! the polynomial's range go through the scalar functions. Results agree
//! with the scalar code to rounding (FMA contractions differ). `tanh` and
//! `erf` compute both of their branches (polynomial near zero, exp form
//! above) and blend them. Sixteen-lane forms of some are in `x86_512.rs`.
use core::arch::x86_64::*;

/// `[f(0), f(1), …, f(N - 1)]`: one step of `N` independent vectors'
/// computations, written one after another so that each step of every
/// vector comes before the next step of any, and the out-of-order core
/// overlaps their dependency chains.
macro_rules! each {
    (|$i:ident| $e:expr) => {
        core::array::from_fn(|$i| $e)
    };
}

/// `e^x` of eight lanes already clamped to [-87, 88].
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn exp8(x: __m256) -> __m256 {
    let [e] = exp_n([x]);
    e
}

/// [`exp8`] of `N` vectors, interleaved (see [`each`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_n<const N: usize>(x: [__m256; N]) -> [__m256; N] {
    let (p, t) = exp_parts_n(x);
    each!(|i| _mm256_mul_ps(p[i], pow2(t[i], 0)))
}

/// `e^x = p · 2^n` of `N` vectors: the polynomial `p` of the reduced
/// argument and `t`, the shifted round number whose low bits hold `n`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_parts_n<const N: usize>(x: [__m256; N]) -> ([__m256; N], [__m256; N]) {
    let c = |v: f32| _mm256_set1_ps(v);
    let magic = c(12582912.0);
    let t: [__m256; N] = each!(|i| _mm256_fmadd_ps(x[i], c(core::f32::consts::LOG2_E), magic));
    let n: [__m256; N] = each!(|i| _mm256_sub_ps(t[i], magic));
    let r: [__m256; N] = each!(|i| _mm256_fnmadd_ps(n[i], c(0.693_145_75), x[i]));
    let r: [__m256; N] = each!(|i| _mm256_fnmadd_ps(n[i], c(1.428_606_8e-6), r[i]));
    // Estrin's scheme, as the scalar code: Horner's seven dependent steps
    // bounded the loops (`kernel_bench`, Zen 1: exp 1.65 → 1.51 ns per
    // value, GELU 4.01 → 3.74).
    let [c2, c3, c4, c5, c6] = super::math::EXP_POLY;
    let r2: [__m256; N] = each!(|i| _mm256_mul_ps(r[i], r[i]));
    let a: [__m256; N] = each!(|i| _mm256_fmadd_ps(c(c3), r[i], c(c2)));
    let b: [__m256; N] = each!(|i| _mm256_fmadd_ps(c(c5), r[i], c(c4)));
    let lo: [__m256; N] = each!(|i| _mm256_add_ps(r[i], c(1.0)));
    let q: [__m256; N] = each!(|i| _mm256_fmadd_ps(c(c6), r2[i], b[i]));
    let q: [__m256; N] = each!(|i| _mm256_fmadd_ps(q[i], r2[i], a[i]));
    (each!(|i| _mm256_fmadd_ps(q[i], r2[i], lo[i])), t)
}

/// `2^(n + extra)` from [`exp_parts_n`]'s `t` (a normal float: the caller
/// keeps `n + extra` in [-126, 127]).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn pow2(t: __m256, extra: i32) -> __m256 {
    let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40_0000));
    _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        ni,
        _mm256_set1_epi32(127 + extra),
    )))
}

/// [`super::math::sigmoid_far`] of eight lanes (`e^z` for `z <= -87`,
/// clamped at -104; other lanes are meaningless), with no multiply that
/// rounds to a subnormal (with one, such lanes ran at 1.47 ns per value
/// against 0.76 on the Zen 4 machine, `kernel_bench` "sigmoid far" on the
/// AVX2 path): below `2^-125` a float's bits, read as an integer, count
/// steps of `2^-149`, so `p · 2^n` rounded to that grid is
/// `p · 2^(n + 149)` (exact, normal) rounded to an integer, ties to even,
/// the rounding `p · 2^n` itself would get.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn sigmoid_far8(z: __m256) -> __m256 {
    let ([p], [t]) = exp_parts_n([_mm256_max_ps(z, _mm256_set1_ps(-104.0))]);
    _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(p, pow2(t, 149))))
}

/// [`swish8`] of `N ≤ 4` vectors, interleaved (see [`each`]); bits
/// `8i..8i + 8` of the mask are vector `i`'s lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn swish_n<const N: usize>(neg_alpha: __m256, x: [__m256; N]) -> ([__m256; N], i32) {
    let (d, bad) = sigmoid_denominator_n::<N>(each!(|i| _mm256_mul_ps(x[i], neg_alpha)));
    (each!(|i| _mm256_div_ps(x[i], d[i])), bad)
}

/// `1 + e^w` of eight lanes, the denominator of `sigmoid(-w)`, with `w`
/// clamped to [-87, 87] for the exponential; also returns the lanes that need
/// the scalar path (`w >= 87`, that is `sigmoid`'s argument `<= -87`, or
/// NaN) as a bit mask.
///
/// `sigmoid(z) = 1 / (1 + e^-z)` and `z · sigmoid(z) = z / (1 + e^-z)` then
/// take one division and no sign split: for `z < 0` the exponential exceeds
/// one and its rounding error is damped, not amplified, by the sum.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn sigmoid_denominator8(w: __m256) -> (__m256, i32) {
    let ([d], bad) = sigmoid_denominator_n([w]);
    (d, bad)
}

/// [`sigmoid_denominator8`] of `N ≤ 4` vectors, interleaved (see
/// [`each`]); bits `8i..8i + 8` of the mask are vector `i`'s lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sigmoid_denominator_n<const N: usize>(w: [__m256; N]) -> ([__m256; N], i32) {
    let c = |v: f32| _mm256_set1_ps(v);
    let mut bad = 0;
    for (i, &v) in w.iter().enumerate() {
        bad |= _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NLT_UQ>(v, c(87.0))) << (8 * i);
    }
    // Clamped at 87, where the flagged lanes start: their quotients stay
    // normal (a subnormal quotient cost about 4 cycles per lane on the Zen
    // 4 machine), the others are unchanged.
    let e = exp_n::<N>(each!(|i| _mm256_min_ps(
        _mm256_max_ps(w[i], c(-87.0)),
        c(87.0)
    )));
    (each!(|i| _mm256_add_ps(c(1.0), e[i])), bad)
}

/// `sigmoid(z)` of eight lanes and the lanes that need the scalar path
/// (NaN).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn sigmoid8(z: __m256) -> (__m256, i32) {
    let (d, bad) = sigmoid_denominator8(_mm256_xor_ps(z, _mm256_set1_ps(-0.0)));
    let v = _mm256_div_ps(_mm256_set1_ps(1.0), d);
    if bad == 0 {
        return (v, 0);
    }
    // Lanes at or below -87 ([`super::math::sigmoid_far`]) here; only NaN
    // goes to the scalar path.
    let far = _mm256_cmp_ps::<_CMP_LE_OQ>(z, _mm256_set1_ps(-87.0));
    let v = _mm256_blendv_ps(v, sigmoid_far8(z), far);
    (v, _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(z, z)))
}

/// `x · sigmoid(alpha · x)` of eight lanes (`neg_alpha` = `-alpha`) and the
/// lanes that need the scalar path.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn swish8(neg_alpha: __m256, x: __m256) -> (__m256, i32) {
    let ([v], bad) = swish_n(neg_alpha, [x]);
    (v, bad)
}

/// One block of eight: `lanes`, then `fix(v)` for the lanes whose mask
/// bit is set.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn block8(
    xb: &[f32; 8],
    lanes: &impl Fn(__m256) -> (__m256, i32),
    fix: &impl Fn(f32) -> f32,
) -> [f32; 8] {
    let mut yb = [0f32; 8];
    // SAFETY: both arrays hold exactly 8 floats.
    let (v, mask) = lanes(unsafe { _mm256_loadu_ps(xb.as_ptr()) });
    // SAFETY: as above.
    unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), v) };
    if mask != 0 {
        for i in 0..8 {
            if mask & (1 << i) != 0 {
                yb[i] = fix(xb[i]);
            }
        }
    }
    yb
}

/// `y[i] = fix(x[i])` for the lanes whose bit is set in `mask`.
#[inline(always)]
fn fix_lanes(mask: i32, x: &[f32], y: &mut [f32], fix: &impl Fn(f32) -> f32) {
    for (i, (yi, &xi)) in y.iter_mut().zip(x).enumerate().take(8) {
        if mask & (1 << i) != 0 {
            *yi = fix(xi);
        }
    }
}

/// Applies `lanes` to `x` in blocks of eight into `y` (see [`block8`]).
/// The tail goes through a zero-padded block, so every element gets the
/// same arithmetic wherever it sits (the result does not depend on how a
/// tensor is split into calls).
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn blocks(
    x: &[f32],
    y: &mut [f32],
    lanes: impl Fn(__m256) -> (__m256, i32),
    fix: impl Fn(f32) -> f32,
) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    // Two blocks per step (their dependency chains overlap) on the fast
    // path; blocks with flagged lanes and the last < 16 elements go through
    // `padded_blocks`. Fixing lanes here after the stores would make the
    // compiler load every `x` lane ahead of them on the fast path too (it
    // cannot tell `y` does not alias `x`).
    let pairs = n - n % 16;
    for (xb, yb) in x[..pairs]
        .chunks_exact(16)
        .zip(y[..pairs].chunks_exact_mut(16))
    {
        // SAFETY: both chunks hold exactly 16 floats.
        let (v0, m0) = lanes(unsafe { _mm256_loadu_ps(xb.as_ptr()) });
        // SAFETY: as above.
        let (v1, m1) = lanes(unsafe { _mm256_loadu_ps(xb.as_ptr().add(8)) });
        if (m0 | m1) == 0 {
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), v0) };
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(yb.as_mut_ptr().add(8), v1) };
        } else {
            padded_blocks(xb, yb, &lanes, &fix);
        }
    }
    padded_blocks(&x[pairs..], &mut y[pairs..], &lanes, &fix);
}

/// [`block8`] over `x` in blocks of eight, the last one zero-padded.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline(never)]
#[target_feature(enable = "avx2,fma")]
fn padded_blocks(
    x: &[f32],
    y: &mut [f32],
    lanes: &impl Fn(__m256) -> (__m256, i32),
    fix: &impl Fn(f32) -> f32,
) {
    for (xb, yb) in x.chunks(8).zip(y.chunks_mut(8)) {
        let mut t = [0f32; 8];
        t[..xb.len()].copy_from_slice(xb);
        let r = block8(&t, lanes, fix);
        yb.copy_from_slice(&r[..yb.len()]);
    }
}

/// `y = x · sigmoid(alpha · x)`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn swish(alpha: f32, x: &[f32], y: &mut [f32]) {
    let neg_alpha = _mm256_set1_ps(-alpha);
    blocks_wide::<SWISH_WIDTH>(
        x,
        y,
        |v| swish_n(neg_alpha, v),
        |v| swish8(neg_alpha, v),
        |v| v * super::sigmoid(alpha * v),
    );
}

/// `y = sigmoid(x)`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn sigmoid(x: &[f32], y: &mut [f32]) {
    blocks(x, y, |v| sigmoid8(v), super::sigmoid);
}

/// `tanh` of eight lanes: [`super::math::tanh_f32`], both branches
/// computed and blended; NaN lanes are flagged for the scalar path.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn tanh8(x: __m256) -> (__m256, i32) {
    use super::math::{TANH_SMALL, TANH_SPLIT};
    let c = |v: f32| _mm256_set1_ps(v);
    let one = c(1.0);
    let sign = _mm256_and_ps(x, c(-0.0));
    let abs = _mm256_andnot_ps(c(-0.0), x);
    let x2 = _mm256_mul_ps(x, x);
    let k = TANH_SMALL;
    let mut q = c(k[4]);
    for &a in k[..4].iter().rev() {
        q = _mm256_add_ps(_mm256_mul_ps(q, x2), c(a));
    }
    let small = _mm256_add_ps(x, _mm256_mul_ps(_mm256_mul_ps(x, x2), q));
    let t = exp8(_mm256_mul_ps(c(2.0), _mm256_min_ps(abs, c(20.0))));
    let big = _mm256_sub_ps(one, _mm256_div_ps(c(2.0), _mm256_add_ps(t, one)));
    let big = _mm256_or_ps(big, sign);
    let r = _mm256_blendv_ps(big, small, _mm256_cmp_ps::<_CMP_LT_OQ>(abs, c(TANH_SPLIT)));
    (r, _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x)))
}

/// `y = tanh(x)`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tanh(x: &[f32], y: &mut [f32]) {
    blocks(x, y, |v| tanh8(v), super::math::tanh_f32);
}

/// `e^v` of eight lanes, with the lanes in [-104, -87] or at or above 88
/// (or NaN) flagged for the scalar path. Below -104 the exact result rounds
/// to zero (`e^-104` is under half the smallest subnormal), so those lanes
/// are zero here, as `f32::exp` gives: masked attention scores (-10000)
/// and the like stay in the vector.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_lanes(v: __m256) -> (__m256, i32) {
    let lo = _mm256_set1_ps(-87.0);
    let c = _mm256_min_ps(_mm256_max_ps(v, lo), _mm256_set1_ps(88.0));
    let zero = _mm256_cmp_ps::<_CMP_LT_OQ>(v, _mm256_set1_ps(-104.0));
    let out = _mm256_or_ps(
        _mm256_or_ps(
            _mm256_andnot_ps(zero, _mm256_cmp_ps::<_CMP_LE_OQ>(v, lo)),
            _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(88.0)),
        ),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v),
    );
    (_mm256_andnot_ps(zero, exp8(c)), _mm256_movemask_ps(out))
}

/// [`exp_lanes`] for softmax's numerators: lanes below
/// [`super::math::EXP_SHIFTED_FLUSH`] give 0 (none is flagged for the
/// scalar path, which leaves NaN and overflow).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_lanes_flushed(v: __m256) -> (__m256, i32) {
    let lo = _mm256_set1_ps(super::math::EXP_SHIFTED_FLUSH);
    let c = _mm256_min_ps(_mm256_max_ps(v, lo), _mm256_set1_ps(88.0));
    let zero = _mm256_cmp_ps::<_CMP_LT_OQ>(v, lo);
    let out = _mm256_or_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(88.0)),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v),
    );
    (_mm256_andnot_ps(zero, exp8(c)), _mm256_movemask_ps(out))
}

/// `y = e^x`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn exp(x: &[f32], y: &mut [f32]) {
    blocks(x, y, |v| exp_lanes(v), f32::exp);
}

/// `y = e^(x - shift)` (softmax's numerators), returning the sum of `y`
/// (eight running lane sums, then the tail). The tail goes through a block
/// padded with `shift`, so each element gets the vector arithmetic.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn exp_shifted(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let vs = _mm256_set1_ps(shift);
    // Called with exactly eight floats.
    let one_block = |xb: &[f32]| -> __m256 {
        // SAFETY: `xb` holds eight floats.
        let d = _mm256_sub_ps(unsafe { _mm256_loadu_ps(xb.as_ptr()) }, vs);
        let (e, mask) = exp_lanes_flushed(d);
        if mask == 0 {
            return e;
        }
        let mut t = [0f32; 8];
        // SAFETY: `t` holds 8 floats.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), e) };
        fix_lanes(mask, xb, &mut t, &|v| (v - shift).exp());
        // SAFETY: as above.
        unsafe { _mm256_loadu_ps(t.as_ptr()) }
    };
    let full = n - n % 8;
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x[..full].chunks_exact(8).zip(y[..full].chunks_exact_mut(8)) {
        let e = one_block(xb);
        // SAFETY: the chunk holds exactly 8 floats.
        unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), e) };
        acc = _mm256_add_ps(acc, e);
    }
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    let mut sum: f32 = lanes.iter().sum();
    if full < n {
        let mut xt = [shift; 8];
        xt[..n - full].copy_from_slice(&x[full..]);
        let mut t = [0f32; 8];
        // SAFETY: `t` holds 8 floats.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), one_block(&xt)) };
        y[full..].copy_from_slice(&t[..n - full]);
        sum += t[..n - full].iter().sum::<f32>();
    }
    sum
}

/// [`blocks`] reading and writing the same slice (an epilogue's output).
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn blocks_in_place(
    y: &mut [f32],
    lanes: impl Fn(__m256) -> (__m256, i32),
    fix: impl Fn(f32) -> f32,
) {
    let n = y.len();
    let full = n - n % 8;
    for yb in y[..full].chunks_exact_mut(8) {
        // SAFETY: the chunk holds exactly 8 floats.
        let xv = unsafe { _mm256_loadu_ps(yb.as_ptr()) };
        let (v, mask) = lanes(xv);
        if mask != 0 {
            let mut xb = [0f32; 8];
            // SAFETY: `xb` holds 8 floats.
            unsafe { _mm256_storeu_ps(xb.as_mut_ptr(), xv) };
            // SAFETY: the chunk holds exactly 8 floats.
            unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), v) };
            fix_lanes(mask, &xb, yb, &fix);
        } else {
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), v) };
        }
    }
    if full < n {
        let mut t = [0f32; 8];
        t[..n - full].copy_from_slice(&y[full..]);
        y[full..].copy_from_slice(&block8(&t, &lanes, &fix)[..n - full]);
    }
}

/// [`blocks`] taking `N` vectors per step through `wide` (their chains
/// interleaved), the rest through `lanes`; a step with flagged lanes goes
/// through [`padded_blocks`]. Every element gets the same arithmetic
/// either way.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn blocks_wide<const N: usize>(
    x: &[f32],
    y: &mut [f32],
    wide: impl Fn([__m256; N]) -> ([__m256; N], i32),
    lanes: impl Fn(__m256) -> (__m256, i32),
    fix: impl Fn(f32) -> f32,
) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let main = n - n % (8 * N);
    for (xb, yb) in x[..main]
        .chunks_exact(8 * N)
        .zip(y[..main].chunks_exact_mut(8 * N))
    {
        // SAFETY: the chunk holds 8·N floats.
        let (v, mask) = wide(each!(|i| unsafe {
            _mm256_loadu_ps(xb.as_ptr().add(8 * i))
        }));
        if mask == 0 {
            for (i, v) in v.iter().enumerate() {
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(yb.as_mut_ptr().add(8 * i), *v) };
            }
        } else {
            padded_blocks(xb, yb, &lanes, &fix);
        }
    }
    blocks(&x[main..], &mut y[main..], lanes, fix);
}

/// [`blocks_wide`] reading and writing the same slice.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn blocks_wide_in_place<const N: usize>(
    y: &mut [f32],
    wide: impl Fn([__m256; N]) -> ([__m256; N], i32),
    lanes: impl Fn(__m256) -> (__m256, i32),
    fix: impl Fn(f32) -> f32,
) {
    let n = y.len();
    let main = n - n % (8 * N);
    for yb in y[..main].chunks_exact_mut(8 * N) {
        // SAFETY: the chunk holds 8·N floats.
        let (v, mask) = wide(each!(|i| unsafe {
            _mm256_loadu_ps(yb.as_ptr().add(8 * i))
        }));
        if mask == 0 {
            for (i, v) in v.iter().enumerate() {
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(yb.as_mut_ptr().add(8 * i), *v) };
            }
        } else {
            // Nothing stored yet: the chunk again, eight lanes at a time.
            blocks_in_place(yb, &lanes, &fix);
        }
    }
    blocks_in_place(&mut y[main..], lanes, fix);
}

/// Vectors per step of [`swish`] and [`swish_in_place`] (`kernel_bench`,
/// Zen 1, Swish over 8192 floats: 1.64 ns per value one at a time, 1.59
/// four at a time).
const SWISH_WIDTH: usize = 4;

/// [`swish`] in place.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn swish_in_place(alpha: f32, y: &mut [f32]) {
    let neg_alpha = _mm256_set1_ps(-alpha);
    blocks_wide_in_place::<SWISH_WIDTH>(
        y,
        |v| swish_n(neg_alpha, v),
        |v| swish8(neg_alpha, v),
        |v| v * super::sigmoid(alpha * v),
    );
}

/// [`sigmoid`] in place.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn sigmoid_in_place(y: &mut [f32]) {
    blocks_in_place(y, |v| sigmoid8(v), super::sigmoid);
}

/// `S(u)` of [`super::math::GELU_S`] in eight lanes, by Estrin's scheme
/// (short dependency chains), the order of the scalar code.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn erfc_scaled8(u: __m256) -> __m256 {
    use super::math::GELU_S;
    let c = |v: f32| _mm256_set1_ps(v);
    let u2 = _mm256_mul_ps(u, u);
    let u4 = _mm256_mul_ps(u2, u2);
    let p = |i: usize| _mm256_fmadd_ps(c(GELU_S[i + 1]), u, c(GELU_S[i]));
    let (p0, p2, p4, p6, p8) = (p(0), p(2), p(4), p(6), p(8));
    let q0 = _mm256_fmadd_ps(p2, u2, p0);
    let q4 = _mm256_fmadd_ps(p6, u2, p4);
    let lo = _mm256_fmadd_ps(q4, u4, q0);
    _mm256_fmadd_ps(_mm256_mul_ps(p8, u4), u4, lo)
}

/// `erf` of eight lanes: [`super::math::erf_f32`], both of its branches
/// computed and blended; NaN lanes are flagged for the scalar path.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn erf8(x: __m256) -> (__m256, i32) {
    use super::math::{ERF_C0, ERF_ONE, ERF_SMALL};
    let c = |v: f32| _mm256_set1_ps(v);
    let one = c(1.0);
    let sign = _mm256_and_ps(x, c(-0.0));
    let abs = _mm256_andnot_ps(c(-0.0), x);
    // |x| < 1: x·(2/√π + x²·R(x²)).
    let x2 = _mm256_mul_ps(x, x);
    let x4 = _mm256_mul_ps(x2, x2);
    let k = ERF_SMALL;
    let lo = _mm256_fmadd_ps(c(k[1]), x2, c(k[0]));
    let mid = _mm256_fmadd_ps(c(k[3]), x2, c(k[2]));
    let hi = _mm256_fmadd_ps(c(k[5]), x2, c(k[4]));
    let r = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, x4, mid), x4, lo);
    let rest = _mm256_mul_ps(x, _mm256_fmadd_ps(x2, r, c(ERF_C0[1])));
    let small = _mm256_fmadd_ps(x, c(ERF_C0[0]), rest);
    // Else ±(1 - e^{-z²}·u·S(u)).
    let z = _mm256_min_ps(abs, c(ERF_ONE));
    let u = _mm256_div_ps(one, _mm256_fmadd_ps(z, c(0.5), one));
    let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(z, z)));
    let erfc = _mm256_mul_ps(_mm256_mul_ps(e, u), erfc_scaled8(u));
    let big = _mm256_or_ps(_mm256_sub_ps(one, erfc), sign);
    let r = _mm256_blendv_ps(big, small, _mm256_cmp_ps::<_CMP_LT_OQ>(abs, one));
    (r, _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x)))
}

/// `y = erf(x)`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn erf(x: &[f32], y: &mut [f32]) {
    blocks(x, y, |v| erf8(v), super::math::erf_f32);
}

/// `GELU(x)` of eight lanes: [`super::math::gelu_tail_form`], lane for
/// lane; non-finite lanes are flagged for the scalar path.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn gelu8(x_in: __m256) -> (__m256, i32) {
    use super::math::{GELU_D, GELU_HIGH, GELU_LOW};
    let c = |v: f32| _mm256_set1_ps(v);
    let one = c(1.0);
    // Bad lanes are judged by the input. The rest are computed at most
    // at the high bound (`min` returns its second operand, NaN, when
    // either is NaN), and lanes below the low bound at 0, whose result is
    // then dropped (at the bound itself the tail is already subnormal).
    let bad = _mm256_cmp_ps::<_CMP_NLT_UQ>(_mm256_andnot_ps(c(-0.0), x_in), c(f32::INFINITY));
    let low = _mm256_cmp_ps::<_CMP_LT_OQ>(x_in, c(GELU_LOW));
    let x = _mm256_andnot_ps(low, _mm256_min_ps(c(GELU_HIGH), x_in));
    let abs = _mm256_andnot_ps(c(-0.0), x);
    // d = 1 + |x|/(2√2) and its rounding residue (d - 1 is exact).
    let d = _mm256_fmadd_ps(abs, c(GELU_D), one);
    let d_lo = _mm256_fmsub_ps(abs, c(GELU_D), _mm256_sub_ps(d, one));
    let u = _mm256_div_ps(one, d);
    // x² = sq + sq_lo.
    let sq = _mm256_mul_ps(x, x);
    let sq_lo = _mm256_fmsub_ps(x, x, sq);
    let e = exp8(_mm256_max_ps(_mm256_mul_ps(sq, c(-0.5)), c(-87.0)));
    // First-order corrections: u's division and d's rounding, the low part
    // of x²/2.
    let r = _mm256_fnmadd_ps(u, d, one);
    let corr = _mm256_fnmadd_ps(u, d_lo, r);
    let corr = _mm256_fnmadd_ps(c(0.5), sq_lo, corr);
    let q = _mm256_mul_ps(_mm256_mul_ps(e, u), erfc_scaled8(u));
    let tail = _mm256_mul_ps(c(0.5), _mm256_fmadd_ps(q, corr, q));
    let neg = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_setzero_ps());
    let phi = _mm256_blendv_ps(_mm256_sub_ps(one, tail), tail, neg);
    // Below the low bound: x·0 = -0.
    let phi = _mm256_andnot_ps(low, phi);
    (_mm256_mul_ps(x_in, phi), _mm256_movemask_ps(bad))
}

/// [`gelu`] in place.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn gelu_in_place(y: &mut [f32]) {
    blocks_in_place(y, |v| gelu8(v), super::math::gelu_tail_form);
}

/// `y = GELU(x)` ([`super::math::gelu_tail_form`] eight lanes at a time:
/// the AVX2 code keeps the tail form everywhere, see
/// [`super::math::gelu_f32`]).
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn gelu(x: &[f32], y: &mut [f32]) {
    blocks(x, y, |v| gelu8(v), super::math::gelu_tail_form);
}
