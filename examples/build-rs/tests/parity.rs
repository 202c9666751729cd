//! The build.rs-compiled model (custom HardSigmoid, fused HardSwish) gives
//! the outputs ONNX Runtime gives, and the override and the pattern fired.
use lele::TensorView;
use lele_example_build_rs::TextDirection;

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/text_direction.rs"));

#[test]
fn override_and_pattern_fired() {
    // PP-OCR cls has 9 HardSigmoid nodes and 9 hard-swish subgraphs.
    assert_eq!(GENERATED.matches("crate::kernels::HardSigmoid").count(), 9);
    assert!(GENERATED.matches("crate::kernels::HardSwish").count() >= 9);
}

fn fixture(case: &str, name: &str) -> (Vec<f32>, Vec<usize>) {
    let root = std::env::var_os("LELE_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fixtures")
        });
    let dir = root.join(case).join("step0");
    let t = lele_build::npy::read(&dir.join(name))
        .unwrap_or_else(|e| panic!("{e}; run `cargo xtask fixtures`"));
    let dims = t.shape().unwrap().dims().to_vec();
    let v: Vec<f32> = bytemuck_f32(t.bytes());
    (v, dims)
}

fn bytemuck_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn check(got: &[f32], expected: &[f32]) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!((g - e).abs() <= 1e-4 + 1e-3 * e.abs(), "{g} vs {e}");
    }
}

#[test]
fn matches_onnx_runtime() {
    let (x, dims) = fixture("ppocr_cls_48x192", "in_0.npy");
    let (expected, _) = fixture("ppocr_cls_48x192", "out_0.npy");
    let model = TextDirection::new().unwrap();
    let mut ws = model.workspace();
    let out = model
        .forward(&mut ws, TensorView::new(&x, &dims).unwrap())
        .unwrap();
    check(out.save_infer_model_scale_0_tmp_1.data(), &expected);
}

#[test]
fn without_constant_folding_matches_onnx_runtime() {
    use lele_example_build_rs::unfolded::TextDirectionUnfolded;
    let (x, dims) = fixture("ppocr_cls_48x192", "in_0.npy");
    let (expected, _) = fixture("ppocr_cls_48x192", "out_0.npy");
    let model = TextDirectionUnfolded::new().unwrap();
    let mut ws = model.workspace();
    let out = model
        .forward(&mut ws, TensorView::new(&x, &dims).unwrap())
        .unwrap();
    check(out.save_infer_model_scale_0_tmp_1.data(), &expected);
}
