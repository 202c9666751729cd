//! Convolution cases: the benchmark models' layers on each path (direct,
//! GEMM, packed weights, Winograd, depthwise).
use super::*;

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
    conv_case_hw(name, c, m, k, s, [h, h], group, activation, budget)
}

/// [`conv_case`] on an `hw[0]`×`hw[1]` input.
#[allow(clippy::too_many_arguments)]
fn conv_case_hw(
    name: &str,
    c: usize,
    m: usize,
    k: usize,
    s: usize,
    hw: [usize; 2],
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
    // The input 64-byte aligned, as a model's arena holds it.
    let x_len = c * hw[0] * hw[1] * 4;
    let mut x_lines = aligned_scratch(x_len);
    let x = &mut line_bytes(&mut x_lines)[..x_len];
    x.copy_from_slice(bytemuck_bytes(&fill(c * hw[0] * hw[1], 4)));
    // `--shared-input`: before each call the input is rewritten (negated,
    // which keeps its distribution, from a copy kept for the purpose) by the
    // element-wise kernel on the kernels' threads, each thread writing one
    // contiguous part, as a channel-split layer before it would leave it.
    let shared_input = *SHARED_INPUT.get().unwrap_or(&false);
    let x_source = x.to_vec();
    let negate = Unary { op: UnaryOp::Neg };
    // Weights scaled to 3.6/√fan-in so that an output's standard
    // deviation is about 1.2, as a model's pre-activations (the epilogue's
    // activation costs depend on the values: GELU's table covers ±4).
    let fan_in = (c / group * k * k) as f32;
    let mut w: Vec<f32> = fill(m * (c / group) * k * k, 5)
        .iter()
        .map(|v| v * 3.6 / fan_in.sqrt())
        .collect();
    // A name ending in "packed": the weight stored packed at build time;
    // in "winograd": transformed for Winograd F(2x2, 3x3); in "winograd4":
    // for F(4x4, 3x3).
    let packed = ConvPackedWeights { conv };
    let winograd = ConvWinograd { conv, m };
    let mut ws = Shape::new(&[m, c / group, k, k]).expect("rank 4");
    let kernel: &dyn Kernel = if name.ends_with(" packed") {
        w = ConvPackedWeights::pack(group, &[m, c / group, k, k], &w)
            .expect("the weight qualifies for packing");
        &packed
    } else if let Some(tile) = [(" winograd", 2), (" winograd4", 4)]
        .iter()
        .find_map(|&(end, tile)| name.ends_with(end).then_some(tile))
    {
        let dims = [m, c / group, k, k];
        w = ConvWinograd::pack_for(tile, &dims, &w).expect("a 3x3 weight");
        let pd = ConvWinograd::packed_dims_for(tile, &dims).expect("a 3x3 weight");
        ws = Shape::new(&pd).expect("rank 3");
        &winograd
    } else {
        &conv
    };
    let b = fill(m, 6);
    let xs = Shape::new(&[1, c, hw[0], hw[1]]).expect("rank 4");
    let bs = Shape::new(&[m]).expect("rank 1");
    // A name containing "residual": a residual added onto the output (the
    // fused `Add`), as large as the output.
    let residual_len = if name.contains(" residual") {
        let (oh, ow) = (hw[0].div_ceil(s), hw[1].div_ceil(s));
        m * oh * ow
    } else {
        0
    };
    let residual = fill(residual_len, 7);
    // The weight, bias and residual; the input goes first, per call.
    let rest = [
        None,
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
        (residual_len > 0).then(|| TensorRef {
            dtype: DType::F32,
            shape: Shape::new(&[1, m, hw[0].div_ceil(s), hw[1].div_ceil(s)]).expect("rank 4"),
            data: bytemuck_bytes(&residual),
        }),
    ];
    let count = if residual_len > 0 { 4 } else { 3 };
    let mut ins = rest;
    ins[0] = Some(TensorRef {
        dtype: DType::F32,
        shape: xs,
        data: &x_source,
    });
    let mut out_shape = [Shape::SCALAR];
    kernel
        .infer(&ins[..count], &mut out_shape)
        .expect("conv shapes are consistent");
    let mut y = aligned_scratch(4 * out_shape[0].numel());
    let mut scratch = aligned_scratch(kernel.scratch_bytes(&ins[..count], &out_shape));
    let x_run = std::cell::RefCell::new(x_lines);
    let secs = time_prepared(
        budget,
        || {
            if !shared_input {
                return;
            }
            let mut lines = x_run.borrow_mut();
            let source = [Some(TensorRef {
                dtype: DType::F32,
                shape: xs,
                data: &x_source,
            })];
            let mut outs = [TensorMut {
                dtype: DType::F32,
                shape: xs,
                data: &mut line_bytes(&mut lines)[..x_len],
            }];
            negate
                .run(&source, &mut outs, &mut [])
                .expect("a negation of the input");
        },
        || {
            let mut lines = x_run.borrow_mut();
            let mut ins = rest;
            ins[0] = Some(TensorRef {
                dtype: DType::F32,
                shape: xs,
                data: &line_bytes(&mut lines)[..x_len],
            });
            let mut outs = [TensorMut {
                dtype: DType::F32,
                shape: out_shape[0],
                data: &mut line_bytes(&mut y)[..4 * out_shape[0].numel()],
            }];
            kernel
                .run(&ins[..count], &mut outs, line_bytes(&mut scratch))
                .expect("conv arguments are consistent");
            black_box(&y);
        },
    );
    let ohw = out_shape[0].numel() / m;
    let flops = 2.0 * (m * ohw * (c / group) * k * k) as f64;
    println!(
        "{{\"kernel\":\"conv\",\"case\":\"{name}\",\"ms\":{:.4},\"gflops\":{:.2}}}",
        secs * 1e3,
        flops / secs / 1e9
    );
}

/// A 2×2, stride-2 `ConvTranspose` of `c` channels over `h`² to `m`
/// channels (PP-OCR det's upsampling head), with a bias and `activation`.
fn conv_transpose_case(
    name: &str,
    c: usize,
    m: usize,
    h: usize,
    activation: Activation,
    budget: f64,
) {
    if !selected("conv_transpose", name) {
        return;
    }
    let op = ConvTranspose {
        group: 1,
        kernel: [2, 2],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
        output_padding: [0, 0],
        output_shape: None,
        auto_pad: AutoPad::NotSet,
        activation,
    };
    let x = fill(c * h * h, 4);
    let w = fill(c * m * 4, 5);
    // "far": outputs far below zero (a probability map's background,
    // whose sigmoid underflows).
    let shift = if name.ends_with("far") { -120.0 } else { 0.0 };
    let b: Vec<f32> = fill(m, 6).iter().map(|v| v + shift).collect();
    let ins = [
        Some(TensorRef {
            dtype: DType::F32,
            shape: Shape::new(&[1, c, h, h]).expect("rank 4"),
            data: bytemuck_bytes(&x),
        }),
        Some(TensorRef {
            dtype: DType::F32,
            shape: Shape::new(&[c, m, 2, 2]).expect("rank 4"),
            data: bytemuck_bytes(&w),
        }),
        Some(TensorRef {
            dtype: DType::F32,
            shape: Shape::new(&[m]).expect("rank 1"),
            data: bytemuck_bytes(&b),
        }),
    ];
    let mut out_shape = [Shape::SCALAR];
    op.infer(&ins, &mut out_shape)
        .expect("conv transpose shapes are consistent");
    let mut y = aligned_scratch(4 * out_shape[0].numel());
    let mut scratch = aligned_scratch(op.scratch_bytes(&ins, &out_shape));
    let secs = time(budget, || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: out_shape[0],
            data: &mut line_bytes(&mut y)[..4 * out_shape[0].numel()],
        }];
        op.run(&ins, &mut outs, line_bytes(&mut scratch))
            .expect("conv transpose arguments are consistent");
        black_box(&y);
    });
    let flops = 2.0 * (c * m * 4 * h * h) as f64;
    println!(
        "{{\"kernel\":\"conv_transpose\",\"case\":\"{name}\",\"ms\":{:.4},\"gflops\":{:.2}}}",
        secs * 1e3,
        flops / secs / 1e9
    );
}

/// Every convolution case.
pub(crate) fn cases(budget: f64) {
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
    // YOLOv8n's pointwise convolutions (C2f's cv1 and cv2, with SiLU).
    for (name, c, m, h) in [
        ("yolo 32->32 1x1 160", 32, 32, 160),
        ("yolo 48->32 1x1 160", 48, 32, 160),
        ("yolo 64->64 1x1 80", 64, 64, 80),
        ("yolo 192->64 1x1 80", 192, 64, 80),
        ("yolo 256->128 1x1 40", 256, 128, 40),
    ] {
        conv_case(name, c, m, 1, 1, h, 1, Activation::Swish, budget);
    }
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
    // PP-OCRv6 rec's 1x1 convs at their own planes (GELU after the
    // widening ones), weights packed as the compiler stores them.
    for (name, c, m, hw, act) in [
        (
            "v6rec 192->384 1x1 6x80 gelu packed",
            192,
            384,
            [6, 80],
            Activation::Gelu,
        ),
        (
            "v6rec 384->192 1x1 6x80 packed",
            384,
            192,
            [6, 80],
            Activation::None,
        ),
        (
            "v6rec 96->192 1x1 12x80 gelu packed",
            96,
            192,
            [12, 80],
            Activation::Gelu,
        ),
        (
            "v6rec 96->192 1x1 6x80 gelu packed",
            96,
            192,
            [6, 80],
            Activation::Gelu,
        ),
        (
            "v6rec 192->96 1x1 12x80",
            192,
            96,
            [12, 80],
            Activation::None,
        ),
        (
            "v6rec 384->768 1x1 3x80 gelu packed",
            384,
            768,
            [3, 80],
            Activation::Gelu,
        ),
        (
            "v6rec 768->384 1x1 3x80 packed",
            768,
            384,
            [3, 80],
            Activation::None,
        ),
    ] {
        conv_case_hw(name, c, m, 1, 1, hw, 1, act, budget);
    }
    // PP-OCRv6 det's feed-forward projections, each with the residual
    // added onto its output (and without, for the residual's cost).
    for (name, c, m, hw) in [
        ("v6det 96->48 1x1 120", 96, 48, [120, 120]),
        ("v6det 96->48 1x1 120 residual", 96, 48, [120, 120]),
        ("v6det 192->96 1x1 60", 192, 96, [60, 60]),
        ("v6det 192->96 1x1 60 residual", 192, 96, [60, 60]),
        ("v6det 384->192 1x1 30 packed", 384, 192, [30, 30]),
        ("v6det 384->192 1x1 30 residual packed", 384, 192, [30, 30]),
        ("v6det 768->384 1x1 15 packed", 768, 384, [15, 15]),
        ("v6det 768->384 1x1 15 residual packed", 768, 384, [15, 15]),
    ] {
        conv_case_hw(name, c, m, 1, 1, hw, 1, Activation::None, budget);
    }
    // PP-OCRv4 rec's widest 1x1 convs (HardSwish after each).
    for (name, c, m, hw, act) in [
        (
            "v4rec 240->240 1x1 12x80 packed",
            240,
            240,
            [12, 80],
            Activation::None,
        ),
        (
            "v4rec 240->240 1x1 12x80 hardswish packed",
            240,
            240,
            [12, 80],
            Activation::HardSwish,
        ),
        (
            "v4rec 480->480 1x1 6x80 hardswish packed",
            480,
            480,
            [6, 80],
            Activation::HardSwish,
        ),
    ] {
        conv_case_hw(name, c, m, 1, 1, hw, 1, act, budget);
    }
    // PP-OCRv4 rec's depthwise 5x5 layers (HardSwish after each).
    for (name, c, hw) in [
        ("v4rec depthwise 240 5x5 12x80 hardswish", 240, [12, 80]),
        ("v4rec depthwise 480 5x5 3x80 hardswish", 480, [3, 80]),
    ] {
        conv_case_hw(name, c, c, 5, 1, hw, c, Activation::HardSwish, budget);
    }
    // PP-OCRv4 det's upsampling head (ReLU after the first, the sigmoid of
    // the probability map after the second).
    for (name, c, m, h, act) in [
        ("v4det 24->24 2x2 s2 160", 24, 24, 160, Activation::None),
        (
            "v4det 24->24 2x2 s2 160 relu",
            24,
            24,
            160,
            Activation::Relu,
        ),
        ("v4det 24->1 2x2 s2 320", 24, 1, 320, Activation::None),
        (
            "v4det 24->1 2x2 s2 320 sigmoid",
            24,
            1,
            320,
            Activation::Sigmoid,
        ),
        ("v4det 24->1 2x2 s2 320 far", 24, 1, 320, Activation::None),
        (
            "v4det 24->1 2x2 s2 320 sigmoid far",
            24,
            1,
            320,
            Activation::Sigmoid,
        ),
    ] {
        conv_transpose_case(name, c, m, h, act, budget);
    }
    // Winograd F(2x2, 3x3) and F(4x4, 3x3) on the dense stride-1 3x3 convs
    // of YOLOv8n and ddddocr (each also timed above or here on the
    // direct/GEMM path).
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
        for path in ["", " winograd", " winograd4"] {
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
    // ddddocr's 64->256 at its own 8x20 plane (40 Winograd tiles).
    for name in [
        "dddd 64->256 3x3 8x20 packed",
        "dddd 64->256 3x3 8x20 winograd",
        "dddd 64->256 3x3 8x20 winograd4",
    ] {
        conv_case_hw(name, 64, 256, 3, 1, [8, 20], 1, Activation::Swish, budget);
    }
    // ddddocr's 48->192 at its own 16x40 plane (160 Winograd tiles of 2x2,
    // 40 of 4x4).
    for name in [
        "dddd 48->192 3x3 16x40 winograd",
        "dddd 48->192 3x3 16x40 winograd4",
    ] {
        conv_case_hw(name, 48, 192, 3, 1, [16, 40], 1, Activation::Swish, budget);
    }
    // PP-OCRv6 rec at 48x320: the stem's stride-2 3x3 on a 24x160 plane.
    conv_case_hw(
        "v6rec 96->48 3x3 s2 24x160",
        96,
        48,
        3,
        2,
        [24, 160],
        1,
        Activation::Relu,
        budget,
    );
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
    // PP-OCRv6 rec's depthwise layers over its flat planes.
    for (name, c, hw) in [
        ("depthwise 192 3x3 s1 6x80", 192, [6, 80]),
        ("depthwise 384 3x3 s1 3x80", 384, [3, 80]),
    ] {
        conv_case_hw(name, c, c, 3, 1, hw, c, Activation::None, budget);
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
}
