//! AVX2+FMA versions of the hot f32 activations (`exp`, `sigmoid`, Swish).
//!
//! Same algorithm as the scalar code in `math.rs` (range reduction by
//! `ln 2`, degree-7 polynomial, exponent bits from the rounded multiple),
//! eight lanes at a time (the tail through a padded block); lanes outside
//! the polynomial's range go through the scalar functions. Results agree
//! with the scalar code to rounding (FMA contractions differ).
use core::arch::x86_64::*;

/// `e^x` of eight lanes already clamped to [-87, 88].
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let log2e = _mm256_set1_ps(core::f32::consts::LOG2_E);
    let magic = _mm256_set1_ps(12582912.0);
    let t = _mm256_fmadd_ps(x, log2e, magic);
    let n = _mm256_sub_ps(t, magic);
    let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40_0000));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), r);
    let mut p = _mm256_set1_ps(1.0 / 5040.0);
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        ni,
        _mm256_set1_epi32(127),
    )));
    _mm256_mul_ps(p, scale)
}

/// `sigmoid(z)` of eight lanes; also returns the lanes that need the
/// scalar path (`z <= -87` or NaN) as a bit mask.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sigmoid8(z: __m256) -> (__m256, i32) {
    let sign = _mm256_set1_ps(-0.0);
    let neg_abs = _mm256_or_ps(z, sign);
    let e = exp8(_mm256_max_ps(neg_abs, _mm256_set1_ps(-87.0)));
    let r = _mm256_div_ps(_mm256_set1_ps(1.0), _mm256_add_ps(_mm256_set1_ps(1.0), e));
    let nonneg = _mm256_cmp_ps::<_CMP_GE_OQ>(z, _mm256_setzero_ps());
    let s = _mm256_blendv_ps(_mm256_mul_ps(e, r), r, nonneg);
    let bad = _mm256_or_ps(
        _mm256_cmp_ps::<_CMP_LE_OQ>(z, _mm256_set1_ps(-87.0)),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(z, z),
    );
    (s, _mm256_movemask_ps(bad))
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
fn blocks(
    x: &[f32],
    y: &mut [f32],
    lanes: impl Fn(__m256) -> (__m256, i32),
    fix: impl Fn(f32) -> f32,
) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let full = n - n % 8;
    for (xb, yb) in x[..full].chunks_exact(8).zip(y[..full].chunks_exact_mut(8)) {
        // SAFETY: both chunks hold exactly 8 floats.
        let (v, mask) = lanes(unsafe { _mm256_loadu_ps(xb.as_ptr()) });
        // SAFETY: as above.
        unsafe { _mm256_storeu_ps(yb.as_mut_ptr(), v) };
        if mask != 0 {
            fix_lanes(mask, xb, yb, &fix);
        }
    }
    if full < n {
        let mut xt = [0f32; 8];
        xt[..n - full].copy_from_slice(&x[full..]);
        y[full..].copy_from_slice(&block8(&xt, &lanes, &fix)[..n - full]);
    }
}

/// `y = x · sigmoid(alpha · x)`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn swish(alpha: f32, x: &[f32], y: &mut [f32]) {
    let va = _mm256_set1_ps(alpha);
    blocks(
        x,
        y,
        |v| {
            let (s, bad) = sigmoid8(_mm256_mul_ps(va, v));
            (_mm256_mul_ps(v, s), bad)
        },
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

/// `y = e^x`.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn exp(x: &[f32], y: &mut [f32]) {
    blocks(
        x,
        y,
        |v| {
            let c = _mm256_min_ps(
                _mm256_max_ps(v, _mm256_set1_ps(-87.0)),
                _mm256_set1_ps(88.0),
            );
            let out = _mm256_or_ps(
                _mm256_or_ps(
                    _mm256_cmp_ps::<_CMP_LE_OQ>(v, _mm256_set1_ps(-87.0)),
                    _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(88.0)),
                ),
                _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v),
            );
            (exp8(c), _mm256_movemask_ps(out))
        },
        f32::exp,
    );
}

/// [`blocks`] reading and writing the same slice (an epilogue's output).
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn blocks_in_place(
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

/// [`swish`] in place.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn swish_in_place(alpha: f32, y: &mut [f32]) {
    let va = _mm256_set1_ps(alpha);
    blocks_in_place(
        y,
        |v| {
            let (s, bad) = sigmoid8(_mm256_mul_ps(va, v));
            (_mm256_mul_ps(v, s), bad)
        },
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
