//! The vector activation and softmax kernels on every backend this CPU
//! runs, against the scalar ones and against each other, over odd lengths,
//! tails and special values.
use super::vector::{self, VectorOp};
use super::*;
use crate::simd::Isa;

/// The vector activations against the scalar ones: every length 0..70 (all
/// tails), plus special values in every lane position.
#[test]
fn vector_activations_match_scalar_over_odd_lengths_and_edges() {
    use super::math::{exp_scalar, sigmoid_scalar, swish_scalar};
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -87.5,
        -86.9,
        -100.0,
        -103.9,
        -104.0,
        -104.1,
        -10000.0,
        87.9,
        88.5,
        0.0,
        -0.0,
        1e-30,
        -3.25,
        17.0,
    ];
    let close = |a: f32, b: f32| {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 4.0 * f32::EPSILON * b.abs()
    };
    for isa in vector_isas() {
        for n in (0..70).chain([1000, 1003]) {
            let mut x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37)
                .collect();
            for (i, v) in x.iter_mut().enumerate() {
                if i % 5 == 3 {
                    *v = specials[(i / 5) % specials.len()];
                }
            }
            let (mut want, mut got) = (vec![0f32; n], vec![0f32; n]);
            fn erf_scalar(x: &[f32], y: &mut [f32]) {
                super::map(x, y, super::math::erf_f32)
            }
            fn gelu_scalar(x: &[f32], y: &mut [f32]) {
                super::map(x, y, super::math::gelu_f32)
            }
            // Without a one-instruction lookup the vector GELU is the tail
            // form everywhere.
            fn gelu_tail_scalar(x: &[f32], y: &mut [f32]) {
                super::map(x, y, super::math::gelu_tail_form)
            }
            fn tanh_scalar(x: &[f32], y: &mut [f32]) {
                super::map(x, y, super::math::tanh_f32)
            }
            type Scalar = fn(&[f32], &mut [f32]);
            let gelu_ref: Scalar = if isa == Isa::Avx512 {
                gelu_scalar
            } else {
                gelu_tail_scalar
            };
            let pairs: [(&str, Scalar, VectorOp); 5] = [
                ("tanh", tanh_scalar, VectorOp::Tanh),
                ("exp", exp_scalar, VectorOp::Exp),
                ("sigmoid", sigmoid_scalar, VectorOp::Sigmoid),
                ("erf", erf_scalar, VectorOp::Erf),
                ("gelu", gelu_ref, VectorOp::Gelu),
            ];
            for (name, scalar, op) in pairs {
                scalar(&x, &mut want);
                vector_on(isa, op, &x, &mut got);
                for i in 0..n {
                    assert!(
                        close(got[i], want[i]),
                        "{isa:?} {name} n={n} x={} {} vs {}",
                        x[i],
                        got[i],
                        want[i]
                    );
                }
            }
            for shift in [0.0f32, 17.0, -3.5] {
                check_exp_shifted(&x, shift, &close, |x, y, s| {
                    vector::exp_shifted_on(isa, x, y, s).unwrap()
                });
            }
            for alpha in [1.0f32, 1.702, -0.5] {
                swish_scalar(alpha, &x, &mut want);
                vector_on(isa, VectorOp::Swish(alpha), &x, &mut got);
                for i in 0..n {
                    assert!(
                        close(got[i], want[i]),
                        "{isa:?} swish({alpha}) n={n} x={} {} vs {}",
                        x[i],
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }
}

/// `n` values over about ±9.5 for the vector activations' bit-for-bit
/// tests, with a special value (NaN, ±inf, beyond ±87, -0) at every
/// `stride`-th position (none for `usize::MAX`).
fn activation_inputs(n: usize, stride: usize) -> Vec<f32> {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -87.5,
        -100.0,
        88.5,
        -0.0,
    ];
    let mut x: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.19)
        .collect();
    if stride != usize::MAX {
        for (i, v) in x.iter_mut().enumerate() {
            if i % stride == stride / 2 {
                *v = specials[(i / stride) % specials.len()];
            }
        }
    }
    x
}

/// The vector activations on every backend: a whole slice (out of place
/// and in place) against each element computed alone (one partial
/// vector), bit for bit, over every length 0..100 and two long ones, with
/// special values (NaN, ±inf, beyond ±87) at several spacings, so that
/// steps with and without flagged lanes both occur.
#[test]
fn whole_slices_equal_single_elements_bit_for_bit() {
    let mut ops = vec![
        VectorOp::Gelu,
        VectorOp::Sigmoid,
        VectorOp::Exp,
        VectorOp::Tanh,
        VectorOp::Erf,
    ];
    ops.extend([1.0f32, 1.702, -0.5].map(VectorOp::Swish));
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for isa in vector_isas() {
        for n in (0..100).chain([1000, 1003]) {
            for stride in [5usize, 37, 97, usize::MAX] {
                let x = activation_inputs(n, stride);
                for &op in &ops {
                    let mut whole = vec![0f32; n];
                    vector_on(isa, op, &x, &mut whole);
                    let mut inplace = x.clone();
                    assert!(vector::apply_in_place_on(isa, op, &mut inplace));
                    for i in 0..n {
                        let mut alone = [0f32];
                        vector_on(isa, op, &x[i..=i], &mut alone);
                        assert!(
                            same(whole[i], alone[0]) && same(inplace[i], alone[0]),
                            "{isa:?} {op:?} n={n} stride {stride} x={}: whole {} in place {} alone {}",
                            x[i],
                            whole[i],
                            inplace[i],
                            alone[0]
                        );
                    }
                }
            }
        }
    }
}

/// The AVX-512 activations (out of place and in place) against the AVX2
/// ones, bit for bit (the same operations in the same order; `scalef`
/// against an exponent built from bits): every length 0..100 (all tails
/// and pair splits) and two long ones, with special values (NaN, ±inf,
/// below -87) in every lane position. GELU: see
/// `avx512_gelu_equals_scalar_bit_for_bit`.
#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_activations_equal_avx2_bit_for_bit() {
    use crate::simd::isa_available;
    if !isa_available(Isa::Avx512) {
        return;
    }
    let mut ops = vec![
        VectorOp::Sigmoid,
        VectorOp::Exp,
        VectorOp::Tanh,
        VectorOp::Erf,
    ];
    ops.extend([1.0f32, 1.702, -0.5].map(VectorOp::Swish));
    // NaN payloads may differ.
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for n in (0..100).chain([1000, 1003]) {
        for stride in [7usize, 41, usize::MAX] {
            let x = activation_inputs(n, stride);
            for &op in &ops {
                let (mut want, mut got) = (vec![0f32; n], vec![0f32; n]);
                vector_on(Isa::Avx2, op, &x, &mut want);
                vector_on(Isa::Avx512, op, &x, &mut got);
                let mut inplace = x.clone();
                assert!(vector::apply_in_place_on(Isa::Avx512, op, &mut inplace));
                for i in 0..n {
                    assert!(
                        same(got[i], want[i]) && same(inplace[i], want[i]),
                        "{op:?} n={n} x={}: avx512 {} in place {} avx2 {}",
                        x[i],
                        got[i],
                        inplace[i],
                        want[i]
                    );
                }
            }
        }
    }
}

/// The AVX-512 GELU (out of place and in place) bit for bit against the
/// scalar `gelu_f32` on the table's range and against the AVX2 tail form
/// (one element at a time) outside it: every length 0..100 and two long ones over
/// about ±9.5 with NaN/±inf/-0 in every lane position (table and tail
/// lanes mixed in one vector), and a sweep over the table's range with
/// each interval boundary approached to within a few ulps from both sides
/// (where `x·4 + 16` rounds to the next interval), each value also within
/// 5e-7 of the f64 reference.
#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_gelu_equals_scalar_bit_for_bit() {
    use super::math::gelu_f32;
    use crate::simd::isa_available;
    if !isa_available(Isa::Avx512) {
        return;
    }
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    let check = |x: &[f32], what: &str| {
        let n = x.len();
        let mut got = vec![0f32; n];
        vector_on(Isa::Avx512, VectorOp::Gelu, x, &mut got);
        let mut inplace = x.to_vec();
        assert!(vector::apply_in_place_on(
            Isa::Avx512,
            VectorOp::Gelu,
            &mut inplace
        ));
        for i in 0..n {
            let want = if super::math::gelu_table_position(x[i]).is_some() {
                gelu_f32(x[i])
            } else {
                let mut alone = [0f32];
                vector_on(Isa::Avx2, VectorOp::Gelu, &x[i..=i], &mut alone);
                alone[0]
            };
            assert!(
                same(got[i], want) && same(inplace[i], want),
                "gelu {what} n={n} x={}: avx512 {} in place {} want {want}",
                x[i],
                got[i],
                inplace[i]
            );
        }
    };
    for n in (0..100).chain([1000, 1003]) {
        for stride in [7usize, 41, usize::MAX] {
            check(&activation_inputs(n, stride), &format!("stride {stride}"));
        }
    }
    let mut sweep: Vec<f32> = (0..=90_001)
        .map(|i| -4.5 + i as f32 * (9.0 / 90_000.0))
        .collect();
    for k in 0..=32 {
        let edge = -4.0 + k as f32 * 0.25;
        let mut below = edge;
        let mut above = edge;
        for _ in 0..6 {
            below = f32::from_bits(if below > 0.0 {
                below.to_bits() - 1
            } else if below == 0.0 {
                0x8000_0001
            } else {
                below.to_bits() + 1
            });
            above = f32::from_bits(if above >= 0.0 {
                above.to_bits() + 1
            } else {
                above.to_bits() - 1
            });
            sweep.extend([below, above]);
        }
        sweep.push(edge);
    }
    check(&sweep, "sweep");
    for &v in &sweep {
        let want = gelu_f64(v as f64);
        assert!(
            close(gelu_f32(v) as f64, want, 5e-7, 1e-37),
            "gelu_f32({v}) = {}, want {want}",
            gelu_f32(v)
        );
    }
}

#[test]
fn vector_softmax_pieces_match_scalar() {
    for isa in vector_isas() {
        softmax_pieces_match_scalar_on(isa);
    }
}

/// [`vector_softmax_pieces_match_scalar`] on one backend.
fn softmax_pieces_match_scalar_on(isa: Isa) {
    use super::vector::Pointwise;
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        1e-40,
        -95.0,
    ];
    // One subnormal step: a subnormal exponential may round either way.
    let step = f32::from_bits(1);
    let close = |a: f32, b: f32| {
        (a.is_nan() && b.is_nan())
            || a == b
            || (a - b).abs() <= 4.0 * f32::EPSILON * b.abs()
            || (b.abs() < f32::MIN_POSITIVE && (a - b).abs() <= step)
    };
    // NaN everywhere but one element, and everywhere: NaN is ignored.
    for n in [64, 70, 130] {
        let mut x = vec![f32::NAN; n];
        assert_eq!(vector::max_of_on(isa, &x), Some(f32::NEG_INFINITY));
        x[n / 3] = 3.0;
        assert_eq!(vector::max_of_on(isa, &x), Some(3.0), "n={n}");
    }
    for n in (0..100).chain([1000, 1003]) {
        for with_specials in [false, true] {
            // Spread over ±115, so the shifts below give subnormal results,
            // results that round to zero, and ones that overflow.
            let mut x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 2.3)
                .collect();
            if with_specials {
                for (i, v) in x.iter_mut().enumerate() {
                    if i % 9 == 4 {
                        *v = specials[(i / 9) % specials.len()];
                    }
                }
            }
            let want_max = super::math::max_of_scalar(&x);
            let got_max = vector::max_of_on(isa, &x).unwrap();
            assert_eq!(got_max, want_max, "{isa:?} max_of n={n}");
            for shift in [want_max, 0.0, 17.0, -3.5] {
                check_exp_shifted(&x, shift, &close, |x, y, s| {
                    vector::exp_shifted_on(isa, x, y, s).unwrap()
                });
                // The in-place form: the same bits and sum as the vector
                // form out of place.
                let mut out = vec![0f32; x.len()];
                let sum = vector::exp_shifted_on(isa, &x, &mut out, shift).unwrap();
                let mut inplace = x.clone();
                let sum_in = vector::exp_shifted_in_place_on(isa, &mut inplace, shift).unwrap();
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&inplace), bits(&out), "in place n={n} shift {shift}");
                assert!(sum_in.to_bits() == sum.to_bits() || sum_in.is_nan() && sum.is_nan());
                // The in-place form the kernels call, against the portable one.
                let mut chunked = x.clone();
                let mut want = vec![0f32; x.len()];
                super::math::exp_shifted_scalar(&x, &mut want, shift);
                super::math::exp_shifted_in_place(&mut chunked, shift);
                for (g, w) in chunked.iter().zip(&want) {
                    assert!(close(*g, *w), "in place n={n}: {g} vs {w}");
                }
            }
            let mut scaled = x.clone();
            assert!(vector::pointwise_on(
                isa,
                Pointwise::Scale(0.37),
                &mut scaled
            ));
            for (s, &v) in scaled.iter().zip(&x) {
                assert!(
                    s.to_bits() == (v * 0.37).to_bits() || s.is_nan() && v.is_nan(),
                    "scale {v}: {s}"
                );
            }
        }
    }
}

/// Checks a vector `exp_shifted` against the portable one at `shift`: each
/// element `close` to it, and the sum (taken in another order) within a
/// few ulp of the total of magnitudes (NaN and inf propagate alike).
fn check_exp_shifted(
    x: &[f32],
    shift: f32,
    close: &dyn Fn(f32, f32) -> bool,
    vector: impl Fn(&[f32], &mut [f32], f32) -> f32,
) {
    let n = x.len();
    let (mut want, mut got) = (vec![0f32; n], vec![0f32; n]);
    let sum_want = super::math::exp_shifted_scalar(x, &mut want, shift);
    let sum_got = vector(x, &mut got, shift);
    for i in 0..n {
        assert!(
            close(got[i], want[i]),
            "exp_shifted({shift}) n={n} x={} {} vs {}",
            x[i],
            got[i],
            want[i]
        );
    }
    let scale: f32 = want.iter().map(|v| v.abs()).sum();
    assert!(
        (sum_got.is_nan() && sum_want.is_nan())
            || sum_got == sum_want
            || (sum_got - sum_want).abs() <= 1e-6 * scale,
        "exp_shifted({shift}) n={n} sum {sum_got} vs {sum_want}"
    );
}

/// The vector softmax over an attention head's rows (every backend) equals [`max_of`] and
/// [`exp_shifted`] called row by row, bit for bit (numerators and sums'
/// reciprocals), with and without a mask, over row lengths with every tail
/// and values from BERT's -10000 padding to infinities and NaN.
#[test]
fn vector_softmax_rows_equal_the_per_row_calls() {
    for isa in vector_isas() {
        softmax_rows_equal_the_per_row_calls_on(isa);
    }
}

/// [`vector_softmax_rows_equal_the_per_row_calls`] on one backend.
fn softmax_rows_equal_the_per_row_calls_on(isa: Isa) {
    use crate::ops::test_util::rand_vec;
    let rows = 5;
    for t in [1, 7, 15, 16, 17, 31, 33, 64, 100, 128, 131] {
        let mut scores: Vec<f32> = rand_vec(rows * t, t as u64)
            .iter()
            .map(|v| 20.0 * v)
            .collect();
        for (i, v) in scores.iter_mut().enumerate() {
            match i % 23 {
                3 => *v = -10000.0,
                11 if i % 3 == 0 => *v = f32::NEG_INFINITY,
                19 if t > 60 => *v = f32::NAN,
                _ => {}
            }
        }
        // Mask rows t + 3 apart from float 2 on, some of them -10000.
        let (start, stride) = (2, t + 3);
        let mut mask = rand_vec(start + rows * stride, 7 + t as u64);
        for v in mask.iter_mut().step_by(5) {
            *v = -10000.0;
        }
        for masked in [false, true] {
            let mut want = scores.clone();
            let mut want_norms = vec![0f32; rows];
            let mut buf = vec![0f32; t];
            for (i, row) in want.chunks_exact_mut(t).enumerate() {
                for (j, o) in buf.iter_mut().enumerate() {
                    *o = row[j]
                        + if masked {
                            mask[start + i * stride + j]
                        } else {
                            0.0
                        };
                }
                if !masked {
                    buf.copy_from_slice(row);
                }
                let top = vector::max_of_on(isa, &buf).unwrap();
                let sum = vector::exp_shifted_on(isa, &buf, row, top).unwrap();
                want_norms[i] = 1.0 / sum;
            }
            let mut got = scores.clone();
            let mut norms = vec![0f32; rows];
            let mut shifted = vec![0f32; t];
            let m = masked.then_some((&mask[..], start, stride));
            assert!(vector::softmax_rows_on(
                isa,
                &mut got,
                t,
                m,
                &mut shifted,
                &mut norms
            ));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "t={t} masked={masked}");
            assert_eq!(bits(&norms), bits(&want_norms), "t={t} masked={masked}");
        }
    }
}
