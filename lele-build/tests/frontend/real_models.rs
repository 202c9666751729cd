//! The compiler's passes on the real models of the zoo (`cargo xtask models`).
use lele_build::compile::{optimize, resolve_input_dims};
use lele_build::config::ModelToml;

use crate::builders::*;

/// Op types of a zoo model after the compiler's passes.
fn optimized_zoo_ops(file: &str, inputs: &str) -> Vec<String> {
    op_types(&optimized_zoo(file, inputs))
}

/// A zoo model after the compiler's passes.
fn optimized_zoo(file: &str, inputs: &str) -> lele_build::ir::Graph {
    let path = lele_build::config::zoo_dir().join(file);
    let mut g = lele_build::onnx::load(&path)
        .unwrap_or_else(|e| panic!("{} (run `cargo xtask models`): {e}", path.display()));
    let toml = ModelToml::parse(&format!(
        "[model]\npath = {:?}\n[inputs]\n{inputs}\n",
        path.display().to_string()
    ))
    .unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    g
}

/// PP-OCRv6 det's two 768→384 1×1 convolutions have weights that are
/// largely subnormal (about a quarter and two thirds of them in the ONNX
/// file): after the passes the flush zeroes them, and no weight of a
/// convolution or product keeps a subnormal value.
#[test]
fn subnormal_weights_are_flushed_on_ppocr_v6_det() {
    use lele_build::passes::flush_subnormal_weights;
    let mut g = optimized_zoo("ppocr_v6_det_small.onnx", "x = [1, 3, 480, 480]");
    let subnormal_weights = |g: &lele_build::ir::Graph| -> usize {
        g.main
            .nodes
            .iter()
            .filter(|n| n.op_type.starts_with("Conv") || n.op_type.starts_with("MatMul"))
            .filter_map(|n| n.inputs.get(1).copied().flatten())
            .filter_map(|w| g.values[w].constant.as_deref())
            .filter(|t| t.dtype == lele_kernels::DType::F32)
            .map(|t| {
                t.bytes()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .filter(|v| *v != 0.0 && v.abs() < f32::MIN_POSITIVE)
                    .count()
            })
            .sum()
    };
    let before = subnormal_weights(&g);
    assert!(
        before > 100_000,
        "{before} subnormal weights before the flush"
    );
    assert_eq!(flush_subnormal_weights(&mut g), before);
    assert_eq!(subnormal_weights(&g), 0);
}

/// Every Linear layer's constant weight is stored packed for the GEMM
/// (`MatMulPacked`), fused bias and residual kept.
#[test]
fn constant_matmul_weights_are_stored_packed_on_real_models() {
    use lele_build::ir::Op;
    use lele_kernels::ops::matmul_packed::MatMulPacked;
    let packed = |g: &lele_build::ir::Graph| -> Vec<(String, usize, usize, usize)> {
        g.main
            .nodes
            .iter()
            .filter_map(|n| {
                let Op::Kernel(k) = &n.op else { return None };
                let any: &dyn std::any::Any = k.as_ref();
                let p = any.downcast_ref::<MatMulPacked>()?;
                Some((n.op_type.clone(), n.inputs.len(), p.k, p.n))
            })
            .collect()
    };
    // MiniLM-L3: Q, K, V, attention output and the two FFN layers of each
    // of its 3 layers; the output and second FFN layer keep their residual.
    let minilm = optimized_zoo(
        "minilm_l3.onnx",
        "input_ids = [1, 128]\nattention_mask = [1, 128]",
    );
    let p = packed(&minilm);
    assert_eq!(p.len(), 18, "{p:?}");
    let with_residual = p.iter().filter(|x| x.0 == "MatMul+Add+Add" && x.1 == 4);
    assert_eq!(with_residual.count(), 6, "{p:?}");
    assert_eq!(p.iter().filter(|x| (x.2, x.3) == (384, 1536)).count(), 3);
    // No MatMul with a constant weight is left (the attention products
    // multiply two activations).
    let left = minilm.main.nodes.iter().filter(|n| {
        let packed = match &n.op {
            Op::Kernel(k) => {
                let any: &dyn std::any::Any = k.as_ref();
                any.downcast_ref::<MatMulPacked>().is_some()
            }
            _ => false,
        };
        n.op_type.starts_with("MatMul")
            && !packed
            && n.inputs
                .get(1)
                .copied()
                .flatten()
                .is_some_and(|w| minilm.values[w].constant.is_some())
    });
    assert_eq!(left.count(), 0);
    // PP-OCRv6 rec: the neck's Linear layers and the 18710-class head.
    let rec = optimized_zoo("ppocr_v6_rec_small.onnx", "x = [1, 3, 48, 320]");
    let p = packed(&rec);
    assert_eq!(p.len(), 9, "{p:?}");
    assert!(p.iter().any(|x| (x.2, x.3) == (120, 18710)), "{p:?}");
    // ddddocr: its classifier is a Gemm with transB (`x·Wᵀ + b`, W stored
    // 8210 × 1024), packed as the 1024 × 8210 product it is, bias kept.
    let ocr = optimized_zoo("ddddocr_common.onnx", "input1 = [1, 1, 64, 160]");
    let p = packed(&ocr);
    assert_eq!(p, [("Gemm".to_string(), 3, 1024, 8210)]);
    let gemm_left = kernels_with_weight_dims(&ocr)
        .iter()
        .filter(|(any, _)| {
            any.downcast_ref::<lele_kernels::ops::matmul::Gemm>()
                .is_some()
        })
        .count();
    assert_eq!(gemm_left, 0);
}

/// Each main-block kernel node of `g` (for downcasting) with the dims of
/// its input 1 when that is a constant (a weight).
fn kernels_with_weight_dims(
    g: &lele_build::ir::Graph,
) -> Vec<(&dyn std::any::Any, Option<Vec<usize>>)> {
    use lele_build::ir::Op;
    let mut out = Vec::new();
    for n in &g.main.nodes {
        let Op::Kernel(k) = &n.op else { continue };
        let any: &dyn std::any::Any = k.as_ref();
        let w = n.inputs.get(1).copied().flatten();
        let dims = w
            .and_then(|w| g.values[w].constant.as_ref())
            .map(|t| t.dims.clone());
        out.push((any, dims));
    }
    out
}

/// Every convolution with more output channels than the direct path takes
/// (per group, in whole panels of 8: more than 128 for a 1×1 kernel over
/// fewer than 128 input channels, 64 for a deeper 1×1 or a larger kernel;
/// those always run on the GEMM) and not run as Winograd reads its weight
/// packed for the GEMM's left operand, still shaped as the weight; the
/// counts are the ONNX files' own under that rule (33 of PP-OCRv6 rec's
/// convolutions, 15 of YOLOv8n's).
#[test]
fn wide_convolution_weights_are_stored_packed_on_real_models() {
    use lele_kernels::ops::conv::{Conv, ConvPackedWeights};
    // PP-OCRv6 rec's five SE blocks' convolutions at 1×1 keep their
    // row-major weight (at most 8 output positions: the GEMM's dot
    // products read it in place).
    for (file, inputs, want) in [
        ("ppocr_v6_rec_small.onnx", "x = [1, 3, 48, 320]", (28, 5)),
        ("yolov8n_320n.onnx", "images = [1, 3, 640, 640]", (15, 0)),
        ("ppocr_cls.onnx", "x = [1, 3, 48, 192]", (3, 2)),
    ] {
        let g = optimized_zoo(file, inputs);
        let (mut packed, mut plain_wide) = (0, 0);
        for (any, dims) in kernels_with_weight_dims(&g) {
            if let Some(p) = any.downcast_ref::<ConvPackedWeights>() {
                let dims = dims.expect("a packed weight is a constant");
                assert!(ConvPackedWeights::applies(p.conv.group, &dims), "{dims:?}");
                packed += 1;
            } else if let (Some(c), Some(dims)) = (any.downcast_ref::<Conv>(), dims)
                && ConvPackedWeights::applies(c.group, &dims)
            {
                plain_wide += 1;
            }
        }
        assert_eq!((packed, plain_wide), want, "{file}");
    }
}

/// Every dense 3×3 convolution of unit strides and dilations with at least
/// 32 input channels runs as Winograd from a weight transformed at build
/// time (`[16 or 36, M rounded up to 8, C]`), and no plain one that
/// qualifies is left; the counts are the ONNX files' own (30 of YOLOv8n's
/// convolutions, 6 of ddddocr's, 1 of PP-OCRv6 det's), 4×4 tiles (36
/// positions) on those with at least 48 input channels over planes of at
/// least 512 outputs: YOLOv8n's at 80² and 40² but not 20² nor its 32-channel
/// ones, ddddocr's 48→192 at 16×40 but not 64→256 at 8×20.
#[test]
fn dense_3x3_convolutions_run_as_winograd_on_real_models() {
    use lele_kernels::ops::conv::{Conv, ConvWinograd};
    for (file, inputs, want, want4) in [
        ("yolov8n_320n.onnx", "images = [1, 3, 640, 640]", 30, 16),
        ("ddddocr_common.onnx", "input1 = [1, 1, 64, 160]", 6, 3),
        ("ppocr_v6_det_small.onnx", "x = [1, 3, 480, 480]", 1, 1),
    ] {
        let g = optimized_zoo(file, inputs);
        let (mut winograd, mut four, mut plain) = (0, 0, 0);
        for (any, dims) in kernels_with_weight_dims(&g) {
            if let Some(k) = any.downcast_ref::<ConvWinograd>() {
                let dims = dims.expect("a transformed weight is a constant");
                assert!(matches!(dims[0], 16 | 36), "{file}: {dims:?}");
                assert_eq!(dims[1], k.m.next_multiple_of(8), "{file}");
                winograd += 1;
                four += usize::from(dims[0] == 36);
            } else if let (Some(c), Some(dims)) = (any.downcast_ref::<Conv>(), dims)
                && ConvWinograd::applies(c, &dims)
            {
                plain += 1;
            }
        }
        assert_eq!((winograd, four, plain), (want, want4, 0), "{file}");
    }
}

#[test]
fn built_in_fusions_fire_on_real_models() {
    let count = |ops: &[String], op: &str| ops.iter().filter(|o| *o == op).count();
    let convs = |ops: &[String]| {
        ops.iter()
            .filter(|o| *o == "Conv" || o.starts_with("Conv+"))
            .count()
    };
    // YOLOv8n: every SiLU (57) becomes one Swish, and each of them, following
    // a conv, that conv's epilogue; the head's lone Sigmoid stays.
    let yolo = optimized_zoo_ops("yolov8n_320n.onnx", "images = [1, 3, 640, 640]");
    assert_eq!(
        count(&yolo, "Conv+Swish") + count(&yolo, "Conv+Swish+Add"),
        57,
        "{yolo:?}"
    );
    // The 6 bottleneck shortcuts add onto such a conv's output.
    assert_eq!(count(&yolo, "Conv+Swish+Add"), 6, "{yolo:?}");
    assert_eq!(
        (count(&yolo, "Swish"), count(&yolo, "Mul")),
        (0, 1),
        "{yolo:?}"
    );
    assert_eq!(count(&yolo, "Sigmoid"), 1, "{yolo:?}");
    // PP-OCRv4 det: all 24 decomposed HardSwish chains fuse (then into the
    // conv before them, with the scalar Mul/Add that follows each); no Clip
    // is left.
    let det = optimized_zoo_ops("ppocr_v4_det.onnx", "x = [1, 3, 640, 640]");
    assert_eq!(count(&det, "Conv+HardSwish+Affine"), 24, "{det:?}");
    assert_eq!(
        (count(&det, "HardSwish"), count(&det, "Clip")),
        (0, 0),
        "{det:?}"
    );
    // The Relus of the SE branches and the head fuse into their convs.
    assert!(count(&det, "Conv+Relu") >= 10, "{det:?}");
    // GELU (erf form): MiniLM-L3 has one per layer, after the first
    // feed-forward product (MatMul + bias), whose epilogue it joins.
    let minilm = optimized_zoo_ops(
        "minilm_l3.onnx",
        "input_ids = [1, 128]\nattention_mask = [1, 128]",
    );
    assert_eq!(
        (
            count(&minilm, "MatMul+Add+Gelu"),
            count(&minilm, "Gelu"),
            count(&minilm, "Erf")
        ),
        (3, 0, 0),
        "{minilm:?}"
    );
    // Attention: each layer's Transposes, Q·Kᵀ, Div, mask Add, Softmax,
    // ·V and output Transpose are one node; no Softmax or Transpose is
    // left, and the only MatMuls left carry a weight.
    assert_eq!(count(&minilm, "Attention"), 3, "{minilm:?}");
    assert_eq!(
        (
            count(&minilm, "Softmax"),
            count(&minilm, "Transpose"),
            count(&minilm, "MatMul")
        ),
        (0, 0, 0),
        "{minilm:?}"
    );
    // PP-OCRv6 det: its 13 GELUs fuse, then into the convolution before
    // each, and its 20 Relus into theirs, through the `Identity` Paddle
    // puts after each bias `Add` (the last Relu follows the head's first
    // ConvTranspose, whose bias `Add` folds into it; the final Sigmoid
    // joins the second one the same way).
    let v6 = optimized_zoo_ops("ppocr_v6_det_small.onnx", "x = [1, 3, 480, 480]");
    assert_eq!(
        (
            count(&v6, "Conv+Gelu"),
            count(&v6, "Gelu"),
            count(&v6, "Erf")
        ),
        (13, 0, 0),
        "{v6:?}"
    );
    assert_eq!(
        (count(&v6, "Conv+Relu"), count(&v6, "Relu")),
        (19, 0),
        "{v6:?}"
    );
    assert_eq!(
        (
            count(&v6, "ConvTranspose+Relu"),
            count(&v6, "ConvTranspose+Sigmoid"),
            count(&v6, "Sigmoid")
        ),
        (1, 1, 0),
        "{v6:?}"
    );
    assert_eq!(count(&v6, "Identity"), 0, "{v6:?}");
    // Residual adds: 10 onto a convolution's output in PP-OCRv6 det (the
    // other 13 join two shared values), and in MiniLM the attention
    // output and FFN projections (MatMul + bias) of all 3 layers; the
    // other 9 products with a bias are Q, K and V.
    assert_eq!(count(&v6, "Conv+Add"), 10, "{v6:?}");
    assert_eq!(
        (
            count(&minilm, "MatMul+Add+Add"),
            count(&minilm, "MatMul+Add")
        ),
        (6, 9),
        "{minilm:?}"
    );
    // The Swish after each of PP-OCRv6 rec's two SVTR feed-forward
    // products (packed, with bias) runs in that product's epilogue.
    let v6rec = optimized_zoo_ops("ppocr_v6_rec_small.onnx", "x = [1, 3, 48, 320]");
    assert_eq!(
        (count(&v6rec, "MatMul+Add+Swish"), count(&v6rec, "Swish")),
        (2, 0),
        "{v6rec:?}"
    );
    // Its head's softmax over the 18710 classes runs in the head's packed
    // product; the two softmaxes left are the SVTR attention's.
    assert_eq!(
        (
            count(&v6rec, "MatMul+Add+Softmax"),
            count(&v6rec, "Softmax")
        ),
        (1, 2),
        "{v6rec:?}"
    );
    // Decomposed LayerNorms (ReduceMean … Sqrt, Div, Mul, Add): the SVTR
    // neck of PP-OCRv4 rec has 5, no ReduceMean is left.
    let rec = optimized_zoo_ops("ppocr_v4_rec.onnx", "x = [1, 3, 48, 320]");
    assert_eq!(
        (count(&rec, "LayerNormalization"), count(&rec, "ReduceMean")),
        (5, 0),
        "{rec:?}"
    );
    // ... and the per-channel Mul/Add pair Paddle emits for each of the 52
    // batch norms folds into the conv before it (86 Mul and 89 Add before,
    // 34 and 37 after that step, 10 and 13 after the scalar ones); the
    // head's two ConvTransposes take their bias Adds (the first also its
    // BatchNormalization and Relu, the second the final Sigmoid): the
    // Mul/Add left scale an SE branch or join branches.
    assert_eq!(convs(&det), 62, "{det:?}");
    assert_eq!(
        (count(&det, "Mul"), count(&det, "Add")),
        (10, 11),
        "{det:?}"
    );
    assert_eq!(
        (
            count(&det, "ConvTranspose+Relu"),
            count(&det, "ConvTranspose+Sigmoid"),
            count(&det, "BatchNormalization"),
            count(&det, "Relu"),
            count(&det, "Sigmoid")
        ),
        (1, 1, 0, 0, 0),
        "{det:?}"
    );
    // PP-OCR cls exports its 35 batch norms as BatchNormalization nodes
    // after a convolution: all fold into it (and the HardSwish or Relu
    // after them then into its epilogue).
    let cls = optimized_zoo_ops("ppocr_cls.onnx", "x = [1, 3, 48, 192]");
    assert_eq!(count(&cls, "BatchNormalization"), 0, "{cls:?}");
    assert_eq!(count(&cls, "HardSwish"), 0, "{cls:?}");
    // Silero VAD runs its network inside an `If` on the sample rate: in
    // both branches the encoder's four Relus join their convolutions and
    // the decoder's Sigmoid its 1×1 convolution; the decoder's Relu before
    // that convolution is the only Relu left in each.
    let vad = optimized_zoo_ops(
        "silero_vad.onnx",
        "input = [1, 576]\nstate = [2, 1, 128]\nsr = []",
    );
    assert_eq!(
        (
            count(&vad, "Conv+Relu"),
            count(&vad, "Conv+Sigmoid"),
            count(&vad, "Relu"),
            count(&vad, "Sigmoid")
        ),
        (8, 2, 2, 0),
        "{vad:?}"
    );
    // Its STFT's slices over whole axes and float-to-float casts are gone:
    // per branch the two slices that cut the real and imaginary halves are
    // left (the padding's, of constants, folds), and no Cast.
    assert_eq!(
        (count(&vad, "Slice"), count(&vad, "Cast")),
        (4, 0),
        "{vad:?}"
    );
}

/// YOLOv8n at a fixed size: every Split and every Concat moves nothing
/// except the head's Concat along the anchors (of `[1, 144, n]` tensors,
/// whose pieces are strided). At run-time sizes all of them copy.
#[test]
fn concat_and_split_pieces_live_in_the_whole_on_yolov8n() {
    let path = lele_build::config::zoo_dir().join("yolov8n_320n.onnx");
    let load = || {
        lele_build::onnx::load(&path)
            .unwrap_or_else(|e| panic!("{} (run `cargo xtask models`): {e}", path.display()))
    };
    let count = |g: &lele_build::ir::Graph, p: &lele_build::plan::Plan| {
        let mut moved = Vec::new();
        let mut kept = Vec::new();
        g.for_each_node(&mut |n| {
            if n.op_type == "Concat" || n.op_type == "Split" {
                if p.pieces_in_place.contains_key(&n.outputs[0]) {
                    moved.push(n.name.clone());
                } else {
                    kept.push(n.name.clone());
                }
            }
        });
        (moved, kept)
    };
    let (g, p) = planned_graph(load(), "images = [1, 3, 640, 640]");
    let (moved, kept) = count(&g, &p);
    assert_eq!(kept, vec!["/model.22/Concat_6".to_string()]);
    assert_eq!(moved.iter().filter(|n| n.contains("Split")).count(), 9);
    assert_eq!(moved.len(), 27, "{moved:?}");
    let (g, p) = planned_graph(load(), "images = [1, 3, \"h <= 640\", \"w <= 640\"]");
    let (moved, _) = count(&g, &p);
    assert!(moved.is_empty(), "{moved:?}");
}
