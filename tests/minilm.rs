//! paraphrase-MiniLM-L3-v2 through the macro at sequence lengths 16 and 128.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/minilm_l3.toml")]
struct MiniLm;

fn case(name: &str) {
    let model = MiniLm::new().unwrap();
    let mut ws = model.workspace();
    let ids = load(name, 0, "in", 0);
    let mask = load(name, 0, "in", 1);
    let out = model.forward(&mut ws, view(&ids), view(&mask)).unwrap();
    assert_close(
        &format!("{name} output"),
        out.output.as_untyped(),
        &load(name, 0, "out", 0),
    );
    assert_close(
        &format!("{name} 463"),
        out.v_463.as_untyped(),
        &load(name, 0, "out", 1),
    );
    assert_close(
        &format!("{name} hidden"),
        out.onnx_shape_422.as_untyped(),
        &load(name, 0, "out", 2),
    );
    assert_close(
        &format!("{name} pooled"),
        out.v_461.as_untyped(),
        &load(name, 0, "out", 3),
    );
}

#[test]
fn minilm_l3_seq16_matches_ort() {
    case("minilm_l3_seq16");
}

#[test]
fn minilm_l3_seq128_matches_ort() {
    case("minilm_l3_seq128");
}
