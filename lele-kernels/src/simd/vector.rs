//! The vector abstraction kernels are written over once: [`Simd`], a
//! zero-sized token per instruction set whose methods are the handful of
//! f32 operations the kernels need, and [`dispatch`], which runs a
//! [`SimdKernel`] on the best backend this CPU has.
//!
//! Every method is `#[inline(always)]` and every kernel's `run` too, so a
//! kernel's whole body lands inside the backend's `#[target_feature]`
//! entry point (`dispatch`'s wrappers) and is compiled for that ISA: the
//! generic code costs nothing over intrinsics written by hand.
//!
//! The semantics are x86's where ISAs differ, so that one algorithm gives
//! the same bits on every backend: `min`/`max` return their second operand
//! when either is NaN, conversions round to nearest even.
// Builds without any vector backend (wasm32 without `simd128`) use none of
// this.
#![cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )),
    allow(dead_code)
)]
use super::Isa;

/// An instruction set's f32 vectors. A value of an implementing type is
/// proof that the CPU runs that instruction set (only [`dispatch`] makes
/// them, after detection).
///
/// # Safety
/// Implementors may only be constructed where the CPU supports every
/// instruction their methods use.
pub(crate) unsafe trait Simd: Copy {
    /// A vector of [`Self::LANES`] f32.
    type F32: Copy;
    /// A vector of [`Self::LANES`] i32.
    type I32: Copy;
    /// A lane mask, the result of a comparison.
    type Mask: Copy;
    /// Lanes per vector (at most 16).
    const LANES: usize;
    /// Vector registers the ISA has (16 or 32): how many sums, weights and
    /// inputs a kernel can keep in registers at once.
    const REGISTERS: usize;
    /// Whether [`Simd::lookup32`] is one or two instructions (it is
    /// correct everywhere, but elsewhere slower than computing instead).
    const FAST_LOOKUP32: bool;
    /// Whether [`Simd::load_lanes`] is one instruction about as fast as a
    /// plain load (AVX-512's masked loads), so a kernel may skip the
    /// branch between the two.
    const MASKED_LOADS: bool = false;

    /// Every lane `v`.
    fn splat(self, v: f32) -> Self::F32;
    /// `LANES` floats from `p`.
    ///
    /// # Safety
    /// `p` is readable for `LANES` floats.
    unsafe fn load(self, p: *const f32) -> Self::F32;
    /// Stores `LANES` floats at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES` floats.
    unsafe fn store(self, p: *mut f32, v: Self::F32);
    /// The first `len` lanes from `p` (`len <= LANES`), the others `fill`.
    ///
    /// # Safety
    /// `p` is readable for `len` floats.
    #[inline(always)]
    unsafe fn load_partial(self, p: *const f32, len: usize, fill: f32) -> Self::F32 {
        let mut t = [fill; 16];
        // SAFETY: `p` holds `len <= LANES <= 16` floats, `t` 16.
        unsafe {
            core::ptr::copy_nonoverlapping(p, t.as_mut_ptr(), len.min(Self::LANES));
            self.load(t.as_ptr())
        }
    }
    /// Lanes `first..end` (`first <= end <= LANES`) read from `p + lane`,
    /// the others zero; no other address is touched, so `p` may point
    /// before or past its row (a convolution's padding columns).
    ///
    /// # Safety
    /// `p + first .. p + end` is readable.
    #[inline(always)]
    unsafe fn load_lanes(self, p: *const f32, first: usize, end: usize) -> Self::F32 {
        let mut t = [0f32; 16];
        let end = end.min(Self::LANES);
        if first < end {
            // SAFETY: the caller's contract covers `p + first .. p + end`;
            // `t` holds 16 >= LANES floats.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    p.wrapping_add(first),
                    t.as_mut_ptr().add(first),
                    end - first,
                )
            };
        }
        // SAFETY: `t` holds 16 >= LANES floats.
        unsafe { self.load(t.as_ptr()) }
    }
    /// Stores the first `len` lanes of `v` at `p` (`len <= LANES`).
    ///
    /// # Safety
    /// `p` is writable for `len` floats.
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, len: usize, v: Self::F32) {
        let mut t = [0f32; 16];
        // SAFETY: `t` holds 16 >= LANES floats, `p` `len <= LANES`.
        unsafe {
            self.store(t.as_mut_ptr(), v);
            core::ptr::copy_nonoverlapping(t.as_ptr(), p, len.min(Self::LANES));
        }
    }

    /// `a + b`.
    fn add(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// `a - b`.
    fn sub(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// `a · b`.
    fn mul(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// `a / b`.
    fn div(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// `a · b + c`, one rounding.
    fn mul_add(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;
    /// `c - a · b`, one rounding.
    fn neg_mul_add(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;
    /// `a · b + c` for the steps of a polynomial or a range reduction,
    /// where a second rounding costs no meaningful accuracy: fused where
    /// the ISA fuses, else (wasm simd128, whose fused operation is emulated
    /// at ten times the cost) a multiply, then an add.
    #[inline(always)]
    fn mul_add_approx(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32 {
        self.mul_add(a, b, c)
    }
    /// `a · b - c` rounded once, for `c` within a factor of two of `a · b`
    /// (the rounding residue of a product, or of a product near 1): a
    /// fused multiply-subtract where the ISA has one.
    fn product_residue(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;
    /// `c - a · b` rounded once, under [`Simd::product_residue`]'s
    /// condition (a fused negated multiply-add where the ISA has one).
    fn neg_product_residue(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;
    /// `a < b ? a : b` (so `b` when either is NaN).
    fn min(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// `a > b ? a : b` (so `b` when either is NaN).
    fn max(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// Bitwise `a & b`.
    fn and(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// Bitwise `a | b`.
    fn or(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// Bitwise `a ^ b`.
    fn xor(self, a: Self::F32, b: Self::F32) -> Self::F32;
    /// Bitwise `!a & b`.
    fn and_not(self, a: Self::F32, b: Self::F32) -> Self::F32;

    /// Lanes where `a < b` (false for NaN).
    fn lt(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// Lanes where `a <= b` (false for NaN).
    fn le(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// Lanes where `a >= b` (false for NaN).
    fn ge(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// Lanes where `!(a < b)` (true for NaN).
    fn not_lt(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// Lanes where `a` or `b` is NaN.
    fn unordered(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// Lanes in `a` or `b`.
    fn mask_or(self, a: Self::Mask, b: Self::Mask) -> Self::Mask;
    /// Lanes in `b` but not `a`.
    fn mask_and_not(self, a: Self::Mask, b: Self::Mask) -> Self::Mask;
    /// `m ? 0 : v` lane by lane (+0).
    fn clear(self, m: Self::Mask, v: Self::F32) -> Self::F32;
    /// `m ? a : b` lane by lane.
    fn select(self, m: Self::Mask, a: Self::F32, b: Self::F32) -> Self::F32;
    /// Bit `i` set where lane `i` is in `m`.
    fn bits(self, m: Self::Mask) -> u32;

    /// `p · 2^n` for whole `n` with `n + 127` in [1, 254] (one rounding).
    fn ldexp(self, p: Self::F32, n: Self::F32) -> Self::F32;
    /// `v` rounded to an integer (ties to even), its bits read as f32.
    fn round_to_bits(self, v: Self::F32) -> Self::F32;
    /// `v` truncated toward zero (in range: callers mask the others).
    fn trunc_i32(self, v: Self::F32) -> Self::I32;
    /// `i` as f32.
    fn i32_to_f32(self, i: Self::I32) -> Self::F32;
    /// `table[i & 31]` lane by lane.
    fn lookup32(self, table: &[f32; 32], i: Self::I32) -> Self::F32;

    /// The even lanes and the odd lanes of `a` followed by `b` (a row of
    /// pairs split into its two phases).
    fn unzip(self, a: Self::F32, b: Self::F32) -> (Self::F32, Self::F32);
    /// Transposes the square of the first [`Self::LANES`] vectors of `v`
    /// (the others are left as they are): afterwards lane `r` of `v[c]` is
    /// what lane `c` of `v[r]` was.
    fn transpose_square(self, v: &mut [Self::F32; 16]);
    /// Hints that the cache line at `p` will be read soon (into the second
    /// level); nothing where the ISA has no such hint. Any address is
    /// fine: a prefetch never faults.
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        let _ = p;
    }
    /// The sum of the lanes, halves folded: lane `i` takes lane
    /// `i + LANES/2`, then `i + LANES/4`, …, down to lane 0 (the order of a
    /// portable loop's pairwise combination, on every backend).
    fn reduce_add(self, v: Self::F32) -> f32;
    /// The lane sums of four vectors, each added in an order of the
    /// backend's choosing (AVX-512 sums the four in one tree of shuffles:
    /// a row of four dot products reduced at once).
    #[inline(always)]
    fn reduce_add4(self, a: Self::F32, b: Self::F32, c: Self::F32, d: Self::F32) -> [f32; 4] {
        [
            self.reduce_add(a),
            self.reduce_add(b),
            self.reduce_add(c),
            self.reduce_add(d),
        ]
    }
    /// The largest lane (lanes are not NaN).
    fn reduce_max(self, v: Self::F32) -> f32;

    // Bytes of quantized blocks (the ggml dot products): 32 at a time,
    // one Q8_0 block, two 16-element sub-blocks of Q6_K.

    /// 32 bytes.
    type I8x32: Copy;
    /// The 32 bytes at `p`.
    ///
    /// # Safety
    /// `p` is readable for 32 bytes.
    unsafe fn load_i8x32(self, p: *const u8) -> Self::I8x32;
    /// The 16 bytes at `p` split into nibbles: their low nibbles as bytes
    /// 0..16, their high nibbles as bytes 16..32 (the element order of
    /// Q4_0 and Q5_0).
    ///
    /// # Safety
    /// `p` is readable for 16 bytes.
    unsafe fn nibbles_i8x32(self, p: *const u8) -> Self::I8x32;
    /// Byte `j` all ones where bit `j` of `bits` is set, else zero.
    fn bit_bytes_i8x32(self, bits: u32) -> Self::I8x32;
    /// Every byte `v`.
    fn splat_i8x32(self, v: u8) -> Self::I8x32;
    /// Bitwise and.
    fn and_i8x32(self, a: Self::I8x32, b: Self::I8x32) -> Self::I8x32;
    /// Bitwise or.
    fn or_i8x32(self, a: Self::I8x32, b: Self::I8x32) -> Self::I8x32;
    /// Bytewise `a − b`, wrapping.
    fn sub_i8x32(self, a: Self::I8x32, b: Self::I8x32) -> Self::I8x32;
    /// Each byte shifted right by `N` (1..8) as unsigned.
    fn shr_u8x32<const N: i32>(self, a: Self::I8x32) -> Self::I8x32;
    /// Each byte shifted left by 4 (its high nibble lost).
    fn shl4_u8x32(self, a: Self::I8x32) -> Self::I8x32;
    /// `acc` plus lanes whose total is `lo·Σ_{j<16} a_j·b_j + hi·Σ_{j≥16}
    /// a_j·b_j`, the bytes as signed and each half's sum exact in
    /// integers. `b`'s bytes are in −127..=127 (x86 multiplies `|a|` by
    /// `b` with `a`'s sign, which −128 in `b` would overflow).
    fn dot_i8x32_add(
        self,
        acc: Self::F32,
        lo: f32,
        hi: f32,
        a: Self::I8x32,
        b: Self::I8x32,
    ) -> Self::F32;
}

/// The first `len` (at most 4) floats at `p`, the rest `fill`, without a
/// variable-length copy (which would be a call to `memcpy`): the partial
/// loads of the four-lane backends.
///
/// # Safety
/// `p` is readable for `len` floats.
#[allow(dead_code)]
#[inline(always)]
pub(super) unsafe fn first4(p: *const f32, len: usize, fill: f32) -> [f32; 4] {
    // SAFETY: each arm reads only the first `len` floats.
    unsafe {
        match len {
            0 => [fill; 4],
            1 => [*p, fill, fill, fill],
            2 => [*p, *p.add(1), fill, fill],
            3 => [*p, *p.add(1), *p.add(2), fill],
            _ => [*p, *p.add(1), *p.add(2), *p.add(3)],
        }
    }
}

/// Lanes `first..end` of the four floats at `p`, the others zero, each
/// read on its own (see [`Simd::load_lanes`]).
///
/// # Safety
/// `p + first .. p + end` is readable.
#[allow(dead_code)]
#[inline(always)]
pub(super) unsafe fn lanes4(p: *const f32, first: usize, end: usize) -> [f32; 4] {
    let mut t = [0f32; 4];
    for (i, v) in t.iter_mut().enumerate() {
        if first <= i && i < end {
            // SAFETY: lane `i` lies in `first..end`, readable by contract.
            *v = unsafe { *p.wrapping_add(i) };
        }
    }
    t
}

/// Stores the first `len` (at most 4) of `v` at `p` (see [`first4`]).
///
/// # Safety
/// `p` is writable for `len` floats.
#[allow(dead_code)]
#[inline(always)]
pub(super) unsafe fn store_first4(p: *mut f32, len: usize, v: [f32; 4]) {
    // SAFETY: only the first `len` floats are written.
    unsafe {
        for (i, &x) in v.iter().enumerate().take(len.min(4)) {
            *p.add(i) = x;
        }
    }
}

/// A computation written over [`Simd`]: `dispatch` runs it on a backend.
pub(crate) trait SimdKernel {
    /// What the kernel returns.
    type Output;
    /// Runs the kernel on backend `s` (implementations are
    /// `#[inline(always)]`, see the module documentation).
    fn run<S: Simd>(self, s: S) -> Self::Output;
}

/// Runs `kernel` on the best backend of this CPU ([`super::best_isa`]),
/// or gives it back when that is the portable code (the caller then runs
/// its plain Rust form).
#[inline]
pub(crate) fn dispatch<K: SimdKernel>(kernel: K) -> Result<K::Output, K> {
    dispatch_on(super::best_isa(), kernel)
}

/// [`dispatch`] on `isa`, or gives the kernel back when `isa` is the
/// portable code or this CPU cannot run it.
#[inline]
pub(crate) fn dispatch_on<K: SimdKernel>(isa: Isa, kernel: K) -> Result<K::Output, K> {
    if !super::isa_runs(isa) {
        return Err(kernel);
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa_runs` confirmed AVX-512F (detected with AVX2 and FMA).
        Isa::Avx512 => Ok(unsafe { on_avx512(kernel) }),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa_runs` confirmed AVX2 and FMA.
        Isa::Avx2 => Ok(unsafe { on_avx2(kernel) }),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => Ok(kernel.run(super::neon::Neon::new())),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => Ok(kernel.run(super::simd128::Simd128::new())),
        _ => Err(kernel),
    }
}

/// `kernel` compiled for AVX-512F.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn on_avx512<K: SimdKernel>(kernel: K) -> K::Output {
    // SAFETY: this function's contract.
    kernel.run(unsafe { super::avx512::Avx512::new_unchecked() })
}

/// `kernel` compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn on_avx2<K: SimdKernel>(kernel: K) -> K::Output {
    // SAFETY: this function's contract.
    kernel.run(unsafe { super::avx2::Avx2::new_unchecked() })
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::{Simd, SimdKernel, dispatch_on};

    /// Every `load_lanes(p, first, end)` with `first <= end <= LANES`:
    /// the lanes of the range as stored, the others zero.
    struct LoadLanes;

    impl SimdKernel for LoadLanes {
        type Output = usize;
        #[inline(always)]
        fn run<S: Simd>(self, s: S) -> usize {
            let l = S::LANES;
            let src: Vec<f32> = (0..l).map(|i| i as f32 + 1.5).collect();
            let mut checked = 0;
            for first in 0..=l {
                for end in first..=l {
                    let mut got = [f32::NAN; 16];
                    // SAFETY: `src` holds LANES floats, `got` 16.
                    unsafe { s.store(got.as_mut_ptr(), s.load_lanes(src.as_ptr(), first, end)) };
                    for (i, &g) in got.iter().enumerate().take(l) {
                        let want = if (first..end).contains(&i) {
                            src[i]
                        } else {
                            0.0
                        };
                        assert_eq!(g, want, "lane {i} of {first}..{end}");
                    }
                    checked += 1;
                }
            }
            checked
        }
    }

    #[test]
    fn load_lanes_reads_the_range_and_zeroes_the_rest() {
        for isa in crate::simd::runnable_isas() {
            if let Ok(n) = dispatch_on(isa, LoadLanes) {
                assert!(n > 0, "{isa:?}");
            }
        }
    }

    /// `mul_add` and the residues of every backend round once, as
    /// `f32::mul_add` does, bit for bit: on random triples, and on sums
    /// whose f64 value lies exactly halfway between two floats (where an
    /// f64 sum rounded to f32 would round twice: wasm's emulation must
    /// settle them toward the exact sum).
    struct FusedOps(Vec<[f32; 3]>);

    impl SimdKernel for FusedOps {
        type Output = usize;
        #[inline(always)]
        fn run<S: Simd>(self, s: S) -> usize {
            let l = S::LANES;
            let mut checked = 0;
            for chunk in self.0.chunks(l) {
                let lane = |k: usize| -> Vec<f32> {
                    (0..l).map(|i| chunk.get(i).map_or(1.0, |t| t[k])).collect()
                };
                let (a, b, c) = (lane(0), lane(1), lane(2));
                let p: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
                let u: Vec<f32> = b.iter().map(|y| 1.0 / y).collect();
                let one = vec![1.0f32; l];
                let mut got = [[0f32; 16]; 4];
                // SAFETY: every vector holds LANES floats, `got`'s rows 16.
                unsafe {
                    let v = |x: &[f32]| s.load(x.as_ptr());
                    s.store(got[0].as_mut_ptr(), s.mul_add(v(&a), v(&b), v(&c)));
                    s.store(got[1].as_mut_ptr(), s.neg_mul_add(v(&a), v(&b), v(&c)));
                    s.store(got[2].as_mut_ptr(), s.product_residue(v(&a), v(&b), v(&p)));
                    s.store(
                        got[3].as_mut_ptr(),
                        s.neg_product_residue(v(&u), v(&b), v(&one)),
                    );
                }
                for i in 0..chunk.len() {
                    let want = [
                        a[i].mul_add(b[i], c[i]),
                        (-a[i]).mul_add(b[i], c[i]),
                        a[i].mul_add(b[i], -p[i]),
                        (-u[i]).mul_add(b[i], 1.0),
                    ];
                    for (k, w) in want.iter().enumerate() {
                        assert_eq!(
                            got[k][i].to_bits(),
                            w.to_bits(),
                            "op {k} of ({}, {}, {}): {} vs {w}",
                            a[i],
                            b[i],
                            c[i],
                            got[k][i]
                        );
                    }
                    checked += 1;
                }
            }
            checked
        }
    }

    #[test]
    fn fused_operations_round_once() {
        // (1 + 2^-12)² = 1 + 2^-11 + 2^-24, halfway between two floats; a
        // tiny addend decides the rounding, which an f64 sum loses.
        let a = 1.0 + f32::powi(2.0, -12);
        let tiny = f32::powi(2.0, -80);
        let mut cases = vec![
            [a, a, tiny],
            [a, a, -tiny],
            [-a, a, tiny],
            [a, -a, -tiny],
            [a, a, 0.0],
            [3.0, 1.0 / 3.0, -1.0],
            [0.0, 5.0, -0.0],
            [1e-30, 1e-10, 1e-38],
        ];
        // A fixed xorshift stream: magnitudes over many binades, both signs.
        let mut x: u32 = 0x9e37_79b9;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let m = (x >> 9) as f32 / (1u32 << 23) as f32 + 1.0;
            let e = ((x & 0x3f) as i32) - 32;
            let sign = if x & 0x40 != 0 { -1.0 } else { 1.0 };
            sign * m * f32::powi(2.0, e)
        };
        for _ in 0..4000 {
            cases.push([next(), next(), next()]);
        }
        // Products near halfway cases: a·b exactly halfway, c tiny.
        for k in 1..200u32 {
            let a = 1.0 + k as f32 * f32::powi(2.0, -12);
            cases.push([a, a, if k % 2 == 0 { tiny } else { -tiny }]);
        }
        let n = cases.len();
        for isa in crate::simd::runnable_isas() {
            match dispatch_on(isa, FusedOps(cases.clone())) {
                Ok(checked) => assert_eq!(checked, n, "{isa:?}"),
                // Only the portable code has no vector backend to check.
                Err(_) => assert_eq!(isa, crate::simd::Isa::Scalar, "{isa:?} did not run"),
            }
        }
    }
}
