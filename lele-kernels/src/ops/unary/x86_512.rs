//! AVX-512 forms of the hottest activations (sigmoid, Swish, GELU) and of
//! softmax's row operations,
//! sixteen lanes at a time, two vectors per step.
//!
//! Sigmoid and Swish lanes compute exactly what the eight-lane AVX2 code in
//! `x86.rs` computes (the same operations in the same order), so a result
//! does not depend on which of the two an element went through: chunks
//! with lanes that need the scalar path go through the AVX2 loops. That
//! keeps a fused epilogue (which sees a tensor in pieces) bit-identical to
//! the standalone kernel.
//!
//! GELU differs: on [-4, 4) it evaluates the piecewise polynomial of
//! [`super::math::gelu_f32`] (coefficients fetched by a two-register
//! permute, no exponential, no division), outside it the tail form that
//! the AVX2 code uses everywhere (same operations, but for a clamp that
//! never binds and two blends folded into masked arithmetic). Every lane
//! equals the scalar [`super::math::gelu_f32`], so chunks with non-finite
//! lanes go through that instead of the AVX2 loops. Measured on the Zen 4
//! machine (`kernel_bench` "gelu (erf)", inputs over ±1): 0.77 → 0.33 ns
//! per value; over ±6 ("wide", a third of the lanes outside the table, so
//! nearly every vector computes both forms) 1.07. In the models 97–99.9%
//! of the 16-lane vectors of GELU inputs lie wholly inside (PP-OCRv6 det
//! and rec, MiniLM): PP-OCRv6 rec on one thread 23.8 → 22.8 ms, v6 det
//! 62.6 → 59.7 (old and new runners alternated).
//!
//! Softmax's pieces (`exp_shifted`, `max_of`, `scale_in_place`) are the
//! exception: a softmax row is never split between code paths, so its
//! exponential keeps every lane in the vector (`exp16_flushed`: `scalef`
//! gives overflowing results too, and numerators that would be subnormal
//! are 0, as on every path), instead of matching the AVX2 form's scalar
//! fix-ups.
//!
//! Measured on the 2-core Zen 4 machine (`kernel_bench`): Swish over 1M
//! floats 0.62 → 0.40 ns per element; as the epilogue of a 64→64 3×3
//! convolution at 80² (409,600 outputs, in cache) 0.47 → 0.08 ms.
use core::arch::x86_64::*;

use super::x86::{blocks, blocks_in_place, sigmoid8, swish8};

/// `e^x` of sixteen lanes already clamped to [-87, 88] ([`super::x86::exp8`] in
/// AVX-512).
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16(x: __m512) -> __m512 {
    let (p, n) = exp16_parts(x);
    // p·2^n in one instruction, where the AVX2 code builds 2^n from the
    // integer n and multiplies: the same single rounding of the same
    // product (n >= -126 after the clamp to -87, so 2^n is a normal float).
    _mm512_scalef_ps(p, n)
}

/// [`exp16`]'s two factors: `e^x = p · 2^n`, `p` in about [0.7, 1.42],
/// `n` a whole number as a float.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16_parts(x: __m512) -> (__m512, __m512) {
    let c = |v: f32| _mm512_set1_ps(v);
    let magic = c(12582912.0);
    let t = _mm512_fmadd_ps(x, c(core::f32::consts::LOG2_E), magic);
    let n = _mm512_sub_ps(t, magic);
    let r = _mm512_fnmadd_ps(n, c(0.693_145_75), x);
    let r = _mm512_fnmadd_ps(n, c(1.428_606_8e-6), r);
    // Estrin's scheme, as the scalar code.
    let [c2, c3, c4, c5, c6] = super::math::EXP_POLY;
    let r2 = _mm512_mul_ps(r, r);
    let a = _mm512_fmadd_ps(c(c3), r, c(c2));
    let b = _mm512_fmadd_ps(c(c5), r, c(c4));
    let q = _mm512_fmadd_ps(c(c6), r2, b);
    let q = _mm512_fmadd_ps(q, r2, a);
    let p = _mm512_fmadd_ps(q, r2, _mm512_add_ps(r, c(1.0)));
    (p, n)
}

/// [`super::math::sigmoid_far`] of sixteen lanes (`e^z` for `z <= -87`,
/// clamped at -104; other lanes are meaningless) as
/// [`super::x86::sigmoid_far8`] computes it, bit for bit: `p · 2^(n + 149)`
/// (normal, exact) rounded to an integer is the subnormal result's bits.
/// No arithmetic produces a subnormal, which on Intel cores costs a
/// microcode assist per vector (`scalef` straight to the subnormal result:
/// 4.7 ns per value in `kernel_bench` "sigmoid far" on the 2-core Sapphire
/// Rapids VM, where the AVX2 form took 0.66; free on Zen 4).
#[inline]
#[target_feature(enable = "avx512f")]
fn sigmoid_far16(z: __m512) -> __m512 {
    let (p, n) = exp16_parts(_mm512_max_ps(z, _mm512_set1_ps(-104.0)));
    let scaled = _mm512_scalef_ps(p, _mm512_add_ps(n, _mm512_set1_ps(149.0)));
    _mm512_castsi512_ps(_mm512_cvtps_epi32(scaled))
}

/// [`super::math::gelu_tail_form`] of sixteen lanes ([`super::x86::gelu8`]
/// in AVX-512); non-finite lanes are flagged for the scalar path.
#[inline]
#[target_feature(enable = "avx512f")]
fn gelu_tail16(x_in: __m512) -> (__m512, u16) {
    use super::math::{GELU_D, GELU_HIGH, GELU_LOW, GELU_S};
    let c = |v: f32| _mm512_set1_ps(v);
    let one = c(1.0);
    // As `gelu8`: judged by the input, computed at most at the high
    // bound, lanes below the low bound at 0 (their result dropped).
    let bad = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(_mm512_abs_ps(x_in), c(f32::INFINITY));
    let low = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x_in, c(GELU_LOW));
    let x = _mm512_maskz_mov_ps(!low, _mm512_min_ps(c(GELU_HIGH), x_in));
    let abs = _mm512_abs_ps(x);
    let d = _mm512_fmadd_ps(abs, c(GELU_D), one);
    let d_lo = _mm512_fmsub_ps(abs, c(GELU_D), _mm512_sub_ps(d, one));
    let u = _mm512_div_ps(one, d);
    let sq = _mm512_mul_ps(x, x);
    let sq_lo = _mm512_fmsub_ps(x, x, sq);
    // x lies in [GELU_LOW, GELU_HIGH] (or is 0, or the lane is flagged), so
    // -x²/2 >= -84.5 is already inside exp16's range (`gelu8` clamps it at
    // -87, which never binds).
    let e = exp16(_mm512_mul_ps(sq, c(-0.5)));
    let r = _mm512_fnmadd_ps(u, d, one);
    let corr = _mm512_fnmadd_ps(u, d_lo, r);
    let corr = _mm512_fnmadd_ps(c(0.5), sq_lo, corr);
    let u2 = _mm512_mul_ps(u, u);
    let u4 = _mm512_mul_ps(u2, u2);
    let p = |i: usize| _mm512_fmadd_ps(c(GELU_S[i + 1]), u, c(GELU_S[i]));
    let (p0, p2, p4, p6, p8) = (p(0), p(2), p(4), p(6), p(8));
    let q0 = _mm512_fmadd_ps(p2, u2, p0);
    let q4 = _mm512_fmadd_ps(p6, u2, p4);
    let lo = _mm512_fmadd_ps(q4, u4, q0);
    let s = _mm512_fmadd_ps(_mm512_mul_ps(p8, u4), u4, lo);
    let q = _mm512_mul_ps(_mm512_mul_ps(e, u), s);
    let tail = _mm512_mul_ps(c(0.5), _mm512_fmadd_ps(q, corr, q));
    // Φ = 1 - tail where x is not negative, tail where it is: one masked
    // subtraction where `gelu8` subtracts and blends (the same values).
    let nonneg = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_setzero_ps());
    let phi = _mm512_mask_sub_ps(tail, nonneg, one, tail);
    // Below the low bound -0 (`gelu8`'s x·0 there), else x·Φ: one masked
    // multiply.
    (_mm512_mask_mul_ps(c(-0.0), !low, x_in, phi), bad)
}

/// `Φ(x)` of sixteen lanes from [`super::math::GELU_PHI`] and the lanes
/// inside the table ([`super::math::gelu_table_position`] and the
/// polynomial of [`super::math::gelu_f32`], lane for lane; other lanes
/// hold garbage).
#[inline]
#[target_feature(enable = "avx512f")]
fn gelu_phi16(x: __m512) -> (__m512, u16) {
    use super::math::{GELU_PHI, GELU_TABLE_BIAS, GELU_TABLE_FIRST_CENTRE, GELU_TABLE_SCALE};
    let c = |v: f32| _mm512_set1_ps(v);
    let f = _mm512_fmadd_ps(x, c(GELU_TABLE_SCALE), c(GELU_TABLE_BIAS));
    // 0 <= f < 32, false for NaN (as the scalar range test).
    let at_least_0 = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(f, _mm512_setzero_ps());
    let inside = _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(at_least_0, f, c(32.0));
    // Inside, truncation is the scalar `f as usize`; outside the index is
    // garbage, and the permutes read only its low five bits.
    let idx = _mm512_cvttps_epi32(f);
    let centre = _mm512_fmadd_ps(
        _mm512_cvtepi32_ps(idx),
        c(1.0 / GELU_TABLE_SCALE),
        c(GELU_TABLE_FIRST_CENTRE),
    );
    let t = _mm512_sub_ps(x, centre);
    let coef = |j: usize| {
        let row = &GELU_PHI[j];
        // SAFETY: the row holds 32 floats: two loads of sixteen.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_ps(row.as_ptr()),
                _mm512_loadu_ps(row.as_ptr().add(16)),
            )
        };
        _mm512_permutex2var_ps(lo, idx, hi)
    };
    let mut p = coef(6);
    for j in (0..6).rev() {
        p = _mm512_fmadd_ps(p, t, coef(j));
    }
    (p, inside)
}

/// `GELU(x)` of sixteen lanes: [`super::math::gelu_f32`], lane for lane
/// (the tail form computed only when a lane lies outside the table);
/// non-finite lanes are flagged for the scalar path.
#[inline]
#[target_feature(enable = "avx512f")]
fn gelu16(x: __m512) -> (__m512, u16) {
    let (phi, inside) = gelu_phi16(x);
    let y = _mm512_mul_ps(x, phi);
    if inside == u16::MAX {
        return (y, 0);
    }
    let (tail, bad) = gelu_tail16(x);
    (_mm512_mask_mov_ps(tail, inside, y), bad)
}

/// `1 + e^w` of sixteen lanes and the lanes that need the scalar path
/// ([`super::x86::sigmoid_denominator8`] in AVX-512).
#[inline]
#[target_feature(enable = "avx512f")]
fn sigmoid_denominator16(w: __m512) -> (__m512, u16) {
    let c = |v: f32| _mm512_set1_ps(v);
    // Clamped as `sigmoid_denominator_n` (flagged lanes' quotients normal).
    let e = exp16(_mm512_min_ps(_mm512_max_ps(w, c(-87.0)), c(87.0)));
    let bad = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(w, c(87.0));
    (_mm512_add_ps(c(1.0), e), bad)
}

/// `sigmoid(z)` of sixteen lanes ([`sigmoid8`] in AVX-512): lanes at or
/// below -87 are `e^z` ([`sigmoid_far16`]), only NaN lanes are flagged.
#[inline]
#[target_feature(enable = "avx512f")]
fn sigmoid16(z: __m512) -> (__m512, u16) {
    let flipped = _mm512_xor_si512(_mm512_castps_si512(z), _mm512_set1_epi32(i32::MIN));
    let (d, bad) = sigmoid_denominator16(_mm512_castsi512_ps(flipped));
    let v = _mm512_div_ps(_mm512_set1_ps(1.0), d);
    if bad == 0 {
        return (v, 0);
    }
    let far = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(z, _mm512_set1_ps(-87.0));
    (
        _mm512_mask_mov_ps(v, far, sigmoid_far16(z)),
        _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(z, z),
    )
}

/// `x · sigmoid(alpha · x)` of sixteen lanes ([`swish8`] in AVX-512).
#[inline]
#[target_feature(enable = "avx512f")]
fn swish16(neg_alpha: __m512, x: __m512) -> (__m512, u16) {
    let (d, bad) = sigmoid_denominator16(_mm512_mul_ps(x, neg_alpha));
    (_mm512_div_ps(x, d), bad)
}

/// `y = lanes(x)` two vectors at a time, then the last < 32 elements in at
/// most two masked vectors; a pair or masked piece with a flagged lane goes
/// through `fallback` (the AVX2 loop, which computes the same per lane and
/// fixes the flagged ones). Epilogues call this on short rows (a Winograd
/// output segment is 20 to 30 floats), where the masked pieces replace
/// four 8-lane blocks.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn pairs16(
    x: &[f32],
    y: &mut [f32],
    lanes: impl Fn(__m512) -> (__m512, u16),
    fallback: impl Fn(&[f32], &mut [f32]),
) {
    let n = x.len().min(y.len());
    let body = n - n % 32;
    for (xb, yb) in x[..body]
        .chunks_exact(32)
        .zip(y[..body].chunks_exact_mut(32))
    {
        // SAFETY: both chunks hold exactly 32 floats.
        let (v0, m0) = lanes(unsafe { _mm512_loadu_ps(xb.as_ptr()) });
        // SAFETY: as above.
        let (v1, m1) = lanes(unsafe { _mm512_loadu_ps(xb.as_ptr().add(16)) });
        if (m0 | m1) == 0 {
            // SAFETY: as above.
            unsafe {
                _mm512_storeu_ps(yb.as_mut_ptr(), v0);
                _mm512_storeu_ps(yb.as_mut_ptr().add(16), v1);
            }
        } else {
            fallback(xb, yb);
        }
    }
    for (at, len, keep) in masked_pieces(body, n) {
        // SAFETY: the masked load reads only lanes `..len`, all inside `x`
        // (`at + len <= n <= x.len()`); the other lanes are zero.
        let (v, bad) = lanes(unsafe { _mm512_maskz_loadu_ps(keep, x.as_ptr().add(at)) });
        if bad & keep == 0 {
            // SAFETY: the masked store writes only lanes `..len`, inside `y`.
            unsafe { _mm512_mask_storeu_ps(y.as_mut_ptr().add(at), keep, v) };
        } else {
            fallback(&x[at..at + len], &mut y[at..at + len]);
        }
    }
}

/// Elements `from..n` in pieces of at most 16: `(start, length, mask of
/// the piece's lanes)`.
#[inline(always)]
fn masked_pieces(from: usize, n: usize) -> impl Iterator<Item = (usize, usize, __mmask16)> {
    (from..n).step_by(16).map(move |at| {
        let len = (n - at).min(16);
        (at, len, ((1u32 << len) - 1) as __mmask16)
    })
}

/// [`pairs16`] reading and writing the same slice (an epilogue's output).
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn pairs16_in_place(
    y: &mut [f32],
    lanes: impl Fn(__m512) -> (__m512, u16),
    fallback: impl Fn(&mut [f32]),
) {
    let n = y.len();
    let body = n - n % 32;
    for yb in y[..body].chunks_exact_mut(32) {
        // SAFETY: the chunk holds exactly 32 floats.
        let (v0, m0) = lanes(unsafe { _mm512_loadu_ps(yb.as_ptr()) });
        // SAFETY: as above.
        let (v1, m1) = lanes(unsafe { _mm512_loadu_ps(yb.as_ptr().add(16)) });
        if (m0 | m1) == 0 {
            // SAFETY: as above.
            unsafe {
                _mm512_storeu_ps(yb.as_mut_ptr(), v0);
                _mm512_storeu_ps(yb.as_mut_ptr().add(16), v1);
            }
        } else {
            fallback(yb);
        }
    }
    for (at, len, keep) in masked_pieces(body, n) {
        // SAFETY: the masked load reads only lanes `..len`, all inside `y`
        // (`at + len <= n`); the other lanes are zero.
        let (v, bad) = lanes(unsafe { _mm512_maskz_loadu_ps(keep, y.as_ptr().add(at)) });
        if bad & keep == 0 {
            // SAFETY: the masked store writes only lanes `..len`, inside `y`.
            unsafe { _mm512_mask_storeu_ps(y.as_mut_ptr().add(at), keep, v) };
        } else {
            fallback(&mut y[at..at + len]);
        }
    }
}

/// [`gelu16`] over a chunk with non-finite lanes: those lanes through the
/// scalar code (its f64 reference), every other lane as [`gelu16`] computes
/// it (not the AVX2 loops, whose table-range lanes differ).
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn gelu_fixing_lanes(x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    for (at, len, keep) in masked_pieces(0, n) {
        // SAFETY: the masked load reads only lanes `..len`, inside `x`.
        let (v, bad) = gelu16(unsafe { _mm512_maskz_loadu_ps(keep, x.as_ptr().add(at)) });
        // SAFETY: the masked store writes only lanes `..len`, inside `y`.
        unsafe { _mm512_mask_storeu_ps(y.as_mut_ptr().add(at), keep, v) };
        for lane in 0..len {
            if bad & keep & (1 << lane) != 0 {
                y[at + lane] = super::math::gelu_f32(x[at + lane]);
            }
        }
    }
}

/// `y = GELU(x)` ([`super::math::gelu_f32`]).
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn gelu(x: &[f32], y: &mut [f32]) {
    pairs16(x, y, |v| gelu16(v), |x, y| gelu_fixing_lanes(x, y));
}

/// [`gelu`] in place.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn gelu_in_place(y: &mut [f32]) {
    pairs16_in_place(
        y,
        |v| gelu16(v),
        |y| {
            // A chunk of at most 32 (see `pairs16_in_place`).
            let mut x = [0f32; 32];
            let x = &mut x[..y.len()];
            x.copy_from_slice(y);
            gelu_fixing_lanes(x, y)
        },
    );
}

/// `y = x · sigmoid(alpha · x)`.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn swish(alpha: f32, x: &[f32], y: &mut [f32]) {
    let (na, na8) = (_mm512_set1_ps(-alpha), _mm256_set1_ps(-alpha));
    pairs16(
        x,
        y,
        |v| swish16(na, v),
        |x, y| blocks(x, y, |v| swish8(na8, v), |v| v * super::sigmoid(alpha * v)),
    );
}

/// [`swish`] in place.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn swish_in_place(alpha: f32, y: &mut [f32]) {
    let (na, na8) = (_mm512_set1_ps(-alpha), _mm256_set1_ps(-alpha));
    pairs16_in_place(
        y,
        |v| swish16(na, v),
        |y| blocks_in_place(y, |v| swish8(na8, v), |v| v * super::sigmoid(alpha * v)),
    );
}

/// `y = sigmoid(x)`.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn sigmoid(x: &[f32], y: &mut [f32]) {
    pairs16(
        x,
        y,
        |v| sigmoid16(v),
        |x, y| blocks(x, y, |v| sigmoid8(v), super::sigmoid),
    );
}

/// [`sigmoid`] in place.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn sigmoid_in_place(y: &mut [f32]) {
    pairs16_in_place(
        y,
        |v| sigmoid16(v),
        |y| blocks_in_place(y, |v| sigmoid8(v), super::sigmoid),
    );
}

/// `y = max(y, 0)` in place, NaN kept (the `Relu` kernel's
/// `if v < 0 { 0 } else { v }`), sixteen lanes at a time.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn relu_in_place(y: &mut [f32]) {
    for v in y.iter_mut() {
        if *v < 0.0 {
            *v = 0.0;
        }
    }
}

/// `y += b` in place, sixteen lanes at a time.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add_in_place(y: &mut [f32], b: f32) {
    for v in y.iter_mut() {
        *v += b;
    }
}

/// `y[i] += x[i]` over the shorter of the two, sixteen lanes at a time.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add_slice_in_place(y: &mut [f32], x: &[f32]) {
    for (v, &x) in y.iter_mut().zip(x) {
        *v += x;
    }
}

/// The mask of the first `len` (at most 16) lanes.
#[inline]
fn first_lanes(len: usize) -> __mmask16 {
    ((1u32 << len.min(16)) - 1) as __mmask16
}

/// `e^d` of sixteen lanes, 0 where `d` is below
/// [`super::math::EXP_SHIFTED_FLUSH`] (softmax's numerators: no lane
/// underflows, so none takes a microcode assist), NaN kept, above 89
/// infinity (`scalef` builds any power of two, so no lane needs the
/// scalar path). Elsewhere exactly [`exp16`]'s (and the AVX2 form's) value.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16_flushed(d: __m512) -> __m512 {
    let flush = super::math::EXP_SHIFTED_FLUSH;
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(d, _mm512_set1_ps(flush));
    // `max`/`min` return their second operand when either is NaN.
    let clamped = _mm512_min_ps(
        _mm512_set1_ps(89.0),
        _mm512_max_ps(_mm512_set1_ps(flush), d),
    );
    _mm512_maskz_mov_ps(keep, exp16(clamped))
}

/// `y = e^(x - shift)` (softmax's numerators) through [`exp16_flushed`],
/// returning the sum of `y` (two vector accumulators; the tail through
/// masked loads).
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn exp_shifted(x: &[f32], y: &mut [f32], shift: f32) -> f32 {
    let n = x.len().min(y.len());
    // SAFETY: both hold n floats; `y` is a distinct, exclusive borrow.
    unsafe { exp_shifted_raw(x.as_ptr(), y.as_mut_ptr(), n, shift) }
}

/// [`exp_shifted`] over `y` in place.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn exp_shifted_in_place(y: &mut [f32], shift: f32) -> f32 {
    let p = y.as_mut_ptr();
    // SAFETY: `y` holds its length of floats; each vector is read before
    // the same lanes are written, so source and destination may be one.
    unsafe { exp_shifted_raw(p, p, y.len(), shift) }
}

/// The loop of [`exp_shifted`] over `n` floats from `x` to `y`, which may
/// be the same floats (each vector is loaded before its lanes are stored).
///
/// # Safety
/// The CPU supports AVX-512F; `x` is readable and `y` writable for `n`
/// floats, and they are either the same or disjoint.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn exp_shifted_raw(x: *const f32, y: *mut f32, n: usize, shift: f32) -> f32 {
    let vs = _mm512_set1_ps(shift);
    let mut acc = [_mm512_setzero_ps(); 2];
    let body = n - n % 32;
    for at in (0..body).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: lanes at + 16j..at + 16j + 16 < body <= n.
            unsafe {
                let e = exp16_flushed(_mm512_sub_ps(_mm512_loadu_ps(x.add(at + 16 * j)), vs));
                _mm512_storeu_ps(y.add(at + 16 * j), e);
                *a = _mm512_add_ps(*a, e);
            }
        }
    }
    let mut at = body;
    while at < n {
        let mask = first_lanes(n - at);
        // SAFETY: only the first n - at lanes are read and written (masked
        // lanes are not accessed, so they cannot fault).
        unsafe {
            let v = _mm512_maskz_loadu_ps(mask, x.add(at));
            let e = _mm512_maskz_mov_ps(mask, exp16_flushed(_mm512_sub_ps(v, vs)));
            _mm512_mask_storeu_ps(y.add(at), mask, e);
            acc[0] = _mm512_add_ps(acc[0], e);
        }
        at += 16;
    }
    _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]))
}

/// Softmax numerators of the rows of `scores` (`t` floats each, `t > 0`)
/// in place, and the reciprocal of each row's sum into `norms`: row `i`
/// plus its mask row (`t` floats at `mask[start + i·stride..]`, added into
/// `shifted` sixteen lanes at a time) when there is a mask, then
/// [`max_of`] and [`exp_shifted`] as the per-row calls compute them, but
/// without a dispatch per call (MiniLM's attention, 12 heads of 128 rows
/// of 128 keys, alternated runner runs, medians of 10: 0.43 → 0.36 ms a
/// layer on one thread, 0.25 → 0.22 on two; the model 11.46 → 11.34 and
/// 6.02 → 5.87 ms).
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn softmax_rows(
    scores: &mut [f32],
    t: usize,
    mask: Option<(&[f32], usize, usize)>,
    shifted: &mut [f32],
    norms: &mut [f32],
) {
    let shifted = &mut shifted[..t];
    for (i, (row, norm)) in scores.chunks_exact_mut(t).zip(norms.iter_mut()).enumerate() {
        let sum = match mask {
            Some((m, start, stride)) => {
                let m = &m[start + i * stride..][..t];
                let mut at = 0;
                while at < t {
                    let lanes = first_lanes(t - at);
                    // SAFETY: only the first t - at lanes of the three
                    // t-float rows are read and written.
                    unsafe {
                        let v = _mm512_add_ps(
                            _mm512_maskz_loadu_ps(lanes, row.as_ptr().add(at)),
                            _mm512_maskz_loadu_ps(lanes, m.as_ptr().add(at)),
                        );
                        _mm512_mask_storeu_ps(shifted.as_mut_ptr().add(at), lanes, v);
                    }
                    at += 16;
                }
                // SAFETY: AVX-512F (this function's contract); `shifted`
                // and `row` hold t floats each and are distinct.
                unsafe {
                    let top = max_of(shifted);
                    exp_shifted_raw(shifted.as_ptr(), row.as_mut_ptr(), t, top)
                }
            }
            // SAFETY: as above, over `row` in place.
            None => unsafe {
                let top = max_of(row);
                exp_shifted_raw(row.as_ptr(), row.as_mut_ptr(), t, top)
            },
        };
        *norm = 1.0 / sum;
    }
}

/// The largest element of `x` ignoring NaN (`-inf` when empty or all NaN),
/// in four vector accumulators.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_of(x: &[f32]) -> f32 {
    let mut acc = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
    let body = x.len() - x.len() % 64;
    for b in x[..body].chunks_exact(64) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: the chunk holds 64 floats. `max` returns its second
            // operand (the running maximum) when the element is NaN.
            *a = _mm512_max_ps(unsafe { _mm512_loadu_ps(b.as_ptr().add(16 * j)) }, *a);
        }
    }
    let mut at = body;
    while at < x.len() {
        let mask = first_lanes(x.len() - at);
        // SAFETY: only the first len - at lanes are read.
        let v = unsafe { _mm512_maskz_loadu_ps(mask, x.as_ptr().add(at)) };
        acc[0] = _mm512_mask_max_ps(acc[0], mask, v, acc[0]);
        at += 16;
    }
    let m = _mm512_max_ps(_mm512_max_ps(acc[0], acc[1]), _mm512_max_ps(acc[2], acc[3]));
    _mm512_reduce_max_ps(m)
}

/// `y *= r` in place, sixteen lanes at a time.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn scale_in_place(y: &mut [f32], r: f32) {
    for v in y.iter_mut() {
        *v *= r;
    }
}
