//! The AVX2+FMA backend of [`Simd`]: eight lanes.
use core::arch::x86_64::*;

use super::vector::Simd;

/// Proof that the CPU runs AVX2 and FMA.
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// # Safety
    /// The CPU supports AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Self {
        Avx2(())
    }
}

/// All ones in the first `len` (at most 8) lanes.
#[inline(always)]
fn first_lanes(len: usize) -> __m256i {
    // SAFETY: the callers hold the AVX2 token.
    unsafe {
        let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(len.min(8) as i32), iota)
    }
}

// SAFETY: `Avx2` is only made by `new_unchecked`, whose callers checked
// AVX2 and FMA; every method uses only those.
unsafe impl Simd for Avx2 {
    type F32 = __m256;
    type I32 = __m256i;
    type Mask = __m256;
    const LANES: usize = 8;
    const REGISTERS: usize = 16;
    const FAST_LOOKUP32: bool = false;

    // SAFETY (every intrinsic call in this impl): the token proves AVX2
    // and FMA; pointer contracts are the callers' (see the trait).
    #[inline(always)]
    fn splat(self, v: f32) -> __m256 {
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_partial(self, p: *const f32, len: usize, fill: f32) -> __m256 {
        // Masked-off lanes are not accessed, so they cannot fault (and a
        // stack copy of a variable length would be a call to `memcpy`).
        unsafe {
            let keep = first_lanes(len);
            let v = _mm256_maskload_ps(p, keep);
            _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(keep))
        }
    }
    #[inline(always)]
    unsafe fn load_lanes(self, p: *const f32, first: usize, end: usize) -> __m256 {
        // Masked-off lanes are not accessed and read as zero.
        unsafe {
            let lanes = _mm256_andnot_si256(first_lanes(first), first_lanes(end));
            _mm256_maskload_ps(p, lanes)
        }
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, len: usize, v: __m256) {
        unsafe { _mm256_maskstore_ps(p, first_lanes(len), v) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn product_residue(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmsub_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_product_residue(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn and(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_and_ps(a, b) }
    }
    #[inline(always)]
    fn or(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_or_ps(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_xor_ps(a, b) }
    }
    #[inline(always)]
    fn and_not(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_andnot_ps(a, b) }
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn ge(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_GE_OQ>(a, b) }
    }
    #[inline(always)]
    fn not_lt(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_NLT_UQ>(a, b) }
    }
    #[inline(always)]
    fn unordered(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn mask_or(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_or_ps(a, b) }
    }
    #[inline(always)]
    fn mask_and_not(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_andnot_ps(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_blendv_ps(b, a, m) }
    }
    #[inline(always)]
    fn clear(self, m: __m256, v: __m256) -> __m256 {
        unsafe { _mm256_andnot_ps(m, v) }
    }
    #[inline(always)]
    fn bits(self, m: __m256) -> u32 {
        unsafe { _mm256_movemask_ps(m) as u32 }
    }
    #[inline(always)]
    fn ldexp(self, p: __m256, n: __m256) -> __m256 {
        unsafe {
            let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
            _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)))
        }
    }
    #[inline(always)]
    fn round_to_bits(self, v: __m256) -> __m256 {
        unsafe { _mm256_castsi256_ps(_mm256_cvtps_epi32(v)) }
    }
    #[inline(always)]
    fn trunc_i32(self, v: __m256) -> __m256i {
        unsafe { _mm256_cvttps_epi32(v) }
    }
    #[inline(always)]
    fn i32_to_f32(self, i: __m256i) -> __m256 {
        unsafe { _mm256_cvtepi32_ps(i) }
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32], i: __m256i) -> __m256 {
        let mut idx = [0i32; 8];
        // SAFETY: `idx` holds eight i32.
        unsafe { _mm256_storeu_si256(idx.as_mut_ptr().cast(), i) };
        let v = idx.map(|j| table[(j & 31) as usize]);
        // SAFETY: `v` holds eight floats.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    }
    #[inline(always)]
    fn unzip(self, a: __m256, b: __m256) -> (__m256, __m256) {
        unsafe {
            // Per 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6 (and the odd
            // ones), then the 64-bit pairs reordered 0 2 1 3.
            let ev = _mm256_castps_pd(_mm256_shuffle_ps::<0b10_00_10_00>(a, b));
            let od = _mm256_castps_pd(_mm256_shuffle_ps::<0b11_01_11_01>(a, b));
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(ev)),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(od)),
            )
        }
    }
    #[inline(always)]
    fn transpose_square(self, v: &mut [__m256; 16]) {
        if let Some(square) = v.first_chunk_mut::<8>() {
            unsafe { transpose8x8(square) }
        }
    }
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    #[inline(always)]
    fn reduce_add(self, v: __m256) -> f32 {
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
        }
    }
    #[inline(always)]
    fn reduce_max(self, v: __m256) -> f32 {
        unsafe {
            let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)))
        }
    }

    type I8x32 = __m256i;
    #[inline(always)]
    unsafe fn load_i8x32(self, p: *const u8) -> __m256i {
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn nibbles_i8x32(self, p: *const u8) -> __m256i {
        unsafe {
            let v = _mm_loadu_si128(p.cast());
            let low = _mm_set1_epi8(0x0f);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), low);
            _mm256_set_m128i(hi, _mm_and_si128(v, low))
        }
    }
    #[inline(always)]
    fn bit_bytes_i8x32(self, bits: u32) -> __m256i {
        unsafe {
            // Byte j takes byte j / 8 of the word, then keeps bit j % 8.
            let word = _mm256_set1_epi32(bits as i32);
            let pick = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
            );
            let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            let b = _mm256_and_si256(_mm256_shuffle_epi8(word, pick), bit);
            _mm256_cmpeq_epi8(b, bit)
        }
    }
    #[inline(always)]
    fn splat_i8x32(self, v: u8) -> __m256i {
        unsafe { _mm256_set1_epi8(v as i8) }
    }
    #[inline(always)]
    fn and_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_and_si256(a, b) }
    }
    #[inline(always)]
    fn or_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_or_si256(a, b) }
    }
    #[inline(always)]
    fn sub_i8x32(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_sub_epi8(a, b) }
    }
    #[inline(always)]
    fn shr_u8x32<const N: i32>(self, a: __m256i) -> __m256i {
        // x86 shifts 16-bit lanes at the least: the bits shifted in from
        // the neighbouring byte are masked off.
        unsafe {
            _mm256_and_si256(
                _mm256_srli_epi16::<N>(a),
                _mm256_set1_epi8((0xffu8 >> N) as i8),
            )
        }
    }
    #[inline(always)]
    fn shl4_u8x32(self, a: __m256i) -> __m256i {
        unsafe { _mm256_and_si256(_mm256_slli_epi16::<4>(a), _mm256_set1_epi8(0xf0u8 as i8)) }
    }
    #[inline(always)]
    fn dot_i8x32_add(self, acc: __m256, lo: f32, hi: f32, a: __m256i, b: __m256i) -> __m256 {
        unsafe { _mm256_fmadd_ps(dot_i8x32_lanes(a, b), halves(lo, hi), acc) }
    }
}

/// The products of two 32-byte vectors (signed, `b` not −128) summed in
/// fours: lanes 0..4 total bytes 0..16, lanes 4..8 bytes 16..32.
/// `maddubs` takes an unsigned and a signed operand, so `a`'s sign moves
/// onto `b`; the pair sums (at most 2·128·127) fit its 16 bits.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn dot_i8x32_lanes(a: __m256i, b: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// `lo` in lanes 0..4, `hi` in lanes 4..8.
#[inline]
#[target_feature(enable = "avx")]
pub(crate) fn halves(lo: f32, hi: f32) -> __m256 {
    _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(lo))
}

/// Transposes an 8×8 block held as eight row vectors: afterwards `v[c]`
/// holds what was column `c`. Three rounds: 32-bit interleaves of row
/// pairs, 64-bit shuffles of those (each 128-bit half then holds a
/// transposed 4×4 block), and the halves exchanged.
#[inline]
#[target_feature(enable = "avx")]
pub(crate) fn transpose8x8(v: &mut [__m256; 8]) {
    let t0 = _mm256_unpacklo_ps(v[0], v[1]);
    let t1 = _mm256_unpackhi_ps(v[0], v[1]);
    let t2 = _mm256_unpacklo_ps(v[2], v[3]);
    let t3 = _mm256_unpackhi_ps(v[2], v[3]);
    let t4 = _mm256_unpacklo_ps(v[4], v[5]);
    let t5 = _mm256_unpackhi_ps(v[4], v[5]);
    let t6 = _mm256_unpacklo_ps(v[6], v[7]);
    let t7 = _mm256_unpackhi_ps(v[6], v[7]);
    let q0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let q1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let q2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let q3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let q4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let q5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let q6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let q7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    v[0] = _mm256_permute2f128_ps::<0x20>(q0, q4);
    v[1] = _mm256_permute2f128_ps::<0x20>(q1, q5);
    v[2] = _mm256_permute2f128_ps::<0x20>(q2, q6);
    v[3] = _mm256_permute2f128_ps::<0x20>(q3, q7);
    v[4] = _mm256_permute2f128_ps::<0x31>(q0, q4);
    v[5] = _mm256_permute2f128_ps::<0x31>(q1, q5);
    v[6] = _mm256_permute2f128_ps::<0x31>(q2, q6);
    v[7] = _mm256_permute2f128_ps::<0x31>(q3, q7);
}
