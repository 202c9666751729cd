//! Fast Fourier transforms of any length.
//!
//! A length whose prime factors are all at most [`MAX_RADIX`] is transformed
//! by Stockham's self-sorting mixed-radix passes (radix 4, 2, 3 and 5
//! butterflies written out, other small primes as a direct DFT of the
//! factor), written once over `Points`: one complex number, or one per
//! SIMD lane (a transform per lane). A length
//! with a larger prime factor goes through Bluestein's algorithm: the DFT
//! becomes a convolution with a chirp, computed by a power-of-two FFT.
//!
//! A [`Plan`] holds every sine and cosine a length needs, computed in f64.
//! Its values are a plain `f32` buffer ([`plan_len`], [`build_plan`]), so
//! the compiler can compute the plan of a length known at build time once
//! and store it with the weights, and a kernel whose length is only known
//! at run time builds it in scratch memory.
use core::ops::{Add, Mul, Sub};

use bytemuck::{Pod, Zeroable};

use crate::simd::Simd;

/// Largest prime factor transformed directly; larger ones use Bluestein.
pub const MAX_RADIX: usize = 23;

/// A complex number of two `f32`s (real, imaginary), laid out as the
/// trailing `[.., 2]` axis of the ONNX signal ops.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct Complex {
    /// Real part.
    pub re: f32,
    /// Imaginary part.
    pub im: f32,
}

impl Complex {
    /// Zero.
    pub const ZERO: Complex = Complex { re: 0.0, im: 0.0 };

    /// `re + i·im`.
    #[inline(always)]
    pub fn new(re: f32, im: f32) -> Complex {
        Complex { re, im }
    }

    /// The complex conjugate.
    #[inline(always)]
    pub fn conj(self) -> Complex {
        Complex::new(self.re, -self.im)
    }

    /// `self · s` for a real `s`.
    #[inline(always)]
    pub fn scale(self, s: f32) -> Complex {
        Complex::new(self.re * s, self.im * s)
    }

    /// `self · (-i)`.
    #[inline(always)]
    pub fn times_minus_i(self) -> Complex {
        Complex::new(self.im, -self.re)
    }

    /// `e^{-2πi·k/n}`, computed in f64 (`k < n`).
    fn root(k: u64, n: u64) -> Complex {
        let a = -2.0 * core::f64::consts::PI * (k as f64) / (n as f64);
        Complex::new(a.cos() as f32, a.sin() as f32)
    }
}

impl Add for Complex {
    type Output = Complex;
    #[inline(always)]
    fn add(self, o: Complex) -> Complex {
        Complex::new(self.re + o.re, self.im + o.im)
    }
}

impl Sub for Complex {
    type Output = Complex;
    #[inline(always)]
    fn sub(self, o: Complex) -> Complex {
        Complex::new(self.re - o.re, self.im - o.im)
    }
}

impl Mul for Complex {
    type Output = Complex;
    #[inline(always)]
    fn mul(self, o: Complex) -> Complex {
        Complex::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

/// The smallest prime factor of `n` (`n >= 2`).
fn smallest_factor(n: usize) -> usize {
    if n.is_multiple_of(2) {
        return 2;
    }
    let mut p = 3;
    while p * p <= n {
        if n.is_multiple_of(p) {
            return p;
        }
        p += 2;
    }
    n
}

/// Whether every prime factor of `n` is at most [`MAX_RADIX`].
fn is_smooth(mut n: usize) -> bool {
    while n > 1 {
        let p = smallest_factor(n);
        if p > MAX_RADIX {
            return false;
        }
        n /= p;
    }
    true
}

/// The factors the mixed-radix passes use, outermost first (4s, then 2,
/// then odd primes in increasing order), and how many there are.
fn radices(mut n: usize) -> ([u8; 64], usize) {
    let mut out = [0u8; 64];
    let mut len = 0;
    while n.is_multiple_of(4) {
        out[len] = 4;
        len += 1;
        n /= 4;
    }
    while n > 1 {
        let p = smallest_factor(n);
        // A smooth length's factors are at most MAX_RADIX and there are at
        // most log2(n) < 64 of them.
        out[len] = p as u8;
        len += 1;
        n /= p;
    }
    (out, len)
}

/// The Bluestein convolution length for `n`: a power of two `>= 2n - 1`.
fn bluestein_len(n: usize) -> Option<usize> {
    n.checked_mul(2)?
        .checked_sub(1)?
        .checked_next_power_of_two()
}

/// Complex values in the plan of a length-`n` transform (`None` when it
/// would not fit in memory).
pub fn plan_complex_len(n: usize) -> Option<usize> {
    if n <= 1 || is_smooth(n) {
        return Some(n);
    }
    // Chirp (n), the inner transform's roots (m) and the chirp filter's
    // spectrum (m).
    let m = bluestein_len(n)?;
    n.checked_add(m.checked_mul(2)?)
}

/// `f32` values in the plan of a length-`n` transform.
pub fn plan_len(n: usize) -> Option<usize> {
    plan_complex_len(n)?.checked_mul(2)
}

/// Complex values of work memory a length-`n` transform needs.
pub fn work_len(n: usize) -> Option<usize> {
    if n <= 1 || is_smooth(n) {
        return Some(n);
    }
    bluestein_len(n)?.checked_mul(2)
}

/// An upper bound of [`plan_len`] (in `f32`s) over every length `<= n`, for
/// scratch sized before the length is known.
pub fn plan_len_bound(n: usize) -> Option<usize> {
    let m = bluestein_len(n.max(1))?;
    n.checked_add(m.checked_mul(2)?)?.checked_mul(2)
}

/// An upper bound of [`work_len`] over every length `<= n`.
pub fn work_len_bound(n: usize) -> Option<usize> {
    bluestein_len(n.max(1))?.checked_mul(2)
}

/// Fills `out` (at least [`plan_len`]`(n)` values) with the plan of a
/// length-`n` transform; `work` holds at least [`work_len`]`(n)` values.
/// `None` when a buffer is too short.
pub fn build_plan(n: usize, out: &mut [f32], work: &mut [Complex]) -> Option<()> {
    let len = plan_complex_len(n)?;
    let out: &mut [Complex] = bytemuck::try_cast_slice_mut(out.get_mut(..len * 2)?).ok()?;
    if n <= 1 || is_smooth(n) {
        for (k, w) in out.iter_mut().enumerate() {
            *w = Complex::root(k as u64, n as u64);
        }
        return Some(());
    }
    let m = bluestein_len(n)?;
    let (chirp, rest) = out.split_at_mut(n);
    let (roots, filter) = rest.split_at_mut(m);
    // chirp[j] = e^{-πi·j²/n} = root(j² mod 2n, 2n); j² is reduced in u128
    // so that no precision is lost for large j.
    let two_n = 2 * n as u128;
    for (j, c) in chirp.iter_mut().enumerate() {
        let j = j as u128;
        *c = Complex::root(((j * j) % two_n) as u64, two_n as u64);
    }
    for (k, w) in roots.iter_mut().enumerate() {
        *w = Complex::root(k as u64, m as u64);
    }
    // The filter b[j] = conj(chirp[|j|]) for |j| < n, wrapped to length m,
    // and transformed once here.
    filter.fill(Complex::ZERO);
    filter[0] = chirp[0].conj();
    for j in 1..n {
        filter[j] = chirp[j].conj();
        filter[m - j] = chirp[j].conj();
    }
    let work = work.get_mut(..m)?;
    smooth_transform(Scalar, filter, work, m, roots, 1);
    Some(())
}

/// The precomputed roots of a transform of one length.
#[derive(Debug, Clone, Copy)]
pub enum Plan<'a> {
    /// Mixed radix: `roots[k] = e^{-2πi·k/n}`.
    Smooth {
        /// Length.
        n: usize,
        /// `n` roots of unity.
        roots: &'a [Complex],
    },
    /// Bluestein's algorithm through a power-of-two transform of length `m`.
    Bluestein {
        /// Length.
        n: usize,
        /// `e^{-πi·j²/n}` for `j < n`.
        chirp: &'a [Complex],
        /// Roots of the inner length-`m` transform.
        roots: &'a [Complex],
        /// Spectrum of the conjugate chirp, wrapped to length `m`.
        filter: &'a [Complex],
    },
}

impl<'a> Plan<'a> {
    /// Views a plan built by [`build_plan`] for length `n`; `None` if
    /// `plan` is too short.
    pub fn new(n: usize, plan: &'a [f32]) -> Option<Plan<'a>> {
        let len = plan_complex_len(n)?;
        let all: &[Complex] = bytemuck::try_cast_slice(plan.get(..len * 2)?).ok()?;
        if n <= 1 || is_smooth(n) {
            return Some(Plan::Smooth { n, roots: all });
        }
        let m = bluestein_len(n)?;
        let (chirp, rest) = all.split_at(n);
        let (roots, filter) = rest.split_at(m);
        Some(Plan::Bluestein {
            n,
            chirp,
            roots,
            filter,
        })
    }

    /// The transform length.
    pub fn len(&self) -> usize {
        match *self {
            Plan::Smooth { n, .. } | Plan::Bluestein { n, .. } => n,
        }
    }

    /// The roots of a mixed-radix plan.
    pub(crate) fn smooth_roots(&self) -> Option<&'a [Complex]> {
        match *self {
            Plan::Smooth { roots, .. } => Some(roots),
            Plan::Bluestein { .. } => None,
        }
    }

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The forward DFT of `data` (length `n`) in place: `X[k] = Σ x[j]
    /// e^{-2πi·jk/n}`. `work` holds at least [`work_len`]`(n)` values.
    pub fn forward(&self, data: &mut [Complex], work: &mut [Complex]) {
        match *self {
            Plan::Smooth { n, roots } => smooth_transform(Scalar, data, work, n, roots, 1),
            Plan::Bluestein {
                n,
                chirp,
                roots,
                filter,
            } => {
                let m = roots.len();
                let (a, inner_work) = work.split_at_mut(m);
                let n = n.min(data.len());
                for ((a, &x), &c) in a.iter_mut().zip(&data[..n]).zip(chirp) {
                    *a = x * c;
                }
                a[n..].fill(Complex::ZERO);
                smooth_transform(Scalar, a, inner_work, m, roots, 1);
                // Pointwise product, then the inverse transform as the
                // conjugate of the forward transform of the conjugate.
                for (v, &f) in a.iter_mut().zip(filter) {
                    *v = (*v * f).conj();
                }
                smooth_transform(Scalar, a, inner_work, m, roots, 1);
                let s = 1.0 / m as f32;
                for ((x, &v), &c) in data[..n].iter_mut().zip(a.iter()).zip(chirp) {
                    *x = v.conj().scale(s) * c;
                }
            }
        }
    }

    /// The unnormalized inverse DFT in place: `x[j] = Σ X[k] e^{2πi·jk/n}`
    /// (divide by `n` for the inverse of [`Plan::forward`]).
    pub fn backward(&self, data: &mut [Complex], work: &mut [Complex]) {
        for v in data.iter_mut() {
            *v = v.conj();
        }
        self.forward(data, work);
        for v in data.iter_mut() {
            *v = v.conj();
        }
    }

    /// Whether [`Plan::forward_real`] takes the half-length path (an even
    /// mixed-radix length), which the STFT also runs on vectors of frames.
    pub fn halves_real_input(&self) -> bool {
        matches!(*self, Plan::Smooth { n, .. } if n >= 2 && n % 2 == 0)
    }

    /// The first `n/2 + 1` bins of the DFT of the real signal `x(j)`,
    /// `j < n`, into `out` (the rest are their conjugates). An even length
    /// of a mixed-radix plan takes half the work: the `n/2`-point transform
    /// of `x(2j) + i·x(2j+1)`, then a split step. `out` holds at least `n`
    /// values, `work` at least [`work_len`]`(n)`.
    pub fn forward_real(
        &self,
        x: impl Fn(usize) -> f32,
        out: &mut [Complex],
        work: &mut [Complex],
    ) {
        let n = self.len();
        match *self {
            Plan::Smooth { roots, .. } if self.halves_real_input() => {
                let h = n / 2;
                for (j, v) in out[..h].iter_mut().enumerate() {
                    *v = Complex::new(x(2 * j), x(2 * j + 1));
                }
                real_half_transform(Scalar, out, work, n, roots);
            }
            _ => {
                for (j, v) in out[..n].iter_mut().enumerate() {
                    *v = Complex::new(x(j), 0.0);
                }
                self.forward(out, work);
            }
        }
    }
}

/// Complex arithmetic on points of some kind, and how they are stored: one
/// complex number ([`Scalar`]), or one per lane of a SIMD vector
/// ([`Lanes`], one transform per lane). The transforms are written once
/// over this.
pub(crate) trait Points: Copy {
    /// A point.
    type P: Copy;
    /// The buffer element points are stored in.
    type Store: Copy;
    /// Buffer elements `n` points take.
    fn stored_len(self, n: usize) -> usize;
    /// Point `i` of `buf`.
    fn get(self, buf: &[Self::Store], i: usize) -> Self::P;
    /// Stores point `i` of `buf`.
    fn put(self, buf: &mut [Self::Store], i: usize, v: Self::P);
    /// `a + b`.
    fn add(self, a: Self::P, b: Self::P) -> Self::P;
    /// `a - b`.
    fn sub(self, a: Self::P, b: Self::P) -> Self::P;
    /// `a · w` for a root `w` shared by every lane.
    fn mul_root(self, a: Self::P, w: Complex) -> Self::P;
    /// `a · (-i)`.
    fn times_minus_i(self, a: Self::P) -> Self::P;
    /// `a · s`.
    fn scale(self, a: Self::P, s: f32) -> Self::P;
    /// The conjugate.
    fn conj(self, a: Self::P) -> Self::P;
    /// `(re(a) + im(a), 0)` and `(re(a) - im(a), 0)`: the DC and Nyquist
    /// bins of a real signal from its packed half-length transform's bin 0.
    fn split_dc(self, a: Self::P) -> (Self::P, Self::P);
}

/// One complex number per point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scalar;

impl Points for Scalar {
    type P = Complex;
    type Store = Complex;
    #[inline(always)]
    fn stored_len(self, n: usize) -> usize {
        n
    }
    #[inline(always)]
    fn get(self, buf: &[Complex], i: usize) -> Complex {
        buf[i]
    }
    #[inline(always)]
    fn put(self, buf: &mut [Complex], i: usize, v: Complex) {
        buf[i] = v;
    }
    #[inline(always)]
    fn add(self, a: Complex, b: Complex) -> Complex {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: Complex, b: Complex) -> Complex {
        a - b
    }
    #[inline(always)]
    fn mul_root(self, a: Complex, w: Complex) -> Complex {
        a * w
    }
    #[inline(always)]
    fn times_minus_i(self, a: Complex) -> Complex {
        a.times_minus_i()
    }
    #[inline(always)]
    fn scale(self, a: Complex, s: f32) -> Complex {
        a.scale(s)
    }
    #[inline(always)]
    fn conj(self, a: Complex) -> Complex {
        a.conj()
    }
    #[inline(always)]
    fn split_dc(self, a: Complex) -> (Complex, Complex) {
        (
            Complex::new(a.re + a.im, 0.0),
            Complex::new(a.re - a.im, 0.0),
        )
    }
}

/// One complex number per lane of a vector of backend `S`: `LANES`
/// transforms at once. A point is stored as `LANES` real parts, then
/// `LANES` imaginary parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lanes<S>(pub S);

/// A point of [`Lanes`]: real and imaginary parts of every lane.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LanePoint<V> {
    re: V,
    im: V,
}

impl<S: Simd> Points for Lanes<S> {
    type P = LanePoint<S::F32>;
    type Store = f32;
    #[inline(always)]
    fn stored_len(self, n: usize) -> usize {
        n * 2 * S::LANES
    }
    #[inline(always)]
    fn get(self, buf: &[f32], i: usize) -> Self::P {
        let w = S::LANES;
        let p = &buf[i * 2 * w..(i + 1) * 2 * w];
        // SAFETY: `p` holds 2·LANES floats (the slice above is bounds
        // checked).
        unsafe {
            LanePoint {
                re: self.0.load(p.as_ptr()),
                im: self.0.load(p.as_ptr().add(w)),
            }
        }
    }
    #[inline(always)]
    fn put(self, buf: &mut [f32], i: usize, v: Self::P) {
        let w = S::LANES;
        let p = &mut buf[i * 2 * w..(i + 1) * 2 * w];
        // SAFETY: as in `get`.
        unsafe {
            self.0.store(p.as_mut_ptr(), v.re);
            self.0.store(p.as_mut_ptr().add(w), v.im);
        }
    }
    #[inline(always)]
    fn add(self, a: Self::P, b: Self::P) -> Self::P {
        LanePoint {
            re: self.0.add(a.re, b.re),
            im: self.0.add(a.im, b.im),
        }
    }
    #[inline(always)]
    fn sub(self, a: Self::P, b: Self::P) -> Self::P {
        LanePoint {
            re: self.0.sub(a.re, b.re),
            im: self.0.sub(a.im, b.im),
        }
    }
    #[inline(always)]
    fn mul_root(self, a: Self::P, w: Complex) -> Self::P {
        let s = self.0;
        let (wr, wi) = (s.splat(w.re), s.splat(w.im));
        LanePoint {
            re: s.neg_mul_add(a.im, wi, s.mul(a.re, wr)),
            im: s.mul_add(a.im, wr, s.mul(a.re, wi)),
        }
    }
    #[inline(always)]
    fn times_minus_i(self, a: Self::P) -> Self::P {
        LanePoint {
            re: a.im,
            im: self.0.sub(self.0.splat(0.0), a.re),
        }
    }
    #[inline(always)]
    fn scale(self, a: Self::P, v: f32) -> Self::P {
        let v = self.0.splat(v);
        LanePoint {
            re: self.0.mul(a.re, v),
            im: self.0.mul(a.im, v),
        }
    }
    #[inline(always)]
    fn conj(self, a: Self::P) -> Self::P {
        LanePoint {
            re: a.re,
            im: self.0.sub(self.0.splat(0.0), a.im),
        }
    }
    #[inline(always)]
    fn split_dc(self, a: Self::P) -> (Self::P, Self::P) {
        let zero = self.0.splat(0.0);
        (
            LanePoint {
                re: self.0.add(a.re, a.im),
                im: zero,
            },
            LanePoint {
                re: self.0.sub(a.re, a.im),
                im: zero,
            },
        )
    }
}

/// The mixed-radix DFT of the `n` points of `data` in place (Stockham's
/// self-sorting order: each pass reads one buffer and writes the other),
/// whose roots are `roots[k·root_stride]`. `work` holds `n` points.
#[inline(always)]
pub(crate) fn smooth_transform<K: Points>(
    k: K,
    data: &mut [K::Store],
    work: &mut [K::Store],
    n: usize,
    roots: &[Complex],
    root_stride: usize,
) {
    if n <= 1 {
        return;
    }
    let (factors, count) = radices(n);
    // Pass with radix p turns transforms of length l into ones of length
    // l·p; point (f, j) of the result, f < l·p, j < n/(l·p), sits at
    // f·n/(l·p) + j.
    let mut l = 1;
    let mut in_data = true;
    for &p in &factors[..count] {
        let p = p as usize;
        let r = n / (l * p);
        if in_data {
            pass(k, data, work, p, l, r, roots, root_stride);
        } else {
            pass(k, work, data, p, l, r, roots, root_stride);
        }
        in_data = !in_data;
        l *= p;
    }
    if !in_data {
        let len = k.stored_len(n);
        data[..len].copy_from_slice(&work[..len]);
    }
}

/// Input `q` of a butterfly: `src[at + q·r]` times `roots[q·step]`
/// (`step` 0 for the first column, whose roots are all 1).
#[inline(always)]
fn input<K: Points>(
    k: K,
    src: &[K::Store],
    at: usize,
    q: usize,
    r: usize,
    step: usize,
    roots: &[Complex],
) -> K::P {
    let v = k.get(src, at + q * r);
    if step == 0 || q == 0 {
        v
    } else {
        k.mul_root(v, root(roots, q * step))
    }
}

/// One radix-`p` pass: for each `f < l` and `j < r`, the `p` points
/// `src[(f·p + q)·r + j]` times `w^{q·f·r}` go through a `p`-point DFT into
/// `dst[(f + l·s)·r + j]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pass<K: Points>(
    k: K,
    src: &[K::Store],
    dst: &mut [K::Store],
    p: usize,
    l: usize,
    r: usize,
    roots: &[Complex],
    root_stride: usize,
) {
    // Output s of a butterfly goes to dst[base + s·lr].
    let lr = l * r;
    for f in 0..l {
        let step = f * r * root_stride;
        for j in 0..r {
            let at = f * p * r + j;
            let base = f * r + j;
            let x = |q: usize| input(k, src, at, q, r, step, roots);
            match p {
                2 => {
                    let (x0, x1) = (x(0), x(1));
                    k.put(dst, base, k.add(x0, x1));
                    k.put(dst, base + lr, k.sub(x0, x1));
                }
                4 => {
                    let (x0, x1, x2, x3) = (x(0), x(1), x(2), x(3));
                    let (s02, d02) = (k.add(x0, x2), k.sub(x0, x2));
                    let s13 = k.add(x1, x3);
                    let d13 = k.times_minus_i(k.sub(x1, x3));
                    k.put(dst, base, k.add(s02, s13));
                    k.put(dst, base + lr, k.add(d02, d13));
                    k.put(dst, base + 2 * lr, k.sub(s02, s13));
                    k.put(dst, base + 3 * lr, k.sub(d02, d13));
                }
                3 => {
                    // e^{-2πi/3} = -1/2 - i·√3/2.
                    const S: f32 = 0.866_025_4;
                    let (x0, x1, x2) = (x(0), x(1), x(2));
                    let s = k.add(x1, x2);
                    let t = k.sub(x0, k.scale(s, 0.5));
                    let u = k.scale(k.times_minus_i(k.sub(x1, x2)), S);
                    k.put(dst, base, k.add(x0, s));
                    k.put(dst, base + lr, k.add(t, u));
                    k.put(dst, base + 2 * lr, k.sub(t, u));
                }
                5 => {
                    // cos and sin of 2π/5 and 4π/5.
                    const C1: f32 = 0.309_017;
                    const C2: f32 = -0.809_017;
                    const S1: f32 = 0.951_056_5;
                    const S2: f32 = 0.587_785_24;
                    let (x0, x1, x2, x3, x4) = (x(0), x(1), x(2), x(3), x(4));
                    let s14 = k.add(x1, x4);
                    let d14 = k.times_minus_i(k.sub(x1, x4));
                    let s23 = k.add(x2, x3);
                    let d23 = k.times_minus_i(k.sub(x2, x3));
                    let t1 = k.add(x0, k.add(k.scale(s14, C1), k.scale(s23, C2)));
                    let t2 = k.add(x0, k.add(k.scale(s14, C2), k.scale(s23, C1)));
                    let u1 = k.add(k.scale(d14, S1), k.scale(d23, S2));
                    let u2 = k.sub(k.scale(d14, S2), k.scale(d23, S1));
                    k.put(dst, base, k.add(x0, k.add(s14, s23)));
                    k.put(dst, base + lr, k.add(t1, u1));
                    k.put(dst, base + 4 * lr, k.sub(t1, u1));
                    k.put(dst, base + 2 * lr, k.add(t2, u2));
                    k.put(dst, base + 3 * lr, k.sub(t2, u2));
                }
                _ => {
                    // A prime up to MAX_RADIX as a direct p-point DFT; its
                    // roots e^{-2πi·m/p} are roots[m·l·r·root_stride].
                    let x0 = x(0);
                    let mut xs = [x0; MAX_RADIX];
                    for (q, v) in xs.iter_mut().enumerate().take(p).skip(1) {
                        *v = x(q);
                    }
                    for s in 0..p {
                        let mut acc = x0;
                        for (q, &v) in xs.iter().enumerate().take(p).skip(1) {
                            let w = root(roots, ((s * q) % p) * lr * root_stride);
                            acc = k.add(acc, k.mul_root(v, w));
                        }
                        k.put(dst, base + s * lr, acc);
                    }
                }
            }
        }
    }
}

/// `roots[i]` or zero (never out of range for a plan of the right length).
#[inline(always)]
fn root(roots: &[Complex], i: usize) -> Complex {
    roots.get(i).copied().unwrap_or_default()
}

/// The real-input DFT of even length `n` from `h = n/2` packed points
/// `z[j] = x[2j] + i·x[2j+1]` in `data[..h]`: the `h`-point transform
/// (whose roots are every other root of the length-`n` plan `roots`),
/// then the split into the even and odd samples' spectra: with
/// `E[k] = (Z[k] + conj Z[h-k]) / 2`, `O[k] = -i (Z[k] - conj Z[h-k]) / 2`,
/// `X[k] = E[k] + w^k O[k]` and `X[h-k] = conj E[k] + w^(h-k) conj O[k]`.
/// Leaves bins `0..=h` in `data` (which holds `h + 1` points; `work` `h`).
#[inline(always)]
pub(crate) fn real_half_transform<K: Points>(
    k: K,
    data: &mut [K::Store],
    work: &mut [K::Store],
    n: usize,
    roots: &[Complex],
) {
    let h = n / 2;
    smooth_transform(k, data, work, h, roots, 2);
    let (dc, nyquist) = k.split_dc(k.get(data, 0));
    k.put(data, 0, dc);
    k.put(data, h, nyquist);
    for j in 1..=h / 2 {
        let (a, b) = (k.get(data, j), k.get(data, h - j));
        let e = k.scale(k.add(a, k.conj(b)), 0.5);
        let o = k.scale(k.times_minus_i(k.sub(a, k.conj(b))), 0.5);
        k.put(data, j, k.add(e, k.mul_root(o, root(roots, j))));
        if h - j != j {
            let lo = k.mul_root(k.conj(o), root(roots, h - j));
            k.put(data, h - j, k.add(k.conj(e), lo));
        }
    }
}
