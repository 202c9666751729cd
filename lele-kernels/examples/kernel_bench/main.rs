//! Times lele's kernels on one thread and prints one JSON object per line
//! (`cargo xtask bench --kernels` runs this next to NumPy's BLAS).
//!
//! `cargo run --release -p lele-kernels --example kernel_bench [-- --quick] [--only TEXT] [--fastest] [--cold] [--threads N] [--shared-input]`
//! (`--only` runs the cases whose kernel or case name contains TEXT;
//! `--fastest` reports each case's fastest call instead of the median, steadier
//! on a machine shared with other load; `--cold` sweeps a 64 MiB buffer through
//! the caches before each timed call, so operands come from memory as a
//! model's weights do in a forward pass; `--shared-input` has the kernels'
//! threads rewrite a convolution's input before each call, as the layer
//! before it would).
//!
//! The cases live by family in `gemm.rs`, `conv.rs` and `misc.rs`
//! (pooling, element-wise); this file holds the timing and the flags.
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

use lele_kernels::ops::conv::{AutoPad, Conv, ConvPackedWeights, ConvTranspose, ConvWinograd};
use lele_kernels::ops::gemm::{MatRef, prepacked, sgemm, sgemm_packed_b, sgemm_scratch_len};
use lele_kernels::ops::pool::{AveragePool, MaxPool, Window};
use lele_kernels::ops::rnn::{Direction, Lstm};
use lele_kernels::ops::unary::{Activation, GeluErf, Swish, Unary, UnaryOp};
use lele_kernels::{DType, Kernel, Shape, TensorMut, TensorRef};

/// A deterministic fill in [-1, 1).
fn fill(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The FMA throughput of one core on the ISA the kernels run
/// (`lele_kernels::simd::fma_probe`): the peak the GFLOP/s of the other
/// rows are a share of.
fn fma_peak(budget: f64) {
    if !selected("peak", "fma") {
        return;
    }
    const ROUNDS: usize = 1 << 20;
    let mut probe = None;
    let secs = time(budget, || {
        probe = Some(black_box(lele_kernels::simd::fma_probe(ROUNDS)))
    });
    let Some(p) = probe else { return };
    println!(
        "{{\"kernel\":\"peak\",\"case\":\"fma\",\"isa\":\"{:?}\",\"ms\":{:.4},\"gflops\":{:.1}}}",
        p.isa,
        secs * 1e3,
        p.flops as f64 / secs / 1e9
    );
}

/// Median seconds per call of `f`, repeated until about `budget` seconds.
fn time(budget: f64, f: impl FnMut()) -> f64 {
    time_prepared(budget, || {}, f)
}

/// [`time`], with `prepare` run untimed before each call.
fn time_prepared(budget: f64, mut prepare: impl FnMut(), mut f: impl FnMut()) -> f64 {
    prepare();
    f();
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((budget / once) as usize).clamp(3, 2000);
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            evict_caches();
            prepare();
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    v.sort_by(f64::total_cmp);
    if *FASTEST.get().unwrap_or(&false) {
        v[0]
    } else {
        v[v.len() / 2]
    }
}

/// With `--cold`, writes a buffer larger than the last-level cache so that
/// the next call finds none of its operands cached.
fn evict_caches() {
    if let Some(Some(buf)) = COLD.get() {
        let mut buf = buf.lock().unwrap_or_else(|e| e.into_inner());
        for (i, x) in buf.iter_mut().step_by(16).enumerate() {
            *x = x.wrapping_add(i as u32);
        }
        black_box(&buf);
    }
}

/// `--cold`: the eviction buffer (64 MiB), when asked for.
static COLD: OnceLock<Option<std::sync::Mutex<Vec<u32>>>> = OnceLock::new();

/// `--fastest`: report the fastest call of a case, not the median.
static FASTEST: OnceLock<bool> = OnceLock::new();

/// `--shared-input`: convolution inputs rewritten before each call by an
/// element-wise kernel on the kernels' threads (each writes a contiguous
/// part), as a model's previous layer leaves them: with two threads, half
/// of the input sits in the other core's cache.
static SHARED_INPUT: OnceLock<bool> = OnceLock::new();

/// The `--only` filter.
static ONLY: OnceLock<Option<String>> = OnceLock::new();

/// Whether a case named `name` (of `kernel`) runs under `--only`.
fn selected(kernel: &str, name: &str) -> bool {
    match ONLY.get().and_then(|o| o.as_deref()) {
        Some(t) => kernel.contains(t) || name.contains(t),
        None => true,
    }
}

pub(crate) fn bytemuck_bytes(x: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding or invalid bit patterns as bytes; the
    // length is the same memory.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len() * 4) }
}

pub(crate) fn bytemuck_bytes_mut(x: &mut [f32]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len() * 4) }
}

/// One cache line of scratch.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line([u8; 64]);

/// Zeroed scratch of at least `bytes` bytes, 64-byte aligned like a
/// model's workspace arena (a plain `Vec<u8>` is 16-byte aligned, which
/// splits the kernels' 64-byte stores across cache lines).
pub(crate) fn aligned_scratch(bytes: usize) -> Vec<Line> {
    vec![Line([0; 64]); bytes.div_ceil(64)]
}

/// The bytes of `lines`.
pub(crate) fn line_bytes(lines: &mut [Line]) -> &mut [u8] {
    // SAFETY: `Line` is 64 plain bytes without padding.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast(), lines.len() * 64) }
}

mod conv;
mod gemm;
mod misc;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = if quick { 0.05 } else { 0.5 };
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    ONLY.get_or_init(|| only);
    FASTEST.get_or_init(|| args.iter().any(|a| a == "--fastest"));
    SHARED_INPUT.get_or_init(|| args.iter().any(|a| a == "--shared-input"));
    COLD.get_or_init(|| {
        args.iter()
            .any(|a| a == "--cold")
            .then(|| std::sync::Mutex::new(vec![0u32; 16 << 20]))
    });
    // `--threads N`: the kernels' thread count (default 1).
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(1);
    lele_kernels::threads::set_num_threads(threads);
    fma_peak(budget);
    gemm::cases(budget);
    conv::cases(budget);
    misc::cases(budget);
}
