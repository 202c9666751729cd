//! The decoder kernels against plain restatements of their definitions,
//! and the key/value cache's behaviour across calls.
use super::gelu_gate::gelu_f16;
use super::*;
use crate::DType;
use crate::kernel::Kernel;
use crate::ops::test_util::rand_vec as values;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

fn t<'a, T: bytemuck::Pod>(d: &'a [T], dtype: DType, s: &[usize]) -> Option<TensorRef<'a>> {
    Some(TensorRef {
        dtype,
        shape: Shape::new(s).unwrap(),
        data: bytemuck::cast_slice(d),
    })
}

/// Runs `k` into fresh f32 outputs (or fails with its error).
fn run(
    k: &dyn Kernel,
    ins: &[Option<TensorRef<'_>>],
    n_out: usize,
) -> Result<Vec<Vec<f32>>, crate::KernelError> {
    let mut shapes = vec![Shape::SCALAR; n_out];
    k.infer(ins, &mut shapes)?;
    let mut bufs: Vec<Vec<f32>> = shapes.iter().map(|s| vec![0f32; s.numel()]).collect();
    run_into(k, ins, &mut bufs, &shapes)?;
    Ok(bufs)
}

fn run_into(
    k: &dyn Kernel,
    ins: &[Option<TensorRef<'_>>],
    bufs: &mut [Vec<f32>],
    shapes: &[Shape],
) -> Result<(), crate::KernelError> {
    let mut scratch = vec![0u8; k.scratch_bytes(ins, shapes)];
    let mut outs: Vec<TensorMut<'_>> = bufs
        .iter_mut()
        .zip(shapes)
        .map(|(b, s)| TensorMut {
            dtype: DType::F32,
            shape: *s,
            data: bytemuck::cast_slice_mut(b),
        })
        .collect();
    k.run(ins, &mut outs, &mut scratch)
}

#[test]
fn rms_norm_scales_each_row_to_unit_mean_square_then_weights() {
    let (rows, d) = (3, 37);
    let x: Vec<f32> = values(rows * d, 1).iter().map(|v| v * 50.0).collect();
    let w = values(d, 2);
    let y = &run(
        &RmsNorm { eps: 1e-6 },
        &[t(&x, DType::F32, &[rows, d]), t(&w, DType::F32, &[d])],
        1,
    )
    .unwrap()[0];
    for r in 0..rows {
        let x = &x[r * d..][..d];
        let ms = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / d as f64;
        let scale = 1.0 / (ms + 1e-6).sqrt();
        for i in 0..d {
            let want = f64::from(x[i]) * scale * f64::from(w[i]);
            assert!((f64::from(y[r * d + i]) - want).abs() <= 1e-5 * (1.0 + want.abs()));
        }
    }
    assert!(
        run(
            &RmsNorm { eps: 1e-6 },
            &[t(&x, DType::F32, &[rows, d]), t(&w[..5], DType::F32, &[5])],
            1
        )
        .is_err()
    );
}

#[test]
fn rope_rotates_the_halves_by_position_times_frequency() {
    let (n, heads, head, dims) = (3, 2, 10, 8);
    let x = values(n * heads * head, 3);
    let pos = [5i64];
    let k = RopeHalves { base: 100.0, dims };
    let y = &run(
        &k,
        &[
            t(&x, DType::F32, &[n, heads, head]),
            t(&pos, DType::I64, &[1]),
        ],
        1,
    )
    .unwrap()[0];
    for tok in 0..n {
        for h in 0..heads {
            let at = (tok * heads + h) * head;
            for i in 0..dims / 2 {
                let angle = (5 + tok) as f64 * 100f64.powf(-2.0 * i as f64 / dims as f64);
                let (a, b) = (f64::from(x[at + i]), f64::from(x[at + i + dims / 2]));
                let want = [
                    a * angle.cos() - b * angle.sin(),
                    a * angle.sin() + b * angle.cos(),
                ];
                for (got, want) in [y[at + i], y[at + i + dims / 2]].iter().zip(want) {
                    assert!((f64::from(*got) - want).abs() < 1e-5, "{tok} {h} {i}");
                }
            }
            // Past the rotated width values are copied.
            assert_eq!(y[at + dims..at + head], x[at + dims..at + head]);
        }
    }
    let neg = [-1i64];
    assert!(
        run(
            &k,
            &[
                t(&x, DType::F32, &[n, heads, head]),
                t(&neg, DType::I64, &[1])
            ],
            1
        )
        .is_err()
    );
}

#[test]
fn gelu_gate_is_the_f16_tabled_tanh_gelu_times_the_values() {
    let g: Vec<f32> = values(101, 4).iter().map(|v| v * 12.0).collect();
    let u = values(101, 5);
    let y = &run(
        &GeluGate,
        &[t(&g, DType::F32, &[101]), t(&u, DType::F32, &[101])],
        1,
    )
    .unwrap()[0];
    for ((&y, &g), &u) in y.iter().zip(&g).zip(&u) {
        let x = f64::from(g);
        let exact = 0.5
            * x
            * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh());
        let gelu = if g <= -10.0 {
            0.0
        } else if g >= 10.0 {
            x
        } else {
            exact
        };
        // Within an f16 step of the exact GELU (input and output rounded).
        assert!(
            (f64::from(y) - gelu * f64::from(u)).abs() <= 2e-3 * (1.0 + gelu.abs()),
            "{g}"
        );
        assert_eq!(y, gelu_f16(g) * u);
    }
}

/// Softmax attention over `keys` in f64, the reference of one head.
fn attend(q: &[f32], keys: &[&[f32]], vals: &[&[f32]], scale: f32) -> Vec<f64> {
    let s: Vec<f64> = keys
        .iter()
        .map(|k| {
            k.iter()
                .zip(q)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum::<f64>()
                * f64::from(scale)
        })
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
    let z: f64 = e.iter().sum();
    (0..vals[0].len())
        .map(|d| {
            e.iter()
                .zip(vals)
                .map(|(p, v)| p / z * f64::from(v[d]))
                .sum()
        })
        .collect()
}

#[test]
fn cached_attention_over_several_calls_equals_the_reference_and_one_call() {
    let (heads, kv, hd, dv, total) = (4, 2, 16, 8, 7);
    let k = CachedAttention {
        heads,
        kv_heads: kv,
        head_dim: hd,
        value_dim: dv,
        window: 3,
        capacity: 3 + 4 - 1,
        scale: 0.25,
    };
    let q = values(total * heads * hd, 6);
    let kk = values(total * kv * hd, 7);
    let v = values(total * kv * dv, 8);
    // Calls of 3, 1 and 3 tokens, the cache carried over.
    let mut shapes = vec![Shape::SCALAR; 3];
    let mut bufs = vec![
        Vec::new(),
        vec![0f32; k.capacity * kv * hd],
        vec![0f32; k.capacity * kv * dv],
    ];
    let mut got = Vec::new();
    for (start, n) in [(0, 3), (3, 1), (4, 3)] {
        let pos = [start as i64];
        let ins = [
            t(
                &q[start * heads * hd..][..n * heads * hd],
                DType::F32,
                &[n, heads, hd],
            ),
            t(
                &kk[start * kv * hd..][..n * kv * hd],
                DType::F32,
                &[n, kv, hd],
            ),
            t(
                &v[start * kv * dv..][..n * kv * dv],
                DType::F32,
                &[n, kv, dv],
            ),
            t(&pos, DType::I64, &[1]),
        ];
        k.infer(&ins, &mut shapes).unwrap();
        bufs[0] = vec![0f32; shapes[0].numel()];
        run_into(&k, &ins, &mut bufs, &shapes).unwrap();
        got.extend_from_slice(&bufs[0]);
    }
    let r16 =
        |x: &[f32]| -> Vec<f32> { x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect() };
    for p in 0..total {
        for h in 0..heads {
            let g = h / (heads / kv);
            let first = (p + 1).saturating_sub(3);
            let keys: Vec<Vec<f32>> = (first..=p)
                .map(|s| r16(&kk[(s * kv + g) * hd..][..hd]))
                .collect();
            let vals: Vec<Vec<f32>> = (first..=p)
                .map(|s| r16(&v[(s * kv + g) * dv..][..dv]))
                .collect();
            let kr: Vec<&[f32]> = keys.iter().map(|k| k.as_slice()).collect();
            let vr: Vec<&[f32]> = vals.iter().map(|k| k.as_slice()).collect();
            let want = attend(&r16(&q[(p * heads + h) * hd..][..hd]), &kr, &vr, 0.25);
            for (d, w) in want.iter().enumerate() {
                let y = f64::from(got[(p * heads + h) * dv + d]);
                assert!(
                    (y - w).abs() < 2e-3,
                    "position {p} head {h} dim {d}: {y} vs {w}"
                );
            }
        }
    }
    // The same tokens in one call give the same values bit for bit
    // (every token's arithmetic is its own), with a cache large enough.
    let one = CachedAttention {
        capacity: total + 2,
        ..k
    };
    let pos = [0i64];
    let all = run(
        &one,
        &[
            t(&q, DType::F32, &[total, heads, hd]),
            t(&kk, DType::F32, &[total, kv, hd]),
            t(&v, DType::F32, &[total, kv, dv]),
            t(&pos, DType::I64, &[1]),
        ],
        3,
    )
    .unwrap();
    assert_eq!(all[0], got);
}

#[test]
fn cached_attention_refuses_tokens_past_its_cache() {
    let k = CachedAttention {
        heads: 1,
        kv_heads: 1,
        head_dim: 4,
        value_dim: 4,
        window: 0,
        capacity: 4,
        scale: 1.0,
    };
    let x = values(12, 9);
    for (p, ok) in [
        (0i64, true),
        (1, true),
        (2, false),
        (i64::MAX, false),
        (-1, false),
    ] {
        let pos = [p];
        let r = run(
            &k,
            &[
                t(&x, DType::F32, &[3, 1, 4]),
                t(&x, DType::F32, &[3, 1, 4]),
                t(&x, DType::F32, &[3, 1, 4]),
                t(&pos, DType::I64, &[1]),
            ],
            3,
        );
        assert_eq!(r.is_ok(), ok, "position {p}");
    }
}
