use super::*;
use crate::ops::test_util::{Owned, run1};
use alloc::vec::Vec;

/// Long same-shape f32 operands run in chunks over the threads: every
/// thread count gives the result of the per-element arithmetic, bit
/// for bit (odd length: a short last chunk).
#[cfg(feature = "std")]
#[test]
fn same_shape_f32_over_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let n = 3 * crate::threads::PARALLEL_MIN_ELEMS + 5;
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 7.0).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 89) as f32 * 0.5 + 0.5).collect();
    let (a, b) = (Owned::new(&[n], &xs), Owned::new(&[n], &ys));
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
        let want: Vec<f32> = xs
            .iter()
            .zip(&ys)
            .map(|(&p, &q)| match op {
                BinaryOp::Add => p + q,
                BinaryOp::Sub => p - q,
                BinaryOp::Mul => p * q,
                _ => p / q,
            })
            .collect();
        for threads in [1, 3] {
            crate::threads::set_num_threads(threads);
            assert_eq!(
                bin(op, &a, &b).to::<f32>(),
                want,
                "{op:?} on {threads} threads"
            );
        }
    }
    crate::threads::set_num_threads(1);
}

/// Broadcast f32 operands (a per-channel scale `[1, C, 1, 1]`, a row
/// `[W]`, a column `[H, 1]` on the left) split by output rows over the
/// threads: every thread count gives the element-by-element result
/// bit for bit, including a split inside the broadcast axes.
#[cfg(feature = "std")]
#[test]
fn broadcast_f32_over_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (n, c, h, w) = (2, 13, 75, 71);
    let len = n * c * h * w;
    assert!(len > BROADCAST_PARALLEL_MIN);
    let xs: Vec<f32> = (0..len).map(|i| (i % 97) as f32 * 0.25 - 7.0).collect();
    let a = Owned::new(&[n, c, h, w], &xs);
    let per_channel: Vec<f32> = (0..c).map(|i| i as f32 * 0.75 - 2.0).collect();
    let row: Vec<f32> = (0..w).map(|i| i as f32 * 0.125 + 0.5).collect();
    let column: Vec<f32> = (0..h).map(|i| i as f32 * 0.5 - 3.0).collect();
    // (other operand, its dims, its index for output element (ni, ci, hi, wi), on the left)
    type Case<'c> = (
        &'c [f32],
        &'c [usize],
        fn(usize, usize, usize, usize) -> usize,
        bool,
    );
    let cases: [Case<'_>; 3] = [
        (&per_channel, &[1, c, 1, 1], |_, ci, _, _| ci, false),
        (&row, &[w], |_, _, _, wi| wi, false),
        (&column, &[h, 1], |_, _, hi, _| hi, true),
    ];
    for (vals, dims, at, left) in cases {
        let b = Owned::new(dims, vals);
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            let mut want = Vec::with_capacity(len);
            for (i, &x) in xs.iter().enumerate() {
                let (wi, hi, ci, ni) = (i % w, (i / w) % h, (i / (w * h)) % c, i / (w * h * c));
                let (p, q) = (x, vals[at(ni, ci, hi, wi)]);
                let (p, q) = if left { (q, p) } else { (p, q) };
                want.push(match op {
                    BinaryOp::Add => p + q,
                    BinaryOp::Sub => p - q,
                    BinaryOp::Mul => p * q,
                    _ => p / q,
                });
            }
            for threads in [1, 2, 3] {
                crate::threads::set_num_threads(threads);
                let got = if left {
                    bin(op, &b, &a)
                } else {
                    bin(op, &a, &b)
                };
                // Bit for bit (0/0 makes NaNs, which `==` never matches).
                let got: Vec<u32> = got.to::<f32>().iter().map(|v| v.to_bits()).collect();
                let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                let first = got.iter().zip(&want).position(|(g, w)| g != w);
                assert_eq!(first, None, "{op:?} {dims:?} on {threads} threads");
            }
        }
    }
    crate::threads::set_num_threads(1);
}

fn bin(op: BinaryOp, a: &Owned, b: &Owned) -> Owned {
    run1(
        &Binary { op },
        &[Some(a), Some(b)],
        op.output_dtype(a.dtype),
    )
    .unwrap()
}

/// Reference broadcast by explicit index arithmetic.
fn reference<A: Copy, B: Copy, O>(
    a: &[A],
    ad: &[usize],
    b: &[B],
    bd: &[usize],
    f: impl Fn(A, B) -> O,
) -> Vec<O> {
    let sa = Shape::new(ad).unwrap();
    let sb = Shape::new(bd).unwrap();
    let so = broadcast(&sa, &sb, "t").unwrap();
    let r = so.rank();
    let mut res = Vec::new();
    for i in 0..so.numel() {
        let mut rem = i;
        let mut idx = [0usize; 8];
        for d in (0..r).rev() {
            idx[d] = rem % so.dims()[d];
            rem /= so.dims()[d];
        }
        let off = |s: &Shape| {
            let lead = r - s.rank();
            let mut o = 0;
            for d in 0..s.rank() {
                let v = if s.dims()[d] == 1 { 0 } else { idx[d + lead] };
                o = o * s.dims()[d] + v;
            }
            o
        };
        res.push(f(a[off(&sa)], b[off(&sb)]));
    }
    res
}

#[test]
fn add_broadcast_shapes() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 5], &[3, 5]),
        (&[3, 5], &[]),
        (&[], &[7]),
        (&[2, 3, 5], &[5]),
        (&[2, 1, 5], &[3, 1]),
        (&[1, 3, 1, 7], &[2, 1, 4, 1]),
        (&[4, 1], &[1, 0]),
    ];
    for &(ad, bd) in cases {
        let na: usize = ad.iter().product();
        let nb: usize = bd.iter().product();
        let av: Vec<f32> = (0..na).map(|i| i as f32 * 0.5 - 1.0).collect();
        let bv: Vec<f32> = (0..nb).map(|i| i as f32 * 3.0 + 0.25).collect();
        let a = Owned::new(ad, &av);
        let b = Owned::new(bd, &bv);
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            let got = bin(op, &a, &b).to::<f32>();
            let want = reference(&av, ad, &bv, bd, |x, y| match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                _ => x / y,
            });
            assert_eq!(got, want, "{op:?} {ad:?} {bd:?}");
        }
        let got = bin(BinaryOp::Less, &a, &b).to::<u8>();
        assert_eq!(got, reference(&av, ad, &bv, bd, |x, y| (x < y) as u8));
    }
    assert!(
        run1(
            &Binary { op: BinaryOp::Add },
            &[
                Some(&Owned::new(&[3], &[1f32; 3])),
                Some(&Owned::new(&[4], &[1f32; 4]))
            ],
            DType::F32
        )
        .is_err()
    );
}

#[test]
fn integer_semantics() {
    // np.fmod / np.mod / np trunc division
    let a = Owned::new(&[4], &[-7i32, 7, -7, 7]);
    let b = Owned::new(&[4], &[3i32, -3, -3, 0]);
    assert_eq!(bin(BinaryOp::Div, &a, &b).to::<i32>(), [-2, -2, 2, 0]);
    assert_eq!(bin(BinaryOp::Mod, &a, &b).to::<i32>(), [2, -2, -1, 0]);
    assert_eq!(bin(BinaryOp::FMod, &a, &b).to::<i32>(), [-1, 1, -1, 0]);
    let a = Owned::new(&[3], &[i64::MAX, 5, -5]);
    let b = Owned::new(&[3], &[1i64, 2, 2]);
    assert_eq!(bin(BinaryOp::Add, &a, &b).to::<i64>(), [i64::MIN, 7, -3]);
    assert_eq!(bin(BinaryOp::Max, &a, &b).to::<i64>(), [i64::MAX, 5, 2]);
    assert_eq!(bin(BinaryOp::Pow, &a, &b).to::<i64>()[1..], [25, 25]);
    let a = Owned::new(&[3], &[1u8, 255, 16]);
    let b = Owned::new(&[3], &[1u8, 1, 9]);
    assert_eq!(bin(BinaryOp::BitShiftLeft, &a, &b).to::<u8>(), [2, 254, 0]);
    assert_eq!(bin(BinaryOp::BitShiftRight, &a, &b).to::<u8>(), [0, 127, 0]);
    assert_eq!(bin(BinaryOp::BitwiseXor, &a, &b).to::<u8>(), [0, 254, 25]);
    let a = Owned::new(&[2], &[-7.5f64, 7.5]);
    let b = Owned::new(&[1], &[2.0f64]);
    assert_eq!(bin(BinaryOp::Mod, &a, &b).to::<f64>(), [0.5, 1.5]);
    assert_eq!(bin(BinaryOp::FMod, &a, &b).to::<f64>(), [-1.5, 1.5]);
}

#[test]
fn pow_and_nan() {
    let a = Owned::new(&[5], &[1.5f32, -2.0, 0.0, 3.0, f32::NAN]);
    for e in [2.0f32, 0.5, 3.0, 1.0, -1.25] {
        let b = Owned::new(&[], &[e]);
        let got = bin(BinaryOp::Pow, &a, &b).to::<f32>();
        for (g, x) in got.iter().zip(a.to::<f32>()) {
            let w = x.powf(e);
            assert!(g == &w || (g.is_nan() && w.is_nan()), "{x}^{e}: {g} vs {w}");
        }
    }
    // float base, int exponent
    let b = Owned::new(&[5], &[2i64, 3, 1, -1, 0]);
    let got = bin(BinaryOp::Pow, &a, &b).to::<f32>();
    assert_eq!(&got[..4], &[2.25, -8.0, 0.0, 1.0 / 3.0]);
    assert_eq!(got[4], 1.0);
    let b = Owned::new(&[5], &[1.0f32, 1.0, f32::NAN, 2.0, 0.0]);
    let mx = bin(BinaryOp::Max, &a, &b).to::<f32>();
    assert_eq!(&mx[..2], &[1.5, 1.0]);
    assert!(mx[2].is_nan() && mx[4].is_nan());
    let eq = bin(BinaryOp::Equal, &a, &b).to::<u8>();
    assert_eq!(eq, [0, 0, 0, 0, 0]);
}

#[test]
fn half_and_bool() {
    let a = Owned::new(
        &[3],
        &[f16::from_f32(1.5), f16::from_f32(-2.0), f16::from_f32(4.0)],
    );
    let b = Owned::new(&[1], &[f16::from_f32(2.0)]);
    let got: Vec<f32> = bin(BinaryOp::Mul, &a, &b)
        .to::<f16>()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [3.0, -4.0, 8.0]);
    let p = Owned::boolean(&[2, 2], &[true, false, true, false]);
    let q = Owned::boolean(&[2, 1], &[true, false]);
    assert_eq!(bin(BinaryOp::And, &p, &q).to::<u8>(), [1, 0, 0, 0]);
    assert_eq!(bin(BinaryOp::Or, &p, &q).to::<u8>(), [1, 1, 1, 0]);
    assert_eq!(bin(BinaryOp::Xor, &p, &q).to::<u8>(), [0, 1, 1, 0]);
    assert_eq!(bin(BinaryOp::Equal, &p, &q).to::<u8>(), [1, 0, 0, 1]);
}

#[test]
fn variadic_ops() {
    let a = Owned::new(&[2, 3], &[1.0f32, 5.0, 3.0, -1.0, 0.0, 2.0]);
    let b = Owned::new(&[3], &[2.0f32, 2.0, 2.0]);
    let c = Owned::new(&[2, 1], &[0.5f32, 10.0]);
    let run = |op| {
        run1(
            &Variadic { op },
            &[Some(&a), Some(&b), Some(&c)],
            DType::F32,
        )
        .unwrap()
        .to::<f32>()
    };
    assert_eq!(run(VariadicOp::Sum), [3.5, 7.5, 5.5, 11.0, 12.0, 14.0]);
    assert_eq!(run(VariadicOp::Max), [2.0, 5.0, 3.0, 10.0, 10.0, 10.0]);
    assert_eq!(run(VariadicOp::Min), [0.5, 0.5, 0.5, -1.0, 0.0, 2.0]);
    let m = run(VariadicOp::Mean);
    assert!((m[0] - 3.5 / 3.0).abs() < 1e-6);
    let single = run1(
        &Variadic {
            op: VariadicOp::Max,
        },
        &[Some(&b)],
        DType::F32,
    )
    .unwrap();
    assert_eq!(single.to::<f32>(), [2.0, 2.0, 2.0]);
    let ints = Owned::new(&[2], &[3i64, -4]);
    let s = run1(
        &Variadic {
            op: VariadicOp::Sum,
        },
        &[Some(&ints), Some(&ints)],
        DType::I64,
    )
    .unwrap();
    assert_eq!(s.to::<i64>(), [6, -8]);
}
