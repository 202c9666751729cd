//! GTCRN streaming speech enhancement through the macro: 200 hops of noisy
//! speech, each hop's three caches fed back from lele's own outputs, every
//! output of every hop against ONNX Runtime's.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/gtcrn.toml")]
struct Gtcrn;

#[test]
fn gtcrn_200_hops_with_caches_carried_match_ort() {
    let case = "gtcrn_200";
    let model = Gtcrn::new().unwrap();
    let mut ws = model.workspace();
    let mut conv: Vec<f32> = view::<f32>(&load(case, 0, "in", 1)).data().to_vec();
    let mut tra: Vec<f32> = view::<f32>(&load(case, 0, "in", 2)).data().to_vec();
    let mut inter: Vec<f32> = view::<f32>(&load(case, 0, "in", 3)).data().to_vec();
    for step in 0..200 {
        let mix = load(case, step, "in", 0);
        let out = model
            .forward(
                &mut ws,
                view(&mix),
                lele::TensorView::new(&conv, &[2, 1, 16, 16, 33]).unwrap(),
                lele::TensorView::new(&tra, &[2, 3, 1, 1, 16]).unwrap(),
                lele::TensorView::new(&inter, &[2, 1, 33, 16]).unwrap(),
            )
            .unwrap();
        let names = ["enh", "conv_cache_out", "tra_cache_out", "inter_cache_out"];
        let outs = [
            out.enh.as_untyped(),
            out.conv_cache_out.as_untyped(),
            out.tra_cache_out.as_untyped(),
            out.inter_cache_out.as_untyped(),
        ];
        for (j, (name, got)) in names.iter().zip(outs).enumerate() {
            assert_close(
                &format!("hop {step} {name}"),
                got,
                &load(case, step, "out", j),
            );
        }
        conv = out.conv_cache_out.to_vec();
        tra = out.tra_cache_out.to_vec();
        inter = out.inter_cache_out.to_vec();
    }
}
