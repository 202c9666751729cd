//! The instruction sets lele's kernels use, and which one this CPU runs:
//! detected once at run time on x86_64 (AVX-512, else AVX2 with FMA, else
//! the portable code), known at compile time on aarch64 (NEON is part of
//! the base architecture) and on wasm32 built with `simd128`; capped by
//! `LELE_ISA`.
use core::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod sums;
mod vector;

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::transpose8x8;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::transpose16;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) use simd128::madd as simd128_madd;
pub(crate) use sums::{pairwise_sum, pairwise_sum_lanes, pairwise_sum_portable as sums_portable};
pub(crate) use vector::{Simd, SimdKernel, dispatch, dispatch_on};

/// An instruction set a kernel can be written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust (what the compiler vectorizes on its own).
    Scalar,
    /// AVX2 with FMA (x86_64).
    Avx2,
    /// AVX-512F (x86_64).
    Avx512,
    /// Advanced SIMD (aarch64, where every CPU has it).
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// The 128-bit SIMD proposal (wasm32 built with `simd128`, which every
    /// engine that runs such a module has).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128,
}

static ISA: AtomicU8 = AtomicU8::new(0);

/// The instruction set the CPU offers, capped by the `LELE_ISA`
/// environment variable (`avx2` or `scalar`; read once, at the first
/// kernel call): it lets a user run the AVX2 or portable code on an
/// AVX-512 machine (to compare paths, or to match a fleet without
/// AVX-512), or the portable code on aarch64 and wasm32. A value naming
/// more than the CPU has changes nothing.
fn detect_isa() -> Isa {
    #[cfg(any(
        target_arch = "aarch64",
        all(target_arch = "wasm32", target_feature = "simd128")
    ))]
    {
        #[cfg(feature = "std")]
        if std::env::var("LELE_ISA").is_ok_and(|cap| cap.eq_ignore_ascii_case("scalar")) {
            return Isa::Scalar;
        }
        #[cfg(target_arch = "aarch64")]
        return Isa::Neon;
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return Isa::Simd128;
    }
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        let cap = std::env::var("LELE_ISA").unwrap_or_default();
        if cap.eq_ignore_ascii_case("scalar") {
            return Isa::Scalar;
        }
        let avx2_cap = cap.eq_ignore_ascii_case("avx2");
        if !avx2_cap && std::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    #[cfg(all(
        target_arch = "x86_64",
        not(feature = "std"),
        target_feature = "avx2",
        target_feature = "fma"
    ))]
    {
        return Isa::Avx2;
    }
    #[allow(unreachable_code)]
    Isa::Scalar
}

/// The micro-kernel chosen for this CPU (detected once, then cached).
/// Inlined: kernels ask per row or tile (often enough for the calls to show
/// in a profile), while detection runs out of line once.
#[inline]
pub fn best_isa() -> Isa {
    match ISA.load(Ordering::Relaxed) {
        1 => Isa::Scalar,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        #[cfg(target_arch = "aarch64")]
        4 => Isa::Neon,
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        5 => Isa::Simd128,
        _ => detect_and_cache_isa(),
    }
}

/// [`best_isa`]'s first call: detects the ISA and caches it.
#[cold]
#[inline(never)]
fn detect_and_cache_isa() -> Isa {
    let isa = detect_isa();
    let code = match isa {
        Isa::Scalar => 1,
        Isa::Avx2 => 2,
        Isa::Avx512 => 3,
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => 4,
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => 5,
    };
    ISA.store(code, Ordering::Relaxed);
    isa
}

/// Lanes of `isa`'s f32 vectors, or `None` when `isa` runs no vector
/// backend here (the portable code, or an ISA this CPU lacks).
pub(crate) fn vector_lanes(isa: Isa) -> Option<usize> {
    struct Lanes;
    impl SimdKernel for Lanes {
        type Output = usize;
        #[inline(always)]
        fn run<S: Simd>(self, _: S) -> usize {
            S::LANES
        }
    }
    dispatch_on(isa, Lanes).ok()
}

/// What [`fma_probe`] measured the work of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmaProbe {
    /// The instruction set it ran on ([`best_isa`]).
    pub isa: Isa,
    /// Floating-point operations done (a multiply-add counting two).
    pub flops: u64,
    /// A value depending on every result (so none is optimized away).
    pub checksum: f32,
}

/// Runs `rounds` of twelve independent chains of vector multiply-adds on
/// the best backend (without one, a portable loop of multiplies and adds): timed by a caller, the
/// FMA throughput of one core, the peak a kernel's GFLOP/s is a share of.
/// Twelve chains cover the latency of two FMA units (four cycles each) and
/// fit AVX2's sixteen registers with the two operands.
pub fn fma_probe(rounds: usize) -> FmaProbe {
    struct Chains {
        rounds: usize,
    }
    impl SimdKernel for Chains {
        type Output = (u64, f32);
        #[inline(always)]
        fn run<S: Simd>(self, s: S) -> (u64, f32) {
            let (a, b) = (s.splat(0.999_999), s.splat(1e-7));
            let mut acc = [s.splat(1.0); 12];
            for _ in 0..self.rounds {
                for x in acc.iter_mut() {
                    *x = s.mul_add(*x, a, b);
                }
            }
            let mut sum = s.splat(0.0);
            for &x in &acc {
                sum = s.add(sum, x);
            }
            let flops = (self.rounds as u64).saturating_mul(24 * S::LANES as u64);
            (flops, s.reduce_add(sum))
        }
    }
    let isa = best_isa();
    let (flops, checksum) = dispatch(Chains { rounds }).unwrap_or_else(|k| {
        let mut acc = [1.0f32; 12];
        for _ in 0..k.rounds {
            for x in acc.iter_mut() {
                // Separate multiply and add: without FMA hardware
                // `mul_add` is a library call.
                *x = *x * 0.999_999 + 1e-7;
            }
        }
        ((k.rounds as u64).saturating_mul(24), acc.iter().sum())
    });
    FmaProbe {
        isa,
        flops,
        checksum,
    }
}

/// Whether `isa` can run on this CPU (NEON and simd128 always can where
/// they are compiled, even under `LELE_ISA=scalar`).
#[cfg(test)]
pub(crate) fn isa_available(isa: Isa) -> bool {
    isa_runs(isa)
}

/// Every instruction set this CPU runs, the portable code first (tests
/// run a kernel on each).
#[cfg(test)]
pub(crate) fn runnable_isas() -> alloc::vec::Vec<Isa> {
    [
        Isa::Scalar,
        Isa::Avx2,
        Isa::Avx512,
        #[cfg(target_arch = "aarch64")]
        Isa::Neon,
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128,
    ]
    .into_iter()
    .filter(|&isa| isa_runs(isa))
    .collect()
}

/// Whether `isa` can run on this CPU (see [`isa_available`]).
#[inline]
pub(crate) fn isa_runs(isa: Isa) -> bool {
    match isa {
        Isa::Scalar => true,
        Isa::Avx2 => matches!(best_isa(), Isa::Avx2 | Isa::Avx512),
        Isa::Avx512 => best_isa() == Isa::Avx512,
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => true,
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => true,
    }
}
