//! Tests of the quantization kernels against scalar references.
use half::f16;

use super::*;
use crate::dtype::Elem;

/// A tiny deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }
    fn int(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u32) as i32
    }
    fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next() as f32 / (1u32 << 31) as f32)
    }
    fn vec<T: Copy>(&mut self, n: usize, f: impl Fn(&mut Self) -> T) -> Vec<T> {
        (0..n).map(|_| f(self)).collect()
    }
}

fn t<'a, T: Elem>(v: &'a [T], dims: &[usize]) -> Option<TensorRef<'a>> {
    Some(TensorRef::new(T::DTYPE, Shape::new(dims).unwrap(), bytemuck::cast_slice(v)).unwrap())
}

/// Runs `k` and returns output `0` as `T`.
fn run1<T: Elem, K: Kernel>(k: &K, inputs: &[Option<TensorRef<'_>>]) -> (Vec<T>, Vec<usize>) {
    let mut shapes = [Shape::SCALAR];
    k.infer(inputs, &mut shapes).unwrap();
    let s = shapes[0];
    let mut y = vec![T::default(); s.numel()];
    let mut scratch = vec![0u8; k.scratch_bytes(inputs, &shapes)];
    {
        let mut outs = [TensorMut::new(T::DTYPE, s, bytemuck::cast_slice_mut(&mut y)).unwrap()];
        k.run(inputs, &mut outs, &mut scratch).unwrap();
    }
    (y, s.dims().to_vec())
}

fn ties_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}

#[test]
fn rint_rounds_half_to_even() {
    for (v, want) in [
        (0.5, 0.0),
        (1.5, 2.0),
        (2.5, 2.0),
        (-0.5, -0.0),
        (-1.5, -2.0),
        (-2.5, -2.0),
        (2.4999, 2.0),
        (7.0, 7.0),
        (1e300, 1e300),
        (-4503599627370497.0, -4503599627370497.0),
    ] {
        assert_eq!(rint(v), want, "{v}");
        assert_eq!(rint(v), ties_even(v), "{v}");
    }
    assert!(rint(f64::NAN).is_nan());
}

#[test]
fn narrowing_from_f64_rounds_once() {
    let tie = 1.0 + 2f64.powi(-11);
    assert_eq!(f64_to_f16(tie), f16::ONE);
    assert_eq!(
        f64_to_f16(tie + 2f64.powi(-40)).to_f64(),
        1.0 + 2f64.powi(-10)
    );
    assert_eq!(
        f64_to_f16(-tie - 2f64.powi(-40)).to_f64(),
        -1.0 - 2f64.powi(-10)
    );
    let btie = 1.0 + 2f64.powi(-8);
    assert_eq!(f64_to_bf16(btie).to_f64(), 1.0);
    assert_eq!(
        f64_to_bf16(btie + 2f64.powi(-45)).to_f64(),
        1.0 + 2f64.powi(-7)
    );
    assert_eq!(f64_to_f16(1e-30).to_f64(), 0.0);
    assert_eq!(f64_to_f16(1e10), f16::INFINITY);
    let mut g = Lcg(1);
    for _ in 0..10_000 {
        let v = (g.f32(-70000.0, 70000.0) as f64) * (1.0 + g.next() as f64 * 1e-12);
        let h = f64_to_f16(v);
        if h.is_infinite() {
            continue;
        }
        let (lo, hi) = (h.to_f64(), h.to_f64());
        let (down, up) = (
            f16::from_bits(h.to_bits().wrapping_sub(1)).to_f64(),
            f16::from_bits(h.to_bits().wrapping_add(1)).to_f64(),
        );
        assert!(
            (lo - v).abs() <= (down - v).abs() && (hi - v).abs() <= (up - v).abs(),
            "{v}"
        );
    }
}

fn quantize<O: Elem>(
    k: QuantizeLinear,
    x: &[f32],
    dims: &[usize],
    s: &[f32],
    sdims: &[usize],
    zp: Option<&[O]>,
) -> Vec<O> {
    let inputs = [t(x, dims), t(s, sdims), zp.and_then(|z| t(z, sdims))];
    run1::<O, _>(&k, &inputs).0
}

const Q: QuantizeLinear = QuantizeLinear {
    axis: 1,
    block_size: 0,
    precision: None,
};

#[test]
fn quantize_per_tensor_rounds_and_saturates() {
    let x = [0.0, 2.0, 3.0, 1000.0, -254.0, -1000.0, 5.0, -5.0, 7.0];
    let y = quantize(Q, &x, &[9], &[2.0], &[], Some(&[128u8]));
    assert_eq!(y, [128, 129, 130, 255, 1, 0, 130, 126, 132]);
    let y = quantize(Q, &x, &[9], &[2.0], &[], Some(&[-1i8]));
    assert_eq!(y, [-1, 0, 1, 127, -128, -128, 1, -3, 3]);
    let x = [65022.0, -66046.0, 65023.0, -66047.0, 2.9, -3.1, f32::NAN];
    let y = quantize(Q, &x, &[7], &[2.0], &[], Some(&[256i16]));
    assert_eq!(y, [32767, -32767, 32767, -32768, 257, 254, -32768]);
    let y = quantize(
        Q,
        &[-1.0, 65536.0 * 2.0, 4.0],
        &[3],
        &[2.0],
        &[],
        Some(&[0u16]),
    );
    assert_eq!(y, [0, 65535, 2]);
}

#[test]
fn quantize_per_axis_and_blocked_match_a_reference() {
    let mut g = Lcg(7);
    for dims in [vec![2, 3, 5], vec![1, 7, 3], vec![4, 1, 2], vec![3, 5, 1]] {
        for axis in -3i64..3 {
            let ax = (axis + 3) as usize % 3;
            let (outer, d, inner) = (
                dims[..ax].iter().product::<usize>(),
                dims[ax],
                dims[ax + 1..].iter().product::<usize>(),
            );
            let x = g.vec(outer * d * inner, |g| g.f32(-300.0, 300.0));
            for block in [0usize, 1, 2, 3] {
                let mut sdims = dims.clone();
                let nb = if block == 0 { d } else { d.div_ceil(block) };
                sdims[ax] = nb;
                let sdims = if block == 0 { vec![d] } else { sdims };
                let n: usize = sdims.iter().product();
                if n == 1 {
                    continue;
                }
                let s = g.vec(n, |g| g.f32(0.5, 4.0));
                let z = g.vec(n, |g| g.int(-20, 20) as i8);
                let k = QuantizeLinear {
                    axis,
                    block_size: block,
                    precision: None,
                };
                let y = quantize(k, &x, &dims, &s, &sdims, Some(&z));
                for o in 0..outer {
                    for j in 0..d {
                        for r in 0..inner {
                            let i = (o * d + j) * inner + r;
                            let p = match j.checked_div(block) {
                                None => j,
                                Some(jb) => (o * nb + jb) * inner + r,
                            };
                            let q = ties_even((x[i] / s[p]) as f64) + z[p] as f64;
                            assert_eq!(
                                y[i],
                                q.clamp(-128.0, 127.0) as i8,
                                "{dims:?} {axis} {block}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn quantize_checks_shapes_and_handles_precision() {
    // A rank-1 input with the default axis 1 and a scalar scale is per tensor.
    let y = quantize::<u8>(Q, &[1.0, 3.0], &[2], &[2.0], &[1], None);
    assert_eq!(y, [0, 2]);
    let k = Q;
    let x = [1.0f32; 6];
    let s = [1.0f32; 4];
    let inputs = [t(&x, &[2, 3]), t(&s, &[4]), None];
    assert!(k.infer(&inputs, &mut [Shape::SCALAR]).is_err());
    let k = QuantizeLinear { block_size: 2, ..Q };
    let s = [1.0f32; 2];
    let inputs = [t(&x, &[2, 3]), t(&s, &[2, 1]), None];
    assert!(k.infer(&inputs, &mut [Shape::SCALAR]).is_err());
    // float16 operands divide in float16: 1000/3 = 333.25 (f16) rounds to 333.
    let xh = [f16::from_f32(1000.0), f16::from_f32(1001.0)];
    let sh = [f16::from_f32(3.0)];
    let inputs = [t(&xh, &[2]), t(&sh, &[]), t(&[0i16], &[])];
    let (y, _) = run1::<i16, _>(&Q, &inputs);
    assert_eq!(y, [333, 334]);
    // Precision float16: 0.1 / 1 rounds to f16 first; big values saturate.
    let k = QuantizeLinear {
        precision: Some(DType::F16),
        ..Q
    };
    let inputs = [
        t(&[100000.0f32, 2.5], &[2]),
        t(&[1.0f32], &[]),
        t(&[0i16], &[]),
    ];
    assert_eq!(run1::<i16, _>(&k, &inputs).0, [32767, 2]);
    // int32 inputs divide in float64.
    let inputs = [t(&[7i32, -9, 1 << 30], &[3]), t(&[2i32], &[]), None];
    assert_eq!(run1::<u8, _>(&Q, &inputs).0, [4, 0, 255]);
}

fn dequantize<X: Elem, O: Elem>(
    k: DequantizeLinear,
    x: &[X],
    dims: &[usize],
    s: &[f32],
    sdims: &[usize],
    zp: Option<&[X]>,
) -> Vec<O> {
    let inputs = [t(x, dims), t(s, sdims), zp.and_then(|z| t(z, sdims))];
    run1::<O, _>(&k, &inputs).0
}

const DQ: DequantizeLinear = DequantizeLinear {
    axis: 1,
    block_size: 0,
};

#[test]
fn dequantize_matches_a_reference() {
    let y: Vec<f32> = dequantize(DQ, &[0u8, 3, 128, 255], &[4], &[2.0], &[], Some(&[128]));
    assert_eq!(y, [-256.0, -250.0, 0.0, 254.0]);
    let y: Vec<f32> = dequantize(DQ, &[-300i16, 1270], &[2], &[2.0], &[], Some(&[-1024]));
    assert_eq!(y, [1448.0, 4588.0]);
    let y: Vec<f32> = dequantize(DQ, &[30000u16, 33000], &[2], &[2.0], &[], Some(&[32767]));
    assert_eq!(y, [-5534.0, 466.0]);
    let y: Vec<f32> = dequantize(DQ, &[i32::MAX, -5], &[2], &[0.5], &[], None);
    assert_eq!(y, [i32::MAX as f32 * 0.5, -2.5]);
    let mut g = Lcg(3);
    let dims = [2usize, 5, 3];
    let x = g.vec(30, |g| g.int(0, 255) as u8);
    for (block, sdims) in [
        (0usize, vec![5usize]),
        (2, vec![2, 3, 3]),
        (5, vec![2, 1, 3]),
    ] {
        let n: usize = sdims.iter().product();
        let s = g.vec(n, |g| g.f32(0.01, 2.0));
        let z = g.vec(n, |g| g.int(0, 255) as u8);
        let k = DequantizeLinear {
            axis: -2,
            block_size: block,
        };
        let y: Vec<f32> = dequantize(k, &x, &dims, &s, &sdims, Some(&z));
        let yh: Vec<f16> = {
            let sh: Vec<f16> = s.iter().map(|&v| f16::from_f32(v)).collect();
            let inputs = [t(&x, &dims), t(&sh, &sdims), t(&z, &sdims)];
            run1::<f16, _>(&k, &inputs).0
        };
        let nb = if block == 0 { 5 } else { sdims[1] };
        for o in 0..2 {
            for j in 0..5usize {
                for r in 0..3 {
                    let i = (o * 5 + j) * 3 + r;
                    let p = match j.checked_div(block) {
                        None => j,
                        Some(jb) => (o * nb + jb) * 3 + r,
                    };
                    let want = (x[i] as f32 - z[p] as f32) * s[p];
                    assert_eq!(y[i], want, "block {block} at {i}");
                    let sh = f16::from_f32(s[p]).to_f32();
                    let want = f16::from_f32((x[i] as f32 - z[p] as f32) * sh);
                    assert_eq!(yh[i], want, "f16 block {block} at {i}");
                }
            }
        }
    }
}

#[test]
fn dynamic_quantize_matches_the_onnx_examples() {
    let cases: [(&[f32], &[u8], f32, u8); 3] = [
        (
            &[0.0, 2.0, -3.0, -2.5, 1.34, 0.5],
            &[153, 255, 0, 26, 221, 179],
            0.019_607_844,
            153,
        ),
        (
            &[-1.0, -2.1, -1.3, -2.5, -3.34, -4.0],
            &[191, 121, 172, 96, 42, 0],
            0.015_686_275,
            255,
        ),
        (
            &[1.0, 2.1, 1.3, 2.5, 3.34, 4.0],
            &[64, 134, 83, 159, 213, 255],
            0.015_686_275,
            0,
        ),
    ];
    for (x, want, scale, zp) in cases {
        let inputs = [t(x, &[x.len()])];
        let k = DynamicQuantizeLinear;
        let mut shapes = [Shape::SCALAR; 3];
        k.infer(&inputs, &mut shapes).unwrap();
        let (mut y, mut s, mut z) = (vec![0u8; x.len()], [0f32], [0u8]);
        let mut outs = [
            TensorMut::new(DType::U8, shapes[0], &mut y).unwrap(),
            TensorMut::new(DType::F32, shapes[1], bytemuck::cast_slice_mut(&mut s)).unwrap(),
            TensorMut::new(DType::U8, shapes[2], &mut z).unwrap(),
        ];
        k.run(&inputs, &mut outs, &mut []).unwrap();
        assert_eq!(y, want);
        assert_eq!(s[0], scale);
        assert_eq!(z[0], zp);
    }
}

/// Naive `(a - za) @ (b - zb)` over `[batch, m, k] x [batch, k, n]` with
/// per-row `za` and per-column `zb`.
fn ref_mm(
    a: &[i32],
    b: &[i32],
    batch: usize,
    (m, k, n): (usize, usize, usize),
    za: &dyn Fn(usize, usize) -> i32,
    zb: &dyn Fn(usize, usize) -> i32,
) -> Vec<i32> {
    let mut y = vec![0; batch * m * n];
    for bt in 0..batch {
        for i in 0..m {
            for j in 0..n {
                for kk in 0..k {
                    y[(bt * m + i) * n + j] += (a[(bt * m + i) * k + kk] - za(bt, i))
                        * (b[(bt * k + kk) * n + j] - zb(bt, j));
                }
            }
        }
    }
    y
}

#[test]
fn matmul_integer_matches_a_reference() {
    let mut g = Lcg(11);
    for (m, k, n) in [(1, 1, 1), (4, 3, 2), (5, 7, 3), (3, 1, 9), (2, 17, 5)] {
        let a = g.vec(2 * m * k, |g| g.int(0, 255) as u8);
        let b = g.vec(2 * k * n, |g| g.int(-128, 127) as i8);
        let za = g.vec(2 * m, |g| g.int(0, 255) as u8);
        let zb = g.vec(n, |g| g.int(-128, 127) as i8);
        let a32: Vec<i32> = a.iter().map(|&v| v as i32).collect();
        let b32: Vec<i32> = b.iter().map(|&v| v as i32).collect();
        // Per-tensor zero points, batch 2.
        let inputs = [
            t(&a, &[2, m, k]),
            t(&b, &[2, k, n]),
            t(&za[..1], &[]),
            t(&zb[..1], &[1]),
        ];
        let (y, dims) = run1::<i32, _>(&MatMulInteger, &inputs);
        assert_eq!(dims, [2, m, n]);
        let want = ref_mm(&a32, &b32, 2, (m, k, n), &|_, _| za[0] as i32, &|_, _| {
            zb[0] as i32
        });
        assert_eq!(y, want);
        // Per-row (batched, [2, m, 1]) and per-column ([n]) zero points.
        let inputs = [
            t(&a, &[2, m, k]),
            t(&b, &[2, k, n]),
            t(&za, &[2, m, 1]),
            t(&zb, &[n]),
        ];
        let (y, _) = run1::<i32, _>(&MatMulInteger, &inputs);
        let want = ref_mm(
            &a32,
            &b32,
            2,
            (m, k, n),
            &|bt, i| za[bt * m + i] as i32,
            &|_, j| zb[j] as i32,
        );
        assert_eq!(y, want);
        // Broadcast B over A's batch; no zero points.
        let inputs = [t(&a, &[2, m, k]), t(&b[..k * n], &[k, n]), None, None];
        let (y, dims) = run1::<i32, _>(&MatMulInteger, &inputs);
        assert_eq!(dims, [2, m, n]);
        let mut b2 = b32[..k * n].to_vec();
        b2.extend_from_slice(&b32[..k * n]);
        assert_eq!(y, ref_mm(&a32, &b2, 2, (m, k, n), &|_, _| 0, &|_, _| 0));
    }
    // The ONNX example: a 1-D zero point with one element.
    let a = [11u8, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0];
    let b = [1u8, 4, 2, 5, 3, 6];
    let inputs = [
        t(&a, &[4, 3]),
        t(&b, &[3, 2]),
        t(&[12u8], &[1]),
        t(&[0u8], &[1]),
    ];
    let (y, _) = run1::<i32, _>(&MatMulInteger, &inputs);
    assert_eq!(y, [-38, -83, -44, -98, -50, -113, -56, -128]);
    // 1-D operands.
    let inputs = [t(&[1u8, 2, 3], &[3]), t(&[4u8, 5, 6], &[3]), None, None];
    let (y, dims) = run1::<i32, _>(&MatMulInteger, &inputs);
    assert_eq!((y, dims), (vec![32], vec![]));
}

#[test]
fn qlinear_matmul_matches_the_onnx_examples_and_a_reference() {
    let a = [208u8, 236, 0, 238, 3, 214, 255, 29];
    let b = [152u8, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247];
    let run = |sa: f32, sb: f32, sy: f32| {
        let inputs = [
            t(&a, &[2, 4]),
            t(std::slice::from_ref(&sa), &[1]),
            t(&[113u8], &[1]),
            t(&b, &[4, 3]),
            t(std::slice::from_ref(&sb), &[1]),
            t(&[114u8], &[1]),
            t(std::slice::from_ref(&sy), &[1]),
            t(&[118u8], &[1]),
        ];
        run1::<u8, _>(&QLinearMatMul, &inputs).0
    };
    assert_eq!(run(0.0066, 0.00705, 0.0107), [168, 115, 255, 1, 66, 151]);
    let ai: Vec<i8> = a.iter().map(|&v| (v as i32 - 127) as i8).collect();
    let bi: Vec<i8> = b.iter().map(|&v| (v as i32 - 127) as i8).collect();
    let h = |v: f32| [f16::from_f32(v)];
    let (sa, sb, sy) = (h(0.0066), h(0.00705), h(0.0107));
    let inputs = [
        t(&ai, &[2, 4]),
        t(&sa, &[1]),
        t(&[-14i8], &[1]),
        t(&bi, &[4, 3]),
        t(&sb, &[1]),
        t(&[-13i8], &[1]),
        t(&sy, &[1]),
        t(&[-9i8], &[1]),
    ];
    assert_eq!(
        run1::<i8, _>(&QLinearMatMul, &inputs).0,
        [41, -12, -9, 1, -75, -128]
    );

    // Per-row / per-column parameters on odd sizes.
    let mut g = Lcg(5);
    let (m, k, n) = (3, 5, 7);
    let a = g.vec(m * k, |g| g.int(-128, 127) as i8);
    let b = g.vec(k * n, |g| g.int(0, 255) as u8);
    let (sa, za) = (
        g.vec(m, |g| g.f32(0.01, 0.1)),
        g.vec(m, |g| g.int(-5, 5) as i8),
    );
    let (sb, zb) = (
        g.vec(n, |g| g.f32(0.01, 0.1)),
        g.vec(n, |g| g.int(100, 150) as u8),
    );
    let (sy, zy) = ([0.05f32], [3i8]);
    let inputs = [
        t(&a, &[m, k]),
        t(&sa, &[m]),
        t(&za, &[m]),
        t(&b, &[k, n]),
        t(&sb, &[1, n]),
        t(&zb, &[1, n]),
        t(&sy, &[]),
        t(&zy, &[]),
    ];
    let (y, _) = run1::<i8, _>(&QLinearMatMul, &inputs);
    let a32: Vec<i32> = a.iter().map(|&v| v as i32).collect();
    let b32: Vec<i32> = b.iter().map(|&v| v as i32).collect();
    let acc = ref_mm(&a32, &b32, 1, (m, k, n), &|_, i| za[i] as i32, &|_, j| {
        zb[j] as i32
    });
    for i in 0..m {
        for j in 0..n {
            let f = (sa[i] * sb[j] / sy[0]) as f64;
            let want = (ties_even(acc[i * n + j] as f64 * f) + 3.0).clamp(-128.0, 127.0);
            assert_eq!(y[i * n + j] as f64, want, "{i},{j}");
        }
    }
}

/// Naive 2-D integer convolution with zero points, pads and strides.
#[allow(clippy::too_many_arguments)]
fn ref_conv2d(
    x: &[i32],
    (n, c, h, w): (usize, usize, usize, usize),
    wt: &[i32],
    (m, kh, kw): (usize, usize, usize),
    group: usize,
    (sh, sw): (usize, usize),
    (dh, dw): (usize, usize),
    (pt, pl, pb, pr): (usize, usize, usize, usize),
    xz: i32,
    wz: &dyn Fn(usize) -> i32,
) -> (Vec<i32>, usize, usize) {
    let oh = (h + pt + pb - (kh - 1) * dh - 1) / sh + 1;
    let ow = (w + pl + pr - (kw - 1) * dw - 1) / sw + 1;
    let (cg, mg) = (c / group, m / group);
    let mut y = vec![0; n * m * oh * ow];
    for b in 0..n {
        for o in 0..m {
            let gi = o / mg;
            for yy in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0;
                    for ci in 0..cg {
                        let ch = gi * cg + ci;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (yy * sh + ky * dh) as isize - pt as isize;
                                let ix = (xx * sw + kx * dw) as isize - pl as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xv = x[((b * c + ch) * h + iy as usize) * w + ix as usize];
                                let wv = wt[((o * cg + ci) * kh + ky) * kw + kx];
                                acc += (xv - xz) * (wv - wz(o));
                            }
                        }
                    }
                    y[((b * m + o) * oh + yy) * ow + xx] = acc;
                }
            }
        }
    }
    (y, oh, ow)
}

fn attrs(group: usize, strides: &[i64], pads: &[i64], dil: &[i64]) -> QConvAttrs {
    QConvAttrs {
        group,
        kernel: crate::IntList::EMPTY,
        strides: crate::IntList::new(strides).unwrap(),
        pads: crate::IntList::new(pads).unwrap(),
        dilations: crate::IntList::new(dil).unwrap(),
        auto_pad: crate::ops::conv::AutoPad::NotSet,
    }
}

#[test]
fn conv_integer_matches_the_onnx_examples() {
    let x: Vec<u8> = (2..11).collect();
    let w = [1u8; 8];
    let k = ConvInteger {
        attrs: attrs(1, &[], &[1, 1, 1, 1], &[]),
    };
    let inputs = [
        t(&x, &[1, 1, 3, 3]),
        t(&w, &[2, 1, 2, 2]),
        t(&[1u8], &[]),
        t(&[0u8, 1], &[2]),
    ];
    let (y, dims) = run1::<i32, _>(&k, &inputs);
    assert_eq!(dims, [1, 2, 4, 4]);
    assert_eq!(
        &y[..16],
        [1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9]
    );
    assert!(y[16..].iter().all(|&v| v == 0));
    let k = ConvInteger {
        attrs: attrs(1, &[], &[], &[]),
    };
    let inputs = [
        t(&x, &[1, 1, 3, 3]),
        t(&w[..4], &[1, 1, 2, 2]),
        t(&[1u8], &[]),
        None,
    ];
    assert_eq!(run1::<i32, _>(&k, &inputs).0, [12, 16, 24, 28]);
}

#[test]
fn conv_integer_matches_a_reference_on_odd_shapes() {
    let mut g = Lcg(17);
    type Case = (
        (usize, usize, usize, usize),
        (usize, usize, usize),
        usize,
        (usize, usize),
        (usize, usize),
        (usize, usize, usize, usize),
    );
    let cases: [Case; 5] = [
        ((1, 3, 5, 7), (4, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),
        ((2, 4, 6, 5), (6, 2, 3), 2, (2, 1), (1, 2), (0, 2, 1, 0)),
        ((1, 3, 4, 4), (3, 1, 1), 3, (1, 1), (1, 1), (0, 0, 0, 0)),
        ((1, 2, 7, 3), (5, 3, 2), 1, (3, 2), (2, 1), (2, 1, 1, 1)),
        ((1, 1, 1, 9), (2, 1, 4), 1, (1, 3), (1, 1), (0, 0, 0, 2)),
    ];
    for (xd, (m, kh, kw), group, st, dl, pads) in cases {
        let (n, c, h, w) = xd;
        let x = g.vec(n * c * h * w, |g| g.int(-128, 127) as i8);
        let wt = g.vec(m * (c / group) * kh * kw, |g| g.int(0, 255) as u8);
        let wz = g.vec(m, |g| g.int(0, 255) as u8);
        let xz = [-3i8];
        let k = ConvInteger {
            attrs: attrs(
                group,
                &[st.0 as i64, st.1 as i64],
                &[pads.0 as i64, pads.1 as i64, pads.2 as i64, pads.3 as i64],
                &[dl.0 as i64, dl.1 as i64],
            ),
        };
        let inputs = [
            t(&x, &[n, c, h, w]),
            t(&wt, &[m, c / group, kh, kw]),
            t(&xz, &[]),
            t(&wz, &[m]),
        ];
        let (y, dims) = run1::<i32, _>(&k, &inputs);
        let x32: Vec<i32> = x.iter().map(|&v| v as i32).collect();
        let w32: Vec<i32> = wt.iter().map(|&v| v as i32).collect();
        let (want, oh, ow) = ref_conv2d(
            &x32,
            xd,
            &w32,
            (m, kh, kw),
            group,
            st,
            dl,
            pads,
            xz[0] as i32,
            &|o| wz[o] as i32,
        );
        assert_eq!(dims, [n, m, oh, ow]);
        assert_eq!(y, want, "{xd:?}");
        // The same as 1-D (H = 1 rows) when the kernel has one row.
        if h == 1 && kh == 1 && pads.0 == 0 && pads.2 == 0 {
            let k1 = ConvInteger {
                attrs: attrs(
                    group,
                    &[st.1 as i64],
                    &[pads.1 as i64, pads.3 as i64],
                    &[dl.1 as i64],
                ),
            };
            let inputs = [
                t(&x, &[n, c, w]),
                t(&wt, &[m, c / group, kw]),
                t(&xz, &[]),
                t(&wz, &[m]),
            ];
            assert_eq!(run1::<i32, _>(&k1, &inputs).0, want);
        }
    }
    // 3-D: a 2x2x2 box filter over a 3x3x3 volume of ones.
    let x = [1u8; 27];
    let w = [1u8; 8];
    let k = ConvInteger {
        attrs: attrs(1, &[], &[], &[]),
    };
    let (y, dims) = run1::<i32, _>(&k, &[t(&x, &[1, 1, 3, 3, 3]), t(&w, &[1, 1, 2, 2, 2])]);
    assert_eq!(dims, [1, 1, 2, 2, 2]);
    assert_eq!(y, [8; 8]);
}

#[test]
fn qlinear_conv_matches_a_reference() {
    let mut g = Lcg(23);
    let (n, c, h, w, m, kh, kw) = (1, 2, 5, 4, 3, 3, 2);
    let x = g.vec(n * c * h * w, |g| g.int(0, 255) as u8);
    let wt = g.vec(m * c * kh * kw, |g| g.int(-128, 127) as i8);
    let ws = g.vec(m, |g| g.f32(0.001, 0.01));
    let wz = [0i8, 1, -1];
    let bias = [100i32, -2000, 0];
    let (xs, xz, ys, yz) = ([0.02f32], [128u8], [0.05f32], [10u8]);
    let k = QLinearConv {
        attrs: attrs(1, &[1, 1], &[1, 0, 1, 1], &[]),
    };
    let inputs = [
        t(&x, &[n, c, h, w]),
        t(&xs, &[]),
        t(&xz, &[]),
        t(&wt, &[m, c, kh, kw]),
        t(&ws, &[m]),
        t(&wz, &[m]),
        t(&ys, &[]),
        t(&yz, &[]),
        t(&bias, &[m]),
    ];
    let (y, dims) = run1::<u8, _>(&k, &inputs);
    let x32: Vec<i32> = x.iter().map(|&v| v as i32).collect();
    let w32: Vec<i32> = wt.iter().map(|&v| v as i32).collect();
    let (acc, oh, ow) = ref_conv2d(
        &x32,
        (n, c, h, w),
        &w32,
        (m, kh, kw),
        1,
        (1, 1),
        (1, 1),
        (1, 0, 1, 1),
        xz[0] as i32,
        &|o| wz[o] as i32,
    );
    assert_eq!(dims, [n, m, oh, ow]);
    let mut saturated = 0;
    for o in 0..m {
        for p in 0..oh * ow {
            let i = o * oh * ow + p;
            let f = (xs[0] * ws[o] / ys[0]) as f64;
            let v = ties_even((acc[i] + bias[o]) as f64 * f) + yz[0] as f64;
            saturated += usize::from(!(0.0..=255.0).contains(&v));
            assert_eq!(y[i] as f64, v.clamp(0.0, 255.0), "{o} {p}");
        }
    }
    assert!(saturated < y.len() / 2);
}

#[test]
fn qlinear_conv_matches_the_onnx_example() {
    #[rustfmt::skip]
    let x: [u8; 49] = [
        255, 174, 162, 25, 203, 168, 58, 15, 59, 237, 95, 129, 0, 64, 56, 242, 153, 221, 168, 12,
        166, 232, 178, 186, 195, 237, 162, 237, 188, 39, 124, 77, 80, 102, 43, 127, 230, 21, 83,
        41, 40, 134, 255, 154, 92, 141, 42, 148, 247,
    ];
    #[rustfmt::skip]
    let want: [u8; 49] = [
        0, 81, 93, 230, 52, 87, 197, 240, 196, 18, 160, 126, 255, 191, 199, 13, 102, 34, 87, 243,
        89, 23, 77, 69, 60, 18, 93, 18, 67, 216, 131, 178, 175, 153, 212, 128, 25, 234, 172, 214,
        215, 121, 0, 101, 163, 114, 213, 107, 8,
    ];
    let k = QLinearConv {
        attrs: attrs(1, &[], &[], &[]),
    };
    let inputs = [
        t(&x, &[1, 1, 7, 7]),
        t(&[0.003_692_05_f32], &[]),
        t(&[132u8], &[]),
        t(&[0u8], &[1, 1, 1, 1]),
        t(&[0.001_727_95_f32], &[1]),
        t(&[255u8], &[1]),
        t(&[0.001_626_81_f32], &[]),
        t(&[123u8], &[]),
    ];
    assert_eq!(run1::<u8, _>(&k, &inputs).0, want);
}
