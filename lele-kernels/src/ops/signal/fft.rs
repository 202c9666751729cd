//! Fast Fourier transforms of any length.
//!
//! A length whose prime factors are all at most [`MAX_RADIX`] is transformed
//! by mixed-radix decimation in time (radix 4, 2, 3 and 5 butterflies
//! written out, other small primes as a direct DFT of the factor). A length
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
    fn times_minus_i(self) -> Complex {
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
    let inner = Plan::Smooth { n: m, roots };
    let spectrum = work.get_mut(..m)?;
    inner.smooth_transform(filter, spectrum);
    filter.copy_from_slice(spectrum);
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

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The forward DFT of `data` (length `n`) in place: `X[k] = Σ x[j]
    /// e^{-2πi·jk/n}`. `work` holds at least [`work_len`]`(n)` values.
    pub fn forward(&self, data: &mut [Complex], work: &mut [Complex]) {
        match *self {
            Plan::Smooth { n, .. } => {
                let n = n.min(data.len()).min(work.len());
                work[..n].copy_from_slice(&data[..n]);
                self.smooth_transform(&work[..n], &mut data[..n]);
            }
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
                let inner = Plan::Smooth { n: m, roots };
                let inner_work = &mut inner_work[..m];
                inner_work.copy_from_slice(a);
                inner.smooth_transform(inner_work, a);
                // Pointwise product, then the inverse transform as the
                // conjugate of the forward transform of the conjugate.
                for (v, &f) in a.iter_mut().zip(filter) {
                    *v = (*v * f).conj();
                }
                inner_work.copy_from_slice(a);
                inner.smooth_transform(inner_work, a);
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

    /// The first `n/2 + 1` bins of the DFT of the real signal `x(j)`,
    /// `j < n`, into `out` (the rest are their conjugates). An even length
    /// of a mixed-radix plan takes half the work: the `n/2`-point transform
    /// of `x(2j) + i·x(2j+1)` (whose roots are every other root of this
    /// plan), separated into the even and odd samples' spectra. `out`
    /// holds at least `n` values, `work` at least [`work_len`]`(n)`.
    pub fn forward_real(
        &self,
        x: impl Fn(usize) -> f32,
        out: &mut [Complex],
        work: &mut [Complex],
    ) {
        let n = self.len();
        let Plan::Smooth { roots, .. } = *self else {
            for (j, v) in out[..n].iter_mut().enumerate() {
                *v = Complex::new(x(j), 0.0);
            }
            self.forward(out, work);
            return;
        };
        if n % 2 == 1 || n < 2 {
            for (j, v) in out[..n].iter_mut().enumerate() {
                *v = Complex::new(x(j), 0.0);
            }
            self.forward(out, work);
            return;
        }
        let h = n / 2;
        for (j, v) in work[..h].iter_mut().enumerate() {
            *v = Complex::new(x(2 * j), x(2 * j + 1));
        }
        let (factors, count) = radices(h);
        step(&work[..h], 0, 1, &mut out[..h], &factors[..count], roots, 2);
        // Z = E + i·O with E, O the spectra of the even and odd samples:
        // E[k] = (Z[k] + conj Z[h-k]) / 2, O[k] = -i (Z[k] - conj Z[h-k]) / 2
        // and X[k] = E[k] + w^k O[k], X[h-k] = conj E[k] + w^(h-k) conj O[k].
        let z0 = out[0];
        out[0] = Complex::new(z0.re + z0.im, 0.0);
        out[h] = Complex::new(z0.re - z0.im, 0.0);
        for k in 1..=h / 2 {
            let (a, b) = (out[k], out[h - k]);
            let e = (a + b.conj()).scale(0.5);
            let o = (a - b.conj()).times_minus_i().scale(0.5);
            out[k] = e + root(roots, k) * o;
            if h - k != k {
                out[h - k] = e.conj() + root(roots, h - k) * o.conj();
            }
        }
    }

    /// Mixed-radix transform of `src` into `dst` (both of length `n`).
    fn smooth_transform(&self, src: &[Complex], dst: &mut [Complex]) {
        let Plan::Smooth { n, roots } = *self else {
            return;
        };
        if n == 0 {
            return;
        }
        let (factors, count) = radices(n);
        step(src, 0, 1, dst, &factors[..count], roots, 1);
    }
}

/// One decimation-in-time level: the length-`dst.len()` DFT of
/// `src[offset + j·stride]`, whose roots are `roots[k·root_stride]`.
fn step(
    src: &[Complex],
    offset: usize,
    stride: usize,
    dst: &mut [Complex],
    factors: &[u8],
    roots: &[Complex],
    root_stride: usize,
) {
    let n = dst.len();
    let Some((&p, rest)) = factors.split_first() else {
        // Length 1.
        if let (Some(d), Some(&s)) = (dst.first_mut(), src.get(offset)) {
            *d = s;
        }
        return;
    };
    let p = p as usize;
    let m = n / p;
    if rest.is_empty() {
        for (q, d) in dst.iter_mut().enumerate() {
            *d = src.get(offset + q * stride).copied().unwrap_or_default();
        }
    } else {
        for (q, sub) in dst.chunks_exact_mut(m).enumerate() {
            step(
                src,
                offset + q * stride,
                stride * p,
                sub,
                rest,
                roots,
                root_stride * p,
            );
        }
    }
    match p {
        2 => butterflies_2(dst, m, roots, root_stride),
        4 => butterflies_4(dst, m, roots, root_stride),
        3 => butterflies_3(dst, m, roots, root_stride),
        5 => butterflies_5(dst, m, roots, root_stride),
        _ => butterflies_any(dst, p, m, roots, root_stride),
    }
}

/// `roots[i]` or zero (never out of range for a plan of the right length).
#[inline(always)]
fn root(roots: &[Complex], i: usize) -> Complex {
    roots.get(i).copied().unwrap_or_default()
}

fn butterflies_2(d: &mut [Complex], m: usize, roots: &[Complex], rs: usize) {
    let (a, b) = d.split_at_mut(m);
    for (k, (a, b)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
        let t = *b * root(roots, k * rs);
        let u = *a;
        *a = u + t;
        *b = u - t;
    }
}

fn butterflies_4(d: &mut [Complex], m: usize, roots: &[Complex], rs: usize) {
    let (a, rest) = d.split_at_mut(m);
    let (b, rest) = rest.split_at_mut(m);
    let (c, e) = rest.split_at_mut(m);
    for k in 0..m {
        let x0 = a[k];
        let x1 = b[k] * root(roots, k * rs);
        let x2 = c[k] * root(roots, 2 * k * rs);
        let x3 = e[k] * root(roots, 3 * k * rs);
        let s02 = x0 + x2;
        let d02 = x0 - x2;
        let s13 = x1 + x3;
        let d13 = (x1 - x3).times_minus_i();
        a[k] = s02 + s13;
        b[k] = d02 + d13;
        c[k] = s02 - s13;
        e[k] = d02 - d13;
    }
}

fn butterflies_3(d: &mut [Complex], m: usize, roots: &[Complex], rs: usize) {
    // e^{-2πi/3} = -1/2 - i·√3/2.
    const S: f32 = 0.866_025_4;
    let (a, rest) = d.split_at_mut(m);
    let (b, c) = rest.split_at_mut(m);
    for k in 0..m {
        let x0 = a[k];
        let x1 = b[k] * root(roots, k * rs);
        let x2 = c[k] * root(roots, 2 * k * rs);
        let s = x1 + x2;
        let t = x0 - s.scale(0.5);
        let r = (x1 - x2).times_minus_i().scale(S);
        a[k] = x0 + s;
        b[k] = t + r;
        c[k] = t - r;
    }
}

fn butterflies_5(d: &mut [Complex], m: usize, roots: &[Complex], rs: usize) {
    // cos and sin of 2π/5 and 4π/5.
    const C1: f32 = 0.309_017;
    const C2: f32 = -0.809_017;
    const S1: f32 = 0.951_056_5;
    const S2: f32 = 0.587_785_24;
    let (a, rest) = d.split_at_mut(m);
    let (b, rest) = rest.split_at_mut(m);
    let (c, rest) = rest.split_at_mut(m);
    let (e, f) = rest.split_at_mut(m);
    for k in 0..m {
        let x0 = a[k];
        let x1 = b[k] * root(roots, k * rs);
        let x2 = c[k] * root(roots, 2 * k * rs);
        let x3 = e[k] * root(roots, 3 * k * rs);
        let x4 = f[k] * root(roots, 4 * k * rs);
        let s14 = x1 + x4;
        let d14 = (x1 - x4).times_minus_i();
        let s23 = x2 + x3;
        let d23 = (x2 - x3).times_minus_i();
        let t1 = x0 + s14.scale(C1) + s23.scale(C2);
        let t2 = x0 + s14.scale(C2) + s23.scale(C1);
        let u1 = d14.scale(S1) + d23.scale(S2);
        let u2 = d14.scale(S2) - d23.scale(S1);
        a[k] = x0 + s14 + s23;
        b[k] = t1 + u1;
        f[k] = t1 - u1;
        c[k] = t2 + u2;
        e[k] = t2 - u2;
    }
}

/// A prime factor `p <= MAX_RADIX` as a direct `p`-point DFT.
fn butterflies_any(d: &mut [Complex], p: usize, m: usize, roots: &[Complex], rs: usize) {
    let mut x = [Complex::ZERO; MAX_RADIX];
    let x = &mut x[..p.min(MAX_RADIX)];
    for k in 0..m {
        for (q, v) in x.iter_mut().enumerate() {
            *v = d[q * m + k] * root(roots, q * k * rs);
        }
        for r in 0..x.len() {
            let mut acc = Complex::ZERO;
            for (q, &v) in x.iter().enumerate() {
                // e^{-2πi·rq/p} is root (rq mod p)·m of this level.
                acc = acc + v * root(roots, ((r * q) % p) * m * rs);
            }
            d[r * m + k] = acc;
        }
    }
}
