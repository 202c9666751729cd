//! GEMM cases: square products, the benchmark models' shapes, and the
//! same with the weight packed ahead of time (and ddddocr's LSTM).
use super::*;

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

/// Every GEMM case (and the LSTM one).
pub(crate) fn cases(budget: f64) {
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
        "lstm half step hRt 1x1024x512",
        1,
        1024,
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
        // Around the few-rows path's bounds (`ops/gemm/few_rows.rs`).
        ("few rows 4x4096x512", 4, 4096, 512),
        ("few rows 16x4096x512", 16, 4096, 512),
        ("few rows 24x4096x512", 24, 4096, 512),
        ("few rows 32x8192x128", 32, 8192, 128),
        ("few rows 32x4096x256", 32, 4096, 256),
        ("few rows 40x4096x512", 40, 4096, 512),
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
}
