//! The aarch64 NEON backend of [`Simd`]: four lanes (Advanced SIMD is part
//! of the base architecture, so the token is free to make). Comparisons
//! and selects give x86's NaN behaviour, see [`super::vector`].
use core::arch::aarch64::*;

use super::vector::Simd;

/// The NEON token (every aarch64 CPU runs NEON).
#[derive(Clone, Copy)]
pub(crate) struct Neon(());

impl Neon {
    /// The token.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Neon(())
    }
}

/// The products of 16 signed bytes summed in fours, as floats: widening
/// products (|a·b| ≤ 128², within 16 bits) added in pairs to 32 bits, so
/// no dependence on the dot-product extension.
#[inline(always)]
fn dot_halves(a: uint8x16_t, b: uint8x16_t) -> float32x4_t {
    // SAFETY: NEON is part of aarch64.
    unsafe {
        let (a, b) = (vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(b));
        let low = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let high = vmull_high_s8(a, b);
        vcvtq_f32_s32(vpadalq_s16(vpaddlq_s16(low), high))
    }
}

/// Reinterprets a lane mask as floats (for the bitwise methods).
#[inline(always)]
fn f(m: uint32x4_t) -> float32x4_t {
    // SAFETY: NEON is part of aarch64.
    unsafe { vreinterpretq_f32_u32(m) }
}

/// Reinterprets floats as a lane mask.
#[inline(always)]
fn u(v: float32x4_t) -> uint32x4_t {
    // SAFETY: NEON is part of aarch64.
    unsafe { vreinterpretq_u32_f32(v) }
}

// SAFETY: NEON is part of the aarch64 base architecture.
unsafe impl Simd for Neon {
    type F32 = float32x4_t;
    type I32 = int32x4_t;
    type Mask = uint32x4_t;
    const LANES: usize = 4;
    const REGISTERS: usize = 32;
    const FAST_LOOKUP32: bool = false;

    // SAFETY (every intrinsic call in this impl): NEON is part of aarch64;
    // pointer contracts are the callers' (see the trait).
    #[inline(always)]
    fn splat(self, v: f32) -> float32x4_t {
        unsafe { vdupq_n_f32(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> float32x4_t {
        unsafe { vld1q_f32(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: float32x4_t) {
        unsafe { vst1q_f32(p, v) }
    }
    #[inline(always)]
    unsafe fn load_partial(self, p: *const f32, len: usize, fill: f32) -> float32x4_t {
        // SAFETY: `first4` reads only `len` floats.
        unsafe { vld1q_f32(super::vector::first4(p, len, fill).as_ptr()) }
    }
    #[inline(always)]
    unsafe fn load_lanes(self, p: *const f32, first: usize, end: usize) -> float32x4_t {
        // SAFETY: `lanes4` reads only lanes `first..end`.
        unsafe { vld1q_f32(super::vector::lanes4(p, first, end).as_ptr()) }
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, len: usize, v: float32x4_t) {
        let mut t = [0f32; 4];
        // SAFETY: `t` holds four floats; `store_first4` writes `len`.
        unsafe {
            vst1q_f32(t.as_mut_ptr(), v);
            super::vector::store_first4(p, len, t);
        }
    }
    #[inline(always)]
    fn add(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vaddq_f32(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vsubq_f32(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vmulq_f32(a, b) }
    }
    #[inline(always)]
    fn div(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vdivq_f32(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        unsafe { vfmaq_f32(c, a, b) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        unsafe { vfmsq_f32(c, a, b) }
    }
    #[inline(always)]
    fn product_residue(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        // a·b + (-c), one rounding; an exact zero is +0 as a fused
        // multiply-subtract gives it (negating c - a·b would give -0).
        unsafe { vfmaq_f32(vnegq_f32(c), a, b) }
    }
    #[inline(always)]
    fn neg_product_residue(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        unsafe { vfmsq_f32(c, a, b) }
    }
    #[inline(always)]
    fn min(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vbslq_f32(vcltq_f32(a, b), a, b) }
    }
    #[inline(always)]
    fn max(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vbslq_f32(vcgtq_f32(a, b), a, b) }
    }
    #[inline(always)]
    fn and(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { f(vandq_u32(u(a), u(b))) }
    }
    #[inline(always)]
    fn or(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { f(vorrq_u32(u(a), u(b))) }
    }
    #[inline(always)]
    fn xor(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { f(veorq_u32(u(a), u(b))) }
    }
    #[inline(always)]
    fn and_not(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // vbic(x, y) = x & !y.
        unsafe { f(vbicq_u32(u(b), u(a))) }
    }
    #[inline(always)]
    fn lt(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vcltq_f32(a, b) }
    }
    #[inline(always)]
    fn le(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vcleq_f32(a, b) }
    }
    #[inline(always)]
    fn ge(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vcgeq_f32(a, b) }
    }
    #[inline(always)]
    fn not_lt(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vmvnq_u32(vcltq_f32(a, b)) }
    }
    #[inline(always)]
    fn unordered(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vmvnq_u32(vandq_u32(vceqq_f32(a, a), vceqq_f32(b, b))) }
    }
    #[inline(always)]
    fn mask_or(self, a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        unsafe { vorrq_u32(a, b) }
    }
    #[inline(always)]
    fn mask_and_not(self, a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        unsafe { vbicq_u32(b, a) }
    }
    #[inline(always)]
    fn select(self, m: uint32x4_t, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vbslq_f32(m, a, b) }
    }
    #[inline(always)]
    fn clear(self, m: uint32x4_t, v: float32x4_t) -> float32x4_t {
        unsafe { f(vbicq_u32(u(v), m)) }
    }
    #[inline(always)]
    fn bits(self, m: uint32x4_t) -> u32 {
        const WEIGHTS: [u32; 4] = [1, 2, 4, 8];
        unsafe { vaddvq_u32(vandq_u32(m, vld1q_u32(WEIGHTS.as_ptr()))) }
    }
    #[inline(always)]
    fn ldexp(self, p: float32x4_t, n: float32x4_t) -> float32x4_t {
        unsafe {
            let e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
            vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32::<23>(e)))
        }
    }
    #[inline(always)]
    fn round_to_bits(self, v: float32x4_t) -> float32x4_t {
        unsafe { vreinterpretq_f32_s32(vcvtnq_s32_f32(v)) }
    }
    #[inline(always)]
    fn trunc_i32(self, v: float32x4_t) -> int32x4_t {
        unsafe { vcvtq_s32_f32(v) }
    }
    #[inline(always)]
    fn i32_to_f32(self, i: int32x4_t) -> float32x4_t {
        unsafe { vcvtq_f32_s32(i) }
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32], i: int32x4_t) -> float32x4_t {
        let mut idx = [0i32; 4];
        let mut v = [0f32; 4];
        // SAFETY: both arrays hold four lanes.
        unsafe { vst1q_s32(idx.as_mut_ptr(), i) };
        for (o, j) in v.iter_mut().zip(idx) {
            *o = table[(j & 31) as usize];
        }
        // SAFETY: as above.
        unsafe { vld1q_f32(v.as_ptr()) }
    }
    #[inline(always)]
    fn unzip(self, a: float32x4_t, b: float32x4_t) -> (float32x4_t, float32x4_t) {
        unsafe { (vuzp1q_f32(a, b), vuzp2q_f32(a, b)) }
    }
    #[inline(always)]
    fn transpose_square(self, v: &mut [float32x4_t; 16]) {
        // Pairs of rows interleaved at 32 bits, then those at 64 bits.
        unsafe {
            let t0 = vtrn1q_f32(v[0], v[1]);
            let t1 = vtrn2q_f32(v[0], v[1]);
            let t2 = vtrn1q_f32(v[2], v[3]);
            let t3 = vtrn2q_f32(v[2], v[3]);
            let d = vreinterpretq_f64_f32;
            let f = vreinterpretq_f32_f64;
            v[0] = f(vtrn1q_f64(d(t0), d(t2)));
            v[1] = f(vtrn1q_f64(d(t1), d(t3)));
            v[2] = f(vtrn2q_f64(d(t0), d(t2)));
            v[3] = f(vtrn2q_f64(d(t1), d(t3)));
        }
    }
    #[inline(always)]
    fn reduce_add(self, v: float32x4_t) -> f32 {
        unsafe {
            let h = vadd_f32(vget_low_f32(v), vget_high_f32(v));
            vget_lane_f32::<0>(h) + vget_lane_f32::<1>(h)
        }
    }
    #[inline(always)]
    fn reduce_max(self, v: float32x4_t) -> f32 {
        unsafe { vmaxvq_f32(v) }
    }

    // Two 16-byte registers.
    type I8x32 = uint8x16x2_t;
    #[inline(always)]
    unsafe fn load_i8x32(self, p: *const u8) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vld1q_u8(p), vld1q_u8(p.add(16))) }
    }
    #[inline(always)]
    unsafe fn nibbles_i8x32(self, p: *const u8) -> uint8x16x2_t {
        unsafe {
            let v = vld1q_u8(p);
            uint8x16x2_t(vandq_u8(v, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(v))
        }
    }
    #[inline(always)]
    fn bit_bytes_i8x32(self, bits: u32) -> uint8x16x2_t {
        unsafe {
            let bit = vcreate_u8(0x8040_2010_0804_0201);
            let [b0, b1, b2, b3] = bits.to_le_bytes();
            uint8x16x2_t(
                vcombine_u8(vtst_u8(vdup_n_u8(b0), bit), vtst_u8(vdup_n_u8(b1), bit)),
                vcombine_u8(vtst_u8(vdup_n_u8(b2), bit), vtst_u8(vdup_n_u8(b3), bit)),
            )
        }
    }
    #[inline(always)]
    fn splat_i8x32(self, v: u8) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vdupq_n_u8(v), vdupq_n_u8(v)) }
    }
    #[inline(always)]
    fn and_i8x32(self, a: uint8x16x2_t, b: uint8x16x2_t) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vandq_u8(a.0, b.0), vandq_u8(a.1, b.1)) }
    }
    #[inline(always)]
    fn or_i8x32(self, a: uint8x16x2_t, b: uint8x16x2_t) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vorrq_u8(a.0, b.0), vorrq_u8(a.1, b.1)) }
    }
    #[inline(always)]
    fn sub_i8x32(self, a: uint8x16x2_t, b: uint8x16x2_t) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vsubq_u8(a.0, b.0), vsubq_u8(a.1, b.1)) }
    }
    #[inline(always)]
    fn shr_u8x32<const N: i32>(self, a: uint8x16x2_t) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vshrq_n_u8::<N>(a.0), vshrq_n_u8::<N>(a.1)) }
    }
    #[inline(always)]
    fn shl4_u8x32(self, a: uint8x16x2_t) -> uint8x16x2_t {
        unsafe { uint8x16x2_t(vshlq_n_u8::<4>(a.0), vshlq_n_u8::<4>(a.1)) }
    }
    #[inline(always)]
    fn dot_i8x32_add(
        self,
        acc: float32x4_t,
        lo: f32,
        hi: f32,
        a: uint8x16x2_t,
        b: uint8x16x2_t,
    ) -> float32x4_t {
        unsafe {
            let acc = vfmaq_n_f32(acc, dot_halves(a.0, b.0), lo);
            vfmaq_n_f32(acc, dot_halves(a.1, b.1), hi)
        }
    }
}
