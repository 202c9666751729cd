//! MaxUnpool: literal cases and the inverse of a MaxPool with indices.
use super::*;

#[test]
fn max_unpool() {
    // onnx/backend/test/case/node/maxunpool.py
    let xt = [1f32, 2., 3., 4.];
    let xi = [5i64, 7, 13, 15];
    let up = MaxUnpool {
        spatial: 2,
        kernel: [1, 2, 2],
        strides: [1, 2, 2],
        pads: [0; 6],
    };
    let out = run(
        &up,
        &[Some(t(&xt, &[1, 1, 2, 2])), Some(ti(&xi, &[1, 1, 2, 2]))],
        1,
    )
    .unwrap();
    assert_eq!(out[0].0, vec![1, 1, 4, 4]);
    assert_eq!(
        out[0].1,
        vec![
            0., 0., 0., 0., 0., 1., 0., 2., 0., 0., 0., 0., 0., 3., 0., 4.
        ]
    );
    // With output_shape (1, 1, 5, 5): the 4x4 result at the origin.
    let xt = [5f32, 6., 7., 8.];
    let shape = [1i64, 1, 5, 5];
    let ins = [
        Some(t(&xt, &[1, 1, 2, 2])),
        Some(ti(&xi, &[1, 1, 2, 2])),
        Some(ti(&shape, &[4])),
    ];
    let out = run(&up, &ins, 1).unwrap();
    assert_eq!(out[0].0, vec![1, 1, 5, 5]);
    let mut want = vec![0f32; 25];
    want[6] = 5.;
    want[8] = 6.;
    want[16] = 7.;
    want[18] = 8.;
    assert_eq!(out[0].1, want);
    // output_shape unknown at build time; too small; an index out of range.
    let unknown = TensorRef::shape_only(DType::I64, Shape::new(&[4]).unwrap());
    let mut shapes = [Shape::SCALAR];
    assert_eq!(
        up.infer(&[ins[0], ins[1], Some(unknown)], &mut shapes),
        Err(KernelError::NeedsData { op: "MaxUnpool" })
    );
    let small = [1i64, 1, 3, 5];
    assert!(run(&up, &[ins[0], ins[1], Some(ti(&small, &[4]))], 1).is_err());
    let far = [5i64, 7, 13, 16];
    assert!(run(&up, &[ins[0], Some(ti(&far, &[1, 1, 2, 2]))], 1).is_err());
    let neg = [5i64, -1, 13, 15];
    assert!(run(&up, &[ins[0], Some(ti(&neg, &[1, 1, 2, 2]))], 1).is_err());
}

#[test]
fn max_unpool_inverts_max_pool() {
    // Pool with indices, unpool, pool again: each window holds its maximum
    // and zeros.
    let x = rand_vec(2 * 3 * 4 * 6 * 4, 8);
    let w = window(
        &[2, 2, 2],
        &[2, 2, 2],
        &[1; 3],
        &[0; 6],
        false,
        AutoPad::NotSet,
    );
    let mp = MaxPool {
        window: w,
        column_major: false,
    };
    let out = run_raw(
        &mp,
        &[Some(t(&x, &[2, 3, 4, 6, 4]))],
        &[DType::F32, DType::I64],
    )
    .unwrap();
    let y = vals::<f32>(&out[0].1);
    let ix = vals::<i64>(&out[1].1);
    let up = MaxUnpool {
        spatial: 3,
        kernel: w.kernel,
        strides: w.strides,
        pads: w.pads,
    };
    let un = run(&up, &[Some(t(&y, &out[0].0)), Some(ti(&ix, &out[1].0))], 1).unwrap();
    assert_eq!(un[0].0, vec![2, 3, 4, 6, 4]);
    for (i, &v) in un[0].1.iter().enumerate() {
        assert!(v == 0.0 || v == x[i]);
    }
    let again = run(&mp, &[Some(t(&un[0].1, &un[0].0))], 1).unwrap();
    let again_want: Vec<f32> = y.iter().map(|&v| v.max(0.0)).collect();
    assert_close(&again[0].1, &again_want, 0.0);
}
