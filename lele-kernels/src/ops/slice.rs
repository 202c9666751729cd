//! `Slice` (ONNX opset 13 semantics: negative steps, clamping).
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::{MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Slice`: inputs `data`, `starts`, `ends`, optional `axes`,
/// optional `steps` (all 1-D i64/i32).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice;
crate::to_rust_struct!(ops::slice::Slice {});

const OP: &str = "Slice";

/// Per-axis start and step of a slice, with the output shape.
struct Plan {
    shape: Shape,
    start: [i64; MAX_RANK],
    step: [i64; MAX_RANK],
}

fn plan(inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
    let x = input(inputs, 0, OP)?;
    let (starts, n) = read_list(input(inputs, 1, OP)?, OP)?;
    let (ends, ne) = read_list(input(inputs, 2, OP)?, OP)?;
    if ne != n {
        return Err(KernelError::Invalid {
            op: OP,
            msg: "starts and ends differ in length",
        });
    }
    let rank = x.shape.rank();
    let mut axes = [0i64; 2 * MAX_RANK];
    match opt_input(inputs, 3) {
        Some(t) => {
            let (a, na) = read_list(t, OP)?;
            if na != n {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "axes length differs from starts",
                });
            }
            axes = a;
        }
        None => {
            for (i, a) in axes[..n].iter_mut().enumerate() {
                *a = i as i64;
            }
        }
    }
    let mut steps = [1i64; 2 * MAX_RANK];
    if let Some(t) = opt_input(inputs, 4) {
        let (s, ns) = read_list(t, OP)?;
        if ns != n {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "steps length differs from starts",
            });
        }
        steps = s;
    }
    let mut p = Plan {
        shape: x.shape,
        start: [0; MAX_RANK],
        step: [1; MAX_RANK],
    };
    let mut seen = [false; MAX_RANK];
    for i in 0..n {
        let a = normalize_axis(axes[i], rank, OP)?;
        if seen[a] {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "repeated axis",
            });
        }
        seen[a] = true;
        // A dim past i64::MAX (a shape of the sizing pass, never a tensor)
        // would turn negative and make the clamps below panic.
        let dim = i64::try_from(x.shape.dims()[a]).map_err(|_| KernelError::Invalid {
            op: OP,
            msg: "dim too large",
        })?;
        let step = steps[i];
        if step == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "step is 0",
            });
        }
        let (mut s, mut e) = (starts[i], ends[i]);
        if s < 0 {
            s = s.saturating_add(dim);
        }
        if e < 0 {
            e = e.saturating_add(dim);
        }
        let len: i128 = if dim == 0 {
            0
        } else if step > 0 {
            s = s.clamp(0, dim);
            e = e.clamp(0, dim);
            if e > s {
                (e as i128 - s as i128 + step as i128 - 1) / step as i128
            } else {
                0
            }
        } else {
            s = s.clamp(0, dim - 1);
            e = e.clamp(-1, dim - 1);
            let st = -(step as i128);
            if s > e {
                (s as i128 - e as i128 + st - 1) / st
            } else {
                0
            }
        };
        p.shape.dims_mut()[a] = len as usize;
        p.start[a] = if len > 0 { s } else { 0 };
        p.step[a] = step;
    }
    Ok(p)
}

impl Kernel for Slice {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = plan(inputs)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = p.shape;
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // A slice selects a subset of the input.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, OP)?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let p = plan(inputs)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &p.shape, OP)?;
        if p.shape.numel() == 0 {
            return Ok(());
        }
        dispatch_size!(x.dtype, OP, |T| {
            let src = raw::<T>(x, OP)?;
            let dst = raw_mut::<T>(out, OP)?;
            copy_strided(src, &x.shape, dst, &p);
            Ok(())
        })
    }
}

fn copy_strided<T: Copy>(src: &[T], in_shape: &Shape, dst: &mut [T], p: &Plan) {
    let r = p.shape.rank();
    if r == 0 {
        dst[0] = src[0];
        return;
    }
    let st = in_shape.strides();
    let od = p.shape.dims();
    // Element stride (signed) of each axis in the input, and the base offset.
    let mut base = 0i64;
    let mut es = [0i64; MAX_RANK];
    for a in 0..r {
        base += p.start[a] * st[a] as i64;
        es[a] = p.step[a].wrapping_mul(st[a] as i64);
    }
    let mut n = od[r - 1];
    let last = es[r - 1];
    // The run copied at once: the last axis, and the axes before it while
    // the one after them is taken whole at step 1 and they step by 1 (each
    // row then continues where the previous one ended, in the input as in
    // the output: a Slice of a [1, 258, 4] into two [1, 129, 4] halves is
    // one copy, not 129 of 4 floats).
    let mut inner = r - 1;
    if last == 1 {
        let id = in_shape.dims();
        while inner > 0
            && p.step[inner] == 1
            && p.start[inner] == 0
            && od[inner] == id[inner]
            && p.step[inner - 1] == 1
        {
            inner -= 1;
            n *= od[inner];
        }
    }
    let mut idx = [0usize; MAX_RANK];
    let mut off = base;
    let mut o = 0;
    loop {
        let row = &mut dst[o..o + n];
        let start = off as usize;
        if last == 1 {
            row.copy_from_slice(&src[start..start + n]);
        } else {
            for (j, d) in row.iter_mut().enumerate() {
                *d = src[(off + j as i64 * last) as usize];
            }
        }
        o += n;
        let mut a = inner;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            off = off.wrapping_add(es[a]);
            if idx[a] < od[a] {
                break;
            }
            off = off.wrapping_sub(es[a].wrapping_mul(od[a] as i64));
            idx[a] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn slice(
        x: &Owned,
        starts: &[i64],
        ends: &[i64],
        axes: Option<&[i64]>,
        steps: Option<&[i64]>,
    ) -> Result<Owned, KernelError> {
        let s = Owned::new(&[starts.len()], starts);
        let e = Owned::new(&[ends.len()], ends);
        let a = axes.map(|a| Owned::new(&[a.len()], a));
        let st = steps.map(|a| Owned::new(&[a.len()], a));
        run1(
            &Slice,
            &[Some(x), Some(&s), Some(&e), a.as_ref(), st.as_ref()],
            x.dtype,
        )
    }

    /// Found by `lele-build/tests/fuzz` (compiler target): a sizing
    /// shape with a dim of 2^63 made `clamp(0, dim)` panic (min > max).
    /// Only a 64-bit `usize` holds such a dim.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn dims_past_i64_are_errors_not_panics() {
        let shape = Shape::new(&[1 << 63]).unwrap();
        let x = TensorRef {
            dtype: crate::dtype::DType::F32,
            shape,
            data: &[],
        };
        let s = Owned::new(&[1], &[-2i64]);
        let e = Owned::new(&[1], &[2i64]);
        let a = Owned::new(&[1], &[0i64]);
        let back = Owned::new(&[1], &[-1i64]);
        let mut out = [shape];
        for reversed in [false, true] {
            let mut inputs = alloc::vec![Some(x), Some(s.r()), Some(e.r())];
            if reversed {
                inputs.push(Some(a.r()));
                inputs.push(Some(back.r()));
            }
            let r = Slice.infer(&inputs, &mut out);
            assert!(matches!(r, Err(KernelError::Invalid { .. })), "{r:?}");
        }
    }

    #[test]
    fn onnx_examples() {
        // x = np.arange(24).reshape(2, 3, 4)
        let data: Vec<i32> = (0..24).collect();
        let x = Owned::new(&[2, 3, 4], &data);
        // x[:, 1:3, ::2]
        let y = slice(&x, &[1, 0], &[3, i64::MAX], Some(&[1, -1]), Some(&[1, 2])).unwrap();
        assert_eq!(y.dims(), &[2, 2, 2]);
        assert_eq!(y.to::<i32>(), [4, 6, 8, 10, 16, 18, 20, 22]);
        // x[::-1, :, -1:0:-2]
        let y = slice(
            &x,
            &[-1, -1],
            &[i64::MIN, 0],
            Some(&[0, 2]),
            Some(&[-1, -2]),
        )
        .unwrap();
        assert_eq!(y.dims(), &[2, 3, 2]);
        assert_eq!(y.to::<i32>(), [15, 13, 19, 17, 23, 21, 3, 1, 7, 5, 11, 9]);
        // x[:, -100:100] (clamped), default axes
        let y = slice(&x, &[0, -100], &[2, 100], None, None).unwrap();
        assert_eq!(y.to::<i32>(), data);
        // empty: x[:, 2:1]
        let y = slice(&x, &[2], &[1], Some(&[1]), None).unwrap();
        assert_eq!(y.dims(), &[2, 0, 4]);
        // x[..., 3:-5:-1] -> indices 3..=0 descending
        let y = slice(&x, &[3], &[-5], Some(&[-1]), Some(&[-1])).unwrap();
        assert_eq!(y.dims(), &[2, 3, 4]);
        assert_eq!(&y.to::<i32>()[..4], &[3, 2, 1, 0]);
        assert!(slice(&x, &[0], &[1], Some(&[0]), Some(&[0])).is_err());
        assert!(slice(&x, &[0], &[1], Some(&[3]), None).is_err());
        // f64 and step 3 on the last axis
        let xd: Vec<f64> = (0..10).map(|v| v as f64).collect();
        let y = slice(&Owned::new(&[10], &xd), &[1], &[10], None, Some(&[3])).unwrap();
        assert_eq!(y.to::<f64>(), [1.0, 4.0, 7.0]);
    }

    /// Every combination of whole, partial, stepped and reversed ranges on
    /// the axes of a `[2, 3, 4, 5]` tensor (trailing whole axes are copied
    /// as one run with the axis before them) against the index arithmetic.
    #[test]
    fn runs_of_whole_trailing_axes_match_the_indices() {
        let dims = [2usize, 3, 4, 5];
        let data: Vec<i32> = (0..120).collect();
        let x = Owned::new(&dims, &data);
        // (start, end, step) per axis, as the kernel normalizes them.
        let ranges = |n: i64| -> Vec<(i64, i64, i64)> {
            vec![
                (0, n, 1),
                (1, n, 1),
                (0, n - 1, 1),
                (0, n, 2),
                (n - 1, -n - 1, -1),
            ]
        };
        for r0 in ranges(2) {
            for r1 in ranges(3) {
                for r2 in ranges(4) {
                    for r3 in ranges(5) {
                        let rs = [r0, r1, r2, r3];
                        let starts: Vec<i64> = rs.iter().map(|r| r.0).collect();
                        let ends: Vec<i64> = rs.iter().map(|r| r.1).collect();
                        let steps: Vec<i64> = rs.iter().map(|r| r.2).collect();
                        let y =
                            slice(&x, &starts, &ends, Some(&[0, 1, 2, 3]), Some(&steps)).unwrap();
                        let picks: Vec<Vec<i64>> = rs
                            .iter()
                            .zip(dims)
                            .map(|(&(s, e, st), n)| {
                                let e = e.max(-1).min(n as i64);
                                let mut v = vec![];
                                let mut i = s;
                                while (st > 0 && i < e) || (st < 0 && i > e) {
                                    v.push(i);
                                    i += st;
                                }
                                v
                            })
                            .collect();
                        let mut want = vec![];
                        for &a in &picks[0] {
                            for &b in &picks[1] {
                                for &c in &picks[2] {
                                    for &d in &picks[3] {
                                        want.push(data[(((a * 3 + b) * 4 + c) * 5 + d) as usize]);
                                    }
                                }
                            }
                        }
                        assert_eq!(y.to::<i32>(), want, "{rs:?}");
                    }
                }
            }
        }
    }
}
