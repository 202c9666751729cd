//! Sums in a fixed order: `SUMS` interleaved partial sums (element `i` of
//! each whole run of `SUMS` added into sum `i`), combined pairwise (sum `i`
//! takes sum `i + SUMS/2`, then `i + SUMS/4`, …), then the last
//! `len % SUMS` elements in order. The partial sums are independent
//! chains (a single running sum is bound by the add latency), and the
//! result is the same bits on every backend and in the portable loop.
use super::{Simd, SimdKernel, dispatch};

/// The most vectors of partial sums (64 sums of four lanes).
const MAX_VECTORS: usize = 16;

/// `Σ x` (`centre` `None`) or `Σ (x - c)²` (`Some(c)`), in the order of the
/// module documentation, on the best backend.
pub(crate) fn pairwise_sum<const SUMS: usize>(x: &[f32], centre: Option<f32>) -> f32 {
    struct Sum<'a, const SUMS: usize> {
        x: &'a [f32],
        centre: Option<f32>,
    }
    impl<const SUMS: usize> SimdKernel for Sum<'_, SUMS> {
        type Output = f32;
        #[inline(always)]
        fn run<S: Simd>(self, s: S) -> f32 {
            pairwise_sum_lanes::<S, SUMS>(s, self.x, self.centre)
        }
    }
    dispatch(Sum::<SUMS> { x, centre })
        .unwrap_or_else(|k| pairwise_sum_portable::<SUMS>(k.x, k.centre))
}

/// The term of element `v`.
#[inline(always)]
fn term(v: f32, centre: Option<f32>) -> f32 {
    match centre {
        Some(c) => (v - c) * (v - c),
        None => v,
    }
}

/// [`pairwise_sum`] in plain Rust (also the tests' reference).
pub(crate) fn pairwise_sum_portable<const SUMS: usize>(x: &[f32], centre: Option<f32>) -> f32 {
    let mut acc = [0f32; SUMS];
    let chunks = x.chunks_exact(SUMS);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += term(v, centre);
        }
    }
    let mut width = SUMS / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    tail.iter().fold(acc[0], |s, &v| s + term(v, centre))
}

/// [`pairwise_sum`] on backend `s`: sum `i` is lane `i % LANES` of vector
/// `i / LANES` (`SUMS` a power of two, at least `LANES`, at most
/// `16 · LANES`).
#[inline(always)]
pub(crate) fn pairwise_sum_lanes<S: Simd, const SUMS: usize>(
    s: S,
    x: &[f32],
    centre: Option<f32>,
) -> f32 {
    let w = S::LANES;
    let count = (SUMS / w).clamp(1, MAX_VECTORS);
    let mut acc = [s.splat(0.0); MAX_VECTORS];
    let chunks = x.chunks_exact(count * w);
    let tail = chunks.remainder();
    let c = s.splat(centre.unwrap_or(0.0));
    for chunk in chunks {
        for (k, a) in acc.iter_mut().enumerate().take(count) {
            // SAFETY: the chunk holds count·w floats, `k·w + w` of them.
            let v = unsafe { s.load(chunk.as_ptr().add(k * w)) };
            let v = if centre.is_some() {
                let d = s.sub(v, c);
                s.mul(d, d)
            } else {
                v
            };
            *a = s.add(*a, v);
        }
    }
    // Whole vectors while the width spans vectors, then within the vector
    // (`reduce_add` folds halves in the same order).
    let mut vectors = count;
    while vectors > 1 {
        vectors /= 2;
        for k in 0..vectors {
            acc[k] = s.add(acc[k], acc[k + vectors]);
        }
    }
    tail.iter()
        .fold(s.reduce_add(acc[0]), |t, &v| t + term(v, centre))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{Isa, dispatch_on, runnable_isas};
    use alloc::vec::Vec;

    /// Every backend gives the portable loop's bits, for 32 and 64 sums,
    /// plain and centred, over every length around the runs.
    #[test]
    fn every_backend_sums_in_the_portable_order() {
        struct On<'a, const SUMS: usize>(&'a [f32], Option<f32>);
        impl<const SUMS: usize> SimdKernel for On<'_, SUMS> {
            type Output = f32;
            fn run<S: Simd>(self, s: S) -> f32 {
                pairwise_sum_lanes::<S, SUMS>(s, self.0, self.1)
            }
        }
        let x: Vec<f32> = (0..300)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0)
            .collect();
        for isa in runnable_isas().into_iter().filter(|&i| i != Isa::Scalar) {
            for n in (0..200).chain([256, 299]) {
                for centre in [None, Some(1.25f32)] {
                    let x = &x[..n];
                    let want32 = pairwise_sum_portable::<32>(x, centre);
                    let want64 = pairwise_sum_portable::<64>(x, centre);
                    let got32 = dispatch_on(isa, On::<32>(x, centre)).ok().unwrap();
                    let got64 = dispatch_on(isa, On::<64>(x, centre)).ok().unwrap();
                    assert_eq!(got32.to_bits(), want32.to_bits(), "{isa:?} 32 n={n}");
                    assert_eq!(got64.to_bits(), want64.to_bits(), "{isa:?} 64 n={n}");
                }
            }
        }
    }
}
