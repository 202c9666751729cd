//! Selection and replication: Where, Expand, Tile, NonZero, TopK.
use core::cmp::Ordering;

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::broadcast::{Rows, broadcast_all, broadcast_copy};
use crate::ops::dtype_dispatch::{dispatch_num, dispatch_size};
use crate::ops::num::Num;
use crate::shape::{MAX_RANK, Shape, broadcast};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Where`: inputs `condition` (Bool), `X`, `Y` (same dtype), all
/// broadcast together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Where;
crate::to_rust_struct!(ops::select::Where {});

impl Kernel for Where {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "Where";
        let (c, x, y) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        set_out(
            outputs,
            broadcast_all([&c.shape, &x.shape, &y.shape], OP)?,
            OP,
        )
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Where";
        let (c, x, y) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        for t in [c, x, y] {
            check_data(t, OP)?;
        }
        if x.dtype != y.dtype {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: x.dtype,
                found: y.dtype,
            });
        }
        let shape = broadcast_all([&c.shape, &x.shape, &y.shape], OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let cv = c.as_bool(OP)?;
        let rows = Rows::new([&c.shape, &x.shape, &y.shape], &shape, OP)?;
        dispatch_size!(x.dtype, OP, |T| {
            let (xv, yv) = (raw::<T>(x, OP)?, raw::<T>(y, OP)?);
            let o = raw_mut::<T>(out, OP)?;
            rows.for_each(|off, n, [oc, ox, oy], [sc, sx, sy]| {
                let row = &mut o[off..off + n];
                if sc == 1 && sx == 1 && sy == 1 {
                    for (((d, &c), &a), &b) in row
                        .iter_mut()
                        .zip(&cv[oc..oc + n])
                        .zip(&xv[ox..ox + n])
                        .zip(&yv[oy..oy + n])
                    {
                        *d = if c != 0 { a } else { b };
                    }
                } else {
                    for (j, d) in row.iter_mut().enumerate() {
                        *d = if cv[oc + j * sc] != 0 {
                            xv[ox + j * sx]
                        } else {
                            yv[oy + j * sy]
                        };
                    }
                }
            });
            Ok(())
        })
    }
}

/// ONNX `Expand`: inputs `input`, `shape` (i64); the output is `input`
/// broadcast with `shape` (bidirectionally).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expand;
crate::to_rust_struct!(ops::select::Expand {});

impl Expand {
    fn shape(inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "Expand";
        let x = input(inputs, 0, OP)?;
        let (v, n) = read_list(input(inputs, 1, OP)?, OP)?;
        if n > MAX_RANK {
            return Err(KernelError::RankTooLarge(n));
        }
        let mut s = Shape::SCALAR;
        for &d in &v[..n] {
            if d < 0 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "negative dim",
                });
            }
            s.push(d as usize)?;
        }
        broadcast(&x.shape, &s, OP)
    }
}

impl Kernel for Expand {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        set_out(outputs, Self::shape(inputs)?, "Expand")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Expand";
        let shape = Self::shape(inputs)?;
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let rows = Rows::new([&x.shape], &shape, OP)?;
        dispatch_size!(x.dtype, OP, |T| {
            broadcast_copy(&rows, raw::<T>(x, OP)?, raw_mut::<T>(out, OP)?);
            Ok(())
        })
    }
}

/// ONNX `Tile`: inputs `input`, `repeats` (i64, one per dim).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tile;
crate::to_rust_struct!(ops::select::Tile {});

impl Tile {
    fn shape(inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "Tile";
        let x = input(inputs, 0, OP)?;
        let (v, n) = read_list(input(inputs, 1, OP)?, OP)?;
        if n != x.shape.rank() {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "repeats length differs from the rank",
            });
        }
        let mut s = x.shape;
        for (d, &r) in s.dims_mut().iter_mut().zip(&v[..n]) {
            if r < 0 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "negative repeat",
                });
            }
            *d = usize::try_from(r)
                .ok()
                .and_then(|r| d.checked_mul(r))
                .ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "repeated dims overflow",
                })?;
        }
        Ok(s)
    }
}

impl Kernel for Tile {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        set_out(outputs, Self::shape(inputs)?, "Tile")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Tile";
        let shape = Self::shape(inputs)?;
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        if shape.numel() == 0 {
            return Ok(());
        }
        let r = shape.rank();
        let es = x.dtype.size();
        if r == 0 {
            out.data.copy_from_slice(x.data);
            return Ok(());
        }
        let id = x.shape.dims();
        let st = x.shape.strides();
        let od = shape.dims();
        let row_in = id[r - 1] * es;
        let n = od[r - 1] * es;
        let mut idx = [0usize; MAX_RANK];
        let mut o = 0;
        loop {
            let mut off = 0;
            for a in 0..r - 1 {
                off += (idx[a] % id[a]) * st[a];
            }
            let src = &x.data[off * es..off * es + row_in];
            for chunk in out.data[o..o + n].chunks_exact_mut(row_in) {
                chunk.copy_from_slice(src);
            }
            o += n;
            let mut a = r - 1;
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                idx[a] += 1;
                if idx[a] < od[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
    }
}

/// ONNX `NonZero`: i64 output `[rank, count]` with the coordinates of the
/// non-zero elements in row-major order. The shape depends on the values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonZero;
crate::to_rust_struct!(ops::select::NonZero {});

fn nonzero_flags(x: &TensorRef<'_>, mut f: impl FnMut(usize)) -> Result<(), KernelError> {
    const OP: &str = "NonZero";
    check_data(x, OP)?;
    if x.dtype == DType::Bool {
        for (i, &v) in x.data.iter().enumerate() {
            if v != 0 {
                f(i);
            }
        }
        return Ok(());
    }
    dispatch_num!(x.dtype, OP, |T| {
        for (i, &v) in x.typed::<T>(OP)?.iter().enumerate() {
            if v != T::ZERO {
                f(i);
            }
        }
        Ok(())
    })
}

impl Kernel for NonZero {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "NonZero")?;
        let mut n = 0;
        nonzero_flags(x, |_| n += 1)?;
        set_out(outputs, Shape::new(&[x.shape.rank(), n])?, "NonZero")
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // At most every element is non-zero; one index per dimension each.
        let x = input(inputs, 0, "NonZero")?;
        let n = x
            .shape
            .rank()
            .max(1)
            .checked_mul(x.numel())
            .ok_or(KernelError::Invalid {
                op: "NonZero",
                msg: "index count overflows",
            })?;
        crate::kernel::bound_outputs(outputs, n)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "NonZero";
        let x = input(inputs, 0, OP)?;
        let mut n = 0;
        nonzero_flags(x, |_| n += 1)?;
        let r = x.shape.rank();
        let out = output(outputs, 0, OP)?;
        check_out(out, DType::I64, &Shape::new(&[r, n])?, OP)?;
        let y = out.typed::<i64>(OP)?;
        let dims = x.shape.dims();
        let mut k = 0;
        nonzero_flags(x, |mut i| {
            for a in (0..r).rev() {
                y[a * n + k] = (i % dims[a]) as i64;
                i /= dims[a];
            }
            k += 1;
        })
    }
}

/// ONNX `TopK`: inputs `X`, `K` (1-element i64); outputs `Values` (dtype of
/// `X`) and `Indices` (i64). Ties keep the smaller index first; NaN counts
/// as the largest value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopK {
    /// The axis to select along.
    pub axis: i64,
    /// Select the largest (else the smallest) values.
    pub largest: bool,
    /// Output in sorted order (always done).
    pub sorted: bool,
}
crate::to_rust_struct!(ops::select::TopK {
    axis,
    largest,
    sorted
});

impl TopK {
    fn plan(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize), KernelError> {
        const OP: &str = "TopK";
        let x = input(inputs, 0, OP)?;
        let k = input(inputs, 1, OP)?.scalar_i64(OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        if k < 0 || k as usize > x.shape.dims()[axis] {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "k out of range",
            });
        }
        let mut s = x.shape;
        s.dims_mut()[axis] = k as usize;
        Ok((s, axis, k as usize))
    }
}

#[inline]
fn total_cmp<T: Num>(a: T, b: T) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl Kernel for TopK {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _, _) = self.plan(inputs)?;
        if outputs.len() < 2 {
            return Err(KernelError::MissingInput {
                op: "TopK",
                index: 1,
            });
        }
        outputs[0] = s;
        outputs[1] = s;
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // k never exceeds the axis length.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, "TopK")?.numel())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let Some(Some(x)) = inputs.first() else {
            return 0;
        };
        match x.shape.axis(self.axis, "TopK") {
            Ok(a) => x.shape.dims()[a].saturating_mul(core::mem::size_of::<u32>()),
            Err(_) => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "TopK";
        let (shape, axis, k) = self.plan(inputs)?;
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let [vals, idxs] = outputs else {
            return Err(KernelError::MissingInput { op: OP, index: 1 });
        };
        check_out(vals, x.dtype, &shape, OP)?;
        check_out(idxs, DType::I64, &shape, OP)?;
        let d = x.shape.dims();
        let outer: usize = d[..axis].iter().product();
        let n = d[axis];
        let inner: usize = d[axis + 1..].iter().product();
        if n > u32::MAX as usize {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "axis too long",
            });
        }
        if shape.numel() == 0 {
            // Nothing to select into; the outer extent may still be huge.
            return Ok(());
        }
        let order: &mut [u32] = bytemuck::try_cast_slice_mut(
            scratch
                .get_mut(..n * 4)
                .ok_or(KernelError::Buffer { op: OP })?,
        )
        .map_err(|_| KernelError::Buffer { op: OP })?;
        let largest = self.largest;
        let iv = idxs.typed::<i64>(OP)?;
        dispatch_num!(x.dtype, OP, |T| {
            let xv = x.typed::<T>(OP)?;
            let yv = vals.typed::<T>(OP)?;
            for o in 0..outer {
                for j in 0..inner {
                    let at = |i: u32| xv[(o * n + i as usize) * inner + j];
                    let cmp = |a: &u32, b: &u32| {
                        let c = total_cmp(at(*a), at(*b));
                        let c = if largest { c.reverse() } else { c };
                        c.then(a.cmp(b))
                    };
                    for (i, v) in order.iter_mut().enumerate() {
                        *v = i as u32;
                    }
                    if k > 0 && k < n {
                        order.select_nth_unstable_by(k - 1, cmp);
                    }
                    order[..k].sort_unstable_by(cmp);
                    for (t, &i) in order[..k].iter().enumerate() {
                        let dst = (o * k + t) * inner + j;
                        yv[dst] = at(i);
                        iv[dst] = i as i64;
                    }
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run_kernel, run1};

    #[test]
    fn where_broadcast() {
        let c = Owned::boolean(&[2, 1], &[true, false]);
        let x = Owned::new(&[3], &[1.0f32, 2.0, 3.0]);
        let y = Owned::new(&[], &[-1.0f32]);
        let o = run1(&Where, &[Some(&c), Some(&x), Some(&y)], DType::F32).unwrap();
        assert_eq!(o.dims(), &[2, 3]);
        assert_eq!(o.to::<f32>(), [1., 2., 3., -1., -1., -1.]);
        let c = Owned::boolean(&[4], &[true, false, false, true]);
        let x = Owned::new(&[4], &[1i64, 2, 3, 4]);
        let y = Owned::new(&[4], &[5i64, 6, 7, 8]);
        let o = run1(&Where, &[Some(&c), Some(&x), Some(&y)], DType::I64).unwrap();
        assert_eq!(o.to::<i64>(), [1, 6, 7, 4]);
    }

    #[test]
    fn expand_and_tile() {
        let x = Owned::new(&[3, 1], &[1i32, 2, 3]);
        let s = Owned::new(&[3], &[2i64, 1, 4]);
        let y = run1(&Expand, &[Some(&x), Some(&s)], DType::I32).unwrap();
        assert_eq!(y.dims(), &[2, 3, 4]);
        assert_eq!(&y.to::<i32>()[..8], &[1, 1, 1, 1, 2, 2, 2, 2]);
        let s = Owned::new(&[1], &[1i64]);
        let y = run1(&Expand, &[Some(&x), Some(&s)], DType::I32).unwrap();
        assert_eq!(y.dims(), &[3, 1]);
        let x = Owned::new(&[2, 2], &[1u8, 2, 3, 4]);
        let r = Owned::new(&[2], &[2i64, 3]);
        let y = run1(&Tile, &[Some(&x), Some(&r)], DType::U8).unwrap();
        assert_eq!(y.dims(), &[4, 6]);
        assert_eq!(
            y.to::<u8>(),
            [
                1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4
            ]
        );
    }

    #[test]
    fn nonzero() {
        let x = Owned::new(&[2, 3], &[0.0f32, 1.0, 0.0, 2.0, 0.0, -1.0]);
        let y = run1(&NonZero, &[Some(&x)], DType::I64).unwrap();
        assert_eq!(y.dims(), &[2, 3]);
        assert_eq!(y.to::<i64>(), [0, 1, 1, 1, 0, 2]);
        let mut o = [Shape::SCALAR];
        assert!(matches!(
            NonZero.infer(&[Some(TensorRef::shape_only(DType::F32, x.shape))], &mut o),
            Err(KernelError::NeedsData { .. })
        ));
    }

    #[test]
    fn topk() {
        let x = Owned::new(
            &[2, 5],
            &[3.0f32, 1.0, 3.0, 5.0, 2.0, 0.0, f32::NAN, -1.0, 0.0, 4.0],
        );
        let k = Owned::new(&[1], &[3i64]);
        let outs = run_kernel(
            &TopK {
                axis: -1,
                largest: true,
                sorted: true,
            },
            &[Some(&x), Some(&k)],
            &[DType::F32, DType::I64],
        )
        .unwrap();
        assert_eq!(outs[1].to::<i64>(), [3, 0, 2, 1, 4, 0]);
        let v = outs[0].to::<f32>();
        assert_eq!(&v[..3], &[5.0, 3.0, 3.0]);
        assert!(v[3].is_nan());
        let outs = run_kernel(
            &TopK {
                axis: 1,
                largest: false,
                sorted: true,
            },
            &[Some(&x), Some(&k)],
            &[DType::F32, DType::I64],
        )
        .unwrap();
        assert_eq!(outs[1].to::<i64>(), [1, 4, 0, 2, 0, 3]);
        let xi = Owned::new(&[3, 2], &[5i64, 1, 7, 1, 6, 2]);
        let k = Owned::new(&[1], &[2i64]);
        let outs = run_kernel(
            &TopK {
                axis: 0,
                largest: true,
                sorted: true,
            },
            &[Some(&xi), Some(&k)],
            &[DType::I64, DType::I64],
        )
        .unwrap();
        assert_eq!(outs[0].to::<i64>(), [7, 2, 6, 1]);
        assert_eq!(outs[1].to::<i64>(), [1, 2, 2, 0]);
    }
}
