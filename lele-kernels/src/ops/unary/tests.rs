use super::math::erf_f64;
use super::*;
use crate::ops::test_util::{Owned, run1};
use alloc::vec::Vec;

mod simd;

/// The vector backends this CPU runs (each test of a vector kernel runs on
/// every one of them).
fn vector_isas() -> Vec<crate::simd::Isa> {
    let mut isas = crate::simd::runnable_isas();
    isas.retain(|&isa| isa != crate::simd::Isa::Scalar);
    isas
}

/// `y = op(x)` on backend `isa` (which runs here).
fn vector_on(isa: crate::simd::Isa, op: super::vector::VectorOp, x: &[f32], y: &mut [f32]) {
    assert!(
        super::vector::apply_on(isa, op, x, y),
        "{isa:?} does not run"
    );
}

fn un(op: UnaryOp, x: &Owned) -> Owned {
    run1(&Unary { op }, &[Some(x)], op.output_dtype(x.dtype)).unwrap()
}

fn close(a: f64, b: f64, rtol: f64, atol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs()
}

#[test]
#[allow(clippy::type_complexity)]
fn f32_fast_paths_match_f64_reference() {
    // Odd length to exercise loop tails; includes extremes and NaN.
    let mut xs: Vec<f32> = (0..2001).map(|i| (i as f32 - 1000.0) * 0.0123).collect();
    xs.extend([
        -120.0,
        -88.5,
        -87.1,
        -1e-6,
        1e-7,
        0.0,
        -0.0,
        87.9,
        88.5,
        100.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    let x = Owned::new(&[xs.len()], &xs);
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let checks: [(UnaryOp, fn(f64) -> f64, f64); 5] = [
        (UnaryOp::Exp, f64::exp, 3e-7),
        (UnaryOp::Sigmoid, sig, 3e-7),
        (UnaryOp::Tanh, f64::tanh, 5e-7),
        (UnaryOp::Erf, erf_f64, 2.5e-7),
        (UnaryOp::Gelu, gelu_f64, 5e-7),
    ];
    for (op, f, rtol) in checks {
        let got = un(op, &x).to::<f32>();
        for (&g, &v) in got.iter().zip(&xs) {
            let want = f(v as f64) as f32 as f64;
            assert!(
                close(g as f64, want, rtol, 1e-37),
                "{op:?}({v}) = {g}, want {want}"
            );
        }
    }
}

#[test]
fn erf_f64_accuracy() {
    // math.erf values
    let cases = [
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (2.6, 0.9997639655834707),
        (3.5, 0.9999992569016276),
        (-1.3, -0.9340079449406524),
        (1e-10, 1.1283791670955126e-10),
    ];
    for (x, want) in cases {
        let got = erf_f64(x);
        assert!(
            (got - want).abs() <= 3e-15 * want.abs(),
            "erf({x}) = {got}, want {want}"
        );
    }
}

#[test]
fn misc_ops() {
    let xs = [-2.5f64, -1.5, -0.5, 0.5, 1.5, 2.5, 0.0, f64::NAN];
    let x = Owned::new(&[8], &xs);
    let round = un(UnaryOp::Round, &x).to::<f64>();
    assert_eq!(&round[..7], &[-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 0.0]);
    let sign = un(UnaryOp::Sign, &x).to::<f64>();
    assert_eq!(&sign[..7], &[-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 0.0]);
    assert!(sign[7].is_nan());
    assert_eq!(un(UnaryOp::IsNaN, &x).to::<u8>(), [0, 0, 0, 0, 0, 0, 0, 1]);
    let relu = un(UnaryOp::Relu, &x).to::<f64>();
    assert_eq!(&relu[..7], &[0.0, 0.0, 0.0, 0.5, 1.5, 2.5, 0.0]);
    let inf = Owned::new(&[3], &[f32::INFINITY, f32::NEG_INFINITY, 1.0]);
    assert_eq!(un(UnaryOp::IsInf, &inf).to::<u8>(), [1, 1, 0]);
    assert_eq!(un(UnaryOp::IsPosInf, &inf).to::<u8>(), [1, 0, 0]);
    assert_eq!(un(UnaryOp::IsNegInf, &inf).to::<u8>(), [0, 1, 0]);
    let sp = un(
        UnaryOp::Softplus,
        &Owned::new(&[3], &[0.0f32, 100.0, -100.0]),
    )
    .to::<f32>();
    assert!((sp[0] - 2f32.ln()).abs() < 1e-7 && sp[1] == 100.0 && sp[2] > 0.0);
    let hs = un(UnaryOp::HardSwish, &Owned::new(&[3], &[-4.0f32, 1.0, 4.0])).to::<f32>();
    assert_eq!(hs, [0.0, 1.0 * (1.0 / 6.0 + 0.5), 4.0]);
    let ints = Owned::new(&[4], &[-3i64, 0, 5, i64::MIN]);
    assert_eq!(un(UnaryOp::Abs, &ints).to::<i64>(), [3, 0, 5, i64::MIN]);
    assert_eq!(un(UnaryOp::Neg, &ints).to::<i64>(), [3, 0, -5, i64::MIN]);
    assert_eq!(un(UnaryOp::Sign, &ints).to::<i64>(), [-1, 0, 1, -1]);
    assert_eq!(un(UnaryOp::Relu, &ints).to::<i64>(), [0, 0, 5, 0]);
    let b = Owned::boolean(&[2], &[true, false]);
    assert_eq!(un(UnaryOp::Not, &b).to::<u8>(), [0, 1]);
    assert!(run1(&Unary { op: UnaryOp::Exp }, &[Some(&ints)], DType::I64).is_err());
    let h = Owned::new(
        &[3],
        &[f16::from_f32(0.0), f16::from_f32(1.0), f16::from_f32(-2.0)],
    );
    let e: Vec<f32> = un(UnaryOp::Exp, &h)
        .to::<f16>()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(
        e,
        [
            1.0,
            f16::from_f32(1f32.exp()).to_f32(),
            f16::from_f32((-2f32).exp()).to_f32()
        ]
    );
}

#[test]
fn parameterised() {
    let xs = [-2.0f32, -0.5, 0.0, 0.3, 2.0];
    let x = Owned::new(&[5], &xs);
    let r = |k: &dyn Fn(&Owned) -> Owned| k(&x).to::<f32>();
    let lr = r(&|x| run1(&LeakyRelu { alpha: 0.1 }, &[Some(x)], DType::F32).unwrap());
    assert_eq!(lr, [-0.2, -0.05, 0.0, 0.3, 2.0]);
    let hs = r(&|x| {
        run1(
            &HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            &[Some(x)],
            DType::F32,
        )
        .unwrap()
    });
    let want: Vec<f32> = xs
        .iter()
        .map(|v| (0.2 * v + 0.5f32).clamp(0.0, 1.0))
        .collect();
    assert_eq!(hs, want);
    let elu = r(&|x| run1(&Elu { alpha: 1.0 }, &[Some(x)], DType::F32).unwrap());
    assert!((elu[0] - ((-2f32).exp() - 1.0)).abs() < 1e-7 && elu[4] == 2.0);
    let tr = r(&|x| run1(&ThresholdedRelu { alpha: 0.2 }, &[Some(x)], DType::F32).unwrap());
    assert_eq!(tr, [0.0, 0.0, 0.0, 0.3, 2.0]);
    let celu = r(&|x| run1(&Celu { alpha: 2.0 }, &[Some(x)], DType::F32).unwrap());
    assert!((celu[0] - 2.0 * ((-1f32).exp() - 1.0)).abs() < 1e-6 && celu[3] == 0.3);
    let selu = r(&|x| {
        run1(
            &Selu {
                alpha: 1.5,
                gamma: 2.0,
            },
            &[Some(x)],
            DType::F32,
        )
        .unwrap()
    });
    assert!((selu[1] - 2.0 * 1.5 * ((-0.5f32).exp() - 1.0)).abs() < 1e-6 && selu[4] == 4.0);
    let gt = r(&|x| run1(&GeluTanh {}, &[Some(x)], DType::F32).unwrap());
    for (g, v) in gt.iter().zip(xs) {
        let v = v as f64;
        let w = 0.5
            * v
            * (1.0 + ((2.0 / core::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh());
        assert!((*g as f64 - w).abs() < 1e-6);
    }
    let sh = r(&|x| {
        run1(
            &Shrink {
                bias: 0.5,
                lambd: 1.0,
            },
            &[Some(x)],
            DType::F32,
        )
        .unwrap()
    });
    assert_eq!(sh, [-1.5, 0.0, 0.0, 0.0, 1.5]);
    // Clip with scalars, one bound, none; ints.
    let lo = Owned::new(&[], &[-1.0f32]);
    let hi = Owned::new(&[], &[1.0f32]);
    let c = run1(&Clip, &[Some(&x), Some(&lo), Some(&hi)], DType::F32).unwrap();
    assert_eq!(c.to::<f32>(), [-1.0, -0.5, 0.0, 0.3, 1.0]);
    let c = run1(&Clip, &[Some(&x), None, Some(&hi)], DType::F32).unwrap();
    assert_eq!(c.to::<f32>(), [-2.0, -0.5, 0.0, 0.3, 1.0]);
    let xi = Owned::new(&[3], &[-5i32, 3, 9]);
    let loi = Owned::new(&[], &[0i32]);
    let c = run1(&Clip, &[Some(&xi), Some(&loi)], DType::I32).unwrap();
    assert_eq!(c.to::<i32>(), [0, 3, 9]);
}
#[test]
fn gelu_erf_matches_its_formula_in_f32_and_f64() {
    // Odd length: the vector body and its tail both run.
    let xs: Vec<f32> = (0..1001).map(|i| (i as f32 - 500.0) * 0.017).collect();
    let want = |v: f64| 0.5 * v * (1.0 + erf_f64(v / core::f64::consts::SQRT_2));
    let x = Owned::new(&[xs.len()], &xs);
    let got = run1(&GeluErf {}, &[Some(&x)], DType::F32)
        .unwrap()
        .to::<f32>();
    for (&v, &g) in xs.iter().zip(&got) {
        // Relative accuracy on both sides, the negative tail included.
        assert!(close(g as f64, gelu_f64(v as f64), 5e-7, 1e-37), "{v}: {g}");
    }
    let xd: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
    let x = Owned::new(&[xd.len()], &xd);
    let got = run1(&GeluErf {}, &[Some(&x)], DType::F64)
        .unwrap()
        .to::<f64>();
    for (&v, &g) in xd.iter().zip(&got) {
        assert!(close(g, want(v), 1e-12, 1e-14), "{v}: {g}");
    }
}

/// GELU's f32 paths over a dense sweep of its whole range, the deep
/// negative tail included (down to where the result leaves the normal
/// range), plus infinities and NaN in every lane position: relative error
/// within 5e-7 of the f64 reference, for the scalar code and each vector
/// form the CPU can run. (Worst seen: 4.2e-7.)
#[test]
fn gelu_f32_relative_error_over_a_dense_sweep() {
    let mut xs: Vec<f32> = (0..240_001)
        .map(|i| -13.0 + i as f32 * (23.0 / 240_000.0))
        .collect();
    for i in 0..48 {
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3];
        xs.insert(1000 + 17 * i, special);
    }
    let check = |name: &str, got: &[f32]| {
        for (&v, &g) in xs.iter().zip(got) {
            let want = gelu_f64(v as f64);
            assert!(
                close(g as f64, want, 5e-7, 1e-37),
                "{name}({v}) = {g}, want {want}"
            );
        }
    };
    let scalar: Vec<f32> = xs.iter().map(|&v| super::math::gelu_f32(v)).collect();
    check("scalar", &scalar);
    let mut got = vec![0f32; xs.len()];
    super::math::gelu_slice(&xs, &mut got);
    check("gelu_slice", &got);
    for isa in vector_isas() {
        vector_on(isa, super::vector::VectorOp::Gelu, &xs, &mut got);
        check(&format!("{isa:?}"), &got);
    }
}

#[test]
fn erf_and_tanh_relative_error_over_a_dense_sweep() {
    // Dense around the branch switches (|x| = 0.625, 1) and out to where
    // both saturate, tiny magnitudes of both signs, and the specials.
    let mut xs: Vec<f32> = (0..240_001)
        .map(|i| -6.0 + i as f32 * (12.0 / 240_000.0))
        .collect();
    for e in -40..0 {
        let v = 1.7f32 * 2f32.powi(e);
        xs.extend([v, -v]);
    }
    xs.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        50.0,
        -50.0,
    ]);
    let check = |name: &str, got: &[f32], f: fn(f64) -> f64, rtol: f64| {
        let mut worst = 0f64;
        for (&v, &g) in xs.iter().zip(got) {
            let want = f(v as f64);
            assert!(
                close(g as f64, want, rtol, 1e-37),
                "{name}({v}) = {g}, want {want}"
            );
            if want != 0.0 && want.is_finite() {
                worst = worst.max(((g as f64 - want) / want).abs());
            }
        }
        std::eprintln!("{name}: worst relative error {worst:.2e}");
    };
    let mut got = vec![0f32; xs.len()];
    let scalar: Vec<f32> = xs.iter().map(|&v| super::math::erf_f32(v)).collect();
    // Measured worst: erf 9.7e-8, tanh 1.4e-7 (about one ulp).
    check("erf scalar", &scalar, erf_f64, 1.2e-7);
    super::math::erf_slice(&xs, &mut got);
    check("erf_slice", &got, erf_f64, 1.2e-7);
    let scalar: Vec<f32> = xs.iter().map(|&v| super::math::tanh_f32(v)).collect();
    check("tanh scalar", &scalar, f64::tanh, 2e-7);
    map_f32(&xs, &mut got, super::math::tanh_f32);
    check("tanh map_f32", &got, f64::tanh, 2e-7);
    super::math::tanh_slice(&xs, &mut got);
    check("tanh_slice", &got, f64::tanh, 2e-7);
    for isa in vector_isas() {
        use super::vector::VectorOp;
        vector_on(isa, VectorOp::Erf, &xs, &mut got);
        check(&format!("erf {isa:?}"), &got, erf_f64, 1.2e-7);
        vector_on(isa, VectorOp::Tanh, &xs, &mut got);
        check(&format!("tanh {isa:?}"), &got, f64::tanh, 2e-7);
    }
}

/// `exp`, sigmoid and Swish against f64 over a dense sweep of their whole working
/// range (both saturations and the scalar path below -87), for the scalar
/// reference, the dispatched kernels and the AVX2 ones.
#[test]
fn exp_sigmoid_and_swish_relative_error_over_a_dense_sweep() {
    let mut xs: Vec<f32> = (0..360_001)
        .map(|i| -90.0 + i as f32 * (180.0 / 360_000.0))
        .collect();
    for e in -40..0 {
        let v = 1.3f32 * 2f32.powi(e);
        xs.extend([v, -v]);
    }
    xs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, -87.0]);
    // `scaled`: the function is `x · sigmoid(…)` (Swish), so the sigmoid
    // factor is `want / x`.
    let check = |name: &str, got: &[f32], f: &dyn Fn(f64) -> f64, rtol: f64, scaled: bool| {
        let (mut worst, mut at) = (0f64, 0f32);
        for (&v, &g) in xs.iter().zip(got) {
            let want = f(v as f64);
            // Beyond f32's range the right answer is infinity.
            let want = if (want as f32).is_infinite() {
                want as f32 as f64
            } else {
                want
            };
            assert!(
                close(g as f64, want, rtol, 1e-37),
                "{name}({v}) = {g}, want {want}"
            );
            // Where sigmoid itself is subnormal (z < -87.3) it carries few
            // bits; the absolute tolerance covers those lanes.
            let factor = if scaled { want / v as f64 } else { want };
            if (factor as f32).is_normal() && (want as f32).is_normal() {
                let rel = ((g as f64 - want) / want).abs();
                if rel > worst {
                    (worst, at) = (rel, v);
                }
            }
        }
        std::eprintln!("{name}: worst relative error {worst:.2e} at {at}");
    };
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    let mut got = vec![0f32; xs.len()];
    super::math::exp_scalar(&xs, &mut got);
    check("exp scalar", &got, &f64::exp, EXP_RTOL, false);
    super::math::exp_slice(&xs, &mut got);
    check("exp_slice", &got, &f64::exp, EXP_RTOL, false);
    super::math::sigmoid_scalar(&xs, &mut got);
    check("sigmoid scalar", &got, &sigmoid, SIGMOID_RTOL, false);
    super::math::sigmoid_slice(&xs, &mut got);
    check("sigmoid_slice", &got, &sigmoid, SIGMOID_RTOL, false);
    for isa in vector_isas() {
        vector_on(isa, super::vector::VectorOp::Exp, &xs, &mut got);
        check(&format!("exp {isa:?}"), &got, &f64::exp, EXP_RTOL, false);
        vector_on(isa, super::vector::VectorOp::Sigmoid, &xs, &mut got);
        check(
            &format!("sigmoid {isa:?}"),
            &got,
            &sigmoid,
            SIGMOID_RTOL,
            false,
        );
    }
    for alpha in [1.0f32, 1.702] {
        let swish = move |v: f64| {
            if v.is_infinite() && v < 0.0 {
                f64::NAN
            } else {
                // The kernels see `alpha · x` rounded to f32.
                let z = (alpha * v as f32) as f64;
                v / (1.0 + (-z).exp())
            }
        };
        super::math::swish_scalar(alpha, &xs, &mut got);
        check("swish scalar", &got, &swish, SIGMOID_RTOL, true);
        super::math::swish_slice(alpha, &xs, &mut got);
        check("swish_slice", &got, &swish, SIGMOID_RTOL, true);
        for isa in vector_isas() {
            vector_on(isa, super::vector::VectorOp::Swish(alpha), &xs, &mut got);
            check(&format!("swish {isa:?}"), &got, &swish, SIGMOID_RTOL, true);
        }
    }
}

/// Relative error bound of `exp` in [`exp_sigmoid_and_swish_relative_error_over_a_dense_sweep`].
/// Measured worst: 9.2e-8 (the degree-7 Taylor polynomial before gave 1.0e-7).
const EXP_RTOL: f64 = 1.2e-7;

/// Relative error bound of [`exp_sigmoid_and_swish_relative_error_over_a_dense_sweep`].
/// Measured worst: sigmoid 1.4e-7, Swish 1.6e-7 (the earlier form, with a
/// sign split and a multiply by `x`, had 1.8e-7 and 2.2e-7).
const SIGMOID_RTOL: f64 = 2e-7;

/// Long f32 tensors run in chunks over the threads: the same bits on one
/// and three threads, for a polynomial kernel (exp, GELU) and a plain map.
#[cfg(feature = "std")]
#[test]
fn long_f32_maps_bit_identical_over_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let n = 3 * crate::threads::PARALLEL_MIN_ELEMS + 5;
    let xs: Vec<f32> = (0..n).map(|i| (i % 211) as f32 * 0.07 - 7.0).collect();
    let x = Owned::new(&[n], &xs);
    for op in [UnaryOp::Exp, UnaryOp::Gelu, UnaryOp::Relu] {
        crate::threads::set_num_threads(1);
        let one = un(op, &x).to::<f32>();
        crate::threads::set_num_threads(3);
        let three = un(op, &x).to::<f32>();
        crate::threads::set_num_threads(1);
        assert_eq!(one.len(), n);
        let same = one
            .iter()
            .zip(&three)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{op:?}");
    }
}

/// The in-place ReLU (AVX-512 or portable), the bias add of the
/// convolution epilogue and the row add of the Linear epilogue give exactly
/// the scalar results over odd lengths and tails, NaN, infinities and
/// signed zeros included.
#[test]
fn relu_and_bias_adds_in_place_match_scalar() {
    let special = [
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1e-40,
    ];
    for n in [0, 1, 15, 16, 17, 31, 33, 100, 257] {
        let x: Vec<f32> = (0..n)
            .map(|i| match special.get(i % 11) {
                Some(&v) if i % 3 == 0 => v,
                _ => (i as f32 * 0.37).sin() * 5.0,
            })
            .collect();
        let mut relu = x.clone();
        Activation::Relu.apply_in_place(&mut relu);
        let mut biased = x.clone();
        add_in_place(&mut biased, 0.75);
        // A row of biases (a Linear layer's), longer than the segment as
        // the epilogue passes it.
        let row: Vec<f32> = (0..n + 3).map(|i| (i as f32 * 0.91).cos() * 2.0).collect();
        let mut row_biased = x.clone();
        add_slice_in_place(&mut row_biased, &row);
        for (i, &v) in x.iter().enumerate() {
            let want = if v < 0.0 { 0.0 } else { v };
            assert_eq!(
                relu[i].to_bits(),
                want.to_bits(),
                "relu, element {i} of {n}"
            );
            let want = v + 0.75;
            assert!(
                biased[i].to_bits() == want.to_bits() || (want.is_nan() && biased[i].is_nan()),
                "bias, element {i} of {n}"
            );
            let want = v + row[i];
            assert!(
                row_biased[i].to_bits() == want.to_bits()
                    || (want.is_nan() && row_biased[i].is_nan()),
                "row bias, element {i} of {n}"
            );
        }
    }
}

/// Softmax's numerators never come out subnormal on any path: a
/// difference below the flush bound gives exactly 0 (so no vector lane
/// underflows), one at or above it a normal `e^d`, and the sum counts
/// only those.
#[test]
fn exp_shifted_flushes_what_would_be_subnormal() {
    use super::math::{EXP_SHIFTED_FLUSH, exp_shifted, exp_shifted_scalar};
    let below = [
        -87.01f32,
        -87.5,
        -90.0,
        -103.5,
        -110.0,
        -1e4,
        f32::NEG_INFINITY,
    ];
    let above = [EXP_SHIFTED_FLUSH, -86.99, -50.0, -1.0, 0.0];
    // Lengths around the vector widths, the flushed lanes anywhere.
    for n in [1usize, 7, 8, 9, 16, 17, 31, 32, 33, 70] {
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 3 {
                0 => below[i % below.len()],
                _ => above[i % above.len()],
            })
            .collect();
        type Path = (String, Box<dyn Fn(&[f32], &mut [f32], f32) -> f32>);
        let mut paths: Vec<Path> = vec![
            ("scalar".into(), Box::new(exp_shifted_scalar)),
            ("dispatched".into(), Box::new(exp_shifted)),
        ];
        for isa in vector_isas() {
            paths.push((
                format!("{isa:?}"),
                Box::new(move |x, y, s| super::vector::exp_shifted_on(isa, x, y, s).unwrap()),
            ));
        }
        for (name, f) in paths {
            let mut y = vec![f32::NAN; n];
            let sum = f(&x, &mut y, 0.0);
            let mut want_sum = 0f32;
            for (&d, &e) in x.iter().zip(&y) {
                if d < EXP_SHIFTED_FLUSH {
                    assert_eq!(e.to_bits(), 0, "{name} n={n}: e^{d} gave {e}");
                } else {
                    assert!(e.is_normal(), "{name} n={n}: e^{d} gave {e}");
                    assert!((e - d.exp()).abs() <= 4.0 * f32::EPSILON * d.exp());
                    want_sum += e;
                }
            }
            assert!((sum - want_sum).abs() <= 1e-6 * want_sum, "{name} n={n}");
        }
    }
}

/// GELU's far tails on every path: below the low bound exactly -0, above
/// the high bound exactly `x` (what the f64 reference rounds to), in every
/// lane position; values between keep their accuracy.
#[test]
fn gelu_far_tails_are_exact_zero_and_identity() {
    use super::math::{GELU_HIGH, GELU_LOW};
    let low = [GELU_LOW - 1e-5, -13.5, -20.0, -100.0, -1e30];
    let high = [GELU_HIGH, 9.5, 13.0, 20.0, 1e30];
    for n in [1usize, 5, 8, 13, 16, 31, 33, 64] {
        let xs: Vec<f32> = (0..n)
            .map(|i| match i % 3 {
                0 => low[i % low.len()],
                1 => high[i % high.len()],
                _ => -12.0 + i as f32 * 0.1,
            })
            .collect();
        let mut paths: Vec<(String, Vec<f32>)> = Vec::new();
        paths.push((
            "scalar".into(),
            xs.iter().map(|&v| super::math::gelu_f32(v)).collect(),
        ));
        let mut got = vec![0f32; n];
        super::math::gelu_slice(&xs, &mut got);
        paths.push(("gelu_slice".into(), got.clone()));
        for isa in vector_isas() {
            vector_on(isa, super::vector::VectorOp::Gelu, &xs, &mut got);
            paths.push((format!("{isa:?}"), got.clone()));
        }
        for (name, ys) in &paths {
            for (&x, &y) in xs.iter().zip(ys) {
                if x < GELU_LOW {
                    assert_eq!(y.to_bits(), (-0.0f32).to_bits(), "{name}({x}) = {y}");
                } else if x >= GELU_HIGH {
                    assert_eq!(y, x, "{name}({x})");
                    assert_eq!(gelu_f64(x as f64) as f32, x);
                } else {
                    let want = gelu_f64(x as f64);
                    assert!(
                        close(y as f64, want, 5e-7, 1e-37),
                        "{name}({x}) = {y}, want {want}"
                    );
                }
            }
        }
    }
}

/// The one-pass conv epilogue (bias, a pointwise activation, scalar
/// affine, residual) equals the separate passes it replaces, bit for bit:
/// the bias add, the standalone activation kernel, `v · mul + add`, the
/// residual add; every combination, lengths 0..70 (all vector tails),
/// special values (NaN, ±inf, -0, huge) in every lane position.
#[test]
fn pointwise_tail_equals_separate_passes() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        3.0e38,
        -3.0,
    ];
    let acts = [
        (Activation::None, None),
        (Activation::Relu, Some(UnaryOp::Relu)),
        (Activation::HardSwish, Some(UnaryOp::HardSwish)),
    ];
    for n in 0..70usize {
        let y0: Vec<f32> = (0..n)
            .map(|i| match i % 9 {
                4 => specials[(i / 9) % specials.len()],
                _ => ((i * 53 % 97) as f32 - 48.0) * 0.173,
            })
            .collect();
        let r: Vec<f32> = (0..n)
            .map(|i| ((i * 29 % 61) as f32 - 30.0) * 0.37)
            .collect();
        for (act, op) in acts {
            for bias in [None, Some(0.75f32), Some(-0.0)] {
                for (mul, add) in [(1.0f32, 0.0f32), (0.5, 0.0), (1.0, -2.5), (-1.25, 0.125)] {
                    for residual in [None, Some(&r[..])] {
                        let mut want = y0.clone();
                        if let Some(b) = bias {
                            want.iter_mut().for_each(|v| *v += b);
                        }
                        if let Some(op) = op {
                            want = un(op, &Owned::new(&[n], &want)).to::<f32>();
                        }
                        if mul != 1.0 || add != 0.0 {
                            want.iter_mut().for_each(|v| *v = *v * mul + add);
                        }
                        if let Some(r) = residual {
                            want.iter_mut().zip(r).for_each(|(v, &x)| *v += x);
                        }
                        let mut got = y0.clone();
                        assert!(pointwise_tail(&mut got, bias, act, (mul, add), residual));
                        let same = |a: f32, b: f32| {
                            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                        };
                        for i in 0..n {
                            assert!(
                                same(got[i], want[i]),
                                "{act:?} n={n} bias {bias:?} ({mul}, {add}) residual {} at {i}: {} vs {}",
                                residual.is_some(),
                                got[i],
                                want[i]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Sigmoid far below zero (`z <= -87`, where `1 + e^-z` overflows the
/// exponential's range and the result `e^z` is at or below the normal
/// range): the scalar reference, the AVX2 and the AVX-512 kernels (out of
/// place and in place) agree bit for bit over a dense sweep down to where
/// the result is 0, and each value is `e^z` rounded to the float grid
/// (within `EXP_RTOL` where normal, within one subnormal step below).
/// Whole tensors of such values (a detector's background logits) stay on
/// the vector path.
#[test]
fn sigmoid_below_minus_87_is_exp_on_every_path() {
    // (Above -87 the scalar reference and the vector kernels agree to
    // rounding, not bit for bit: `avx2_activations_match_scalar_…`.)
    let mut xs: Vec<f32> = (0..200_001)
        .map(|i| -110.0 + i as f32 * (23.0 / 200_000.0))
        .collect();
    xs.extend([f32::NEG_INFINITY, -87.0, -104.0, f32::NAN, -1e30]);
    let mut want = vec![0f32; xs.len()];
    super::math::sigmoid_scalar(&xs, &mut want);
    for (&z, &y) in xs.iter().zip(&want) {
        if z.is_nan() {
            assert!(y.is_nan());
            continue;
        }
        let exact = 1.0 / (1.0 + (-(z as f64)).exp());
        let step = 2f64.powi(-149);
        assert!(
            (y as f64 - exact).abs() <= (EXP_RTOL * exact).max(step),
            "sigmoid({z}) = {y:e}, want {exact:e}"
        );
    }
    let same = |a: &[f32], name: &str| {
        for ((&z, &g), &w) in xs.iter().zip(a).zip(&want) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{name} sigmoid({z}) = {g:e}, scalar {w:e}"
            );
        }
    };
    for isa in vector_isas() {
        use super::vector::{VectorOp, apply_in_place_on};
        let mut got = vec![0f32; xs.len()];
        vector_on(isa, VectorOp::Sigmoid, &xs, &mut got);
        same(&got, &format!("{isa:?}"));
        let mut inplace = xs.clone();
        assert!(apply_in_place_on(isa, VectorOp::Sigmoid, &mut inplace));
        same(&inplace, &format!("{isa:?} in place"));
    }
    let mut got = vec![0f32; xs.len()];
    super::math::sigmoid_slice(&xs, &mut got);
    same(&got, "sigmoid_slice");
}

/// The in-place maps of fused tails (short slices without the ISA
/// dispatch, longer ones at the CPU's vector width) give the plain loop's
/// bits at every length around the short-slice bound, NaN and signed
/// zeros included.
#[test]
fn in_place_maps_match_the_plain_loop_at_every_length() {
    let f = |v: f32| {
        let t = v * (1.0f32 / 6.0) + 0.5;
        let t = if t > 1.0 { 1.0 } else { t };
        (if t < 0.0 { 0.0 } else { t }) * v * 1.5 - 0.25
    };
    let g = |v: f32, r: f32| (if v < 0.0 { 0.0 } else { v }) + r;
    for n in 0..40 {
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 7 {
                0 => f32::NAN,
                1 => -0.0,
                _ => (i as f32 - 9.5) * 0.37,
            })
            .collect();
        let r: Vec<f32> = (0..n).map(|i| i as f32 * 0.125 - 1.0).collect();
        let mut y = x.clone();
        map_in_place_f32(&mut y, f);
        for (a, &v) in y.iter().zip(&x) {
            assert_eq!(a.to_bits(), f(v).to_bits(), "map, length {n}");
        }
        let mut y = x.clone();
        zip_in_place_f32(&mut y, &r, g);
        for ((a, &v), &w) in y.iter().zip(&x).zip(&r) {
            assert_eq!(a.to_bits(), g(v, w).to_bits(), "zip, length {n}");
        }
    }
}
