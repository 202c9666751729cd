//! Shared helpers of the parity tests: reference data written by
//! `cargo xtask fixtures` (ONNX Runtime outputs on fixed inputs).
#![allow(dead_code)]
use std::path::PathBuf;

use lele::kernels::npy::NpyArray as Tensor;
use lele::kernels::{DType, TensorRef, TensorView};

/// Directory of the reference data.
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("fixtures")
        })
}

/// Loads `<case>/step<k>/<kind>_<i>.npy`; panics with a hint when missing.
pub fn load(case: &str, step: usize, kind: &str, i: usize) -> Tensor {
    let p = fixtures_dir()
        .join(case)
        .join(format!("step{step}"))
        .join(format!("{kind}_{i}.npy"));
    let bytes = std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e}\n(run `cargo xtask fixtures` first)", p.display()));
    lele::kernels::npy::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A typed view of a fixture tensor.
pub fn view<T: lele::kernels::Elem>(t: &Tensor) -> TensorView<'_, T> {
    TensorView::from_untyped(t.view().expect("rank")).expect("dtype of fixture")
}

/// Compares an output with the reference: |lele - ort| <= 1e-4 + 1e-3 |ort|
/// for floats, exact equality for integers and booleans.
pub fn assert_close(what: &str, actual: TensorRef<'_>, expected: &Tensor) {
    assert_eq!(
        actual.shape.dims(),
        expected.dims.as_slice(),
        "{what}: shape"
    );
    let exp = expected.view().expect("view");
    match expected.dtype {
        DType::F32 => {
            let a: &[f32] = actual.typed("test").expect("dtype f32");
            let e: &[f32] = exp.typed("test").expect("dtype f32");
            let mut worst = (0usize, 0f32, 0f32, 0f32);
            let mut bad = 0usize;
            for (i, (&x, &y)) in a.iter().zip(e).enumerate() {
                let err = (x - y).abs();
                let tol = 1e-4 + 1e-3 * y.abs();
                if err.is_nan() || err > tol {
                    bad += 1;
                    if err.is_nan() || err > worst.3 {
                        worst = (i, x, y, err);
                    }
                }
            }
            assert!(
                bad == 0,
                "{what}: {bad} of {} elements out of tolerance; worst at {}: lele {} vs ort {} (|diff| {})",
                a.len(),
                worst.0,
                worst.1,
                worst.2,
                worst.3
            );
        }
        _ => {
            assert_eq!(actual.dtype, expected.dtype, "{what}: dtype");
            assert_eq!(actual.data, exp.data, "{what}: values differ");
        }
    }
}
