//! The quantized dot products on a SIMD backend: the same block sums as
//! the portable ones in `dot.rs`, 32 bytes at a time. Each block's integer
//! products are exact; what differs from the portable code is only where
//! the block scales are applied (to each vector's partial sums rather
//! than to the block's whole sum) and the order of the float additions.
use super::GgmlType;
use super::blocks::{half_at, scale_min_k4};
use super::dot::{Q8_0_BYTES, Q8_K_BYTES};
use crate::simd::{Simd, SimdKernel};

/// `Σ w·a` of one weight row (`w` in blocks of `ty`) with each of `R`
/// activation rows (their blocks, as many as `w`'s), each weight block
/// unpacked once for all of them; `None` for a type without a vector
/// form or activation rows too short.
#[inline(always)]
pub(super) fn rows_dot<S: Simd, const R: usize>(
    s: S,
    ty: GgmlType,
    w: &[u8],
    acts: [&[u8]; R],
) -> Option<[f32; R]> {
    let (block, size) = ty.block()?;
    let a_bytes = if block == 32 { Q8_0_BYTES } else { Q8_K_BYTES };
    let blocks = w.len() / size;
    // The unsafe loads below read activation block `b` of each row.
    if acts.iter().any(|a| a.len() < blocks * a_bytes) {
        return None;
    }
    Some(match ty {
        GgmlType::Q8_0 => blocks_32::<S, Q8_0Values, R>(s, w, acts),
        GgmlType::Q4_0 => blocks_32::<S, Q4_0Values, R>(s, w, acts),
        GgmlType::Q5_0 => blocks_32::<S, Q5_0Values, R>(s, w, acts),
        GgmlType::Q4K => k4_blocks(s, w, acts, 144),
        GgmlType::Q5K => k4_blocks(s, w, acts, 176),
        GgmlType::Q6K => q6_k_blocks(s, w, acts),
        _ => return None,
    })
}

/// The lane sums of `R` accumulators.
#[inline(always)]
fn reduce<S: Simd, const R: usize>(s: S, acc: [S::F32; R]) -> [f32; R] {
    let mut out = [0f32; R];
    for (o, a) in out.iter_mut().zip(acc) {
        *o = s.reduce_add(a);
    }
    out
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
fn blocks_32<S: Simd, V: Values32, const R: usize>(s: S, w: &[u8], acts: [&[u8]; R]) -> [f32; R] {
    let mut acc = [s.splat(0.0); R];
    for (b, w) in w.chunks_exact(V::SIZE).enumerate() {
        let (dw, x) = (half_at(w, 0), V::values(s, w));
        for (acc, a) in acc.iter_mut().zip(acts) {
            let a = &a[b * Q8_0_BYTES..(b + 1) * Q8_0_BYTES];
            let d = dw * half_at(a, 0);
            // SAFETY: a Q8_0 block is 34 bytes, its values the last 32.
            let y = unsafe { s.load_i8x32(a.as_ptr().add(2)) };
            *acc = s.dot_i8x32_add(*acc, d, d, x, y);
        }
    }
    reduce(s, acc)
}

/// A Q8_K block's scale.
#[inline(always)]
fn q8_k_scale(a: &[u8]) -> f32 {
    f32::from_le_bytes([a[0], a[1], a[2], a[3]])
}

/// The sum of a Q8_K block's values `16i..16i + 32`.
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
fn k4_blocks<S: Simd, const R: usize>(s: S, w: &[u8], acts: [&[u8]; R], size: usize) -> [f32; R] {
    let five = size == 176;
    let qs_at = if five { 48 } else { 16 };
    let mut acc = [s.splat(0.0); R];
    let mut mins = [0f32; R];
    let low = s.splat_i8x32(0x0f);
    let bit4 = s.splat_i8x32(0x10);
    for (b, w) in w.chunks_exact(size).enumerate() {
        let (d, dmin) = (half_at(w, 0), half_at(w, 2));
        let mut high = if five {
            // SAFETY: Q5_K's fifth bits are 32 bytes from offset 16.
            Some(unsafe { s.load_i8x32(w.as_ptr().add(16)) })
        } else {
            None
        };
        let mut scales = [0f32; 8];
        let mut min_weights = [0i32; 8];
        for (sub, (sc, m)) in scales.iter_mut().zip(&mut min_weights).enumerate() {
            let (scale, min) = scale_min_k4(sub, &w[4..16]);
            (*sc, *m) = (d * f32::from(scale), i32::from(min));
        }
        let blocks: [&[u8]; R] =
            core::array::from_fn(|r| &acts[r][b * Q8_K_BYTES..(b + 1) * Q8_K_BYTES]);
        for pair in 0..4 {
            // SAFETY: the super-block holds 128 bytes of nibbles from
            // `qs_at`.
            let q = unsafe { s.load_i8x32(w.as_ptr().add(qs_at + 32 * pair)) };
            let (mut q0, mut q1) = (s.and_i8x32(q, low), s.shr_u8x32::<4>(q));
            if let Some(h) = high.as_mut() {
                // Bit `sub` of each byte, moved to bit 4, one sub-block
                // after the other.
                q0 = s.or_i8x32(q0, s.and_i8x32(s.shl4_u8x32(*h), bit4));
                *h = s.shr_u8x32::<1>(*h);
                q1 = s.or_i8x32(q1, s.and_i8x32(s.shl4_u8x32(*h), bit4));
                *h = s.shr_u8x32::<1>(*h);
            }
            for (acc, a) in acc.iter_mut().zip(blocks) {
                let da = q8_k_scale(a);
                // SAFETY: a Q8_K block holds 256 values from offset 4.
                let (y0, y1) = unsafe {
                    (
                        s.load_i8x32(a.as_ptr().add(4 + 64 * pair)),
                        s.load_i8x32(a.as_ptr().add(36 + 64 * pair)),
                    )
                };
                let (d0, d1) = (da * scales[2 * pair], da * scales[2 * pair + 1]);
                *acc = s.dot_i8x32_add(*acc, d0, d0, q0, y0);
                *acc = s.dot_i8x32_add(*acc, d1, d1, q1, y1);
            }
        }
        for (mins, a) in mins.iter_mut().zip(blocks) {
            let sum_m: i32 = (0..8)
                .map(|sub| min_weights[sub] * q8_k_pair_sum(a, 2 * sub))
                .sum();
            *mins += dmin * q8_k_scale(a) * sum_m as f32;
        }
    }
    let mut out = reduce(s, acc);
    for (o, m) in out.iter_mut().zip(mins) {
        *o -= m;
    }
    out
}

/// Q6_K super-blocks against Q8_K: per 128 elements, 64 bytes of low
/// nibbles and 32 of 2-bit high parts make four vectors of 32 values (two
/// 16-element sub-blocks each, with their own scales), centred on 32.
#[inline(always)]
fn q6_k_blocks<S: Simd, const R: usize>(s: S, w: &[u8], acts: [&[u8]; R]) -> [f32; R] {
    let mut acc = [s.splat(0.0); R];
    let (low, two) = (s.splat_i8x32(0x0f), s.splat_i8x32(0x03));
    let centre = s.splat_i8x32(32);
    for (b, w) in w.chunks_exact(210).enumerate() {
        let d = half_at(w, 208);
        let blocks: [&[u8]; R] =
            core::array::from_fn(|r| &acts[r][b * Q8_K_BYTES..(b + 1) * Q8_K_BYTES]);
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
                let q = s.sub_i8x32(q, centre);
                let (lo, hi) = (
                    d * f32::from(w[192 + sub] as i8),
                    d * f32::from(w[193 + sub] as i8),
                );
                for (acc, a) in acc.iter_mut().zip(blocks) {
                    let da = q8_k_scale(a);
                    // SAFETY: the Q8_K block holds 256 values from offset 4.
                    let y = unsafe { s.load_i8x32(a.as_ptr().add(4 + 16 * sub)) };
                    *acc = s.dot_i8x32_add(*acc, da * lo, da * hi, q, y);
                }
            }
        }
    }
    reduce(s, acc)
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
        /// Activation rows sharing each unpacked weight block.
        const GROUP: usize = 4;
        let (act_row, n) = (self.act_row, self.n);
        let rows = self.act.len() / act_row.max(1);
        for (c, w) in self.w.chunks_exact(self.w_row).take(n).enumerate() {
            let mut r = 0;
            while r + GROUP <= rows {
                let acts: [&[u8]; GROUP] =
                    core::array::from_fn(|i| &self.act[(r + i) * act_row..(r + i + 1) * act_row]);
                let dots = rows_dot(s, self.ty, w, acts)?;
                for (i, d) in dots.into_iter().enumerate() {
                    self.y[(r + i) * n + c] = d;
                }
                r += GROUP;
            }
            while r < rows {
                let [d] = rows_dot(s, self.ty, w, [&self.act[r * act_row..(r + 1) * act_row]])?;
                self.y[r * n + c] = d;
                r += 1;
            }
        }
        Some(())
    }
}
