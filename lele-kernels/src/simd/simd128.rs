//! The wasm32 `simd128` backend of [`Simd`]: four lanes, known at compile
//! time. Comparisons and selects give x86's NaN behaviour, see
//! [`super::vector`]; wasm has no fused multiply-add, so the fused
//! operations are computed in f64 and rounded once (see `fused`). Built
//! with `relaxed-simd`, the approximate multiply-adds (products, polynomial
//! steps) use the relaxed one (see `madd`).
use core::arch::wasm32::*;

use super::vector::Simd;

/// The simd128 token (the module was built with `simd128`, so every engine
/// that runs it has it).
#[derive(Clone, Copy)]
pub(crate) struct Simd128(());

impl Simd128 {
    /// The token.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Simd128(())
    }
}

/// `a · b + c` as the engine computes it fastest: in a module built with
/// `relaxed-simd`, one relaxed multiply-add (fused where the CPU has FMA,
/// which halves the instructions of every product loop), else a multiply
/// and an add.
#[inline(always)]
pub(crate) fn madd(a: v128, b: v128, c: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        f32x4_relaxed_madd(a, b, c)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        f32x4_add(f32x4_mul(a, b), c)
    }
}

/// `y < x ? y : x`, lane for lane (wasm's `pmin`). In a module built with
/// `relaxed-simd`, LLVM compiles the `pmin` intrinsic to `relaxed_min`,
/// whose result for NaN and signed zeros is the engine's choice (V8 on x64
/// gives other lanes than `pmin`): there, a compare and a bit select.
#[inline(always)]
fn pmin(x: v128, y: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        v128_bitselect(y, x, f32x4_lt(y, x))
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        f32x4_pmin(x, y)
    }
}

/// `x < y ? y : x`, lane for lane (wasm's `pmax`; see [`pmin`]).
#[inline(always)]
fn pmax(x: v128, y: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        v128_bitselect(y, x, f32x4_lt(x, y))
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        f32x4_pmax(x, y)
    }
}

/// The two f64 halves of four f32 lanes.
#[inline(always)]
fn widen(v: v128) -> (v128, v128) {
    let lo = f64x2_promote_low_f32x4(v);
    let hi = f64x2_promote_low_f32x4(i32x4_shuffle::<2, 3, 0, 1>(v, v));
    (lo, hi)
}

/// Four f32 lanes from two f64 halves, each rounded once.
#[inline(always)]
fn narrow(lo: v128, hi: v128) -> v128 {
    i32x4_shuffle::<0, 1, 4, 5>(f32x4_demote_f64x2_zero(lo), f32x4_demote_f64x2_zero(hi))
}

/// Whether an f64 sum, rounded to f32, may round twice: the 29 bits f32
/// drops are exactly 1000…0 (halfway between two floats).
#[inline(always)]
fn halfway(s: v128) -> v128 {
    i64x2_eq(
        v128_and(s, i64x2_splat((1 << 29) - 1)),
        i64x2_splat(1 << 28),
    )
}

/// `s = p + c` (f64) moved one f64 step toward the exact sum where it lies
/// halfway between two floats and is inexact (Knuth's two-sum gives the
/// remainder), so that rounding it to f32 rounds as the exact sum would.
#[inline(always)]
fn settle_tie(s: v128, p: v128, c: v128) -> v128 {
    let bb = f64x2_sub(s, p);
    let e = f64x2_add(f64x2_sub(p, f64x2_sub(s, bb)), f64x2_sub(c, bb));
    let inexact = f64x2_ne(e, f64x2_splat(0.0));
    // +1 step in magnitude when the remainder has the sum's sign, else -1.
    let same_sign = i64x2_ge(v128_xor(s, e), i64x2_splat(0));
    let step = v128_bitselect(i64x2_splat(1), i64x2_splat(-1), same_sign);
    i64x2_add(s, v128_and(step, v128_and(halfway(s), inexact)))
}

/// `a · b + c` rounded once to f32, as a fused multiply-add gives it (wasm
/// has none; the portable code's `mul_add` calls a software one): the
/// product is exact in f64 and the sum rounds once to f64; rounding that to
/// f32 rounds twice, which differs from rounding once only when the f64
/// sum lies exactly halfway between two floats while the exact sum does
/// not. That is rare, so the two-sum that settles it runs only when some
/// lane is halfway.
#[inline(always)]
fn fused(a: v128, b: v128, c: v128) -> v128 {
    let ((alo, ahi), (blo, bhi), (clo, chi)) = (widen(a), widen(b), widen(c));
    let (plo, phi) = (f64x2_mul(alo, blo), f64x2_mul(ahi, bhi));
    let (slo, shi) = (f64x2_add(plo, clo), f64x2_add(phi, chi));
    if v128_any_true(v128_or(halfway(slo), halfway(shi))) {
        narrow(settle_tie(slo, plo, clo), settle_tie(shi, phi, chi))
    } else {
        narrow(slo, shi)
    }
}

/// `a · b - c` rounded once when `c` lies within a factor of two of
/// `a · b` (or is zero): the product is exact in f64 and, by Sterbenz's
/// lemma, so is the difference, which then rounds once to f32.
#[inline(always)]
fn residue(a: v128, b: v128, c: v128) -> v128 {
    let ((alo, ahi), (blo, bhi), (clo, chi)) = (widen(a), widen(b), widen(c));
    narrow(
        f64x2_sub(f64x2_mul(alo, blo), clo),
        f64x2_sub(f64x2_mul(ahi, bhi), chi),
    )
}

/// The products of 16 signed bytes summed in fours, as floats: widening
/// products (|a·b| ≤ 128², within 16 bits) added in pairs to 32 bits.
#[inline(always)]
fn dot_halves(a: v128, b: v128) -> v128 {
    let low = i32x4_extadd_pairwise_i16x8(i16x8_extmul_low_i8x16(a, b));
    let high = i32x4_extadd_pairwise_i16x8(i16x8_extmul_high_i8x16(a, b));
    f32x4_convert_i32x4(i32x4_add(low, high))
}

/// Bytes 0..8 all ones where bits of `x` are set, bytes 8..16 the same
/// for `y`.
#[inline(always)]
fn bit_bytes16(x: u8, y: u8) -> v128 {
    let bytes = u64x2(
        u64::from(x) * 0x0101_0101_0101_0101,
        u64::from(y) * 0x0101_0101_0101_0101,
    );
    let bit = u64x2_splat(0x8040_2010_0804_0201);
    u8x16_ne(v128_and(bytes, bit), u8x16_splat(0))
}

// SAFETY: the module is compiled with `simd128`.
unsafe impl Simd for Simd128 {
    type F32 = v128;
    type I32 = v128;
    type Mask = v128;
    const LANES: usize = 4;
    // What engines on x86-64 hosts map vectors to.
    const REGISTERS: usize = 16;
    const FAST_LOOKUP32: bool = false;

    #[inline(always)]
    fn splat(self, v: f32) -> v128 {
        f32x4_splat(v)
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> v128 {
        // SAFETY: the caller's contract; `v128_load` takes any alignment.
        unsafe { v128_load(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: v128) {
        // SAFETY: as above.
        unsafe { v128_store(p.cast(), v) }
    }
    #[inline(always)]
    unsafe fn load_partial(self, p: *const f32, len: usize, fill: f32) -> v128 {
        // SAFETY: `first4` reads only `len` floats.
        unsafe { v128_load(super::vector::first4(p, len, fill).as_ptr().cast()) }
    }
    #[inline(always)]
    unsafe fn load_lanes(self, p: *const f32, first: usize, end: usize) -> v128 {
        // SAFETY: `lanes4` reads only lanes `first..end`.
        unsafe { v128_load(super::vector::lanes4(p, first, end).as_ptr().cast()) }
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, len: usize, v: v128) {
        let mut t = [0f32; 4];
        // SAFETY: `t` holds four floats; `store_first4` writes `len`.
        unsafe {
            v128_store(t.as_mut_ptr().cast(), v);
            super::vector::store_first4(p, len, t);
        }
    }
    #[inline(always)]
    fn add(self, a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    fn sub(self, a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    fn mul(self, a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    fn div(self, a: v128, b: v128) -> v128 {
        f32x4_div(a, b)
    }
    #[inline(always)]
    fn mul_add(self, a: v128, b: v128, c: v128) -> v128 {
        fused(a, b, c)
    }
    #[inline(always)]
    fn neg_mul_add(self, a: v128, b: v128, c: v128) -> v128 {
        fused(f32x4_neg(a), b, c)
    }
    #[inline(always)]
    fn mul_add_approx(self, a: v128, b: v128, c: v128) -> v128 {
        madd(a, b, c)
    }
    #[inline(always)]
    fn product_residue(self, a: v128, b: v128, c: v128) -> v128 {
        residue(a, b, c)
    }
    #[inline(always)]
    fn neg_product_residue(self, a: v128, b: v128, c: v128) -> v128 {
        residue(f32x4_neg(a), b, f32x4_neg(c))
    }
    #[inline(always)]
    fn min(self, a: v128, b: v128) -> v128 {
        // pmin(x, y) = y < x ? y : x, so pmin(b, a) = a < b ? a : b.
        pmin(b, a)
    }
    #[inline(always)]
    fn max(self, a: v128, b: v128) -> v128 {
        // pmax(x, y) = x < y ? y : x, so pmax(b, a) = b < a ? a : b.
        pmax(b, a)
    }
    #[inline(always)]
    fn and(self, a: v128, b: v128) -> v128 {
        v128_and(a, b)
    }
    #[inline(always)]
    fn or(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn xor(self, a: v128, b: v128) -> v128 {
        v128_xor(a, b)
    }
    #[inline(always)]
    fn and_not(self, a: v128, b: v128) -> v128 {
        v128_andnot(b, a)
    }
    #[inline(always)]
    fn lt(self, a: v128, b: v128) -> v128 {
        f32x4_lt(a, b)
    }
    #[inline(always)]
    fn le(self, a: v128, b: v128) -> v128 {
        f32x4_le(a, b)
    }
    #[inline(always)]
    fn ge(self, a: v128, b: v128) -> v128 {
        f32x4_ge(a, b)
    }
    #[inline(always)]
    fn not_lt(self, a: v128, b: v128) -> v128 {
        v128_not(f32x4_lt(a, b))
    }
    #[inline(always)]
    fn unordered(self, a: v128, b: v128) -> v128 {
        v128_or(f32x4_ne(a, a), f32x4_ne(b, b))
    }
    #[inline(always)]
    fn mask_or(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn mask_and_not(self, a: v128, b: v128) -> v128 {
        v128_andnot(b, a)
    }
    #[inline(always)]
    fn select(self, m: v128, a: v128, b: v128) -> v128 {
        v128_bitselect(a, b, m)
    }
    #[inline(always)]
    fn clear(self, m: v128, v: v128) -> v128 {
        v128_andnot(v, m)
    }
    #[inline(always)]
    fn bits(self, m: v128) -> u32 {
        u32::from(i32x4_bitmask(m))
    }
    #[inline(always)]
    fn ldexp(self, p: v128, n: v128) -> v128 {
        let e = i32x4_add(i32x4_trunc_sat_f32x4(n), i32x4_splat(127));
        f32x4_mul(p, i32x4_shl(e, 23))
    }
    #[inline(always)]
    fn round_to_bits(self, v: v128) -> v128 {
        i32x4_trunc_sat_f32x4(f32x4_nearest(v))
    }
    #[inline(always)]
    fn trunc_i32(self, v: v128) -> v128 {
        i32x4_trunc_sat_f32x4(v)
    }
    #[inline(always)]
    fn i32_to_f32(self, i: v128) -> v128 {
        f32x4_convert_i32x4(i)
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32], i: v128) -> v128 {
        let at = |j: i32| table[(j & 31) as usize];
        f32x4(
            at(i32x4_extract_lane::<0>(i)),
            at(i32x4_extract_lane::<1>(i)),
            at(i32x4_extract_lane::<2>(i)),
            at(i32x4_extract_lane::<3>(i)),
        )
    }
    #[inline(always)]
    fn unzip(self, a: v128, b: v128) -> (v128, v128) {
        (
            i32x4_shuffle::<0, 2, 4, 6>(a, b),
            i32x4_shuffle::<1, 3, 5, 7>(a, b),
        )
    }
    #[inline(always)]
    fn transpose_square(self, v: &mut [v128; 16]) {
        // Rows interleaved in pairs, then 64-bit halves gathered.
        let t0 = i32x4_shuffle::<0, 4, 1, 5>(v[0], v[1]);
        let t1 = i32x4_shuffle::<2, 6, 3, 7>(v[0], v[1]);
        let t2 = i32x4_shuffle::<0, 4, 1, 5>(v[2], v[3]);
        let t3 = i32x4_shuffle::<2, 6, 3, 7>(v[2], v[3]);
        v[0] = i32x4_shuffle::<0, 1, 4, 5>(t0, t2);
        v[1] = i32x4_shuffle::<2, 3, 6, 7>(t0, t2);
        v[2] = i32x4_shuffle::<0, 1, 4, 5>(t1, t3);
        v[3] = i32x4_shuffle::<2, 3, 6, 7>(t1, t3);
    }
    #[inline(always)]
    fn reduce_add(self, v: v128) -> f32 {
        let h = f32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        f32x4_extract_lane::<0>(h) + f32x4_extract_lane::<1>(h)
    }
    #[inline(always)]
    fn reduce_max(self, v: v128) -> f32 {
        let m = pmax(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        let m = pmax(m, i32x4_shuffle::<1, 0, 3, 2>(m, m));
        f32x4_extract_lane::<0>(m)
    }

    // Two 16-byte registers.
    type I8x32 = [v128; 2];
    #[inline(always)]
    unsafe fn load_i8x32(self, p: *const u8) -> [v128; 2] {
        // SAFETY: the caller's contract; `v128_load` takes any alignment.
        unsafe { [v128_load(p.cast()), v128_load(p.add(16).cast())] }
    }
    #[inline(always)]
    unsafe fn nibbles_i8x32(self, p: *const u8) -> [v128; 2] {
        // SAFETY: as above.
        let v = unsafe { v128_load(p.cast()) };
        [v128_and(v, u8x16_splat(0x0f)), u8x16_shr(v, 4)]
    }
    #[inline(always)]
    fn bit_bytes_i8x32(self, bits: u32) -> [v128; 2] {
        let [b0, b1, b2, b3] = bits.to_le_bytes();
        [bit_bytes16(b0, b1), bit_bytes16(b2, b3)]
    }
    #[inline(always)]
    fn splat_i8x32(self, v: u8) -> [v128; 2] {
        [u8x16_splat(v); 2]
    }
    #[inline(always)]
    fn and_i8x32(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        [v128_and(a[0], b[0]), v128_and(a[1], b[1])]
    }
    #[inline(always)]
    fn or_i8x32(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        [v128_or(a[0], b[0]), v128_or(a[1], b[1])]
    }
    #[inline(always)]
    fn sub_i8x32(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        [i8x16_sub(a[0], b[0]), i8x16_sub(a[1], b[1])]
    }
    #[inline(always)]
    fn shr_u8x32<const N: i32>(self, a: [v128; 2]) -> [v128; 2] {
        [u8x16_shr(a[0], N as u32), u8x16_shr(a[1], N as u32)]
    }
    #[inline(always)]
    fn shl4_u8x32(self, a: [v128; 2]) -> [v128; 2] {
        [i8x16_shl(a[0], 4), i8x16_shl(a[1], 4)]
    }
    #[inline(always)]
    fn dot_i8x32_add(self, acc: v128, lo: f32, hi: f32, a: [v128; 2], b: [v128; 2]) -> v128 {
        let acc = madd(dot_halves(a[0], b[0]), f32x4_splat(lo), acc);
        madd(dot_halves(a[1], b[1]), f32x4_splat(hi), acc)
    }
}
