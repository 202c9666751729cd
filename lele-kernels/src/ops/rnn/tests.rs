use super::*;
use crate::Kernel;
use crate::ops::test_util::*;
use alloc::vec;
use alloc::vec::Vec;

/// `((arange(n) * 0.37 + seed) % 2 - 1)` as in /tmp/lele_gen/rnn_gen.py.
fn r(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 * 0.37 + seed) % 2.0 - 1.0)
        .collect()
}

fn ti32<'a>(v: &'a [i32]) -> TensorRef<'a> {
    TensorRef::new(
        DType::I32,
        Shape::new(&[v.len()]).unwrap(),
        bytemuck::cast_slice(v),
    )
    .unwrap()
}

#[test]
fn lstm_onnx_reference() {
    // /tmp/lele_gen/rnn_gen.py (onnx 1.23 ReferenceEvaluator, opset 22):
    // S, B, I, H = 3, 2, 3, 2
    // def r(n, seed): return ((np.arange(n) * 0.37 + seed) % 2 - 1).astype(np.float32)
    // x = r(S*B*I, 0.1).reshape(S, B, I); w = r(4*H*I, 0.3).reshape(1, 4*H, I)
    // rr = r(4*H*H, 0.5).reshape(1, 4*H, H); b = r(8*H, 0.7).reshape(1, 8*H)
    // h0 = r(B*H, 0.9).reshape(1, B, H); c0 = r(B*H, 1.1).reshape(1, B, H)
    // y, yh, yc = LSTM(x, w, rr, b, "", h0, c0; hidden_size=H)
    let (s, b, i, h) = (3, 2, 3, 2);
    let x = r(s * b * i, 0.1);
    let w = r(4 * h * i, 0.3);
    let rr = r(4 * h * h, 0.5);
    let bias = r(8 * h, 0.7);
    let h0 = r(b * h, 0.9);
    let c0 = r(b * h, 1.1);
    let op = Lstm {
        hidden_size: h,
        direction: Direction::Forward,
        layout: 0,
        clip: None,
        input_forget: false,
    };
    let ins = [
        Some(t(&x, &[s, b, i])),
        Some(t(&w, &[1, 4 * h, i])),
        Some(t(&rr, &[1, 4 * h, h])),
        Some(t(&bias, &[1, 8 * h])),
        None,
        Some(t(&h0, &[1, b, h])),
        Some(t(&c0, &[1, b, h])),
        None,
    ];
    let out = run(&op, &ins, 3).unwrap();
    assert_eq!(out[0].0, vec![s, 1, b, h]);
    assert_eq!(out[2].0, vec![1, b, h]);
    let y = [
        0.221123605966568,
        0.17948710918426514,
        0.45076191425323486,
        -0.0729481428861618,
        0.33756279945373535,
        0.09721790999174118,
        0.1489892601966858,
        -0.29689541459083557,
        0.39275264739990234,
        0.04115249216556549,
        0.010876648128032684,
        -0.38344866037368774,
    ];
    assert_close(&out[0].1, &y, 1e-5);
    assert_close(&out[1].1, &y[8..], 1e-5);
    assert_close(
        &out[2].1,
        &[
            0.7807050943374634,
            0.07788045704364777,
            0.023952625691890717,
            -0.45068225264549255,
        ],
        1e-5,
    );
    // Only Y requested.
    let out1 = run(&op, &ins, 1).unwrap();
    assert_close(&out1[0].1, &y, 1e-5);
}

#[test]
fn gru_onnx_reference_bidirectional_layout1() {
    // /tmp/lele_gen/rnn_gen.py: xw = r(B*S*I, 0.2).reshape(B, S, I); w = r(2*3*H*I, 0.4).reshape(2, 3*H, I)
    // rr = r(2*3*H*H, 0.6).reshape(2, 3*H, H); b = r(2*6*H, 0.8).reshape(2, 6*H); h0 = r(B*2*H, 1.0).reshape(B, 2, H)
    // GRU(xw, w, rr, b, "", h0; hidden_size=H, direction="bidirectional", layout=1, linear_before_reset=lbr)
    let (s, b, i, h) = (3, 2, 3, 2);
    let x = r(b * s * i, 0.2);
    let w = r(2 * 3 * h * i, 0.4);
    let rr = r(2 * 3 * h * h, 0.6);
    let bias = r(2 * 6 * h, 0.8);
    let h0 = r(b * 2 * h, 1.0);
    let want: [(&[f32], &[f32]); 2] = [
        (
            &[
                -0.3175896108150482,
                -0.17044727504253387,
                -0.12350654602050781,
                -0.6870181560516357,
                -0.7186853885650635,
                -0.16754156351089478,
                0.4717792272567749,
                -0.7329298257827759,
                -0.7887914180755615,
                -0.3220526874065399,
                0.11586204171180725,
                -0.8412941694259644,
                -0.7978924512863159,
                -0.13621488213539124,
                0.12770529091358185,
                0.2251705676317215,
                -0.8329833745956421,
                -0.28216540813446045,
                -0.24721506237983704,
                0.44919151067733765,
                -0.9149504899978638,
                0.2970210015773773,
                -0.10727201402187347,
                0.40548017621040344,
            ],
            &[
                -0.7887914180755615,
                -0.3220526874065399,
                -0.12350654602050781,
                -0.6870181560516357,
                -0.9149504899978638,
                0.2970210015773773,
                0.12770529091358185,
                0.2251705676317215,
            ],
        ),
        (
            &[
                -0.27899929881095886,
                -0.15604744851589203,
                -0.08353805541992188,
                -0.7356244325637817,
                -0.7001446485519409,
                -0.15638305246829987,
                0.5339280366897583,
                -0.7739943265914917,
                -0.7778881788253784,
                -0.3920302391052246,
                0.13224172592163086,
                -0.846967339515686,
                -0.7939658164978027,
                -0.14149057865142822,
                0.11672303080558777,
                0.055099546909332275,
                -0.8325660228729248,
                -0.3728325068950653,
                -0.2611711919307709,
                0.37208208441734314,
                -0.9147728085517883,
                0.27410560846328735,
                -0.12932635843753815,
                0.34844139218330383,
            ],
            &[
                -0.7778881788253784,
                -0.3920302391052246,
                -0.08353805541992188,
                -0.7356244325637817,
                -0.9147728085517883,
                0.27410560846328735,
                0.11672303080558777,
                0.055099546909332275,
            ],
        ),
    ];
    for (lbr, (wy, wyh)) in want.iter().enumerate() {
        let op = Gru {
            hidden_size: h,
            direction: Direction::Bidirectional,
            linear_before_reset: lbr == 1,
            layout: 1,
        };
        let ins = [
            Some(t(&x, &[b, s, i])),
            Some(t(&w, &[2, 3 * h, i])),
            Some(t(&rr, &[2, 3 * h, h])),
            Some(t(&bias, &[2, 6 * h])),
            None,
            Some(t(&h0, &[b, 2, h])),
        ];
        let out = run(&op, &ins, 2).unwrap();
        assert_eq!(out[0].0, vec![b, s, 2, h]);
        assert_eq!(out[1].0, vec![b, 2, h]);
        assert_close(&out[0].1, wy, 1e-5);
        assert_close(&out[1].1, wyh, 1e-5);
    }
}

/// Straightforward LSTM over one direction and one batch entry
/// (layout 0 indices), following the ONNX equations.
#[allow(clippy::too_many_arguments)]
fn naive_lstm_seq(
    xs: &[Vec<f32>],
    w: &[f32],
    rr: &[f32],
    bias: &[f32],
    p: &[f32],
    h0: &[f32],
    c0: &[f32],
    h: usize,
    clip: f32,
    input_forget: bool,
) -> (Vec<Vec<f32>>, Vec<f32>, Vec<f32>) {
    let i = xs.first().map_or(0, |v| v.len());
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let (mut hs, mut cs) = (h0.to_vec(), c0.to_vec());
    let mut ys = vec![];
    for xt in xs {
        let gate = |g: usize, k: usize| -> f64 {
            let row = g * h + k;
            let mut s = bias[row] as f64 + bias[4 * h + row] as f64;
            for q in 0..i {
                s += (xt[q] * w[row * i + q]) as f64;
            }
            for q in 0..h {
                s += (hs[q] * rr[row * h + q]) as f64;
            }
            s
        };
        let mut hn = vec![0f32; h];
        let mut cn = vec![0f32; h];
        for k in 0..h {
            let c = cs[k] as f64;
            let cl = |v: f64| v.clamp(-clip as f64, clip as f64);
            let ig = sig(cl(gate(0, k) + p[k] as f64 * c));
            let fg = if input_forget {
                1.0 - ig
            } else {
                sig(cl(gate(2, k) + p[2 * h + k] as f64 * c))
            };
            let ct = cl(gate(3, k)).tanh();
            let cnew = fg * c + ig * ct;
            let og = sig(cl(gate(1, k) + p[h + k] as f64 * cnew));
            cn[k] = cnew as f32;
            hn[k] = (og * cnew.tanh()) as f32;
        }
        hs = hn;
        cs = cn;
        ys.push(hs.clone());
    }
    (ys, hs, cs)
}

/// Runs [`Lstm`] with every feature (both layouts, each direction, clip,
/// coupled gates, peepholes, `sequence_lens`, initial states) against
/// [`naive_lstm_seq`]; returns the outputs of every configuration.
fn check_lstm_vs_naive(s: usize, b: usize, i: usize, h: usize, lens: &[i32]) -> Vec<Vec<f32>> {
    let mut all = vec![];
    for layout in [0i64, 1] {
        for (direction, clip, input_forget) in [
            (Direction::Bidirectional, Some(0.8f32), false),
            (Direction::Reverse, None, true),
            (Direction::Forward, Some(5.0), false),
        ] {
            let dirs = direction.count();
            let x = rand_vec(s * b * i, 1);
            let w = rand_vec(dirs * 4 * h * i, 2);
            let rr = rand_vec(dirs * 4 * h * h, 3);
            let bias = rand_vec(dirs * 8 * h, 4);
            let p = rand_vec(dirs * 3 * h, 5);
            let h0 = rand_vec(dirs * b * h, 6);
            let c0 = rand_vec(dirs * b * h, 7);
            let op = Lstm {
                hidden_size: h,
                direction,
                layout,
                clip,
                input_forget,
            };
            let d = Dims {
                seq: s,
                batch: b,
                input: i,
                hidden: h,
                dirs,
                layout1: layout == 1,
            };
            let xdims = if layout == 1 { [b, s, i] } else { [s, b, i] };
            let st = d.state_shape().unwrap();
            let ins = [
                Some(t(&x, &xdims)),
                Some(t(&w, &[dirs, 4 * h, i])),
                Some(t(&rr, &[dirs, 4 * h, h])),
                Some(t(&bias, &[dirs, 8 * h])),
                Some(ti32(lens)),
                Some(t(&h0, st.dims())),
                Some(t(&c0, st.dims())),
                Some(t(&p, &[dirs, 3 * h])),
            ];
            let out = run(&op, &ins, 3).unwrap();
            assert_eq!(out[0].0, d.y_shape().unwrap().dims());
            for dir in 0..dirs {
                let reverse = direction == Direction::Reverse || dir == 1;
                for bi in 0..b {
                    let len = lens[bi] as usize;
                    let mut xs: Vec<Vec<f32>> = (0..len)
                        .map(|tt| {
                            let row = d.x_row(tt, bi);
                            x[row * i..(row + 1) * i].to_vec()
                        })
                        .collect();
                    if reverse {
                        xs.reverse();
                    }
                    let so = d.state_off(dir, bi);
                    let (ys, hn, cn) = naive_lstm_seq(
                        &xs,
                        &w[dir * 4 * h * i..],
                        &rr[dir * 4 * h * h..],
                        &bias[dir * 8 * h..],
                        &p[dir * 3 * h..],
                        &h0[so..so + h],
                        &c0[so..so + h],
                        h,
                        clip.unwrap_or(f32::INFINITY),
                        input_forget,
                    );
                    for tt in 0..s {
                        let o = d.y_off(tt, dir, bi);
                        let got = &out[0].1[o..o + h];
                        if tt < len {
                            let k = if reverse { len - 1 - tt } else { tt };
                            assert_close(got, &ys[k], 1e-5);
                        } else {
                            assert_eq!(got, &vec![0.0; h][..]);
                        }
                    }
                    assert_close(&out[1].1[so..so + h], &hn, 1e-5);
                    assert_close(&out[2].1[so..so + h], &cn, 1e-5);
                }
            }
            all.extend(out.into_iter().map(|o| o.1));
        }
    }
    all
}

#[test]
fn lstm_matches_naive_all_features() {
    check_lstm_vs_naive(5, 3, 4, 3, &[5, 2, 0]);
}

/// A hidden size past the vector width (whole blocks and a tail in every
/// gate), on one and two threads (two run the directions at once): the
/// same results bit for bit.
#[cfg(feature = "std")]
#[test]
fn lstm_wide_hidden_any_thread_count() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let one = check_lstm_vs_naive(4, 2, 19, 37, &[4, 3]);
    crate::threads::set_num_threads(2);
    let two = check_lstm_vs_naive(4, 2, 19, 37, &[4, 3]);
    crate::threads::set_num_threads(1);
    assert_eq!(one, two);
}

/// Steps split over the threads by hidden units (forced at a small hidden
/// size: 37 units in ranges of 32 and 5, or 16, 16 and 5), against the
/// naive reference (inside `check_lstm_vs_naive`) and against one thread;
/// sequences of different lengths, so states carry over past an entry's
/// end. Not bit for bit: a step's product over fewer columns may take
/// another of the GEMM's dot-product paths, which rounds differently.
#[cfg(feature = "std")]
#[test]
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "atomics")),
    ignore = "needs threads, which this target cannot start"
)]
fn lstm_steps_split_by_hidden_units_match_one_thread() {
    use super::lstm::split::{FORCE_TASKS, SPLIT_RUNS};
    use core::sync::atomic::Ordering;
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let runs = || SPLIT_RUNS.load(Ordering::Relaxed);
    let one = check_lstm_vs_naive(4, 2, 19, 37, &[4, 3]);
    assert_eq!(runs(), 0);
    for threads in [2, 3] {
        crate::threads::set_num_threads(threads);
        FORCE_TASKS.with(|f| f.set(Some(threads)));
        let before = runs();
        let split = check_lstm_vs_naive(4, 2, 19, 37, &[4, 3]);
        // Every case of the check (layouts, directions, options) split.
        assert!(
            runs() > before,
            "{threads} threads: the split path did not run"
        );
        FORCE_TASKS.with(|f| f.set(None));
        crate::threads::set_num_threads(1);
        same_within(&one, &split, &format!("{threads} threads"));
    }
    // An odd number of steps leaves the last state in the second buffer.
    let one = check_lstm_vs_naive(3, 1, 5, 40, &[3]);
    crate::threads::set_num_threads(2);
    FORCE_TASKS.with(|f| f.set(Some(2)));
    let before = runs();
    let split = check_lstm_vs_naive(3, 1, 5, 40, &[3]);
    assert!(runs() > before, "odd steps: the split path did not run");
    FORCE_TASKS.with(|f| f.set(None));
    crate::threads::set_num_threads(1);
    same_within(&one, &split, "odd steps");
}

/// A step's product with `R`'s rows read back to front, in runs, equals
/// the one read front to back bit for bit (and both the plain product):
/// one and several state rows, run lengths that leave a short last run,
/// `beta` 0 and 1.
#[test]
fn state_product_in_reverse_is_bit_identical() {
    for (m, n, k) in [
        (1, 1500, 100),
        (3, 1500, 100),
        (1, 2048, 512),
        (2, 700, 260),
    ] {
        let hs = rand_vec(m * k, 1);
        let rr = rand_vec(n * k, 2);
        let c0 = rand_vec(m * n, 3);
        let mut gs = vec![0f32; crate::ops::gemm::sgemm_scratch_len(m, n, k)];
        for beta in [0.0f32, 1.0] {
            let mut fwd = c0.clone();
            state_times_rt(false, m, n, k, &hs, &rr, beta, &mut fwd, n, &mut gs).unwrap();
            let mut rev = c0.clone();
            state_times_rt(true, m, n, k, &hs, &rr, beta, &mut rev, n, &mut gs).unwrap();
            assert!(
                fwd.iter()
                    .zip(&rev)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{m}x{n}x{k} beta {beta}"
            );
            let want: Vec<f32> = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n, e % n);
                    let dot: f64 = (0..k)
                        .map(|p| hs[i * k + p] as f64 * rr[j * k + p] as f64)
                        .sum();
                    (dot + beta as f64 * c0[e] as f64) as f32
                })
                .collect();
            assert_close(&fwd, &want, 1e-5);
        }
    }
}

/// Hidden sizes whose `R` outgrows [`ALTERNATE_MIN_BYTES`], so odd steps
/// read it back to front: one direction's whole `R` on one thread (LSTM
/// and GRU), and each task's share of it with the steps split over two
/// threads; against the naive references.
#[cfg(feature = "std")]
#[test]
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "atomics")),
    ignore = "needs threads, which this target cannot start"
)]
fn recurrent_weights_past_l2_read_alternately_match_naive() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let h = 264;
    assert!(alternates(1, 4 * 4 * h * h));
    check_lstm_vs_naive(3, 1, 5, h, &[3]);
    let h = 300;
    assert!(alternates(1, 4 * 3 * h * h));
    for lbr in [false, true] {
        check_gru_vs_naive(3, 2, 3, h, &[3, 2], lbr);
    }
    // Two tasks of 192 units each: 16·192·384 bytes of R apiece.
    let h = 384;
    assert!(alternates(1, 16 * 192 * h));
    crate::threads::set_num_threads(2);
    let before = super::lstm::split::SPLIT_RUNS.load(core::sync::atomic::Ordering::Relaxed);
    check_lstm_vs_naive(3, 1, 5, h, &[3]);
    let after = super::lstm::split::SPLIT_RUNS.load(core::sync::atomic::Ordering::Relaxed);
    crate::threads::set_num_threads(1);
    assert!(after > before, "the split path did not run");
}

/// Outputs of two runs equal within a few float32 roundings (and exactly
/// where either is zero: padding past a sequence's end).
#[cfg(feature = "std")]
fn same_within(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len(), "{what}");
        for (i, (&u, &v)) in x.iter().zip(y).enumerate() {
            if u == 0.0 || v == 0.0 {
                assert_eq!(u, v, "{what}: element {i}");
            } else {
                assert!((u - v).abs() <= 1e-6, "{what}: element {i}: {u} vs {v}");
            }
        }
    }
}

/// Straightforward GRU over one direction and one batch entry.
fn naive_gru_seq(
    xs: &[Vec<f32>],
    w: &[f32],
    rr: &[f32],
    bias: &[f32],
    h0: &[f32],
    h: usize,
    lbr: bool,
) -> Vec<Vec<f32>> {
    let i = xs.first().map_or(0, |v| v.len());
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let mut hs: Vec<f64> = h0.iter().map(|&v| v as f64).collect();
    let mut ys = vec![];
    for xt in xs {
        let xg = |row: usize| -> f64 {
            (0..i).map(|q| (xt[q] * w[row * i + q]) as f64).sum::<f64>() + bias[row] as f64
        };
        let hg = |row: usize, hv: &[f64]| -> f64 {
            (0..h).map(|q| hv[q] * rr[row * h + q] as f64).sum::<f64>() + bias[3 * h + row] as f64
        };
        let z: Vec<f64> = (0..h).map(|k| sig(xg(k) + hg(k, &hs))).collect();
        let r: Vec<f64> = (0..h).map(|k| sig(xg(h + k) + hg(h + k, &hs))).collect();
        let rh: Vec<f64> = (0..h).map(|k| r[k] * hs[k]).collect();
        let n: Vec<f64> = (0..h)
            .map(|k| {
                let rec = if lbr {
                    r[k] * hg(2 * h + k, &hs)
                } else {
                    hg(2 * h + k, &rh)
                };
                (xg(2 * h + k) + rec).tanh()
            })
            .collect();
        hs = (0..h).map(|k| (1.0 - z[k]) * n[k] + z[k] * hs[k]).collect();
        ys.push(hs.iter().map(|&v| v as f32).collect());
    }
    ys
}

#[test]
fn gru_matches_naive_with_sequence_lens() {
    for lbr in [false, true] {
        check_gru_vs_naive(4, 3, 3, 5, &[4, 1, 3], lbr);
    }
}

/// Runs [`Gru`] forward and in reverse (layout 0, `sequence_lens`,
/// initial state) against [`naive_gru_seq`].
fn check_gru_vs_naive(s: usize, b: usize, i: usize, h: usize, lens: &[i32], lbr: bool) {
    for direction in [Direction::Forward, Direction::Reverse] {
        let x = rand_vec(s * b * i, 21);
        let w = rand_vec(3 * h * i, 22);
        let rr = rand_vec(3 * h * h, 23);
        let bias = rand_vec(6 * h, 24);
        let h0 = rand_vec(b * h, 25);
        let op = Gru {
            hidden_size: h,
            direction,
            linear_before_reset: lbr,
            layout: 0,
        };
        let ins = [
            Some(t(&x, &[s, b, i])),
            Some(t(&w, &[1, 3 * h, i])),
            Some(t(&rr, &[1, 3 * h, h])),
            Some(t(&bias, &[1, 6 * h])),
            Some(ti32(lens)),
            Some(t(&h0, &[1, b, h])),
        ];
        let out = run(&op, &ins, 2).unwrap();
        for bi in 0..b {
            let len = lens[bi] as usize;
            let mut xs: Vec<Vec<f32>> = (0..len)
                .map(|tt| x[(tt * b + bi) * i..(tt * b + bi + 1) * i].to_vec())
                .collect();
            let reverse = direction == Direction::Reverse;
            if reverse {
                xs.reverse();
            }
            let ys = naive_gru_seq(&xs, &w, &rr, &bias, &h0[bi * h..(bi + 1) * h], h, lbr);
            for tt in 0..s {
                let o = (tt * b + bi) * h;
                let got = &out[0].1[o..o + h];
                if tt < len {
                    let k = if reverse { len - 1 - tt } else { tt };
                    assert_close(got, &ys[k], 1e-5);
                } else {
                    assert_eq!(got, &vec![0.0; h][..]);
                }
            }
            assert_close(&out[1].1[bi * h..(bi + 1) * h], &ys[len - 1], 1e-5);
        }
    }
}

#[test]
fn rnn_rejects_bad_inputs() {
    let x = rand_vec(2 * 3, 1);
    let w = rand_vec(8 * 3, 2);
    let rr = rand_vec(8 * 2, 3);
    let op = Lstm {
        hidden_size: 2,
        direction: Direction::Forward,
        layout: 0,
        clip: None,
        input_forget: false,
    };
    let ok = [
        Some(t(&x, &[2, 1, 3])),
        Some(t(&w, &[1, 8, 3])),
        Some(t(&rr, &[1, 8, 2])),
    ];
    assert!(run(&op, &ok, 3).is_ok());
    assert!(run(&op, &ok, 4).is_err());
    assert!(
        run(
            &Lstm {
                hidden_size: 3,
                ..op
            },
            &ok,
            1
        )
        .is_err()
    );
    assert!(run(&Lstm { layout: 2, ..op }, &ok, 1).is_err());
    let lens = [3i32];
    let bad_len = [ok[0], ok[1], ok[2], None, Some(ti32(&lens))];
    assert!(run(&op, &bad_len, 1).is_err());
    let bad_w = [ok[0], Some(t(&w[..18], &[1, 6, 3])), ok[2]];
    assert!(run(&op, &bad_w, 1).is_err());
}

/// An empty batch (a fuzzing finding: GRU sliced its gate scratch by the
/// hidden size when the batch was 0) gives empty outputs, in every cell.
#[test]
fn an_empty_batch_gives_empty_outputs() {
    let (seq, inp, h) = (5, 1, 2);
    let x: Vec<f32> = Vec::new();
    let cells: [(&dyn Kernel, usize, usize); 3] = [
        (
            &Lstm {
                hidden_size: h,
                direction: Direction::Bidirectional,
                layout: 0,
                clip: None,
                input_forget: false,
            },
            4,
            3,
        ),
        (
            &Gru {
                hidden_size: h,
                direction: Direction::Bidirectional,
                linear_before_reset: false,
                layout: 0,
            },
            3,
            2,
        ),
        (
            &Rnn {
                hidden_size: h,
                direction: Direction::Bidirectional,
                layout: 0,
            },
            1,
            2,
        ),
    ];
    for (cell, gates, n_out) in cells {
        let w = rand_vec(2 * gates * h * inp, 1);
        let rr = rand_vec(2 * gates * h * h, 2);
        let ins = [
            Some(t(&x, &[seq, 0, inp])),
            Some(t(&w, &[2, gates * h, inp])),
            Some(t(&rr, &[2, gates * h, h])),
        ];
        let out = run(cell, &ins, n_out).expect("an empty batch runs");
        for (shape, data) in &out {
            assert!(data.is_empty(), "{shape:?}");
        }
    }
}

/// A hidden size of zero (found by the compiler fuzz target: a GRU with
/// `R` of shape `[1, 0, 0]`) gives empty states, not a panic, in every cell.
#[test]
fn a_zero_hidden_size_gives_empty_states() {
    let (seq, batch, inp) = (4, 3, 3);
    let x = rand_vec(seq * batch * inp, 3);
    let cells: [(&dyn Kernel, usize); 3] = [
        (
            &Lstm {
                hidden_size: 0,
                direction: Direction::Forward,
                layout: 0,
                clip: None,
                input_forget: false,
            },
            3,
        ),
        (
            &Gru {
                hidden_size: 0,
                direction: Direction::Forward,
                linear_before_reset: false,
                layout: 0,
            },
            2,
        ),
        (
            &Rnn {
                hidden_size: 0,
                direction: Direction::Forward,
                layout: 0,
            },
            2,
        ),
    ];
    let empty: Vec<f32> = Vec::new();
    for (cell, n_out) in cells {
        let ins = [
            Some(t(&x, &[seq, batch, inp])),
            Some(t(&empty, &[1, 0, inp])),
            Some(t(&empty, &[1, 0, 0])),
        ];
        let out = run(cell, &ins, n_out).expect("a zero hidden size runs");
        for (shape, data) in &out {
            assert!(data.is_empty(), "{shape:?}");
        }
    }
}
