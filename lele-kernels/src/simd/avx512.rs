//! The AVX-512F backend of [`Simd`]: sixteen lanes, masks in `k`
//! registers, tails through masked loads and stores.
use core::arch::x86_64::*;

use super::avx2::{Avx2, dot_i8x32_lanes, halves};
use super::vector::Simd;

/// Proof that the CPU runs AVX-512F (and AVX2 and FMA).
#[derive(Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// # Safety
    /// The CPU supports AVX-512F, AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Self {
        Avx512(())
    }
}

/// The mask of the first `len` (at most 16) lanes.
#[inline(always)]
fn first_lanes(len: usize) -> __mmask16 {
    ((1u32 << len.min(16)) - 1) as __mmask16
}

// SAFETY: `Avx512` is only made by `new_unchecked`, whose callers checked
// AVX-512F, AVX2 and FMA; every method uses only those.
unsafe impl Simd for Avx512 {
    type F32 = __m512;
    type I32 = __m512i;
    type Mask = __mmask16;
    const LANES: usize = 16;
    const REGISTERS: usize = 32;
    const FAST_LOOKUP32: bool = true;
    const MASKED_LOADS: bool = true;

    // SAFETY (every intrinsic call in this impl): the token proves
    // AVX-512F; pointer contracts are the callers' (see the trait).
    #[inline(always)]
    fn splat(self, v: f32) -> __m512 {
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_partial(self, p: *const f32, len: usize, fill: f32) -> __m512 {
        // Masked-off lanes are not accessed, so they cannot fault.
        unsafe { _mm512_mask_loadu_ps(_mm512_set1_ps(fill), first_lanes(len), p) }
    }
    #[inline(always)]
    unsafe fn load_lanes(self, p: *const f32, first: usize, end: usize) -> __m512 {
        let lanes = first_lanes(end) & !first_lanes(first);
        // Masked-off lanes are not accessed, so they cannot fault.
        unsafe { _mm512_maskz_loadu_ps(lanes, p) }
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, len: usize, v: __m512) {
        unsafe { _mm512_mask_storeu_ps(p, first_lanes(len), v) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn product_residue(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmsub_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_product_residue(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn and(self, a: __m512, b: __m512) -> __m512 {
        unsafe {
            _mm512_castsi512_ps(_mm512_and_si512(
                _mm512_castps_si512(a),
                _mm512_castps_si512(b),
            ))
        }
    }
    #[inline(always)]
    fn or(self, a: __m512, b: __m512) -> __m512 {
        unsafe {
            _mm512_castsi512_ps(_mm512_or_si512(
                _mm512_castps_si512(a),
                _mm512_castps_si512(b),
            ))
        }
    }
    #[inline(always)]
    fn xor(self, a: __m512, b: __m512) -> __m512 {
        unsafe {
            _mm512_castsi512_ps(_mm512_xor_si512(
                _mm512_castps_si512(a),
                _mm512_castps_si512(b),
            ))
        }
    }
    #[inline(always)]
    fn and_not(self, a: __m512, b: __m512) -> __m512 {
        unsafe {
            _mm512_castsi512_ps(_mm512_andnot_si512(
                _mm512_castps_si512(a),
                _mm512_castps_si512(b),
            ))
        }
    }
    #[inline(always)]
    fn lt(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn ge(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, b) }
    }
    #[inline(always)]
    fn not_lt(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a, b) }
    }
    #[inline(always)]
    fn unordered(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn mask_or(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn mask_and_not(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        !a & b
    }
    #[inline(always)]
    fn select(self, m: __mmask16, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mask_mov_ps(b, m, a) }
    }
    #[inline(always)]
    fn clear(self, m: __mmask16, v: __m512) -> __m512 {
        unsafe { _mm512_maskz_mov_ps(!m, v) }
    }
    #[inline(always)]
    fn bits(self, m: __mmask16) -> u32 {
        m as u32
    }
    #[inline(always)]
    fn ldexp(self, p: __m512, n: __m512) -> __m512 {
        // One instruction for the same single rounding of the same product
        // as building 2^n from its bits and multiplying.
        unsafe { _mm512_scalef_ps(p, n) }
    }
    #[inline(always)]
    fn round_to_bits(self, v: __m512) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_cvtps_epi32(v)) }
    }
    #[inline(always)]
    fn trunc_i32(self, v: __m512) -> __m512i {
        unsafe { _mm512_cvttps_epi32(v) }
    }
    #[inline(always)]
    fn i32_to_f32(self, i: __m512i) -> __m512 {
        unsafe { _mm512_cvtepi32_ps(i) }
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32], i: __m512i) -> __m512 {
        // SAFETY: the table holds 32 floats: two loads of sixteen; the
        // permute reads the low five bits of each index.
        unsafe {
            let lo = _mm512_loadu_ps(table.as_ptr());
            let hi = _mm512_loadu_ps(table.as_ptr().add(16));
            _mm512_permutex2var_ps(lo, i, hi)
        }
    }
    #[inline(always)]
    fn unzip(self, a: __m512, b: __m512) -> (__m512, __m512) {
        unsafe {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        }
    }
    #[inline(always)]
    fn transpose_square(self, v: &mut [__m512; 16]) {
        unsafe { transpose16(v) }
    }
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    #[inline(always)]
    fn reduce_add4(self, a: __m512, b: __m512, c: __m512, d: __m512) -> [f32; 4] {
        let mut out = [0f32; 4];
        // SAFETY: `out` holds four floats.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), sum4(a, b, c, d)) };
        out
    }
    #[inline(always)]
    fn reduce_add(self, v: __m512) -> f32 {
        unsafe {
            // Lanes 8..16 onto 0..8, then as the AVX2 backend.
            let high = _mm512_shuffle_f32x4::<0b11_10_11_10>(v, v);
            let v = _mm512_castps512_ps256(_mm512_add_ps(v, high));
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
        }
    }
    #[inline(always)]
    fn reduce_max(self, v: __m512) -> f32 {
        unsafe { _mm512_reduce_max_ps(v) }
    }

    // The bytes in 256-bit registers (AVX-512F alone has no byte
    // arithmetic), as the AVX2 backend.
    type I8x32 = __m256i;
    #[inline(always)]
    unsafe fn load_i8x32(self, p: *const u8) -> __m256i {
        unsafe { self.avx2().load_i8x32(p) }
    }
    #[inline(always)]
    unsafe fn nibbles_i8x32(self, p: *const u8) -> __m256i {
        unsafe { self.avx2().nibbles_i8x32(p) }
    }
    #[inline(always)]
    fn bit_bytes_i8x32(self, bits: u32) -> __m256i {
        self.avx2().bit_bytes_i8x32(bits)
    }
    #[inline(always)]
    fn splat_i8x32(self, v: u8) -> __m256i {
        self.avx2().splat_i8x32(v)
    }
    #[inline(always)]
    fn and_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        self.avx2().and_i8x32(a, b)
    }
    #[inline(always)]
    fn or_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        self.avx2().or_i8x32(a, b)
    }
    #[inline(always)]
    fn sub_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        self.avx2().sub_i8x32(a, b)
    }
    #[inline(always)]
    fn shr_u8x32<const N: i32>(self, a: __m256i) -> __m256i {
        self.avx2().shr_u8x32::<N>(a)
    }
    #[inline(always)]
    fn shl4_u8x32(self, a: __m256i) -> __m256i {
        self.avx2().shl4_u8x32(a)
    }
    #[inline(always)]
    fn dot_i8x32_add(self, acc: __m512, lo: f32, hi: f32, a: __m256i, b: __m256i) -> __m512 {
        unsafe {
            let sums = _mm256_mul_ps(dot_i8x32_lanes(a, b), halves(lo, hi));
            _mm512_add_ps(acc, _mm512_zextps256_ps512(sums))
        }
    }
}

impl Avx512 {
    /// The AVX2 backend, for the byte operations.
    #[inline(always)]
    fn avx2(self) -> Avx2 {
        // SAFETY: an `Avx512` token is only made where AVX2 and FMA were
        // detected too (see `dispatch_on`).
        unsafe { Avx2::new_unchecked() }
    }
}

/// Transposes a 16×16 block held as sixteen row vectors: afterwards
/// `v[c]` holds what was column `c` (lane `r` of the new `v[c]` is lane
/// `c` of the old `v[r]`).
///
/// Four rounds of shuffles: 32-bit interleaves of row pairs, 64-bit
/// interleaves of those (each 128-bit lane then holds a transposed 4×4
/// block), and two rounds moving whole 128-bit lanes.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(v: &mut [__m512; 16]) {
    // Lane L of t[2a] is [r0[4L], r1[4L], r0[4L+1], r1[4L+1]] of rows
    // r0 = v[2a], r1 = v[2a + 1]; t[2a + 1] the same for 4L+2 and 4L+3.
    let mut t = [_mm512_setzero_ps(); 16];
    for a in 0..16 / 2 {
        t[2 * a] = _mm512_unpacklo_ps(v[2 * a], v[2 * a + 1]);
        t[2 * a + 1] = _mm512_unpackhi_ps(v[2 * a], v[2 * a + 1]);
    }
    // Lane L of u[4b + q] is column 4L + q of rows 4b..4b + 4.
    let mut u = [_mm512_setzero_ps(); 16];
    let pd = _mm512_castps_pd;
    for b in 0..16 / 4 {
        let (t0, t1, t2, t3) = (t[4 * b], t[4 * b + 1], t[4 * b + 2], t[4 * b + 3]);
        u[4 * b] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t0), pd(t2)));
        u[4 * b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t0), pd(t2)));
        u[4 * b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t1), pd(t3)));
        u[4 * b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t1), pd(t3)));
    }
    // Column 4L + q gathers lane L of u[q], u[4 + q], u[8 + q], u[12 + q].
    for q in 0..4 {
        let s0 = _mm512_shuffle_f32x4::<0x88>(u[q], u[4 + q]);
        let s1 = _mm512_shuffle_f32x4::<0xDD>(u[q], u[4 + q]);
        let s2 = _mm512_shuffle_f32x4::<0x88>(u[8 + q], u[12 + q]);
        let s3 = _mm512_shuffle_f32x4::<0xDD>(u[8 + q], u[12 + q]);
        v[q] = _mm512_shuffle_f32x4::<0x88>(s0, s2);
        v[4 + q] = _mm512_shuffle_f32x4::<0x88>(s1, s3);
        v[8 + q] = _mm512_shuffle_f32x4::<0xDD>(s0, s2);
        v[12 + q] = _mm512_shuffle_f32x4::<0xDD>(s1, s3);
    }
}

/// The lane sums of four vectors, `[Σa, Σb, Σc, Σd]`, in one tree: pairs
/// interleaved and added within each 128-bit lane (each lane then holds a
/// partial sum of every vector), then the four lanes added; 13
/// instructions where four separate reductions take about 32.
#[inline]
#[target_feature(enable = "avx512f")]
fn sum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    let ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    let cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
    let s = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd)),
    );
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s)));
    let s = _mm256_add_ps(_mm512_castps512_ps256(s), hi);
    _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s))
}
