//! Tests of `GridSample` against a direct (non-separable) scalar reference
//! and against PyTorch values of the ONNX backend test cases.
use alloc::vec::Vec;

use super::grid_sample::{GridPadding, GridSample, GridSampleMode};
use crate::dtype::DType;
use crate::ops::test_util::{Owned, run1};

/// Deterministic pseudo-random multiples of 1/64 in `[lo, hi)`.
fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((s >> 33) % 4096) as f32 / 4096.0;
            lo + (u * (hi - lo) * 64.0).floor() / 64.0
        })
        .collect()
}

/// The ONNX reference's `_gs_reflect` (which divides by zero for a
/// single cell with `align_corners`; that cell is then the only choice).
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        lo
    } else if x < lo {
        let dx = lo - x;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 { hi - r } else { lo + r }
    } else {
        x
    }
}

fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Direct reference: the sum over every tap combination of the product of
/// the per-dim weights times the (padded) pixel.
fn reference(k: &GridSample, x: &[f32], xd: &[usize], grid: &[f32], gd: &[usize]) -> Vec<f32> {
    let r = xd.len() - 2;
    let (n, c) = (xd[0], xd[1]);
    let sp = &xd[2..];
    let plane: usize = sp.iter().product();
    let points: usize = gd[1..=r].iter().product();
    let (lo, hi): (Vec<f64>, Vec<f64>) = sp
        .iter()
        .map(|&d| {
            if k.align_corners {
                (0.0, d as f64 - 1.0)
            } else {
                (-0.5, d as f64 - 0.5)
            }
        })
        .unzip();
    // Index of the pixel at integer position `i`, None for a zero.
    let pixel = |idx: &[i64]| -> Option<usize> {
        let mut off = 0;
        for a in 0..r {
            let d = sp[a] as i64;
            let j = match k.padding {
                GridPadding::Zeros if idx[a] < 0 || idx[a] >= d => return None,
                GridPadding::Zeros => idx[a],
                GridPadding::Border => idx[a].clamp(0, d - 1),
                GridPadding::Reflection => reflect(idx[a] as f64, lo[a], hi[a]) as i64,
            };
            off = off * sp[a] + j as usize;
        }
        Some(off)
    };
    let mut y = alloc::vec![0f32; n * c * points];
    for b in 0..n {
        for p in 0..points {
            let g = &grid[(b * points + p) * r..(b * points + p + 1) * r];
            let mut taps: Vec<Vec<(i64, f64)>> = Vec::new();
            for a in 0..r {
                let (v, d) = (g[r - 1 - a] as f64, sp[a] as f64);
                let mut x = if k.align_corners {
                    (v + 1.0) / 2.0 * (d - 1.0)
                } else {
                    ((v + 1.0) * d - 1.0) / 2.0
                };
                if k.mode == GridSampleMode::Nearest {
                    x = x.round_ties_even();
                }
                if x < lo[a] || x > hi[a] {
                    match k.padding {
                        GridPadding::Zeros => {}
                        GridPadding::Border => x = x.clamp(0.0, d - 1.0),
                        GridPadding::Reflection => x = reflect(x, lo[a], hi[a]),
                    }
                }
                let f = x.floor();
                let t = x - f;
                taps.push(match k.mode {
                    GridSampleMode::Nearest => alloc::vec![(x as i64, 1.0)],
                    GridSampleMode::Linear => alloc::vec![(f as i64, 1.0 - t), (f as i64 + 1, t)],
                    GridSampleMode::Cubic => {
                        let w = cubic(t);
                        (0..4).map(|j| (f as i64 + j as i64 - 1, w[j])).collect()
                    }
                });
            }
            let nt = taps[0].len();
            for ch in 0..c {
                let src = &x[(b * c + ch) * plane..(b * c + ch + 1) * plane];
                let mut acc = 0f64;
                for combo in 0..nt.pow(r as u32) {
                    let (mut w, mut idx, mut m) = (1.0, alloc::vec![0i64; r], combo);
                    for a in (0..r).rev() {
                        let (i, wa) = taps[a][m % nt];
                        m /= nt;
                        w *= wa;
                        idx[a] = i;
                    }
                    if let Some(o) = pixel(&idx) {
                        acc += w * src[o] as f64;
                    }
                }
                y[(b * c + ch) * points + p] = acc as f32;
            }
        }
    }
    y
}

const MODES: [GridSampleMode; 3] = [
    GridSampleMode::Nearest,
    GridSampleMode::Linear,
    GridSampleMode::Cubic,
];
const PADDINGS: [GridPadding; 3] = [
    GridPadding::Zeros,
    GridPadding::Border,
    GridPadding::Reflection,
];

#[test]
fn grid_sample_matches_a_reference_in_1_2_and_3_d() {
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[1, 2, 5], &[1, 7, 1]),
        (&[1, 2, 4, 5], &[1, 3, 4, 2]),
        (&[2, 1, 3, 1], &[2, 5, 2, 2]),
        (&[2, 1, 3, 2, 4], &[2, 2, 3, 2, 3]),
    ];
    for (si, &(xd, gd)) in shapes.iter().enumerate() {
        let x = values(xd.iter().product(), si as u64 + 1, -4.0, 4.0);
        let g = values(gd.iter().product(), si as u64 + 11, -1.6, 1.6);
        let (xt, gt) = (Owned::new(xd, &x), Owned::new(gd, &g));
        for mode in MODES {
            for padding in PADDINGS {
                for align_corners in [false, true] {
                    let k = GridSample {
                        mode,
                        padding,
                        align_corners,
                    };
                    let y = run1(&k, &[Some(&xt), Some(&gt)], DType::F32).unwrap();
                    let want = reference(&k, &x, xd, &g, gd);
                    let mut dims = xd[..2].to_vec();
                    dims.extend_from_slice(&gd[1..gd.len() - 1]);
                    assert_eq!(y.dims(), &dims[..]);
                    for (i, (a, b)) in y.to::<f32>().iter().zip(&want).enumerate() {
                        assert!(
                            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                            "{xd:?} {k:?} at {i}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}

fn pytorch_case(k: GridSample, xd: &[usize], x: &[f32], gd: &[usize], g: &[f32], want: &[f32]) {
    let y = run1(
        &k,
        &[Some(&Owned::new(xd, x)), Some(&Owned::new(gd, g))],
        DType::F32,
    )
    .unwrap();
    for (i, (a, b)) in y.to::<f32>().iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
            "{k:?} at {i}: {a} vs {b}"
        );
    }
}

#[test]
fn grid_sample_matches_pytorch() {
    let x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    let k = |mode, padding, align_corners| GridSample {
        mode,
        padding,
        align_corners,
    };
    let g = [
        -1.0, -1.0, -0.5, -0.5, -0.2, -0.2, 0.0, 0.0, 0.0, 0.0, -0.2, -0.2, 0.5, 0.5, 1.0, 1.0,
    ];
    pytorch_case(
        k(GridSampleMode::Cubic, GridPadding::Zeros, false),
        &[1, 1, 3, 2],
        &x,
        &[1, 2, 4, 2],
        &g,
        &[
            -0.1406, 0.3828, 1.7556, 2.9688, 2.9688, 1.7556, 5.1445, 1.3906,
        ],
    );
    let g = [
        -10.0, -10.0, -5.0, -5.0, -0.2, -0.2, 10.0, 10.0, 10.0, 10.0, -0.2, -0.2, 5.0, 5.0, 10.0,
        10.0,
    ];
    pytorch_case(
        k(GridSampleMode::Linear, GridPadding::Reflection, false),
        &[1, 1, 3, 2],
        &x,
        &[1, 2, 4, 2],
        &g,
        &[2.5, 0.0, 1.7, 2.5, 2.5, 1.7, 5.0, 2.5],
    );
    let g = [
        -1.0, -0.8, -0.6, -0.5, -0.1, -0.2, 0.7, 0.0, 0.0, 0.4, 0.2, -0.2, -0.3, 0.5, -1.0, 1.0,
    ];
    pytorch_case(
        k(GridSampleMode::Nearest, GridPadding::Zeros, false),
        &[1, 1, 3, 2],
        &x,
        &[1, 2, 4, 2],
        &g,
        &[0.0, 0.0, 2.0, 3.0, 4.0, 3.0, 4.0, 4.0],
    );
    let x3: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let g3 = [
        -1.0, -1.0, -1.0, -1.0, -0.5, 0.3, -0.5, -0.5, -0.5, 1.0, -0.6, -1.0, -0.2, -0.2, -0.2,
        0.4, 0.2, 0.6, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 1.0, 0.0, -0.2, -0.2,
        -0.2, 1.0, 0.4, -0.2, 0.5, 0.5, 0.5, -1.0, -0.8, 0.8, 1.0, 1.0, 1.0, 0.4, 0.6, -0.3,
    ];
    pytorch_case(
        k(GridSampleMode::Linear, GridPadding::Zeros, false),
        &[1, 1, 3, 2, 2],
        &x3,
        &[1, 2, 4, 2, 3],
        &g3,
        &[
            0.125, 3.4, 2.0, 0.45, 4.7, 10.9, 6.5, 3.0, 6.5, 1.75, 4.7, 3.3, 11.0, 2.52, 1.5, 5.49,
        ],
    );
}

#[test]
fn grid_sample_other_dtypes_and_errors() {
    let (xd, gd) = ([1usize, 2, 3, 4], [1usize, 2, 3, 2]);
    let x = values(24, 5, -2.0, 2.0);
    let g = values(12, 6, -1.2, 1.2);
    let k = GridSample {
        mode: GridSampleMode::Cubic,
        padding: GridPadding::Border,
        align_corners: true,
    };
    let want = run1(
        &k,
        &[Some(&Owned::new(&xd, &x)), Some(&Owned::new(&gd, &g))],
        DType::F32,
    )
    .unwrap()
    .to::<f32>();
    // f64 data with an f32 grid.
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let y = run1(
        &k,
        &[Some(&Owned::new(&xd, &x64)), Some(&Owned::new(&gd, &g))],
        DType::F64,
    )
    .unwrap();
    for (a, b) in y.to::<f64>().iter().zip(&want) {
        assert!((a - *b as f64).abs() < 1e-5);
    }
    // f16 data with an f64 grid (values exact in f16).
    let x16: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
    let g64: Vec<f64> = g.iter().map(|&v| v as f64).collect();
    let y = run1(
        &k,
        &[Some(&Owned::new(&xd, &x16)), Some(&Owned::new(&gd, &g64))],
        DType::F16,
    )
    .unwrap();
    for (a, b) in y.to::<half::f16>().iter().zip(&want) {
        assert!((a.to_f32() - b).abs() < 1e-2 * (1.0 + b.abs()));
    }
    // Shape errors: grid rank, last dim, batch; integer data.
    let xt = Owned::new(&xd, &x);
    for bad in [&[1usize, 6, 2][..], &[1, 2, 3, 3], &[2, 1, 3, 2]] {
        let gt = Owned::new(bad, &alloc::vec![0f32; bad.iter().product()]);
        assert!(
            run1(&k, &[Some(&xt), Some(&gt)], DType::F32).is_err(),
            "{bad:?}"
        );
    }
    let xi = Owned::new(&xd, &[0i32; 24]);
    let gt = Owned::new(&gd, &g);
    assert!(run1(&k, &[Some(&xi), Some(&gt)], DType::I32).is_err());
}
