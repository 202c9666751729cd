//! The FFT plan of a signal op whose length is known at build time becomes
//! a constant input; one whose length comes from the caller does not.
use lele_kernels::ops::signal::fft;
use lele_kernels::ops::signal::stft::STFT_PLAN_INPUT;

use crate::builders::*;

fn stft_model(signal_dims: &[i64]) -> lele_build::onnx::proto::ModelProto {
    let window: Vec<f32> = (0..8).map(|k| k as f32 / 8.0).collect();
    model(
        vec![node("STFT", &["x", "step", "w"], &["y"], vec![])],
        vec![i64_init("step", &[4]), f32_tensor("w", &[8], &window)],
        vec![value_info("x", 1, signal_dims)],
        vec![value_info("y", 1, &[])],
    )
}

#[test]
fn a_constant_frame_length_gets_its_plan_as_a_constant() {
    let g = optimized(&stft_model(&[1, 32]));
    assert_eq!(op_types(&g), vec!["STFT"]);
    let n = &g.main.nodes[0];
    assert_eq!(n.inputs.len(), STFT_PLAN_INPUT + 1);
    let plan = constant_input(&g, n, STFT_PLAN_INPUT);
    assert_eq!(plan.len(), fft::plan_len(8).unwrap());
    // The plan of a mixed-radix length is its roots of unity, e^{-2πik/8}.
    assert!((plan[2] - 0.5f64.sqrt()).abs() < 1e-7 && (plan[3] + 0.5f64.sqrt()).abs() < 1e-7);
}

#[test]
fn a_length_known_only_where_sizing_succeeds_still_gets_its_plan() {
    // At the lower bound (4 samples) no 8-sample frame fits: that point
    // does not size, the others decide.
    let g = load(&stft_model(&[1, 0])).unwrap();
    let (g, _) = planned_graph(g, "x = [1, \"n <= 64\"]");
    let n = &g.main.nodes[0];
    assert_eq!(n.inputs.len(), STFT_PLAN_INPUT + 1);
}

#[test]
fn a_length_fed_at_run_time_gets_no_plan() {
    let m = model(
        vec![node("DFT", &["x", "len"], &["y"], vec![])],
        vec![],
        vec![value_info("x", 1, &[1, 16, 1]), value_info("len", 7, &[])],
        vec![value_info("y", 1, &[1, 16, 2])],
    );
    let g = optimized(&m);
    assert!(g.main.nodes[0].inputs.len() <= 3);
}
