//! Pooling and element-wise cases.
use super::*;

fn unary_case(name: &str, kernel: &dyn Kernel, len: usize, budget: f64) {
    if !selected(name, name) {
        return;
    }
    // "far": inputs around -100 (a det model's background logits); "wide":
    // over ±6 instead of ±1 (a third of them outside GELU's table, so
    // nearly every vector mixes table and tail lanes: its worst case).
    let shift = if name.ends_with("far") { -100.0 } else { 0.0 };
    let scale = if name.ends_with("wide") { 6.0 } else { 1.0 };
    let x: Vec<f32> = fill(len, 3).iter().map(|v| v * scale + shift).collect();
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

/// Fused multi-head attention on `[1, s, heads, d]` operands with a
/// `[1, 1, 1, s]` additive mask (MiniLM's layout) that hides the last
/// `padded` keys (BERT's -10000 on padding tokens).
fn attention_case(name: &str, s: usize, heads: usize, d: usize, padded: usize, budget: f64) {
    if !selected("attention", name) {
        return;
    }
    let kernel = lele_kernels::ops::mha::MultiHeadAttention {
        scale: 1.0 / (d as f32).sqrt(),
    };
    let qkv_shape = Shape::new(&[1, s, heads, d]).expect("rank 4");
    let mask_shape = Shape::new(&[1, 1, 1, s]).expect("rank 4");
    let (q, k, v) = (
        fill(s * heads * d, 1),
        fill(s * heads * d, 2),
        fill(s * heads * d, 3),
    );
    let mut mask = vec![0f32; s];
    mask[s - padded..].fill(-10000.0);
    fn t(x: &[f32], shape: Shape) -> Option<TensorRef<'_>> {
        Some(TensorRef {
            dtype: DType::F32,
            shape,
            data: bytemuck_bytes(x),
        })
    }
    let ins = [
        t(&q, qkv_shape),
        t(&k, qkv_shape),
        t(&v, qkv_shape),
        t(&mask, mask_shape),
    ];
    let mut y = vec![0f32; s * heads * d];
    let mut scratch = aligned_scratch(kernel.scratch_bytes(&ins, &[qkv_shape]));
    let secs = time(budget, || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: qkv_shape,
            data: bytemuck_bytes_mut(&mut y),
        }];
        kernel
            .run(&ins, &mut outs, line_bytes(&mut scratch))
            .expect("arguments are consistent");
        black_box(&y);
    });
    let flops = 4.0 * (s * s * heads * d) as f64;
    println!(
        "{{\"kernel\":\"attention\",\"case\":\"{name}\",\"ms\":{:.4},\"gflops\":{:.1}}}",
        secs * 1e3,
        flops / secs * 1e-9
    );
}

/// The pooling, attention and element-wise cases.
pub(crate) fn cases(budget: f64) {
    attention_case("minilm 128 tokens 12x32", 128, 12, 32, 0, budget);
    attention_case(
        "minilm 123 tokens + 5 padding 12x32",
        128,
        12,
        32,
        5,
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
    // PP-OCR cls's last pool: 2x2, stride 2, on short planes.
    let mut window = Window::new(2, [1, 2, 2]);
    window.strides = [1, 2, 2];
    shaped_case(
        "maxpool 2x2 s2 200x2x96",
        &MaxPool {
            window,
            column_major: false,
        },
        &[1, 200, 2, 96],
        budget,
    );
    // YOLOv8n's SPPF pools at 640x640: 5x5, stride 1, pads 2.
    let mut window = Window::new(2, [1, 5, 5]);
    window.pads = [0, 2, 2, 0, 2, 2];
    shaped_case(
        "maxpool 5x5 s1 p2 128x20x20",
        &MaxPool {
            window,
            column_major: false,
        },
        &[1, 128, 20, 20],
        budget,
    );
    // PP-OCR rec's pool (v4 and v6): 3x2, strides 3 and 2, no padding.
    let mut window = Window::new(2, [1, 3, 2]);
    window.strides = [1, 3, 2];
    shaped_case(
        "avgpool 3x2 s3x2 384x3x80",
        &AveragePool {
            window,
            count_include_pad: false,
        },
        &[1, 384, 3, 80],
        budget,
    );
    let n = 1 << 20;
    unary_case("swish", &Swish { alpha: 1.0 }, n, budget);
    // In L1 (64 KiB of input and output): the arithmetic alone.
    unary_case("swish in cache", &Swish { alpha: 1.0 }, 8192, budget);
    unary_case(
        "swish 32x160x160",
        &Swish { alpha: 1.0 },
        32 * 160 * 160,
        budget,
    );
    for name in ["sigmoid", "sigmoid far"] {
        unary_case(
            name,
            &Unary {
                op: UnaryOp::Sigmoid,
            },
            n,
            budget,
        );
    }
    unary_case("exp", &Unary { op: UnaryOp::Exp }, n, budget);
    unary_case("relu", &Unary { op: UnaryOp::Relu }, n, budget);
    unary_case("erf", &Unary { op: UnaryOp::Erf }, n, budget);
    unary_case("gelu (erf) 96x120x16", &GeluErf {}, 96 * 120 * 16, budget);
    unary_case(
        "gelu (erf) 96x120x16 wide",
        &GeluErf {},
        96 * 120 * 16,
        budget,
    );
    unary_case("tanh", &Unary { op: UnaryOp::Tanh }, n, budget);
}
