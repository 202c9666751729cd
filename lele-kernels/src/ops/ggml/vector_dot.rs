//! The quantized dot products on a SIMD backend: the same block sums as
//! the portable ones in `dot.rs`, 32 bytes at a time. Each block's integer
//! products are exact; what differs from the portable code is only where
//! the block scales are applied (to each vector's partial sums rather
//! than to the block's whole sum) and the order of the float additions.
use super::GgmlType;
use super::blocks::{half_at, scale_min_k4};
use super::dot::{Q8_0_BYTES, Q8_K_BYTES};
use crate::simd::{Simd, SimdKernel};

/// `Σ w·a` over one row (`w` in blocks of `ty`, `act` its activation
/// blocks, equal in number), or `None` for a type without a vector form.
#[inline(always)]
pub(super) fn row_dot<S: Simd>(s: S, ty: GgmlType, w: &[u8], act: &[u8]) -> Option<f32> {
    Some(match ty {
        GgmlType::Q8_0 => blocks_32::<S, Q8_0Values>(s, w, act),
        GgmlType::Q4_0 => blocks_32::<S, Q4_0Values>(s, w, act),
        GgmlType::Q5_0 => blocks_32::<S, Q5_0Values>(s, w, act),
        GgmlType::Q4K => k4_blocks(s, w, act, 144),
        GgmlType::Q5K => k4_blocks(s, w, act, 176),
        GgmlType::Q6K => q6_k_blocks(s, w, act),
        _ => return None,
    })
}

/// How a 32-element weight type's block (f16 scale first) unpacks to 32
/// signed values. A trait rather than a closure: a closure is compiled as
/// a function of its own, without the backend's target features.
trait Values32 {
    /// Bytes per block.
    const SIZE: usize;
    /// The block's values.
    fn values<S: Simd>(s: S, w: &[u8]) -> S::I8x32;
}

struct Q8_0Values;
impl Values32 for Q8_0Values {
    const SIZE: usize = 34;
    #[inline(always)]
    fn values<S: Simd>(s: S, w: &[u8]) -> S::I8x32 {
        // SAFETY: a Q8_0 block is 34 bytes, its values the last 32.
        unsafe { s.load_i8x32(w.as_ptr().add(2)) }
    }
}

struct Q4_0Values;
impl Values32 for Q4_0Values {
    const SIZE: usize = 18;
    #[inline(always)]
    fn values<S: Simd>(s: S, w: &[u8]) -> S::I8x32 {
        // SAFETY: a Q4_0 block is 18 bytes, its nibbles the last 16.
        let q = unsafe { s.nibbles_i8x32(w.as_ptr().add(2)) };
        s.sub_i8x32(q, s.splat_i8x32(8))
    }
}

struct Q5_0Values;
impl Values32 for Q5_0Values {
    const SIZE: usize = 22;
    #[inline(always)]
    fn values<S: Simd>(s: S, w: &[u8]) -> S::I8x32 {
        let high = u32::from_le_bytes([w[2], w[3], w[4], w[5]]);
        // SAFETY: a Q5_0 block is 22 bytes, its nibbles the last 16.
        let q = unsafe { s.nibbles_i8x32(w.as_ptr().add(6)) };
        let fifth = s.and_i8x32(s.bit_bytes_i8x32(high), s.splat_i8x32(0x10));
        s.sub_i8x32(s.or_i8x32(q, fifth), s.splat_i8x32(16))
    }
}

/// Rows of 32-element blocks of type `V` against Q8_0 activations.
#[inline(always)]
fn blocks_32<S: Simd, V: Values32>(s: S, w: &[u8], act: &[u8]) -> f32 {
    let mut acc = s.splat(0.0);
    for (w, a) in w.chunks_exact(V::SIZE).zip(act.chunks_exact(Q8_0_BYTES)) {
        let d = half_at(w, 0) * half_at(a, 0);
        // SAFETY: a Q8_0 block is 34 bytes, its values the last 32.
        let y = unsafe { s.load_i8x32(a.as_ptr().add(2)) };
        acc = s.dot_i8x32_add(acc, d, d, V::values(s, w), y);
    }
    s.reduce_add(acc)
}

/// A Q8_K block's scale.
#[inline(always)]
fn q8_k_scale(a: &[u8]) -> f32 {
    f32::from_le_bytes([a[0], a[1], a[2], a[3]])
}

/// The sum of a Q8_K block's values `16i..16i + 32` (from its sums of 16).
#[inline(always)]
fn q8_k_pair_sum(a: &[u8], i: usize) -> i32 {
    let sum = |j: usize| i32::from(i16::from_le_bytes([a[260 + 2 * j], a[261 + 2 * j]]));
    sum(i) + sum(i + 1)
}

/// Q4_K (`size` 144) or Q5_K (176) super-blocks against Q8_K: per pair of
/// 32-element sub-blocks, 32 bytes whose low nibbles are the first and
/// high nibbles the second (Q5_K adds a fifth bit: bit `sub` of byte `l`
/// for element `l` of sub-block `sub`); each sub-block's scale applied to
/// its products, the minimums through the activations' sums.
#[inline(always)]
fn k4_blocks<S: Simd>(s: S, w: &[u8], act: &[u8], size: usize) -> f32 {
    let five = size == 176;
    let qs_at = if five { 48 } else { 16 };
    let mut acc = s.splat(0.0);
    let mut mins = 0f32;
    let low = s.splat_i8x32(0x0f);
    let bit4 = s.splat_i8x32(0x10);
    for (w, a) in w.chunks_exact(size).zip(act.chunks_exact(Q8_K_BYTES)) {
        let da = q8_k_scale(a);
        let (d, dmin) = (half_at(w, 0) * da, half_at(w, 2) * da);
        let mut high = if five {
            // SAFETY: Q5_K's fifth bits are 32 bytes from offset 16.
            Some(unsafe { s.load_i8x32(w.as_ptr().add(16)) })
        } else {
            None
        };
        let mut sum_m = 0i32;
        for pair in 0..4 {
            // SAFETY: the super-block holds 128 bytes of nibbles from
            // `qs_at`; the Q8_K block 256 values from offset 4.
            let (q, y0, y1) = unsafe {
                (
                    s.load_i8x32(w.as_ptr().add(qs_at + 32 * pair)),
                    s.load_i8x32(a.as_ptr().add(4 + 64 * pair)),
                    s.load_i8x32(a.as_ptr().add(36 + 64 * pair)),
                )
            };
            let (mut q0, mut q1) = (s.and_i8x32(q, low), s.shr_u8x32::<4>(q));
            if let Some(h) = high.as_mut() {
                // Bit `sub` of each byte, moved to bit 4, one sub-block
                // after the other.
                q0 = s.or_i8x32(q0, s.and_i8x32(s.shl4_u8x32(*h), bit4));
                *h = s.shr_u8x32::<1>(*h);
                q1 = s.or_i8x32(q1, s.and_i8x32(s.shl4_u8x32(*h), bit4));
                *h = s.shr_u8x32::<1>(*h);
            }
            let (sc0, m0) = scale_min_k4(2 * pair, &w[4..16]);
            let (sc1, m1) = scale_min_k4(2 * pair + 1, &w[4..16]);
            let (d0, d1) = (d * f32::from(sc0), d * f32::from(sc1));
            acc = s.dot_i8x32_add(acc, d0, d0, q0, y0);
            acc = s.dot_i8x32_add(acc, d1, d1, q1, y1);
            sum_m += i32::from(m0) * q8_k_pair_sum(a, 4 * pair)
                + i32::from(m1) * q8_k_pair_sum(a, 4 * pair + 2);
        }
        mins += dmin * sum_m as f32;
    }
    s.reduce_add(acc) - mins
}

/// Q6_K super-blocks against Q8_K: per 128 elements, 64 bytes of low
/// nibbles and 32 of 2-bit high parts make four vectors of 32 values (two
/// 16-element sub-blocks each, with their own scales), centred on 32.
#[inline(always)]
fn q6_k_blocks<S: Simd>(s: S, w: &[u8], act: &[u8]) -> f32 {
    let mut acc = s.splat(0.0);
    let (low, two) = (s.splat_i8x32(0x0f), s.splat_i8x32(0x03));
    let centre = s.splat_i8x32(32);
    for (w, a) in w.chunks_exact(210).zip(act.chunks_exact(Q8_K_BYTES)) {
        let da = q8_k_scale(a);
        let d = half_at(w, 208) * da;
        for half in 0..2 {
            // SAFETY: a Q6_K block is 210 bytes: 128 of low nibbles, then
            // 64 of high bits; each half reads 64 and 32 of them.
            let (l0, l1, h) = unsafe {
                let p = w.as_ptr();
                (
                    s.load_i8x32(p.add(64 * half)),
                    s.load_i8x32(p.add(64 * half + 32)),
                    s.load_i8x32(p.add(128 + 32 * half)),
                )
            };
            // The high parts: bits 2i..2i + 2 of each byte, moved to 4..6.
            let top = [
                q6_high(s, h, two),
                q6_high(s, s.shr_u8x32::<2>(h), two),
                q6_high(s, s.shr_u8x32::<4>(h), two),
                q6_high(s, s.shr_u8x32::<6>(h), two),
            ];
            let values = [
                s.or_i8x32(s.and_i8x32(l0, low), top[0]),
                s.or_i8x32(s.and_i8x32(l1, low), top[1]),
                s.or_i8x32(s.shr_u8x32::<4>(l0), top[2]),
                s.or_i8x32(s.shr_u8x32::<4>(l1), top[3]),
            ];
            for (i, q) in values.into_iter().enumerate() {
                let sub = 8 * half + 2 * i;
                let (lo, hi) = (
                    d * f32::from(w[192 + sub] as i8),
                    d * f32::from(w[193 + sub] as i8),
                );
                // SAFETY: the Q8_K block holds 256 values from offset 4.
                let y = unsafe { s.load_i8x32(a.as_ptr().add(4 + 16 * sub)) };
                acc = s.dot_i8x32_add(acc, lo, hi, s.sub_i8x32(q, centre), y);
            }
        }
    }
    s.reduce_add(acc)
}

/// The two low bits of each byte of `h`, moved to bits 4..6 (`two` is
/// every byte 3).
#[inline(always)]
fn q6_high<S: Simd>(s: S, h: S::I8x32, two: S::I8x32) -> S::I8x32 {
    s.shl4_u8x32(s.and_i8x32(h, two))
}

/// Every activation row (`act`, `rows` of `act_row` bytes) against every
/// weight row (`w`, `n` of `w_row` bytes) into `y` (`rows × n`), weight
/// rows outermost so each stays in cache while the activation rows pass.
/// `None` when the type has no vector form.
pub(super) struct RowProducts<'a> {
    pub ty: GgmlType,
    pub w: &'a [u8],
    pub w_row: usize,
    pub act: &'a [u8],
    pub act_row: usize,
    pub y: &'a mut [f32],
    pub n: usize,
}

impl SimdKernel for RowProducts<'_> {
    type Output = Option<()>;
    #[inline(always)]
    fn run<S: Simd>(self, s: S) -> Option<()> {
        for (r, w) in self.w.chunks_exact(self.w_row).take(self.n).enumerate() {
            for (a, y) in self
                .act
                .chunks_exact(self.act_row)
                .zip(self.y.chunks_exact_mut(self.n))
            {
                y[r] = row_dot(s, self.ty, w, a)?;
            }
        }
        Some(())
    }
}
