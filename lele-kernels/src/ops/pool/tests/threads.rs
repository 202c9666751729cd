//! Pools split over the thread pool give the one-thread result.
use super::*;

#[test]
fn f32_max_and_average_pools_are_bit_identical_on_three_threads() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // 7 planes (an uneven split), enough outputs to split.
    let dims = [1, 7, 64, 50];
    let x = rand_vec(dims.iter().product(), 9);
    let win = || {
        window(
            &[3, 3],
            &[1, 1],
            &[1, 1],
            &[1, 1, 1, 1],
            false,
            AutoPad::NotSet,
        )
    };
    let mp = MaxPool {
        window: win(),
        column_major: false,
    };
    // The average pool over a 3x2 window at stride (3, 2) (PP-OCRv6 rec's).
    let ap = AveragePool {
        window: window(
            &[3, 2],
            &[3, 2],
            &[1, 1],
            &[0, 0, 0, 0],
            false,
            AutoPad::NotSet,
        ),
        count_include_pad: false,
    };
    let one = run(&mp, &[Some(t(&x, &dims))], 1).unwrap();
    let one_avg = run(&ap, &[Some(t(&x, &dims))], 1).unwrap();
    crate::threads::set_num_threads(3);
    let three = run(&mp, &[Some(t(&x, &dims))], 1);
    let three_avg = run(&ap, &[Some(t(&x, &dims))], 1);
    crate::threads::set_num_threads(1);
    let general = run_raw(&mp, &[Some(t(&x, &dims))], &[DType::F32, DType::I64]).unwrap();
    assert_eq!(one[0].1, vals::<f32>(&general[0].1));
    assert_eq!(three.unwrap()[0].1, one[0].1);
    // Every average against its window's mean.
    let (oh, ow) = (dims[2] / 3, dims[3] / 2);
    for (i, &v) in one_avg[0].1.iter().enumerate() {
        let (c, r, q) = (i / (oh * ow), i / ow % oh, i % ow);
        let mut sum = 0f32;
        for ki in 0..3 {
            for kj in 0..2 {
                sum += x[(c * dims[2] + 3 * r + ki) * dims[3] + 2 * q + kj];
            }
        }
        assert!(
            (v - sum / 6.0).abs() <= 1e-6,
            "output {i}: {v} vs {}",
            sum / 6.0
        );
    }
    assert_eq!(three_avg.unwrap()[0].1, one_avg[0].1);
}
