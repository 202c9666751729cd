#![allow(clippy::excessive_precision)]
use super::*;
use crate::IntList;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

#[test]
fn batch_norm() {
    let x = rand_vec(2 * 3 * 4, 1);
    let sc = [0.5f32, 1.0, 2.0];
    let b = [0.1f32, -0.2, 0.3];
    let m = [0.0f32, 0.5, -0.5];
    let v = [1.0f32, 0.25, 4.0];
    let ins = [
        Some(t(&x, &[2, 3, 2, 2])),
        Some(t(&sc, &[3])),
        Some(t(&b, &[3])),
        Some(t(&m, &[3])),
        Some(t(&v, &[3])),
    ];
    let bn = BatchNormalization {
        epsilon: 1e-5,
        momentum: 0.9,
        training: false,
    };
    let out = run(&bn, &ins, 1).unwrap();
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, &xv)| {
            let c = (i / 4) % 3;
            (xv - m[c]) / (v[c] + 1e-5).sqrt() * sc[c] + b[c]
        })
        .collect();
    assert_close(&out[0].1, &want, 1e-6);
    assert!(run(&bn, &ins, 3).is_err());
    assert!(run(&bn, &ins[..4], 1).is_err());
}

#[test]
fn layer_norm_reference_literal() {
    // import numpy as np
    // x = np.array([[1, 2, 3, 4], [2, 2, 2, 6]], dtype=np.float32)
    // m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    // y = (x - m) / np.sqrt(v + 1e-5) * np.array([1, 2, 1, 0.5]) + 0.5
    // print(y.ravel(), m.ravel(), 1 / np.sqrt(v + 1e-5).ravel())
    // -> [-0.84163547, -0.39442366, 0.94721183, 1.17081773, -0.07734931, -0.65469861, -0.07734931, 1.36602396]
    //    [2.5 3.0] [0.8944236, 0.5773493]
    let x = [1f32, 2., 3., 4., 2., 2., 2., 6.];
    let sc = [1f32, 2., 1., 0.5];
    let b = [0.5f32; 4];
    let ln = LayerNormalization {
        axis: -1,
        epsilon: 1e-5,
    };
    let ins = [Some(t(&x, &[2, 4])), Some(t(&sc, &[4])), Some(t(&b, &[4]))];
    let out = run(&ln, &ins, 3).unwrap();
    assert_eq!(out[1].0, vec![2, 1]);
    assert_close(
        &out[0].1,
        &[
            -0.84163547,
            -0.39442366,
            0.94721183,
            1.17081773,
            -0.07734931,
            -0.65469861,
            -0.07734931,
            1.36602396,
        ],
        1e-5,
    );
    assert_close(&out[1].1, &[2.5, 3.0], 1e-6);
    assert_close(&out[2].1, &[0.8944236, 0.5773493], 1e-5);
}

#[test]
fn layer_norm_axis_and_broadcast() {
    let x = rand_vec(2 * 3 * 5, 4);
    let sc = rand_vec(15, 5);
    let ln = LayerNormalization {
        axis: 1,
        epsilon: 1e-3,
    };
    let out = run(
        &ln,
        &[Some(t(&x, &[2, 3, 5])), Some(t(&sc, &[3, 5])), None],
        1,
    )
    .unwrap();
    for r in 0..2 {
        let xr = &x[r * 15..(r + 1) * 15];
        let mean = xr.iter().sum::<f32>() / 15.0;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 15.0;
        let want: Vec<f32> = xr
            .iter()
            .zip(&sc)
            .map(|(v, s)| (v - mean) / (var + 1e-3).sqrt() * s)
            .collect();
        assert_close(&out[0].1[r * 15..(r + 1) * 15], &want, 1e-5);
    }
    // Scale [5] and B [1, 5] broadcast over the [3, 5] block.
    let s5 = rand_vec(5, 6);
    let b5 = rand_vec(5, 7);
    let out = run(
        &ln,
        &[
            Some(t(&x, &[2, 3, 5])),
            Some(t(&s5, &[5])),
            Some(t(&b5, &[1, 5])),
        ],
        1,
    )
    .unwrap();
    for r in 0..2 {
        let xr = &x[r * 15..(r + 1) * 15];
        let mean = xr.iter().sum::<f32>() / 15.0;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 15.0;
        let want: Vec<f32> = xr
            .iter()
            .enumerate()
            .map(|(i, v)| (v - mean) / (var + 1e-3).sqrt() * s5[i % 5] + b5[i % 5])
            .collect();
        assert_close(&out[0].1[r * 15..(r + 1) * 15], &want, 1e-5);
    }
    let bad = rand_vec(3, 6);
    assert!(
        run(
            &ln,
            &[Some(t(&x, &[2, 3, 5])), Some(t(&bad, &[3, 1])), None],
            1
        )
        .is_err()
    );
    assert!(
        run(
            &ln,
            &[Some(t(&x, &[2, 3, 5])), Some(t(&bad, &[3])), None],
            1
        )
        .is_err()
    );
}

#[test]
fn instance_norm() {
    let x = rand_vec(2 * 3 * 6, 7);
    let sc = [1f32, 2., 3.];
    let b = [0f32, 1., -1.];
    let op = InstanceNormalization { epsilon: 1e-5 };
    let out = run(
        &op,
        &[
            Some(t(&x, &[2, 3, 6])),
            Some(t(&sc, &[3])),
            Some(t(&b, &[3])),
        ],
        1,
    )
    .unwrap();
    for p in 0..6 {
        let xr = &x[p * 6..(p + 1) * 6];
        let mean = xr.iter().sum::<f32>() / 6.0;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 6.0;
        let want: Vec<f32> = xr
            .iter()
            .map(|v| (v - mean) / (var + 1e-5).sqrt() * sc[p % 3] + b[p % 3])
            .collect();
        assert_close(&out[0].1[p * 6..(p + 1) * 6], &want, 1e-5);
    }
}

/// Mean and biased variance in f64.
fn stats(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, var)
}

#[test]
fn batch_norm_training() {
    let (n, c, inner) = (3, 4, 5);
    let x: Vec<f32> = rand_vec(n * c * inner, 2)
        .iter()
        .map(|v| v * 3.0 + 1.0)
        .collect();
    let sc = [0.5f32, 1.0, 2.0, -1.0];
    let b = [0.1f32, -0.2, 0.3, 0.0];
    let m = [0.0f32, 0.5, -0.5, 2.0];
    let v = [1.0f32, 0.25, 4.0, 0.5];
    let ins = [
        Some(t(&x, &[n, c, inner])),
        Some(t(&sc, &[c])),
        Some(t(&b, &[c])),
        Some(t(&m, &[c])),
        Some(t(&v, &[c])),
    ];
    let bn = BatchNormalization {
        epsilon: 1e-2,
        momentum: 0.8,
        training: true,
    };
    let out = run(&bn, &ins, 3).unwrap();
    assert_eq!(out[1].0, vec![c]);
    let mut want = vec![0f32; x.len()];
    for ch in 0..c {
        let vals: Vec<f32> = (0..n)
            .flat_map(|i| x[(i * c + ch) * inner..(i * c + ch + 1) * inner].to_vec())
            .collect();
        let (bm, bv) = stats(&vals);
        for i in 0..n {
            for k in 0..inner {
                let at = (i * c + ch) * inner + k;
                want[at] = ((x[at] as f64 - bm) / (bv + 1e-2).sqrt() * sc[ch] as f64 + b[ch] as f64)
                    as f32;
            }
        }
        assert_close(
            &out[1].1[ch..ch + 1],
            &[(m[ch] as f64 * 0.8 + bm * 0.2) as f32],
            1e-6,
        );
        assert_close(
            &out[2].1[ch..ch + 1],
            &[(v[ch] as f64 * 0.8 + bv * 0.2) as f32],
            1e-6,
        );
    }
    assert_close(&out[0].1, &want, 1e-5);
    // Y alone is computed the same way.
    let out1 = run(&bn, &ins, 1).unwrap();
    assert_eq!(out1[0].1, out[0].1);
    assert!(run(&bn, &ins, 4).is_err());
}

#[test]
fn group_norm() {
    let (n, c, inner) = (2, 6, 5);
    let x = rand_vec(n * c * inner, 3);
    let sc = rand_vec(c, 4);
    let b = rand_vec(c, 5);
    for (groups, per_channel) in [(3, true), (2, false), (6, true), (1, false)] {
        let np = if per_channel { c } else { groups };
        let k = GroupNormalization {
            num_groups: groups,
            epsilon: 1e-3,
            per_channel,
        };
        let ins = [
            Some(t(&x, &[n, c, inner])),
            Some(t(&sc[..np], &[np])),
            Some(t(&b[..np], &[np])),
        ];
        let out = run(&k, &ins, 1).unwrap();
        let cpg = c / groups;
        let mut want = vec![0f32; x.len()];
        for i in 0..n {
            for g in 0..groups {
                let lo = (i * c + g * cpg) * inner;
                let hi = lo + cpg * inner;
                let (m, v) = stats(&x[lo..hi]);
                for at in lo..hi {
                    let ch = (at / inner) % c;
                    let p = if per_channel { ch } else { g };
                    want[at] = ((x[at] as f64 - m) / (v + 1e-3).sqrt() * sc[p] as f64 + b[p] as f64)
                        as f32;
                }
            }
        }
        assert_close(&out[0].1, &want, 1e-5);
        if groups == c {
            let inst = InstanceNormalization { epsilon: 1e-3 };
            let o2 = run(&inst, &ins, 1).unwrap();
            assert_close(&o2[0].1, &out[0].1, 1e-5);
        }
    }
    let k = GroupNormalization {
        num_groups: 4,
        epsilon: 1e-3,
        per_channel: true,
    };
    let ins = [
        Some(t(&x, &[n, c, inner])),
        Some(t(&sc, &[c])),
        Some(t(&b, &[c])),
    ];
    assert!(run(&k, &ins, 1).is_err());
    let k = GroupNormalization {
        num_groups: 3,
        epsilon: 1e-3,
        per_channel: false,
    };
    assert!(run(&k, &ins, 1).is_err());
}

#[test]
fn lrn() {
    let (n, c, h, w) = (2, 5, 3, 2);
    let x = rand_vec(n * c * h * w, 6);
    for size in [1, 2, 3, 4, 7] {
        let k = Lrn {
            size,
            alpha: 0.3,
            beta: 0.75,
            bias: 1.5,
        };
        let out = run(&k, &[Some(t(&x, &[n, c, h, w]))], 1).unwrap();
        let inner = h * w;
        let mut want = vec![0f32; x.len()];
        for (at, o) in want.iter_mut().enumerate() {
            let ch = (at / inner) % c;
            let base = at - ch * inner;
            let lo = ch as isize - ((size - 1) / 2) as isize;
            let hi = ch + (size - 1).div_ceil(2);
            let mut sq = 0f64;
            for i in lo.max(0) as usize..=hi.min(c - 1) {
                sq += (x[base + i * inner] as f64).powi(2);
            }
            *o = (x[at] as f64 / (1.5 + 0.3 / size as f64 * sq).powf(0.75)) as f32;
        }
        assert_close(&out[0].1, &want, 1e-5);
    }
    let k = Lrn {
        size: 0,
        alpha: 1.0,
        beta: 1.0,
        bias: 1.0,
    };
    assert!(run(&k, &[Some(t(&x, &[n, c, h, w]))], 1).is_err());
}

#[test]
fn lp_norm() {
    // onnx/backend/test/case/node/lpnormalization.py, export_l2normalization_axis_1:
    // [[3, 4], [6, 8]] -> [[0.6, 0.8], [0.6, 0.8]]
    let x = [3f32, 4., 6., 8.];
    let k = LpNormalization { axis: 1, p: 2 };
    let out = run(&k, &[Some(t(&x, &[2, 2]))], 1).unwrap();
    assert_close(&out[0].1, &[0.6, 0.8, 0.6, 0.8], 1e-6);
    let mut x = rand_vec(2 * 3 * 4, 7);
    // A zero slice along axis 1 gives zeros.
    for j in 0..3 {
        x[j * 4 + 2] = 0.0;
    }
    for p in [1u32, 2] {
        for axis in [-3i64, 1, 2] {
            let k = LpNormalization { axis, p };
            let out = run(&k, &[Some(t(&x, &[2, 3, 4]))], 1).unwrap();
            let a = axis.rem_euclid(3) as usize;
            let dims = [2, 3, 4];
            let strides = [12, 4, 1];
            let mut want = vec![0f32; 24];
            for (i, o) in want.iter_mut().enumerate() {
                let ci = (i / strides[a]) % dims[a];
                let first = i - ci * strides[a];
                let norm: f64 = (0..dims[a])
                    .map(|j| (x[first + j * strides[a]] as f64).abs().powi(p as i32))
                    .sum::<f64>()
                    .powf(1.0 / p as f64);
                *o = if norm == 0.0 {
                    0.0
                } else {
                    (x[i] as f64 / norm) as f32
                };
            }
            assert_close(&out[0].1, &want, 1e-6);
        }
    }
    let k = LpNormalization { axis: 1, p: 3 };
    assert!(run(&k, &[Some(t(&x, &[2, 3, 4]))], 1).is_err());
}

#[test]
fn mean_variance_norm() {
    let dims = [3usize, 2, 4, 3];
    let x: Vec<f32> = rand_vec(72, 8).iter().map(|v| v * 2.0 + 0.5).collect();
    for axes in [vec![0i64, 2, 3], vec![-1], vec![1, 2], vec![]] {
        let k = MeanVarianceNormalization {
            axes: IntList::new(&axes).unwrap(),
        };
        let out = run(&k, &[Some(t(&x, &dims))], 1).unwrap();
        let reduced: Vec<bool> = (0..4)
            .map(|a| axes.is_empty() || axes.iter().any(|&b| b.rem_euclid(4) as usize == a))
            .collect();
        let coords = |i: usize| [i / 24, (i / 12) % 2, (i / 3) % 4, i % 3];
        let key = |i: usize| {
            let c = coords(i);
            (0..4)
                .map(|a| if reduced[a] { 0 } else { c[a] })
                .collect::<Vec<_>>()
        };
        let mut want = vec![0f32; 72];
        for (i, o) in want.iter_mut().enumerate() {
            let group: Vec<f32> = (0..72)
                .filter(|&j| key(j) == key(i))
                .map(|j| x[j])
                .collect();
            let (m, v) = stats(&group);
            *o = ((x[i] as f64 - m) / (v.sqrt() + 1e-9)) as f32;
        }
        assert_close(&out[0].1, &want, 1e-5);
    }
    let k = MeanVarianceNormalization {
        axes: IntList::new(&[4]).unwrap(),
    };
    assert!(run(&k, &[Some(t(&x, &dims))], 1).is_err());
}
