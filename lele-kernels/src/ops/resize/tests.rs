use super::*;
use crate::ops::test_util::*;
use alloc::vec::Vec;

/// A Resize with these modes and the attributes' defaults otherwise
/// (cubic a = -0.75, no exclusion, extrapolation 0, no antialias, all
/// axes, stretched).
fn op_with(mode: ResizeMode, coord: CoordMode, nearest: NearestMode) -> Resize {
    Resize {
        mode,
        coord,
        nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        axes: crate::shape::IntList::EMPTY,
        aspect: AspectPolicy::Stretch,
    }
}

type Case<'a> = (
    ResizeMode,
    CoordMode,
    NearestMode,
    f32,
    bool,
    Option<&'a [f32]>,
    Option<&'a [i64]>,
    Option<&'a [f32]>,
    &'a [usize],
    &'a [f32],
);

/// Expected values from the ONNX reference implementation (onnx 1.23,
/// opset 19); each row is `(mode, coord, nearest, cubic_coeff_a,
/// exclude_outside, scales, sizes, roi, output shape, output values)`:
///
/// ```python
/// import numpy as np
/// from onnx import helper as h, TensorProto as T
/// from onnx.reference import ReferenceEvaluator
/// def run(x, scales=None, sizes=None, roi=None, **attrs):
///     vals, ins, node_in = {"x": x}, [h.make_tensor_value_info("x", T.FLOAT, None)], ["x", "", "", ""]
///     for i, (n, v, ty, dt) in enumerate([("roi", roi, T.FLOAT, np.float32), ("scales", scales, T.FLOAT, np.float32),
///                                         ("sizes", sizes, T.INT64, np.int64)]):
///         if v is not None:
///             vals[n] = np.array(v, dt); node_in[i + 1] = n; ins.append(h.make_tensor_value_info(n, ty, None))
///     while node_in[-1] == "": node_in.pop()
///     node = h.make_node("Resize", node_in, ["y"], **attrs)
///     g = h.make_graph([node], "g", ins, [h.make_tensor_value_info("y", T.FLOAT, None)])
///     m = h.make_model(g, opset_imports=[h.make_opsetid("", 19)])
///     return ReferenceEvaluator(m).run(None, vals)[0]
/// x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4) ** 1.5
/// # one call per row, e.g. the first:
/// run(x, sizes=[1, 1, 5, 7], mode="nearest", coordinate_transformation_mode="half_pixel",
///     nearest_mode="round_prefer_floor", extrapolation_value=-7.0)
/// ```
const CASES: &[Case<'static>] = &[
    (
        ResizeMode::Nearest,
        CoordMode::HalfPixel,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        None,
        Some(&[1, 1, 5, 7]),
        None,
        &[1, 1, 5, 7],
        &[
            0.0,
            0.0,
            1.0,
            1.0,
            2.8284270763397217,
            5.196152210235596,
            5.196152210235596,
            0.0,
            0.0,
            1.0,
            1.0,
            2.8284270763397217,
            5.196152210235596,
            5.196152210235596,
            8.0,
            8.0,
            11.180339813232422,
            11.180339813232422,
            14.696938514709473,
            18.520259857177734,
            18.520259857177734,
            22.627416610717773,
            22.627416610717773,
            27.0,
            27.0,
            31.62277603149414,
            36.482872009277344,
            36.482872009277344,
            22.627416610717773,
            22.627416610717773,
            27.0,
            27.0,
            31.62277603149414,
            36.482872009277344,
            36.482872009277344,
        ],
    ),
    (
        ResizeMode::Nearest,
        CoordMode::Asymmetric,
        NearestMode::Floor,
        -0.75,
        false,
        Some(&[1.0, 1.0, 2.0, 1.5]),
        None,
        None,
        &[1, 1, 6, 6],
        &[
            0.0,
            0.0,
            1.0,
            2.8284270763397217,
            2.8284270763397217,
            5.196152210235596,
            0.0,
            0.0,
            1.0,
            2.8284270763397217,
            2.8284270763397217,
            5.196152210235596,
            8.0,
            8.0,
            11.180339813232422,
            14.696938514709473,
            14.696938514709473,
            18.520259857177734,
            8.0,
            8.0,
            11.180339813232422,
            14.696938514709473,
            14.696938514709473,
            18.520259857177734,
            22.627416610717773,
            22.627416610717773,
            27.0,
            31.62277603149414,
            31.62277603149414,
            36.482872009277344,
            22.627416610717773,
            22.627416610717773,
            27.0,
            31.62277603149414,
            31.62277603149414,
            36.482872009277344,
        ],
    ),
    (
        ResizeMode::Nearest,
        CoordMode::AlignCorners,
        NearestMode::RoundPreferCeil,
        -0.75,
        false,
        None,
        Some(&[1, 1, 2, 3]),
        None,
        &[1, 1, 2, 3],
        &[
            0.0,
            2.8284270763397217,
            5.196152210235596,
            22.627416610717773,
            31.62277603149414,
            36.482872009277344,
        ],
    ),
    (
        ResizeMode::Nearest,
        CoordMode::PytorchHalfPixel,
        NearestMode::Ceil,
        -0.75,
        false,
        Some(&[1.0, 1.0, 0.7, 0.6]),
        None,
        None,
        &[1, 1, 2, 2],
        &[
            11.180339813232422,
            14.696938514709473,
            27.0,
            31.62277603149414,
        ],
    ),
    (
        ResizeMode::Linear,
        CoordMode::HalfPixel,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        None,
        Some(&[1, 1, 5, 7]),
        None,
        &[1, 1, 5, 7],
        &[
            0.0,
            0.3571428656578064,
            0.9285714030265808,
            1.9142135381698608,
            2.9975502490997314,
            4.350535869598389,
            5.196152210235596,
            3.200000047683716,
            3.868619918823242,
            4.938411712646484,
            6.323983669281006,
            7.786543369293213,
            9.472236633300781,
            10.525794982910156,
            8.0,
            9.135835647583008,
            10.95317268371582,
            12.938638687133789,
            14.970032691955566,
            17.154787063598633,
            18.520259857177734,
            16.77644920349121,
            18.167766571044922,
            20.39387321472168,
            22.76228904724121,
            25.16996955871582,
            27.710189819335938,
            29.297826766967773,
            22.627416610717773,
            24.18905258178711,
            26.687671661376953,
            29.31138801574707,
            31.969924926757812,
            34.74712371826172,
            36.482872009277344,
        ],
    ),
    (
        ResizeMode::Linear,
        CoordMode::PytorchHalfPixel,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        None,
        Some(&[1, 1, 1, 3]),
        None,
        &[1, 1, 1, 3],
        &[0.1666666716337204, 1.9142135381698608, 4.8015313148498535],
    ),
    (
        ResizeMode::Linear,
        CoordMode::AlignCorners,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        Some(&[1.0, 1.0, 1.6, 1.3]),
        None,
        None,
        &[1, 1, 4, 5],
        &[
            0.0,
            0.7142857313156128,
            1.78361177444458,
            3.1666736602783203,
            4.857905864715576,
            4.210526466369629,
            5.744488716125488,
            7.522475719451904,
            9.52270221710205,
            11.761151313781738,
            8.769864082336426,
            11.086356163024902,
            13.545018196105957,
            16.141756057739258,
            18.91167640686035,
            16.468503952026367,
            19.23320770263672,
            22.120668411254883,
            25.12804412841797,
            28.287729263305664,
        ],
    ),
    (
        ResizeMode::Linear,
        CoordMode::Asymmetric,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        Some(&[1.0, 1.0, 0.5, 0.75]),
        None,
        None,
        &[1, 1, 1, 3],
        &[0.0, 1.6094757318496704, 4.406910419464111],
    ),
    (
        ResizeMode::Linear,
        CoordMode::HalfPixelSymmetric,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        Some(&[1.0, 1.0, 1.7, 1.3]),
        None,
        None,
        &[1, 1, 5, 5],
        &[
            0.0,
            0.7307692170143127,
            1.9142135381698608,
            3.4658915996551514,
            5.196152210235596,
            3.2941176891326904,
            4.680962085723877,
            6.453682899475098,
            8.51429271697998,
            10.682549476623535,
            8.0,
            10.324094772338867,
            12.938638687133789,
            15.72629451751709,
            18.520259857177734,
            16.60436248779297,
            19.440959930419922,
            22.56966781616211,
            25.846864700317383,
            29.086502075195312,
            22.627416610717773,
            25.822765350341797,
            29.31138801574707,
            32.9312629699707,
            36.482872009277344,
        ],
    ),
    (
        ResizeMode::Linear,
        CoordMode::TfCropAndResize,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        None,
        Some(&[1, 1, 3, 5]),
        Some(&[0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 0.9, 1.3]),
        &[1, 1, 3, 5],
        &[
            -7.0,
            -7.0,
            -7.0,
            -7.0,
            -7.0,
            6.3578715324401855,
            8.728267669677734,
            11.475049018859863,
            14.523027420043945,
            -7.0,
            20.942174911499023,
            24.71637725830078,
            28.702882766723633,
            32.890350341796875,
            -7.0,
        ],
    ),
    (
        ResizeMode::Cubic,
        CoordMode::HalfPixel,
        NearestMode::RoundPreferFloor,
        -0.75,
        false,
        None,
        Some(&[1, 1, 5, 7]),
        None,
        &[1, 1, 5, 7],
        &[
            -0.8464486598968506,
            -0.6010562181472778,
            -0.09952420741319656,
            0.7211228609085083,
            1.8934999704360962,
            3.260345220565796,
            4.138092517852783,
            1.8761863708496094,
            2.502742290496826,
            3.599205255508423,
            4.909933567047119,
            6.489289283752441,
            8.246621131896973,
            9.356132507324219,
            7.684458255767822,
            8.867411613464355,
            10.835933685302734,
            12.8783597946167,
            15.078128814697266,
            17.433746337890625,
            18.899593353271484,
            17.124467849731445,
            18.648393630981445,
            21.162931442260742,
            23.706050872802734,
            26.37045669555664,
            29.18338966369629,
            30.925397872924805,
            23.586467742919922,
            25.269752502441406,
            28.043521881103516,
            30.838876724243164,
            33.74987030029297,
            36.808143615722656,
            38.69936752319336,
        ],
    ),
    (
        ResizeMode::Cubic,
        CoordMode::Asymmetric,
        NearestMode::RoundPreferFloor,
        -0.75,
        true,
        Some(&[1.0, 1.0, 0.7, 1.4]),
        None,
        None,
        &[1, 1, 2, 5],
        &[
            0.0,
            0.5137814879417419,
            1.686194896697998,
            3.2839176654815674,
            4.952820301055908,
            15.538615226745605,
            17.880870819091797,
            21.306114196777344,
            24.588193893432617,
            27.670820236206055,
        ],
    ),
    (
        ResizeMode::Cubic,
        CoordMode::AlignCorners,
        NearestMode::RoundPreferFloor,
        -0.5,
        false,
        None,
        Some(&[1, 1, 4, 3]),
        None,
        &[1, 1, 4, 3],
        &[
            0.0,
            1.8287307024002075,
            5.196152210235596,
            4.546113014221191,
            8.405014038085938,
            13.241806983947754,
            12.926650047302246,
            18.572505950927734,
            24.829498291015625,
            22.627416610717773,
            29.28091812133789,
            36.482872009277344,
        ],
    ),
];

#[test]
fn onnx_reference_cases() {
    let x: Vec<f32> = (0..12).map(|v| (v as f32).powf(1.5)).collect();
    for (ci, &(mode, coord, nearest, a, excl, scales, sizes, roi, shape, want)) in
        CASES.iter().enumerate()
    {
        let op = Resize {
            mode,
            coord,
            nearest,
            cubic_coeff_a: a,
            exclude_outside: excl,
            extrapolation_value: -7.0,
            antialias: false,
            axes: crate::shape::IntList::EMPTY,
            aspect: AspectPolicy::Stretch,
        };
        let sc = scales.map(|s| t(s, &[s.len()]));
        let sz = sizes.map(|s| ti(s, &[s.len()]));
        let ro = roi.map(|s| t(s, &[s.len()]));
        let out = run(&op, &[Some(t(&x, &[1, 1, 3, 4])), ro, sc, sz], 1).unwrap();
        assert_eq!(out[0].0, shape.to_vec(), "case {ci}");
        for (i, (g, w)) in out[0].1.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "case {ci} ({mode:?} {coord:?}) at {i}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn unsupported_and_needs_data() {
    let x = [0f32; 24];
    let op = op_with(
        ResizeMode::Linear,
        CoordMode::HalfPixel,
        NearestMode::RoundPreferFloor,
    );
    let xt = t(&x, &[2, 3, 4]);
    // Resizing a leading axis.
    let sz = [4i64, 3, 4];
    assert!(matches!(
        run(&op, &[Some(xt), None, None, Some(ti(&sz, &[3]))], 1),
        Err(KernelError::Invalid { .. })
    ));
    // Antialias when downsampling.
    let sc = [1f32, 0.5, 0.5];
    let aa = Resize {
        antialias: true,
        axes: crate::shape::IntList::EMPTY,
        aspect: AspectPolicy::Stretch,
        ..op
    };
    assert!(matches!(
        run(&aa, &[Some(xt), None, Some(t(&sc, &[3])), None], 1),
        Err(KernelError::Invalid { .. })
    ));
    // Unknown sizes at build time.
    let mut shapes = [Shape::SCALAR];
    let unknown = TensorRef::shape_only(DType::I64, Shape::new(&[3]).unwrap());
    assert_eq!(
        op.infer(&[Some(xt), None, None, Some(unknown)], &mut shapes),
        Err(KernelError::NeedsData { op: OP })
    );
    // Neither scales nor sizes (an empty scales tensor counts as absent).
    let empty: [f32; 0] = [];
    assert!(run(&op, &[Some(xt), None, Some(t(&empty, &[0])), None], 1).is_err());
    // Rank 3, last two axes resized: [2, 3, 4] -> [2, 6, 2].
    let sz = [2i64, 6, 2];
    let out = run(&op, &[Some(xt), None, None, Some(ti(&sz, &[3]))], 1).unwrap();
    assert_eq!(out[0].0, vec![2, 6, 2]);
}

/// Large resizes split their planes over the threads: bit-identical on
/// one and three threads, each plane equal to the same plane resized alone.
#[cfg(feature = "std")]
#[test]
fn planes_over_threads_bit_identical() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (c, h, w) = (7, 40, 36);
    let x = rand_vec(c * h * w, 11);
    let sizes = [1i64, c as i64, 2 * h as i64, 2 * w as i64];
    for mode in [ResizeMode::Nearest, ResizeMode::Linear] {
        let op = op_with(mode, CoordMode::HalfPixel, NearestMode::RoundPreferFloor);
        let ins = [
            Some(t(&x, &[1, c, h, w])),
            None,
            None,
            Some(ti(&sizes, &[4])),
        ];
        crate::threads::set_num_threads(1);
        let one = run(&op, &ins, 1).unwrap();
        crate::threads::set_num_threads(3);
        let three = run(&op, &ins, 1).unwrap();
        crate::threads::set_num_threads(1);
        assert_eq!(one[0].1, three[0].1, "{mode:?}");
        let plane_sizes = [1i64, 1, 2 * h as i64, 2 * w as i64];
        let last = &x[(c - 1) * h * w..];
        let alone = run(
            &op,
            &[
                Some(t(last, &[1, 1, h, w])),
                None,
                None,
                Some(ti(&plane_sizes, &[4])),
            ],
            1,
        )
        .unwrap();
        assert_eq!(
            &one[0].1[(c - 1) * 4 * h * w..],
            &alone[0].1[..],
            "{mode:?}"
        );
    }
}

/// Nearest resizes by whole factors (the repeated-value rows and the
/// copied rows) and by other factors (the gathered rows) against the
/// definition: asymmetric coordinates, floor rounding, output pixel
/// `(o_h, o_w)` reads input pixel `(o_h·ih/oh, o_w·iw/ow)`.
#[test]
fn nearest_whole_factors_match_definition() {
    let (c, h, w) = (3, 5, 7);
    let x = rand_vec(c * h * w, 21);
    let op = op_with(
        ResizeMode::Nearest,
        CoordMode::Asymmetric,
        NearestMode::Floor,
    );
    // (output height, output width): factors 1, 2, 3, 4, 8 and mixed,
    // a non-whole upsampling and a downsampling.
    for (oh, ow) in [
        (5, 7),
        (10, 14),
        (15, 21),
        (20, 28),
        (40, 56),
        (10, 56),
        (40, 7),
        (8, 10),
        (3, 4),
    ] {
        let sizes = [1i64, c as i64, oh as i64, ow as i64];
        let ins = [
            Some(t(&x, &[1, c, h, w])),
            None,
            None,
            Some(ti(&sizes, &[4])),
        ];
        let got = run(&op, &ins, 1).unwrap();
        assert_eq!(got[0].0, [1, c, oh, ow]);
        let want: Vec<f32> = (0..c * oh * ow)
            .map(|i| {
                let (p, o_h, o_w) = (i / (oh * ow), i / ow % oh, i % ow);
                // floor(o · in / out) as the asymmetric mode computes it
                // (scale = out / in).
                let sh = oh as f64 / h as f64;
                let sw = ow as f64 / w as f64;
                let (r, col) = ((o_h as f64 / sh) as usize, (o_w as f64 / sw) as usize);
                x[(p * h + r) * w + col]
            })
            .collect();
        assert_eq!(got[0].1, want, "{oh}x{ow}");
    }
}

/// A whole-factor nearest resize whose columns are not `o / s`
/// (asymmetric, rounding up: `ceil(o / 2)`, clamped) takes the gathered
/// rows, not the repeated values.
#[test]
fn nearest_ceil_by_two_matches_definition() {
    let (h, w) = (4, 6);
    let x = rand_vec(h * w, 22);
    let op = op_with(
        ResizeMode::Nearest,
        CoordMode::Asymmetric,
        NearestMode::Ceil,
    );
    let (oh, ow) = (2 * h, 2 * w);
    let sizes = [1i64, 1, oh as i64, ow as i64];
    let ins = [
        Some(t(&x, &[1, 1, h, w])),
        None,
        None,
        Some(ti(&sizes, &[4])),
    ];
    let got = run(&op, &ins, 1).unwrap();
    let pick = |o: usize, i: usize, _: usize| o.div_ceil(2).min(i - 1);
    let want: Vec<f32> = (0..oh * ow)
        .map(|k| x[pick(k / ow, h, oh) * w + pick(k % ow, w, ow)])
        .collect();
    assert_eq!(got[0].1, want);
}
