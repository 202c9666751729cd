//! Times lele's kernels on one thread and prints one JSON object per line
//! (`cargo xtask bench --kernels` runs this next to NumPy's BLAS).
//!
//! `cargo run --release -p lele-kernels --example kernel_bench [-- --quick] [--only TEXT] [--fastest] [--cold]`
//! (`--only` runs the cases whose kernel or case name contains TEXT;
//! `--fastest` reports each case's fastest call instead of the median, steadier
//! on a machine shared with other load; `--cold` sweeps a 64 MiB buffer through
//! the caches before each timed call, so operands come from memory as a
//! model's weights do in a forward pass)
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

use lele_kernels::ops::conv::{AutoPad, Conv, ConvPackedWeights, ConvWinograd};
use lele_kernels::ops::gemm::{MatRef, prepacked, sgemm, sgemm_packed_b, sgemm_scratch_len};
use lele_kernels::ops::pool::{MaxPool, Window};
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

/// Median seconds per call of `f`, repeated until about `budget` seconds.
fn time(budget: f64, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((budget / once) as usize).clamp(3, 2000);
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            evict_caches();
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

/// The `--only` filter.
static ONLY: OnceLock<Option<String>> = OnceLock::new();

/// Whether a case named `name` (of `kernel`) runs under `--only`.
fn selected(kernel: &str, name: &str) -> bool {
    match ONLY.get().and_then(|o| o.as_deref()) {
        Some(t) => kernel.contains(t) || name.contains(t),
        None => true,
    }
}

/// How a GEMM case's right operand is stored.
#[derive(Clone, Copy, PartialEq)]
enum BLayout {
    /// Row-major `k × n`, packed per call.
    Rows,
    /// Transposed (`n × k` row-major, a Linear layer's weight).
    Transposed,
    /// Packed ahead of time (a constant weight, as the compiler stores it).
    Prepacked,
}

fn gemm_case(name: &str, m: usize, n: usize, k: usize, layout: BLayout, budget: f64) {
    if !selected("gemm", name) {
        return;
    }
    let a = fill(m * k, 1);
    let b = fill(k * n, 2);
    let bm = match layout {
        BLayout::Transposed => MatRef::transposed(&b, k),
        _ => MatRef::row_major(&b, n),
    };
    let mut packed = vec![0f32; prepacked::packed_len(k, n)];
    let pb = match layout {
        BLayout::Prepacked => {
            assert!(prepacked::pack_into(bm, k, n, &mut packed));
            prepacked::Prepacked::new(&packed, k, n)
        }
        _ => None,
    };
    let mut c = vec![0f32; m * n];
    let mut scratch = vec![0f32; sgemm_scratch_len(m, n, k)];
    let am = MatRef::row_major(&a, k);
    let secs = time(budget, || {
        match &pb {
            Some(pb) => sgemm_packed_b(m, n, k, 1.0, am, pb, 0.0, &mut c, n, &mut scratch, None),
            None => sgemm(m, n, k, 1.0, am, bm, 0.0, &mut c, n, &mut scratch),
        }
        .expect("sgemm arguments are consistent");
        black_box(&c);
    });
    let gflops = 2.0 * (m * n * k) as f64 / secs / 1e9;
    println!(
        "{{\"kernel\":\"sgemm\",\"case\":\"{name}\",\"m\":{m},\"n\":{n},\"k\":{k},\"ms\":{:.4},\"gflops\":{gflops:.2}}}",
        secs * 1e3
    );
}

fn unary_case(name: &str, kernel: &dyn Kernel, len: usize, budget: f64) {
    if !selected(name, name) {
        return;
    }
    let x = fill(len, 3);
    let mut y = vec![0f32; len];
    let shape = Shape::new(&[len]).expect("rank 1");
    let secs = time(budget, || {
        let ins = [Some(TensorRef {
            dtype: DType::F32,
            shape,
            data: bytemuck_bytes(&x),
        })];
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape,
            data: bytemuck_bytes_mut(&mut y),
        }];
        kernel
            .run(&ins, &mut outs, &mut [])
            .expect("unary arguments are consistent");
        black_box(&y);
    });
    println!(
        "{{\"kernel\":\"{name}\",\"case\":\"{len}\",\"len\":{len},\"ms\":{:.4},\"ns_per_elem\":{:.3}}}",
        secs * 1e3,
        secs * 1e9 / len as f64
    );
}

/// One call of a single-input kernel on an input of `dims` (the output
/// shape inferred).
fn shaped_case(name: &str, kernel: &dyn Kernel, dims: &[usize], budget: f64) {
    if !selected(name, name) {
        return;
    }
    let shape = Shape::new(dims).expect("rank within limits");
    let x = fill(shape.numel(), 3);
    let ins = [Some(TensorRef {
        dtype: DType::F32,
        shape,
        data: bytemuck_bytes(&x),
    })];
    let mut out_shape = [Shape::SCALAR];
    kernel
        .infer(&ins, &mut out_shape)
        .expect("shapes are consistent");
    let mut y = vec![0f32; out_shape[0].numel()];
    let mut scratch = vec![0f32; kernel.scratch_bytes(&ins, &out_shape).div_ceil(4)];
    let secs = time(budget, || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: out_shape[0],
            data: bytemuck_bytes_mut(&mut y),
        }];
        kernel
            .run(&ins, &mut outs, bytemuck_bytes_mut(&mut scratch))
            .expect("arguments are consistent");
        black_box(&y);
    });
    println!(
        "{{\"kernel\":\"{name}\",\"case\":\"{dims:?}\",\"ms\":{:.4},\"ns_per_elem\":{:.3}}}",
        secs * 1e3,
        secs * 1e9 / y.len() as f64
    );
}

/// One `Conv` call: `c` → `m` channels, `k`×`k` kernel, stride `s`, pad
/// `k / 2`, on an `h`×`h` input, with bias; `group` groups; a fused
/// `activation`.
#[allow(clippy::too_many_arguments)]
fn conv_case(
    name: &str,
    c: usize,
    m: usize,
    k: usize,
    s: usize,
    h: usize,
    group: usize,
    activation: Activation,
    budget: f64,
) {
    if !selected("conv", name) {
        return;
    }
    let conv = Conv {
        group,
        kernel: [k, k],
        strides: [s, s],
        pads: [k / 2; 4],
        dilations: [1, 1],
        auto_pad: AutoPad::NotSet,
        activation,
        post_mul: 1.0,
        post_add: 0.0,
    };
    let x = fill(c * h * h, 4);
    let mut w = fill(m * (c / group) * k * k, 5);
    // A name ending in "packed": the weight stored packed at build time;
    // in "winograd": transformed for Winograd F(2x2, 3x3).
    let packed = ConvPackedWeights { conv };
    let winograd = ConvWinograd { conv, m };
    let mut ws = Shape::new(&[m, c / group, k, k]).expect("rank 4");
    let kernel: &dyn Kernel = if name.ends_with(" packed") {
        w = ConvPackedWeights::pack(group, &[m, c / group, k, k], &w)
            .expect("the weight qualifies for packing");
        &packed
    } else if name.ends_with(" winograd") {
        let dims = [m, c / group, k, k];
        w = ConvWinograd::pack(&dims, &w).expect("a 3x3 weight");
        let pd = ConvWinograd::packed_dims(&dims).expect("a 3x3 weight");
        ws = Shape::new(&pd).expect("rank 3");
        &winograd
    } else {
        &conv
    };
    let b = fill(m, 6);
    let xs = Shape::new(&[1, c, h, h]).expect("rank 4");
    let bs = Shape::new(&[m]).expect("rank 1");
    let ins = [
        Some(TensorRef {
            dtype: DType::F32,
            shape: xs,
            data: bytemuck_bytes(&x),
        }),
        Some(TensorRef {
            dtype: DType::F32,
            shape: ws,
            data: bytemuck_bytes(&w),
        }),
        Some(TensorRef {
            dtype: DType::F32,
            shape: bs,
            data: bytemuck_bytes(&b),
        }),
    ];
    let mut out_shape = [Shape::SCALAR];
    kernel
        .infer(&ins, &mut out_shape)
        .expect("conv shapes are consistent");
    let mut y = vec![0f32; out_shape[0].numel()];
    let mut scratch = vec![0u8; kernel.scratch_bytes(&ins, &out_shape)];
    let secs = time(budget, || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: out_shape[0],
            data: bytemuck_bytes_mut(&mut y),
        }];
        kernel
            .run(&ins, &mut outs, &mut scratch)
            .expect("conv arguments are consistent");
        black_box(&y);
    });
    let ohw = out_shape[0].numel() / m;
    let flops = 2.0 * (m * ohw * (c / group) * k * k) as f64;
    println!(
        "{{\"kernel\":\"conv\",\"case\":\"{name}\",\"ms\":{:.4},\"gflops\":{:.2}}}",
        secs * 1e3,
        flops / secs / 1e9
    );
}

/// One bidirectional `LSTM` call (batch 1, with biases): `seq` steps,
/// `input` features, `hidden` units per direction.
fn lstm_case(name: &str, seq: usize, input: usize, hidden: usize, budget: f64) {
    if !selected("lstm", name) {
        return;
    }
    let op = Lstm {
        hidden_size: hidden,
        direction: Direction::Bidirectional,
        layout: 0,
        clip: None,
        input_forget: false,
    };
    let g4 = 4 * hidden;
    // Small weights keep the states away from saturation.
    let small = |n, seed| -> Vec<f32> { fill(n, seed).iter().map(|v| v * 0.05).collect() };
    let (x, w, r, b) = (
        fill(seq * input, 7),
        small(2 * g4 * input, 8),
        small(2 * g4 * hidden, 9),
        small(4 * g4, 10),
    );
    fn t<'a>(data: &'a [f32], dims: &[usize]) -> Option<TensorRef<'a>> {
        Some(TensorRef {
            dtype: DType::F32,
            shape: Shape::new(dims).expect("rank 3 or less"),
            data: bytemuck_bytes(data),
        })
    }
    let ins = [
        t(&x, &[seq, 1, input]),
        t(&w, &[2, g4, input]),
        t(&r, &[2, g4, hidden]),
        t(&b, &[2, 2 * g4]),
    ];
    let mut out_shape = [Shape::SCALAR];
    op.infer(&ins, &mut out_shape)
        .expect("lstm shapes are consistent");
    let mut y = vec![0f32; out_shape[0].numel()];
    let mut scratch = vec![0u8; op.scratch_bytes(&ins, &out_shape)];
    let secs = time(budget, || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: out_shape[0],
            data: bytemuck_bytes_mut(&mut y),
        }];
        op.run(&ins, &mut outs, &mut scratch)
            .expect("lstm arguments are consistent");
        black_box(&y);
    });
    let flops = 2.0 * (2 * seq * g4 * (input + hidden)) as f64;
    println!(
        "{{\"kernel\":\"lstm\",\"case\":\"{name}\",\"ms\":{:.4},\"gflops\":{:.2}}}",
        secs * 1e3,
        flops / secs / 1e9
    );
}

fn bytemuck_bytes(x: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding or invalid bit patterns as bytes; the
    // length is the same memory.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len() * 4) }
}

fn bytemuck_bytes_mut(x: &mut [f32]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len() * 4) }
}

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
    for s in [256, 384, 512, 768, 1024] {
        gemm_case(&format!("square {s}"), s, s, s, BLayout::Rows, budget);
    }
    gemm_case("gemv 1x2048x2048", 1, 2048, 2048, BLayout::Rows, budget);
    // Shapes from the benchmark models: a 3x3 conv of YOLOv8n as im2col
    // GEMM, a 1x1 conv, and MiniLM's projections at sequence 128.
    gemm_case(
        "conv3x3 yolo 32x25600x144",
        32,
        25600,
        144,
        BLayout::Rows,
        budget,
    );
    gemm_case(
        "conv1x1 yolo 64x6400x128",
        64,
        6400,
        128,
        BLayout::Rows,
        budget,
    );
    gemm_case(
        "minilm qkv 128x384x384",
        128,
        384,
        384,
        BLayout::Rows,
        budget,
    );
    gemm_case(
        "ppocr rec head 40x18710x120",
        40,
        18710,
        120,
        BLayout::Rows,
        budget,
    );
    gemm_case(
        "minilm ffn 128x1536x384",
        128,
        1536,
        384,
        BLayout::Rows,
        budget,
    );
    // PP-OCRv6 det's widest 1x1 conv (384 -> 768 channels at 15x15).
    gemm_case(
        "conv1x1 v6det 768x225x384",
        768,
        225,
        384,
        BLayout::Rows,
        budget,
    );
    // A Linear layer (x·Wᵀ, W stored n × k) with few rows: ddddocr's
    // 8210-class output at two sequence lengths.
    gemm_case(
        "linear xWt 16x8210x1024",
        16,
        8210,
        1024,
        BLayout::Transposed,
        budget,
    );
    // Silero VAD's convolutions over a few frames: the STFT basis (258
    // filters of 256 taps, 5 frames) and the first encoder layer.
    gemm_case("vad stft 258x5x256", 258, 5, 256, BLayout::Rows, budget);
    gemm_case("vad enc0 128x4x387", 128, 4, 387, BLayout::Rows, budget);
    // One LSTM step of ddddocr: the hidden state times Rᵀ (R is 2048 × 512
    // per direction, stored n × k).
    gemm_case(
        "lstm step hRt 1x2048x512",
        1,
        2048,
        512,
        BLayout::Transposed,
        budget,
    );
    gemm_case(
        "ddddocr head 20x8210x1024 xWt",
        20,
        8210,
        1024,
        BLayout::Transposed,
        budget,
    );
    gemm_case(
        "ddddocr lstm xW 20x4096x512 xWt",
        20,
        4096,
        512,
        BLayout::Transposed,
        budget,
    );
    gemm_case(
        "linear xWt 40x8210x1024",
        40,
        8210,
        1024,
        BLayout::Transposed,
        budget,
    );
    // ddddocr's recurrent layer (20 steps, 512 inputs, 512 units).
    lstm_case("ddddocr bilstm 20x512x512", 20, 512, 512, budget);
    // The same products with the weight packed ahead of time (as the
    // compiler stores a MatMul's constant right operand).
    for (name, m, n, k) in [
        ("square 512", 512, 512, 512),
        ("gemv 1x2048x2048", 1, 2048, 2048),
        ("minilm qkv 128x384x384", 128, 384, 384),
        ("minilm ffn 128x1536x384", 128, 1536, 384),
        ("minilm ffn out 128x384x1536", 128, 384, 1536),
        ("ppocr rec head 40x18710x120", 40, 18710, 120),
        ("ddddocr head 20x8210x1024", 20, 8210, 1024),
        ("ddddocr lstm xW 20x4096x512", 20, 4096, 512),
        ("lstm step hRt 1x2048x512", 1, 2048, 512),
    ] {
        gemm_case(
            &format!("{name} prepacked"),
            m,
            n,
            k,
            BLayout::Prepacked,
            budget,
        );
    }
    // Convolutions of the benchmark models (YOLOv8n stem and a C2f block,
    // a PP-OCR depthwise layer).
    conv_case(
        "yolo 3->16 3x3 s2 640",
        3,
        16,
        3,
        2,
        640,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 16->32 3x3 s2 320",
        16,
        32,
        3,
        2,
        320,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 32->32 3x3 s1 160",
        32,
        32,
        3,
        1,
        160,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 64->64 3x3 s1 80",
        64,
        64,
        3,
        1,
        80,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 64->64 3x3 s1 80 +swish",
        64,
        64,
        3,
        1,
        80,
        1,
        Activation::Swish,
        budget,
    );
    conv_case(
        "yolo 32->32 3x3 s1 160 +swish",
        32,
        32,
        3,
        1,
        160,
        1,
        Activation::Swish,
        budget,
    );
    conv_case(
        "yolo 128->128 1x1 40",
        128,
        128,
        1,
        1,
        40,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 128->128 3x3 s1 40",
        128,
        128,
        3,
        1,
        40,
        1,
        Activation::None,
        budget,
    );
    // Rows narrower than a multiple of 16 (flat tiles).
    conv_case(
        "yolo 64->64 3x3 s1 40",
        64,
        64,
        3,
        1,
        40,
        1,
        Activation::None,
        budget,
    );
    // YOLOv8n's downsampling convolutions (stride 2; input size given).
    for (name, c, m, h) in [
        ("yolo 32->64 3x3 s2 160", 32, 64, 160),
        ("yolo 64->128 3x3 s2 80", 64, 128, 80),
        ("yolo 64->64 3x3 s2 80", 64, 64, 80),
        ("yolo 128->128 3x3 s2 40", 128, 128, 40),
    ] {
        conv_case(name, c, m, 3, 2, h, 1, Activation::Swish, budget);
    }
    conv_case(
        "yolo 128->128 3x3 s1 20",
        128,
        128,
        3,
        1,
        20,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "v6det 96->96 3x3 s1 30",
        96,
        96,
        3,
        1,
        30,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 256->256 3x3 s1 20",
        256,
        256,
        3,
        1,
        20,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "yolo 256->256 1x1 20",
        256,
        256,
        1,
        1,
        20,
        1,
        Activation::None,
        budget,
    );
    // Many channels over small planes: PP-OCRv6 rec's widest 1x1 convs
    // (384->768 over 3x80, 192->384 over 6x80; here over 16² and 22²) and
    // det's 384->768 over 15².
    for (name, c, m, h) in [
        ("v6 384->768 1x1 16", 384, 768, 16),
        ("v6 192->384 1x1 22", 192, 384, 22),
        ("v6 768->384 1x1 16", 768, 384, 16),
        ("v6det 384->768 1x1 15", 384, 768, 15),
        ("v6det 48->96 1x1 60", 48, 96, 60),
        ("v6det 96->192 1x1 30", 96, 192, 30),
        ("v6det 192->384 1x1 15", 192, 384, 15),
        ("v6det 384->384 1x1 15", 384, 384, 15),
        ("v6det 192->192 1x1 30", 192, 192, 30),
        ("v6det 96->48 1x1 120", 96, 48, 120),
    ] {
        conv_case(name, c, m, 1, 1, h, 1, Activation::None, budget);
        if m > 128 {
            let packed = format!("{name} packed");
            conv_case(&packed, c, m, 1, 1, h, 1, Activation::None, budget);
        }
    }
    // Winograd F(2x2, 3x3) on the dense stride-1 3x3 convs of YOLOv8n and
    // ddddocr (each also timed above or here on the direct/GEMM path).
    for (c, m, h) in [
        (16, 16, 160),
        (32, 32, 80),
        (64, 64, 80),
        (64, 64, 40),
        (128, 128, 20),
        (128, 64, 40),
        (256, 64, 20),
        (48, 192, 25),
        (64, 256, 13),
        (24, 24, 40),
    ] {
        for path in ["", " winograd"] {
            let name = format!("wino {c}->{m} 3x3 {h}{path}");
            conv_case(&name, c, m, 3, 1, h, 1, Activation::Swish, budget);
        }
    }
    // YOLOv8n's 3x3 convs at 20x20 (256 channels, the GEMM's im2col path).
    for name in ["yolo 256->256 3x3 20", "yolo 256->256 3x3 20 packed"] {
        conv_case(name, 256, 256, 3, 1, 20, 1, Activation::Swish, budget);
    }
    // ddddocr's widest 3x3 convs (48->192 over 16x40, 64->256 over 8x20;
    // here over 25² and 13²), weights packed as the compiler stores them.
    for (name, c, m, h) in [
        ("dddd 48->192 3x3 25", 48, 192, 25),
        ("dddd 64->256 3x3 13", 64, 256, 13),
    ] {
        conv_case(name, c, m, 3, 1, h, 1, Activation::Swish, budget);
        let packed = format!("{name} packed");
        conv_case(&packed, c, m, 3, 1, h, 1, Activation::Swish, budget);
    }
    // PP-OCRv6 det at 480x480: few output channels over large planes.
    conv_case(
        "ppocr 48->24 3x3 s2 240",
        48,
        24,
        3,
        2,
        240,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "ppocr 96->24 3x3 s1 120",
        96,
        24,
        3,
        1,
        120,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "ppocr 96->48 1x1 120",
        96,
        48,
        1,
        1,
        120,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "depthwise 96 7x7 s1 120",
        96,
        96,
        7,
        1,
        120,
        96,
        Activation::None,
        budget,
    );
    conv_case(
        "v6det 48->96 1x1 120",
        48,
        96,
        1,
        1,
        120,
        1,
        Activation::None,
        budget,
    );
    // The same with GELU fused (PP-OCRv6 det's Conv+Gelu blocks).
    conv_case(
        "v6det 48->96 1x1 120 gelu",
        48,
        96,
        1,
        1,
        120,
        1,
        Activation::Gelu,
        budget,
    );
    conv_case(
        "v6det 96->96 3x3 s1 60",
        96,
        96,
        3,
        1,
        60,
        1,
        Activation::None,
        budget,
    );
    // PP-OCRv6 det's stem: 2x2 convolutions with few channels.
    conv_case(
        "v6det 24->12 2x2 s1 240",
        24,
        12,
        2,
        1,
        240,
        1,
        Activation::None,
        budget,
    );
    conv_case(
        "v6det 12->24 2x2 s1 240",
        12,
        24,
        2,
        1,
        240,
        1,
        Activation::None,
        budget,
    );
    // Depthwise layers over small planes (PP-OCRv6 det's later stages).
    for (name, c, k, s, h) in [
        ("depthwise 384 3x3 s1 15", 384, 3, 1, 15),
        ("depthwise 192 3x3 s1 30", 192, 3, 1, 30),
        ("depthwise 96 3x3 s1 60", 96, 3, 1, 60),
        ("depthwise 96 7x7 s1 60", 96, 7, 1, 60),
        ("depthwise 48 3x3 s1 120", 48, 3, 1, 120),
        ("depthwise 48 3x3 s2 120", 48, 3, 2, 120),
        ("depthwise 96 3x3 s2 60", 96, 3, 2, 60),
        ("depthwise 192 3x3 s2 30", 192, 3, 2, 30),
    ] {
        conv_case(name, c, c, k, s, h, c, Activation::None, budget);
    }
    conv_case(
        "depthwise 64 3x3 s1 160",
        64,
        64,
        3,
        1,
        160,
        64,
        Activation::None,
        budget,
    );
    conv_case(
        "depthwise 64 3x3 s2 160",
        64,
        64,
        3,
        2,
        160,
        64,
        Activation::None,
        budget,
    );
    // PP-OCRv6 det's stem pool: 2x2, stride 1, SAME_UPPER.
    let mut window = Window::new(2, [1, 2, 2]);
    window.auto_pad = AutoPad::SameUpper;
    shaped_case(
        "maxpool 2x2 s1",
        &MaxPool {
            window,
            column_major: false,
        },
        &[1, 24, 240, 240],
        budget,
    );
    let n = 1 << 20;
    unary_case("swish", &Swish { alpha: 1.0 }, n, budget);
    unary_case(
        "swish 32x160x160",
        &Swish { alpha: 1.0 },
        32 * 160 * 160,
        budget,
    );
    unary_case(
        "sigmoid",
        &Unary {
            op: UnaryOp::Sigmoid,
        },
        n,
        budget,
    );
    unary_case("exp", &Unary { op: UnaryOp::Exp }, n, budget);
    unary_case("relu", &Unary { op: UnaryOp::Relu }, n, budget);
    unary_case("erf", &Unary { op: UnaryOp::Erf }, n, budget);
    unary_case("gelu (erf) 96x120x16", &GeluErf {}, 96 * 120 * 16, budget);
    unary_case("tanh", &Unary { op: UnaryOp::Tanh }, n, budget);
}
