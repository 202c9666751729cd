//! The same model with embedded and memory-mapped weights gives the same,
//! ORT-matching outputs.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/ppocr_cls.toml")]
struct Embedded;

#[lele::model("tests/models/ppocr_cls_mmap.toml")]
struct Mapped;

#[test]
fn embedded_and_mmap_weights_match_ort() {
    let case = "ppocr_cls_48x192";
    let x = load(case, 0, "in", 0);
    let expected = load(case, 0, "out", 0);
    let e = Embedded::new().unwrap();
    let mut ws = e.workspace();
    let a = e
        .forward(&mut ws, view(&x))
        .unwrap()
        .save_infer_model_scale_0_tmp_1
        .to_vec();
    let m = Mapped::new().unwrap();
    let mut ws2 = m.workspace();
    let out = m.forward(&mut ws2, view(&x)).unwrap();
    assert_close(
        "mmap",
        out.save_infer_model_scale_0_tmp_1.as_untyped(),
        &expected,
    );
    assert_eq!(a, out.save_infer_model_scale_0_tmp_1.to_vec());
    assert_eq!(Embedded::WEIGHTS_BYTES, Mapped::WEIGHTS_BYTES);
}

#[test]
fn inputs_outside_the_bounds_are_errors() {
    let e = Embedded::new().unwrap();
    let mut ws = e.workspace();
    let data = vec![0f32; 3 * 48 * 100];
    let x = lele::TensorView::new(&data, &[1, 3, 48, 100]).unwrap();
    let err = e
        .forward(&mut ws, x)
        .err()
        .expect("wrong width must be rejected");
    assert!(err.to_string().contains("input `x`"), "{err}");
}
