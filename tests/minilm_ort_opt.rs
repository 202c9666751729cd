//! paraphrase-MiniLM-L3-v2 as ONNX Runtime's BERT optimizer rewrites it
//! (`com.microsoft` EmbedLayerNormalization, whose mask index feeds
//! Attention, SkipLayerNormalization, BiasGelu: what ORT users ship), on a padded
//! mask, against ORT on that same file. The rewrite is graph-level, so this
//! runs on the host's ISAs only (not the emulated legs).
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/minilm_l3_ort_opt.toml")]
struct MiniLmOrtOptimized;

#[test]
fn minilm_l3_ort_optimized_seq128_matches_ort() {
    let name = "minilm_l3_ort_opt_seq128";
    let model = MiniLmOrtOptimized::new().unwrap();
    let mut ws = model.workspace();
    let ids = load(name, 0, "in", 0);
    let mask = load(name, 0, "in", 1);
    let out = model.forward(&mut ws, view(&ids), view(&mask)).unwrap();
    let outputs = [
        ("output", out.output.as_untyped()),
        ("463", out.v_463.as_untyped()),
        ("hidden", out.onnx_shape_422.as_untyped()),
        ("pooled", out.v_461.as_untyped()),
    ];
    for (j, (what, got)) in outputs.into_iter().enumerate() {
        assert_close(&format!("{name} {what}"), got, &load(name, 0, "out", j));
    }
}
