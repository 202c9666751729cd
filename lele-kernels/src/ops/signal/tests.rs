//! The FFT and the signal kernels against direct f64 sums.
use alloc::vec::Vec;

use super::dft::{DFT_PLAN_INPUT, Dft};
use super::fft::{self, Complex, Plan};
use super::mel::MelWeightMatrix;
use super::stft::{STFT_PLAN_INPUT, Stft};
use super::window::{Window, WindowKind};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::ops::test_util::{Owned, run1};

/// Deterministic values in `[-1, 1)`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The DFT by its definition, in f64.
fn direct_dft(x: &[Complex], sign: f64) -> Vec<(f64, f64)> {
    let n = x.len();
    (0..n)
        .map(|k| {
            let mut acc = (0.0f64, 0.0f64);
            for (j, v) in x.iter().enumerate() {
                let a = sign * 2.0 * core::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                let (s, c) = a.sin_cos();
                acc.0 += v.re as f64 * c - v.im as f64 * s;
                acc.1 += v.re as f64 * s + v.im as f64 * c;
            }
            acc
        })
        .collect()
}

fn complex_signal(n: usize, seed: u64) -> Vec<Complex> {
    let v = values(2 * n, seed);
    v.chunks_exact(2)
        .map(|c| Complex::new(c[0], c[1]))
        .collect()
}

/// Relative error of `got` against `want`, measured against the largest
/// magnitude of `want` (the FFT's error grows with the signal's energy, not
/// with each bin's value).
fn max_error(got: &[Complex], want: &[(f64, f64)]) -> f64 {
    let scale = want.iter().map(|w| w.0.hypot(w.1)).fold(1.0f64, f64::max);
    got.iter()
        .zip(want)
        .map(|(g, w)| (g.re as f64 - w.0).hypot(g.im as f64 - w.1) / scale)
        .fold(0.0, f64::max)
}

fn transform(n: usize, x: &mut [Complex], inverse: bool) {
    let mut plan = alloc::vec![0f32; fft::plan_len(n).unwrap()];
    let mut work = alloc::vec![Complex::ZERO; fft::work_len(n).unwrap()];
    fft::build_plan(n, &mut plan, &mut work).unwrap();
    let p = Plan::new(n, &plan).unwrap();
    assert_eq!(p.len(), n);
    if inverse {
        p.backward(x, &mut work);
    } else {
        p.forward(x, &mut work);
    }
}

#[test]
fn fft_matches_the_direct_sum_for_every_length_to_130_and_long_odd_ones() {
    // Every length to 130 covers each radix pass, the direct small-prime
    // passes (7 … 23) and Bluestein (29, 31, 37 …); the long ones are the
    // frame lengths of speech front ends (400, 512) and large primes.
    let long = [256, 360, 400, 512, 640, 1000, 1021, 1024, 1536, 2053];
    for n in (1..=130).chain(long) {
        for inverse in [false, true] {
            let x = complex_signal(n, n as u64 * 7 + inverse as u64);
            let want = direct_dft(&x, if inverse { 1.0 } else { -1.0 });
            let mut got = x.clone();
            transform(n, &mut got, inverse);
            let err = max_error(&got, &want);
            assert!(
                err < 2e-6 * (n as f64).log2().max(1.0),
                "n {n} inverse {inverse}: {err}"
            );
        }
    }
}

#[test]
fn real_fft_matches_the_direct_sum() {
    let long = [256, 400, 512, 1000, 1022, 2048, 2053];
    for n in (1..=130).chain(long) {
        let x = values(n, n as u64 + 5);
        let signal: Vec<Complex> = x.iter().map(|&v| Complex::new(v, 0.0)).collect();
        let want = direct_dft(&signal, -1.0);
        let mut plan = alloc::vec![0f32; fft::plan_len(n).unwrap()];
        let mut work = alloc::vec![Complex::ZERO; fft::work_len(n).unwrap()];
        fft::build_plan(n, &mut plan, &mut work).unwrap();
        let p = Plan::new(n, &plan).unwrap();
        let mut out = alloc::vec![Complex::ZERO; n];
        p.forward_real(|j| x[j], &mut out, &mut work);
        let half = n / 2 + 1;
        let err = max_error(&out[..half], &want[..half]);
        assert!(err < 2e-6 * (n as f64).log2().max(1.0), "n {n}: {err}");
    }
}

#[test]
fn plan_bounds_cover_every_shorter_length() {
    for n_max in [1, 2, 17, 29, 64, 100, 401] {
        for n in 1..=n_max {
            assert!(fft::plan_len(n).unwrap() <= fft::plan_len_bound(n_max).unwrap());
            assert!(fft::work_len(n).unwrap() <= fft::work_len_bound(n_max).unwrap());
        }
    }
}

fn plan_tensor(n: usize) -> Owned {
    let mut plan = alloc::vec![0f32; fft::plan_len(n).unwrap()];
    let mut work = alloc::vec![Complex::ZERO; fft::work_len(n).unwrap()];
    fft::build_plan(n, &mut plan, &mut work).unwrap();
    Owned::new(&[plan.len()], &plan)
}

fn scalar(v: i64) -> Owned {
    Owned::new::<i64>(&[], &[v])
}

/// `x` of dims `[outer, len, inner, c]`: the line at (o, i) as complex.
fn line(x: &[f32], dims: [usize; 4], o: usize, i: usize) -> Vec<Complex> {
    let [_, len, inner, c] = dims;
    (0..len)
        .map(|j| {
            let p = ((o * len + j) * inner + i) * c;
            Complex::new(x[p], if c == 2 { x[p + 1] } else { 0.0 })
        })
        .collect()
}

#[test]
fn dft_on_a_middle_axis_with_padding_truncation_and_one_side() {
    let dims = [2usize, 11, 3, 1];
    let x = values(dims.iter().product(), 3);
    let input = Owned::new(&dims, &x);
    for (length, onesided) in [
        (None, false),
        (Some(16), false),
        (Some(7), true),
        (Some(13), true),
    ] {
        let n = length.unwrap_or(11);
        let len_t = length.map(|l| scalar(l as i64));
        let axis = scalar(-3);
        let plan = plan_tensor(n);
        for with_plan in [false, true] {
            let mut ins = alloc::vec![Some(&input), len_t.as_ref(), Some(&axis)];
            if with_plan {
                ins.push(Some(&plan));
            }
            assert_eq!(ins.len() > DFT_PLAN_INPUT, with_plan);
            let k = Dft {
                inverse: false,
                onesided,
            };
            let y = run1(&k, &ins, DType::F32).unwrap();
            let bins = if onesided { n / 2 + 1 } else { n };
            assert_eq!(y.dims(), [2, bins, 3, 2]);
            let y = y.to::<f32>();
            for o in 0..2 {
                for i in 0..3 {
                    let mut l = line(&x, dims, o, i);
                    l.resize(n, Complex::ZERO);
                    let want = direct_dft(&l, -1.0);
                    let got = line(&y, [2, bins, 3, 2], o, i);
                    assert!(max_error(&got, &want[..bins]) < 1e-5, "n {n} {onesided}");
                }
            }
        }
    }
}

#[test]
fn inverse_dft_undoes_the_forward_one_and_irfft_restores_a_real_signal() {
    for n in [8usize, 9, 31, 100] {
        let x = values(n, n as u64);
        let input = Owned::new(&[1, n, 1], &x);
        let full = run1(
            &Dft {
                inverse: false,
                onesided: false,
            },
            &[Some(&input)],
            DType::F32,
        )
        .unwrap();
        let back = run1(
            &Dft {
                inverse: true,
                onesided: false,
            },
            &[Some(&full)],
            DType::F32,
        )
        .unwrap();
        for (j, v) in back.to::<f32>().chunks_exact(2).enumerate() {
            assert!(
                (v[0] - x[j]).abs() < 1e-5 && v[1].abs() < 1e-5,
                "n {n} at {j}"
            );
        }
        let half = run1(
            &Dft {
                inverse: false,
                onesided: true,
            },
            &[Some(&input)],
            DType::F32,
        )
        .unwrap();
        let len = scalar(n as i64);
        let real = run1(
            &Dft {
                inverse: true,
                onesided: true,
            },
            &[Some(&half), Some(&len)],
            DType::F32,
        )
        .unwrap();
        assert_eq!(real.dims(), [1, n, 1]);
        for (j, v) in real.to::<f32>().iter().enumerate() {
            assert!(
                (v - x[j]).abs() < 1e-5,
                "irfft n {n} at {j}: {v} vs {}",
                x[j]
            );
        }
    }
}

#[test]
fn stft_frames_windows_and_transforms() {
    let (batch, length, n, step) = (2usize, 1000usize, 400usize, 160usize);
    let x = values(batch * length, 11);
    let signal = Owned::new(&[batch, length, 1], &x);
    let w: Vec<f32> = (0..n)
        .map(|k| WindowKind::Hann.value(k, n as f64) as f32)
        .collect();
    let window = Owned::new(&[n], &w);
    let step_t = scalar(step as i64);
    let len_t = scalar(n as i64);
    let plan = plan_tensor(n);
    for with_plan in [false, true] {
        let mut ins = alloc::vec![Some(&signal), Some(&step_t), Some(&window), Some(&len_t)];
        if with_plan {
            ins.push(Some(&plan));
        }
        assert_eq!(ins.len() > STFT_PLAN_INPUT, with_plan);
        let y = run1(&Stft { onesided: true }, &ins, DType::F32).unwrap();
        // A `[batch, length]` signal is the same real signal.
        let flat = Owned::new(&[batch, length], &x);
        ins[0] = Some(&flat);
        let y2 = run1(&Stft { onesided: true }, &ins, DType::F32).unwrap();
        assert_eq!(y.to::<f32>(), y2.to::<f32>());
        // The full spectrum's upper half mirrors the lower one.
        let full = run1(&Stft { onesided: false }, &ins, DType::F32).unwrap();
        let full = full.to::<f32>();
        let half = y.to::<f32>();
        let first: Vec<f32> = full[..n * 2].to_vec();
        assert_eq!(&first[..(n / 2 + 1) * 2], &half[..(n / 2 + 1) * 2]);
        for k in n / 2 + 1..n {
            assert_eq!(first[2 * k], first[2 * (n - k)]);
            assert_eq!(first[2 * k + 1], -first[2 * (n - k) + 1]);
        }
        let frames = (length - n) / step + 1;
        let bins = n / 2 + 1;
        assert_eq!(y.dims(), [batch, frames, bins, 2]);
        let y = y.to::<f32>();
        for b in 0..batch {
            for f in 0..frames {
                let frame: Vec<Complex> = (0..n)
                    .map(|j| Complex::new(x[b * length + f * step + j] * w[j], 0.0))
                    .collect();
                let want = direct_dft(&frame, -1.0);
                let at = (b * frames + f) * bins * 2;
                let got: Vec<Complex> = y[at..at + bins * 2]
                    .chunks_exact(2)
                    .map(|c| Complex::new(c[0], c[1]))
                    .collect();
                assert!(max_error(&got, &want[..bins]) < 1e-5, "frame {b} {f}");
            }
        }
    }
}

#[test]
fn signal_ops_reject_bad_parameters_with_errors() {
    let signal = Owned::new(&[1, 10, 1], &values(10, 1));
    let step0 = scalar(0);
    let step1 = scalar(1);
    let too_long = scalar(11);
    let k = Stft { onesided: true };
    assert!(run1(&k, &[Some(&signal), Some(&step0)], DType::F32).is_err());
    assert!(
        run1(
            &k,
            &[Some(&signal), Some(&step1), None, Some(&too_long)],
            DType::F32
        )
        .is_err()
    );
    let wrong_plan = plan_tensor(7);
    let eight = scalar(8);
    let r = run1(
        &k,
        &[
            Some(&signal),
            Some(&step1),
            None,
            Some(&eight),
            Some(&wrong_plan),
        ],
        DType::F32,
    );
    assert!(matches!(r, Err(KernelError::Invalid { .. })), "{r:?}");
    let dft = Dft {
        inverse: false,
        onesided: false,
    };
    let last_axis = scalar(-1);
    assert!(run1(&dft, &[Some(&signal), None, Some(&last_axis)], DType::F32).is_err());
    let zero = scalar(0);
    assert!(run1(&dft, &[Some(&signal), Some(&zero)], DType::F32).is_err());
    let three = Owned::new(&[1, 10, 3], &values(30, 2));
    assert!(run1(&dft, &[Some(&three)], DType::F32).is_err());
}

#[test]
fn windows_match_their_formulas() {
    // Hann periodic of 4: sin²(πk/4) = 0, 0.5, 1, 0.5.
    let size = scalar(4);
    let hann = Window {
        kind: WindowKind::Hann,
        periodic: true,
        dtype: DType::F32,
    };
    let y = run1(&hann, &[Some(&size)], DType::F32).unwrap().to::<f32>();
    for (g, w) in y.iter().zip([0.0, 0.5, 1.0, 0.5]) {
        assert!((g - w).abs() < 1e-7, "{y:?}");
    }
    // Symmetric Hamming of 5 ends at 25/46 - 21/46 and peaks at 1; Blackman
    // as f64.
    let size = scalar(5);
    let hamming = Window {
        kind: WindowKind::Hamming,
        periodic: false,
        dtype: DType::F32,
    };
    let y = run1(&hamming, &[Some(&size)], DType::F32)
        .unwrap()
        .to::<f32>();
    assert!(
        (y[0] - 4.0 / 46.0).abs() < 1e-7 && (y[2] - 1.0).abs() < 1e-7,
        "{y:?}"
    );
    assert!((y[4] - y[0]).abs() < 1e-7);
    let blackman = Window {
        kind: WindowKind::Blackman,
        periodic: false,
        dtype: DType::F64,
    };
    let y = run1(&blackman, &[Some(&size)], DType::F64)
        .unwrap()
        .to::<f64>();
    assert!(y[0].abs() < 1e-12 && (y[2] - 1.0).abs() < 1e-12, "{y:?}");
    let negative = scalar(-1);
    assert!(run1(&hann, &[Some(&negative)], DType::F32).is_err());
}

#[test]
fn mel_filters_are_triangles_that_peak_at_one() {
    let ins = [
        scalar(8),
        scalar(256),
        scalar(16000),
        Owned::new::<f32>(&[], &[0.0]),
        Owned::new::<f32>(&[], &[8000.0]),
    ];
    let refs: Vec<Option<&Owned>> = ins.iter().map(Some).collect();
    let y = run1(&MelWeightMatrix { dtype: DType::F32 }, &refs, DType::F32).unwrap();
    assert_eq!(y.dims(), [129, 8]);
    let y = y.to::<f32>();
    for m in 0..8 {
        let col: Vec<f32> = (0..129).map(|b| y[b * 8 + m]).collect();
        let peak = col.iter().cloned().fold(0.0, f32::max);
        assert_eq!(peak, 1.0, "filter {m}: {col:?}");
        // Rises to the peak, then falls: one triangle.
        let top = col.iter().position(|&v| v == 1.0).unwrap();
        assert!(col[..=top].windows(2).all(|w| w[0] <= w[1]));
        assert!(col[top..].windows(2).all(|w| w[0] >= w[1]));
    }
    let above_nyquist = [
        scalar(8),
        scalar(256),
        scalar(16000),
        Owned::new::<f32>(&[], &[0.0]),
        Owned::new::<f32>(&[], &[20000.0]),
    ];
    let refs: Vec<Option<&Owned>> = above_nyquist.iter().map(Some).collect();
    assert!(run1(&MelWeightMatrix { dtype: DType::F32 }, &refs, DType::F32).is_err());
}
