//! Tests of the reductions, ArgMax/ArgMin and CumSum.
use super::*;
use crate::ops::test_util::{Owned, run1};
use alloc::vec::Vec;

fn reduce(x: &Owned, op: ReduceOp, axes: Option<&[i64]>, keepdims: bool) -> Owned {
    let a = axes.map(|a| Owned::new(&[a.len()], a));
    let k = Reduce {
        op,
        keepdims,
        noop_with_empty_axes: false,
    };
    run1(&k, &[Some(x), a.as_ref()], x.dtype).unwrap()
}

/// Reference: reduce a [2, 3, 4] tensor over a mask by brute force.
fn reference(data: &[f64], mask: [bool; 3], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let dims = [2usize, 3, 4];
    let od: Vec<usize> = (0..3).map(|i| if mask[i] { 1 } else { dims[i] }).collect();
    let mut res = Vec::new();
    for i in 0..od[0] {
        for j in 0..od[1] {
            for k in 0..od[2] {
                let mut vals = Vec::new();
                for a in 0..2 {
                    for b in 0..3 {
                        for c in 0..4 {
                            if (mask[0] || a == i) && (mask[1] || b == j) && (mask[2] || c == k) {
                                vals.push(data[a * 12 + b * 4 + c]);
                            }
                        }
                    }
                }
                res.push(f(&vals));
            }
        }
    }
    res
}

#[test]
#[allow(clippy::type_complexity)]
fn all_ops_all_axes() {
    let data: Vec<f64> = (0..24)
        .map(|v| ((v * 7) % 11) as f64 * 0.25 - 1.0)
        .collect();
    let x = Owned::new(&[2, 3, 4], &data);
    let ops: [(ReduceOp, fn(&[f64]) -> f64); 10] = [
        (ReduceOp::Sum, |v| v.iter().sum()),
        (ReduceOp::Mean, |v| v.iter().sum::<f64>() / v.len() as f64),
        (ReduceOp::Max, |v| {
            v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        }),
        (ReduceOp::Min, |v| {
            v.iter().cloned().fold(f64::INFINITY, f64::min)
        }),
        (ReduceOp::Prod, |v| v.iter().product()),
        (ReduceOp::L1, |v| v.iter().map(|a| a.abs()).sum()),
        (ReduceOp::L2, |v| {
            v.iter().map(|a| a * a).sum::<f64>().sqrt()
        }),
        (ReduceOp::LogSum, |v| v.iter().sum::<f64>().ln()),
        (ReduceOp::LogSumExp, |v| {
            v.iter().map(|a| a.exp()).sum::<f64>().ln()
        }),
        (ReduceOp::SumSquare, |v| v.iter().map(|a| a * a).sum()),
    ];
    let axes_cases: [(&[i64], [bool; 3]); 6] = [
        (&[0], [true, false, false]),
        (&[1], [false, true, false]),
        (&[-1], [false, false, true]),
        (&[0, 2], [true, false, true]),
        (&[1, 2], [false, true, true]),
        (&[], [true, true, true]),
    ];
    for (op, f) in ops {
        for (axes, mask) in axes_cases {
            let got = reduce(&x, op, Some(axes), true).to::<f64>();
            let want = reference(&data, mask, f);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    g == w
                        || (g - w).abs() <= 1e-12 * w.abs().max(1.0)
                        || (g.is_nan() && w.is_nan()),
                    "{op:?} {axes:?}: {g} vs {w}"
                );
            }
        }
    }
    // Long contiguous runs (eight partial sums and a tail) and strided
    // ones, f32 data.
    let long: Vec<f32> = (0..3 * 37)
        .map(|v| ((v * 5) % 13) as f32 * 0.5 - 3.0)
        .collect();
    let xl = Owned::new(&[3, 37], &long);
    for (op, f) in &ops {
        if !matches!(
            op,
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::L1 | ReduceOp::L2 | ReduceOp::SumSquare
        ) {
            continue;
        }
        for (axis, outer, inner, stride_o, stride_i) in [(1i64, 3, 37, 37, 1), (0, 37, 3, 1, 37)] {
            let got = reduce(&xl, *op, Some(&[axis]), false).to::<f32>();
            for (o, g) in got.iter().enumerate().take(outer) {
                let vals: Vec<f64> = (0..inner)
                    .map(|i| long[o * stride_o + i * stride_i] as f64)
                    .collect();
                let w = f(&vals) as f32;
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{op:?} {axis}: {g} vs {w}"
                );
            }
        }
    }
    let y = reduce(&x, ReduceOp::Sum, Some(&[1]), false);
    assert_eq!(y.dims(), &[2, 4]);
    let y = reduce(&x, ReduceOp::Sum, None, false);
    assert_eq!(y.dims(), &[] as &[usize]);
    let noop = Reduce {
        op: ReduceOp::Sum,
        keepdims: true,
        noop_with_empty_axes: true,
    };
    let y = run1(&noop, &[Some(&x), None], DType::F64).unwrap();
    assert_eq!(y.to::<f64>(), data);
}

/// The f32 sum of contiguous runs: every vector width gives the
/// portable loop's sums bit for bit, within the error bound of its
/// summation order from the f64 sum, over run lengths around the 64
/// partial sums and their tails; a NaN or infinity in a run shows in
/// its sum; and the kernel takes axes that end at the last one.
#[test]
fn f32_sums_of_runs() {
    let lens: Vec<usize> = (1..=200).chain([255, 480, 961]).collect();
    for &count in &lens {
        let runs = 3;
        let mut xs: Vec<f32> = (0..runs * count)
            .map(|i| ((i * 37 + count) % 101) as f32 * 0.173 - 8.1)
            .collect();
        if count > 7 {
            xs[count + 7] = f32::NAN;
            xs[2 * count + 3] = f32::INFINITY;
        }
        for kind in [RunSum::Sum, RunSum::Mean, RunSum::SumSquare, RunSum::L2] {
            let mut want = vec![0f32; runs];
            sum_runs(&xs, count, kind, &mut want);
            #[cfg(target_arch = "x86_64")]
            {
                let isa = crate::ops::gemm::best_isa();
                let mut got = vec![0f32; runs];
                if isa == crate::ops::gemm::Isa::Avx512 {
                    // SAFETY: AVX-512F was detected.
                    unsafe { sum_runs_avx512(&xs, count, kind, &mut got) };
                    assert_eq!(bits(&got), bits(&want), "avx512 {count}");
                }
                if isa != crate::ops::gemm::Isa::Scalar {
                    // SAFETY: AVX2 and FMA were detected.
                    unsafe { sum_runs_avx2(&xs, count, kind, &mut got) };
                    assert_eq!(bits(&got), bits(&want), "avx2 {count}");
                }
            }
            for (r, &w) in want.iter().enumerate() {
                let run = &xs[r * count..(r + 1) * count];
                if run.iter().any(|v| !v.is_finite()) {
                    assert!(!w.is_finite(), "{count} run {r}: {w}");
                    continue;
                }
                let square = matches!(kind, RunSum::SumSquare | RunSum::L2);
                let term = |v: f32| {
                    let v = f64::from(v);
                    if square { v * v } else { v }
                };
                let exact: f64 = run.iter().map(|&v| term(v)).sum();
                let magnitude: f64 = run.iter().map(|&v| term(v).abs()).sum();
                // Each addition rounds once: at most count / 64 + 3
                // into a partial sum, six pairwise levels, 15 leftovers
                // (and one more rounding for each square).
                let adds = (count / PARTIAL_SUMS + 3 + 6 + 15 + square as usize) as f64;
                let mut bound = adds * f64::from(f32::EPSILON) * magnitude;
                let mut exact = exact;
                match kind {
                    RunSum::Mean => {
                        exact /= count as f64;
                        bound = bound / count as f64 + f64::from(f32::EPSILON) * exact.abs();
                    }
                    RunSum::L2 => {
                        // √ halves the relative error, then rounds once.
                        let root = exact.sqrt();
                        bound = bound / (2.0 * root.max(f64::MIN_POSITIVE))
                            + f64::from(f32::EPSILON) * root;
                        exact = root;
                    }
                    RunSum::Sum | RunSum::SumSquare => {}
                }
                assert!(
                    (f64::from(w) - exact).abs() <= bound,
                    "{count} {kind:?}: {w} vs {exact}"
                );
            }
        }
    }
    // Through the kernel: [2, 3, 5, 7] reduced over several axis sets
    // against the f64 kernel path on the same values.
    let data: Vec<f32> = (0..210)
        .map(|i| ((i * 11) % 23) as f32 * 0.37 - 4.0)
        .collect();
    let x32 = Owned::new(&[2, 3, 5, 7], &data);
    let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
    let x64 = Owned::new(&[2, 3, 5, 7], &wide);
    // Trailing blocks (runs), blocks inside (rows), and a split set (the
    // general path).
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::SumSquare,
        ReduceOp::L2,
    ];
    for op in ops {
        for axes in [
            &[2i64, 3][..],
            &[1, 2, -1],
            &[3],
            &[1],
            &[0],
            &[1, 2],
            &[0, 1],
            &[0, 2],
        ] {
            let got = reduce(&x32, op, Some(axes), false).to::<f32>();
            let want = reduce(&x64, op, Some(axes), false).to::<f64>();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{op:?} {axes:?}"
                );
            }
        }
    }
}

/// Sums of runs split over the threads (an input of 35K floats, 37
/// outputs, so the last thread gets fewer): the same bits on 1, 2 and 3
/// threads, close to the f64 path.
#[cfg(feature = "std")]
#[test]
fn f32_sums_of_runs_over_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dims = [1, 37, 33, 29];
    let len: usize = dims.iter().product();
    assert!(len >= crate::threads::PARALLEL_MIN_ELEMS);
    let data: Vec<f32> = (0..len)
        .map(|i| ((i * 7) % 31) as f32 * 0.21 - 3.0)
        .collect();
    let x32 = Owned::new(&dims, &data);
    let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
    let want = reduce(
        &Owned::new(&dims, &wide),
        ReduceOp::Mean,
        Some(&[2, 3]),
        true,
    )
    .to::<f64>();
    let mut first: Option<Vec<u32>> = None;
    for threads in [1, 2, 3] {
        crate::threads::set_num_threads(threads);
        let got = reduce(&x32, ReduceOp::Mean, Some(&[2, 3]), true).to::<f32>();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{threads} threads"
            );
        }
        match &first {
            None => first = Some(bits(&got)),
            Some(one) => assert_eq!(&bits(&got), one, "{threads} threads"),
        }
    }
    crate::threads::set_num_threads(1);
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn ints_and_f32() {
    let x = Owned::new(&[2, 3], &[1i64, -2, 3, i64::MAX, 1, 0]);
    assert_eq!(
        reduce(&x, ReduceOp::Sum, Some(&[1]), false).to::<i64>(),
        [2, i64::MIN]
    );
    assert_eq!(
        reduce(&x, ReduceOp::Max, Some(&[0]), false).to::<i64>(),
        [i64::MAX, 1, 3]
    );
    assert_eq!(
        reduce(&x, ReduceOp::Prod, Some(&[1]), false).to::<i64>(),
        [-6, 0]
    );
    let x = Owned::new(&[3], &[1i32, 2, 2]);
    assert_eq!(reduce(&x, ReduceOp::Mean, None, false).to::<i32>(), [1]);
    let xf: Vec<f32> = (0..1001).map(|v| v as f32 * 0.001).collect();
    let x = Owned::new(&[7, 11, 13], &xf);
    let y = reduce(&x, ReduceOp::Mean, Some(&[-1]), true).to::<f32>();
    let want: f32 = xf[..13].iter().sum::<f32>() / 13.0;
    assert!((y[0] - want).abs() < 1e-6);
    let nan = Owned::new(&[3], &[1.0f32, f32::NAN, 3.0]);
    assert!(reduce(&nan, ReduceOp::Max, None, false).to::<f32>()[0].is_nan());
    let big = Owned::new(&[2], &[1000.0f32, 1000.0]);
    let lse = reduce(&big, ReduceOp::LogSumExp, None, false).to::<f32>()[0];
    assert!((lse - (1000.0 + 2f32.ln())).abs() < 1e-3);
}

#[test]
fn argmax_argmin() {
    // np.argmax(x, axis=1) with ties
    let x = Owned::new(
        &[2, 4],
        &[1.0f32, 3.0, 3.0, 2.0, 5.0, f32::NAN, 7.0, f32::NAN],
    );
    let run = |k: &dyn Kernel| run1_dyn(k, &x);
    let am = ArgMax {
        axis: 1,
        keepdims: false,
        select_last_index: false,
    };
    assert_eq!(run(&am), [1, 1]);
    let am = ArgMax {
        axis: -1,
        keepdims: true,
        select_last_index: true,
    };
    assert_eq!(run(&am), [2, 1]);
    let am = ArgMin {
        axis: 0,
        keepdims: false,
        select_last_index: false,
    };
    assert_eq!(run(&am), [0, 1, 0, 1]);
    let xi = Owned::new(&[3, 1], &[4i32, -1, 9]);
    let y = run1(
        &ArgMin {
            axis: 0,
            keepdims: true,
            select_last_index: false,
        },
        &[Some(&xi)],
        DType::I64,
    )
    .unwrap();
    assert_eq!((y.dims(), y.to::<i64>()), (&[1usize, 1][..], [1].to_vec()));
}

fn run1_dyn(k: &dyn Kernel, x: &Owned) -> Vec<i64> {
    struct W<'a>(&'a dyn Kernel);
    impl Kernel for W<'_> {
        fn infer(&self, i: &[Option<TensorRef<'_>>], o: &mut [Shape]) -> Result<(), KernelError> {
            self.0.infer(i, o)
        }
        fn run(
            &self,
            i: &[Option<TensorRef<'_>>],
            o: &mut [TensorMut<'_>],
            s: &mut [u8],
        ) -> Result<(), KernelError> {
            self.0.run(i, o, s)
        }
    }
    run1(&W(k), &[Some(x)], DType::I64).unwrap().to::<i64>()
}

#[test]
fn cumsum_modes() {
    // np.cumsum([[1,2,3],[4,5,6]], axis=...)
    let x = Owned::new(&[2, 3], &[1.0f64, 2., 3., 4., 5., 6.]);
    let run = |axis: i64, exclusive, reverse| {
        let a = Owned::new(&[], &[axis]);
        run1(
            &CumSum {
                exclusive,
                reverse,
                product: false,
            },
            &[Some(&x), Some(&a)],
            DType::F64,
        )
        .unwrap()
        .to::<f64>()
    };
    assert_eq!(run(1, false, false), [1., 3., 6., 4., 9., 15.]);
    assert_eq!(run(0, false, false), [1., 2., 3., 5., 7., 9.]);
    assert_eq!(run(-1, true, false), [0., 1., 3., 0., 4., 9.]);
    assert_eq!(run(1, false, true), [6., 5., 3., 15., 11., 6.]);
    assert_eq!(run(1, true, true), [5., 3., 0., 11., 6., 0.]);
    assert_eq!(run(0, true, true), [4., 5., 6., 0., 0., 0.]);
    let xi = Owned::new(&[4], &[1i32, 2, 3, 4]);
    let a = Owned::new(&[1], &[0i32]);
    let y = run1(
        &CumSum {
            exclusive: false,
            reverse: false,
            product: false,
        },
        &[Some(&xi), Some(&a)],
        DType::I32,
    );
    assert_eq!(y.unwrap().to::<i32>(), [1, 3, 6, 10]);
    // CumProd, exclusive and reversed.
    let prod = |exclusive, reverse| {
        run1(
            &CumSum {
                exclusive,
                reverse,
                product: true,
            },
            &[Some(&xi), Some(&a)],
            DType::I32,
        )
        .unwrap()
        .to::<i32>()
    };
    assert_eq!(prod(false, false), [1, 2, 6, 24]);
    assert_eq!(prod(true, false), [1, 1, 2, 6]);
    assert_eq!(prod(false, true), [24, 24, 12, 4]);
    assert_eq!(prod(true, true), [24, 12, 4, 1]);
}
