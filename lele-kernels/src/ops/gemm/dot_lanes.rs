//! [`super::skinny::dot_columns`] over the SIMD layer: a few rows of `A`
//! against columns of `B` stored contiguously (a Linear layer's transposed
//! weight, a recurrent layer's state times `Rᵀ`), each output one dot
//! product of `k`, with no packing. Written once for every backend; the
//! deepest tail is one partial load per operand (zeros past `k`), so there
//! is no scalar remainder loop. Accumulation uses
//! [`Simd::mul_add_approx`]: fused where the ISA fuses, a multiply and an
//! add on wasm (whose fused operation is emulated).
use crate::simd::{Simd, SimdKernel};

/// `C = alpha·A·Bᵀ + beta·C` for `m` rows of `A` (`k` floats each, stride
/// `lda`) and `n` columns of `B` (`k` floats each, stride `ldb`); `C` at
/// row stride `ldc`. With `beta == 0` the old `C` is not read.
///
/// `C` is a raw pointer: threads run the kernel on disjoint column ranges
/// of one `C`, so no `&mut` slice may span it. Whoever makes a value
/// promises that `c` is writable for `c_len` floats and that nobody else
/// accesses the `m × n` tile at `c` (row stride `ldc`) while it runs.
pub(super) struct DotColumns<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: &'a [f32],
    pub lda: usize,
    pub bt: &'a [f32],
    pub ldb: usize,
    pub beta: f32,
    pub c: *mut f32,
    pub c_len: usize,
    pub ldc: usize,
}

impl DotColumns<'_> {
    /// Whether every row and column the product touches lies inside its
    /// slice (the condition of [`SimdKernel::run`]).
    pub(super) fn fits(&self) -> bool {
        let fits = |len: usize, count: usize, stride: usize, width: usize| {
            count == 0
                || (count - 1)
                    .checked_mul(stride)
                    .and_then(|x| x.checked_add(width))
                    .is_some_and(|end| end <= len)
        };
        fits(self.a.len(), self.m, self.lda, self.k)
            && fits(self.bt.len(), self.n, self.ldb, self.k)
            && fits(self.c_len, self.m, self.ldc, self.n)
    }
}

impl SimdKernel for DotColumns<'_> {
    type Output = ();

    /// Register tiles sized for the register file: with 16 registers 2
    /// rows × 4 columns (8 sums, 2 rows and a column in registers); with
    /// 32, 4 × 4 (half the loads per multiply-add), or 1 × 8 for a single
    /// row (a GEMV against a transposed weight: an LSTM step, a Linear
    /// layer at batch 1). Row blocks after the first find their columns in
    /// L1 and prefetch the next tile's meanwhile.
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        // The tiles' bounds rely on this (the caller checked it too).
        if !self.fits() {
            return;
        }
        let d = self;
        let big = S::REGISTERS >= 32;
        let wide = if big && d.m == 1 { 8 } else { 4 };
        let max_rows = if big { 4 } else { 2 };
        let mut j = 0;
        while j < d.n {
            let cols = if d.n - j >= wide {
                wide
            } else {
                (d.n - j).min(4)
            };
            let mut i = 0;
            let mut block = 0usize;
            while i < d.m {
                let rows = match (d.m - i).min(max_rows) {
                    r @ (1 | 2) => r,
                    r if r >= 4 => 4,
                    _ => 2,
                };
                let next = (block > 0 && j + cols < d.n).then(|| Prefetch {
                    cols: (j + cols) * d.ldb,
                    first: block - 1,
                });
                let t = Tile { i, j, next };
                match (rows, cols) {
                    (4, 4) => tile::<S, 4, 4>(s, &d, t),
                    (4, 3) => tile::<S, 4, 3>(s, &d, t),
                    (4, 2) => tile::<S, 4, 2>(s, &d, t),
                    (4, _) => tile::<S, 4, 1>(s, &d, t),
                    (2, 4) => tile::<S, 2, 4>(s, &d, t),
                    (2, 3) => tile::<S, 2, 3>(s, &d, t),
                    (2, 2) => tile::<S, 2, 2>(s, &d, t),
                    (2, _) => tile::<S, 2, 1>(s, &d, t),
                    (_, 8) => tile::<S, 1, 8>(s, &d, t),
                    (_, 4) => tile::<S, 1, 4>(s, &d, t),
                    (_, 3) => tile::<S, 1, 3>(s, &d, t),
                    (_, 2) => tile::<S, 1, 2>(s, &d, t),
                    _ => tile::<S, 1, 1>(s, &d, t),
                }
                i += rows;
                block += 1;
            }
            j += cols;
        }
    }
}

/// Where a tile prefetches the next tile's columns: `cols` is the offset
/// of the first of them in `bt`; each 64-byte step fetches one line of
/// column `(first + step) % N`, so row blocks spread their fetches over
/// the columns.
#[derive(Clone, Copy)]
struct Prefetch {
    cols: usize,
    first: usize,
}

/// A tile's first row and column, and what it prefetches.
#[derive(Clone, Copy)]
struct Tile {
    i: usize,
    j: usize,
    next: Option<Prefetch>,
}

/// Rows `i..i + R` against columns `j..j + N`: `R·N` vector accumulators,
/// each reduced once at the end; the last `k % LANES` floats through one
/// partial load per operand (zeros past `k`).
#[inline(always)]
fn tile<S: Simd, const R: usize, const N: usize>(s: S, d: &DotColumns<'_>, t: Tile) {
    let Tile { i, j, next } = t;
    let k = d.k;
    let mut acc = [[s.splat(0.0); N]; R];
    let full = k - k % S::LANES;
    let (a, b) = (d.a.as_ptr(), d.bt.as_ptr());
    let mut p = 0;
    let mut step = next.map_or(0, |n| n.first);
    while p < full {
        if let Some(next) = next
            && p % 16 == 0
        {
            let col = step % N;
            step += 1;
            s.prefetch(b.wrapping_add(next.cols + col * d.ldb + p));
        }
        let mut av = [s.splat(0.0); R];
        for (r, v) in av.iter_mut().enumerate() {
            // SAFETY: row i + r < m holds k floats from (i + r)·lda (the
            // kernel's `fits`), and p + LANES <= k.
            *v = unsafe { s.load(a.add((i + r) * d.lda + p)) };
        }
        for c in 0..N {
            // SAFETY: as above, column j + c < n.
            let bv = unsafe { s.load(b.add((j + c) * d.ldb + p)) };
            for (row, &ar) in acc.iter_mut().zip(&av) {
                row[c] = s.mul_add_approx(ar, bv, row[c]);
            }
        }
        p += S::LANES;
    }
    if full < k {
        let len = k - full;
        let mut av = [s.splat(0.0); R];
        for (r, v) in av.iter_mut().enumerate() {
            // SAFETY: the last `len` floats of the row, zeros past them.
            *v = unsafe { s.load_partial(a.add((i + r) * d.lda + full), len, 0.0) };
        }
        for c in 0..N {
            // SAFETY: the last `len` floats of the column.
            let bv = unsafe { s.load_partial(b.add((j + c) * d.ldb + full), len, 0.0) };
            for (row, &ar) in acc.iter_mut().zip(&av) {
                row[c] = s.mul_add_approx(ar, bv, row[c]);
            }
        }
    }
    let (ldc, alpha, beta) = (d.ldc, d.alpha, d.beta);
    for (r, row) in acc.iter().enumerate() {
        let mut dots = [0f32; N];
        if let (Ok(&[v0, v1, v2, v3]), Ok(four)) = (
            <&[S::F32; 4]>::try_from(&row[..]),
            <&mut [f32; 4]>::try_from(&mut dots[..]),
        ) {
            *four = s.reduce_add4(v0, v1, v2, v3);
        } else {
            for (dot, &lanes) in dots.iter_mut().zip(row) {
                *dot = s.reduce_add(lanes);
            }
        }
        for (col, &dot) in dots.iter().enumerate() {
            // SAFETY: (i + r, j + col) is inside C (`fits`), which this
            // kernel alone accesses (the maker's promise).
            unsafe {
                let out = d.c.add((i + r) * ldc + j + col);
                *out = if beta == 0.0 {
                    alpha * dot
                } else {
                    alpha * dot + beta * *out
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{dispatch_on, runnable_isas};
    use alloc::vec::Vec;

    /// Every backend against the plain dot products, over odd sizes and
    /// strides, with and without `beta`.
    #[test]
    fn every_backend_matches_plain_dot_products() {
        let val = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.013;
        // Backends the kernel ran on (the portable ISA gives it back).
        let mut ran = 0;
        for isa in runnable_isas() {
            for (m, n, k) in [
                (1, 1, 1),
                (1, 5, 3),
                (2, 7, 17),
                (3, 9, 33),
                (5, 4, 64),
                (1, 13, 100),
                // Several row blocks of each backend's tiles: the later
                // ones prefetch the next columns.
                (11, 10, 70),
                (9, 8, 16),
            ] {
                let (lda, ldb, ldc) = (k + 3, k + 1, n + 2);
                let a: Vec<f32> = (0..m * lda).map(val).collect();
                let bt: Vec<f32> = (0..n * ldb).map(|i| val(i + 7)).collect();
                for beta in [0.0f32, 0.5] {
                    let c0: Vec<f32> = (0..m * ldc).map(|i| val(i + 3)).collect();
                    let mut c = c0.clone();
                    let kernel = DotColumns {
                        m,
                        n,
                        k,
                        alpha: 1.5,
                        a: &a,
                        lda,
                        bt: &bt,
                        ldb,
                        beta,
                        c: c.as_mut_ptr(),
                        c_len: c.len(),
                        ldc,
                    };
                    if dispatch_on(isa, kernel).is_err() {
                        continue;
                    }
                    ran += 1;
                    for i in 0..m {
                        for j in 0..n {
                            let dot: f64 = (0..k)
                                .map(|p| a[i * lda + p] as f64 * bt[j * ldb + p] as f64)
                                .sum();
                            let want = 1.5 * dot + beta as f64 * c0[i * ldc + j] as f64;
                            let got = c[i * ldc + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{isa:?} m={m} n={n} k={k} beta={beta} ({i},{j}): {got} vs {want}"
                            );
                        }
                        // Padding between rows of C is left alone.
                        for j in n..ldc {
                            assert_eq!(c[i * ldc + j], c0[i * ldc + j]);
                        }
                    }
                }
            }
        }
        // Every target the tests run on has a vector backend (x86_64:
        // AVX2 at least; aarch64: NEON; wasm: built with simd128).
        assert!(ran > 0, "the kernel ran on no backend");
    }
}
