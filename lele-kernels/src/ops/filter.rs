//! Operators whose output size depends on the data: `Compress` and
//! `Unique`. Their outputs are bounded by the input size, so the compiler
//! can plan them even when the data is unknown at build time.
use core::cmp::Ordering;

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, bound_outputs, input, output};
use crate::ops::access::check_data;
use crate::ops::dtype_dispatch::dispatch;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `Compress`: keeps the slices of `input` along `axis` whose entry in
/// the 1-D Bool `condition` is true (a shorter condition counts as false
/// for the remaining slices). Without an axis the input is flattened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compress {
    /// The axis, or `None` to flatten.
    pub axis: Option<i64>,
}
crate::to_rust_struct!(ops::filter::Compress { axis });

/// `(outer, n, inner)` of `shape` around `axis` (or the flattened tensor).
fn split_at_axis(shape: &Shape, axis: Option<usize>) -> (usize, usize, usize) {
    match axis {
        None => (1, shape.numel(), 1),
        Some(a) => {
            let d = shape.dims();
            (d[..a].iter().product(), d[a], d[a + 1..].iter().product())
        }
    }
}

impl Compress {
    fn axis(&self, x: &TensorRef<'_>) -> Result<Option<usize>, KernelError> {
        self.axis.map(|a| x.shape.axis(a, "Compress")).transpose()
    }
}

impl Kernel for Compress {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "Compress";
        let x = input(inputs, 0, OP)?;
        let cond = input(inputs, 1, OP)?.as_bool(OP)?;
        let axis = self.axis(x)?;
        let (_, n, _) = split_at_axis(&x.shape, axis);
        if cond.len() > n {
            return Err(KernelError::Shape {
                op: OP,
                msg: "condition is longer than the input along the axis",
            });
        }
        let kept = cond.iter().filter(|&&c| c != 0).count();
        let out = match axis {
            None => Shape::new(&[kept])?,
            Some(a) => {
                let mut s = x.shape;
                s.dims_mut()[a] = kept;
                s
            }
        };
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = out;
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // The output is a subset of the input.
        bound_outputs(outputs, input(inputs, 0, "Compress")?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Compress";
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let cond = input(inputs, 1, OP)?.as_bool(OP)?;
        let (outer, n, inner) = split_at_axis(&x.shape, self.axis(x)?);
        let out = output(outputs, 0, OP)?;
        let row = inner * x.dtype.size();
        if row == 0 {
            // An empty output; the outer extent may still be huge.
            return Ok(());
        }
        let mut w = 0;
        for o in 0..outer {
            for (i, _) in cond.iter().enumerate().filter(|&(_, &c)| c != 0) {
                let src = (o * n + i) * row;
                out.data
                    .get_mut(w..w + row)
                    .ok_or(KernelError::Buffer { op: OP })?
                    .copy_from_slice(&x.data[src..src + row]);
                w += row;
            }
        }
        Ok(())
    }
}

/// ONNX `Unique`: the distinct slices of `X` along `axis` (distinct
/// elements of the flattened tensor without an axis), ascending when
/// `sorted`, else in order of first occurrence. Outputs `Y`, and optionally
/// `indices` (first occurrence of each), `inverse_indices` (for each input
/// slice, its position in `Y`) and `counts`, all int64.
///
/// Runs in O(n·u) slice comparisons (n slices, u distinct ones) with an
/// n-entry scratch list and no allocation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unique {
    /// The axis, or `None` to flatten.
    pub axis: Option<i64>,
    /// Sort the distinct slices ascending.
    pub sorted: bool,
}
crate::to_rust_struct!(ops::filter::Unique { axis, sorted });

const UNIQUE: &str = "Unique";

/// [`dispatch!`] over the dtypes `Unique` compares (Bool as bytes).
macro_rules! dispatch_unique {
    ($dt:expr, |$T:ident| $body:expr) => {
        dispatch!($dt, UNIQUE, [
            F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
            I8 => i8, U8 => u8, I16 => i16, U16 => u16,
            I32 => i32, U32 => u32, I64 => i64, U64 => u64, Bool => u8,
        ], |$T| $body)
    };
}

/// Slice comparison along the planned axis.
struct Slices<'a, T> {
    x: &'a [T],
    outer: usize,
    n: usize,
    inner: usize,
}

impl<T: PartialOrd + Copy> Slices<'_, T> {
    fn cmp(&self, a: usize, b: usize) -> Ordering {
        for o in 0..self.outer {
            let (ra, rb) = ((o * self.n + a) * self.inner, (o * self.n + b) * self.inner);
            for j in 0..self.inner {
                match self.x[ra + j].partial_cmp(&self.x[rb + j]) {
                    Some(Ordering::Equal) | None => {}
                    Some(ord) => return ord,
                }
            }
        }
        Ordering::Equal
    }

    fn first_occurrences(&self, mut f: impl FnMut(usize)) {
        for i in 0..self.n {
            if (0..i).all(|j| self.cmp(i, j) != Ordering::Equal) {
                f(i);
            }
        }
    }
}

impl Unique {
    fn axis(&self, x: &TensorRef<'_>) -> Result<Option<usize>, KernelError> {
        self.axis.map(|a| x.shape.axis(a, UNIQUE)).transpose()
    }

    fn count(&self, x: &TensorRef<'_>) -> Result<usize, KernelError> {
        check_data(x, UNIQUE)?;
        let (outer, n, inner) = split_at_axis(&x.shape, self.axis(x)?);
        dispatch_unique!(x.dtype, |T| {
            let s = Slices {
                x: x.typed::<T>(UNIQUE)?,
                outer,
                n,
                inner,
            };
            let mut u = 0;
            s.first_occurrences(|_| u += 1);
            Ok(u)
        })
    }
}

impl Kernel for Unique {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, UNIQUE)?;
        let axis = self.axis(x)?;
        let (_, n, _) = split_at_axis(&x.shape, axis);
        let u = self.count(x)?;
        let y = match axis {
            None => Shape::new(&[u])?,
            Some(a) => {
                let mut s = x.shape;
                s.dims_mut()[a] = u;
                s
            }
        };
        for (i, o) in outputs.iter_mut().enumerate() {
            *o = match i {
                0 => y,
                2 => Shape::new(&[n])?,
                _ => Shape::new(&[u])?,
            };
        }
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // At most every slice is distinct.
        let x = input(inputs, 0, UNIQUE)?;
        let (_, n, _) = split_at_axis(&x.shape, self.axis(x)?);
        for (i, o) in outputs.iter_mut().enumerate() {
            *o = if i == 0 { x.numel() } else { n };
        }
        Ok(true)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let Some(Some(x)) = inputs.first() else {
            return 0;
        };
        let n = self
            .axis(x)
            .map(|a| split_at_axis(&x.shape, a).1)
            .unwrap_or(0);
        n * core::mem::size_of::<usize>()
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, UNIQUE)?;
        check_data(x, UNIQUE)?;
        let (outer, n, inner) = split_at_axis(&x.shape, self.axis(x)?);
        let firsts: &mut [usize] = bytemuck::try_cast_slice_mut(
            scratch
                .get_mut(..n * core::mem::size_of::<usize>())
                .ok_or(KernelError::Buffer { op: UNIQUE })?,
        )
        .map_err(|_| KernelError::Buffer { op: UNIQUE })?;
        dispatch_unique!(x.dtype, |T| {
            let s = Slices {
                x: x.typed::<T>(UNIQUE)?,
                outer,
                n,
                inner,
            };
            let mut u = 0;
            s.first_occurrences(|i| {
                firsts[u] = i;
                u += 1;
            });
            let firsts = &mut firsts[..u];
            if self.sorted {
                firsts.sort_unstable_by(|&a, &b| s.cmp(a, b));
            }
            write_unique(&s, firsts, x.dtype, outputs)
        })
    }
}

/// Writes `Y` and the optional int64 outputs of `Unique` from the first
/// occurrence of each distinct slice, in output order.
fn write_unique<T: PartialOrd + bytemuck::Pod>(
    s: &Slices<'_, T>,
    firsts: &[usize],
    dtype: DType,
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let es = dtype.size();
    let row = s.inner * es;
    let bytes: &[u8] = bytemuck::cast_slice(s.x);
    let u = firsts.len();
    let y = output(outputs, 0, UNIQUE)?;
    if y.dtype != dtype || y.data.len() != s.outer * u * row {
        return Err(KernelError::Buffer { op: UNIQUE });
    }
    for o in 0..s.outer {
        for (k, &i) in firsts.iter().enumerate() {
            let src = (o * s.n + i) * row;
            let dst = (o * u + k) * row;
            y.data[dst..dst + row].copy_from_slice(&bytes[src..src + row]);
        }
    }
    let position = |i: usize| firsts.iter().position(|&f| s.cmp(i, f) == Ordering::Equal);
    if let Some(t) = outputs.get_mut(1) {
        for (d, &f) in t.typed::<i64>(UNIQUE)?.iter_mut().zip(firsts) {
            *d = f as i64;
        }
    }
    if let Some(t) = outputs.get_mut(2) {
        for (i, d) in t.typed::<i64>(UNIQUE)?.iter_mut().enumerate() {
            *d = position(i).ok_or(KernelError::Buffer { op: UNIQUE })? as i64;
        }
    }
    if let Some(t) = outputs.get_mut(3) {
        let counts = t.typed::<i64>(UNIQUE)?;
        counts.fill(0);
        for i in 0..s.n {
            let p = position(i).ok_or(KernelError::Buffer { op: UNIQUE })?;
            counts[p] += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run_kernel};

    #[test]
    fn compress_along_an_axis_and_flat() {
        let x = Owned::new(&[3, 2], &[1i32, 2, 3, 4, 5, 6]);
        let c = Owned::boolean(&[2], &[false, true]);
        let y = run_kernel(
            &Compress { axis: Some(0) },
            &[Some(&x), Some(&c)],
            &[DType::I32],
        );
        let y = y.unwrap();
        assert_eq!(
            (y[0].dims(), y[0].to::<i32>()),
            (&[1usize, 2][..], vec![3, 4])
        );
        let y = run_kernel(
            &Compress { axis: Some(-1) },
            &[Some(&x), Some(&c)],
            &[DType::I32],
        );
        assert_eq!(y.unwrap()[0].to::<i32>(), [2, 4, 6]);
        let c = Owned::boolean(&[5], &[false, true, true, false, true]);
        let y = run_kernel(
            &Compress { axis: None },
            &[Some(&x), Some(&c)],
            &[DType::I32],
        );
        assert_eq!(y.unwrap()[0].to::<i32>(), [2, 3, 5]);
    }

    /// A direct reference: distinct values by first occurrence, optionally
    /// sorted, with indices, inverse and counts.
    fn reference(x: &[f32], sorted: bool) -> (Vec<f32>, Vec<i64>, Vec<i64>, Vec<i64>) {
        let mut firsts: Vec<usize> = (0..x.len()).filter(|&i| !x[..i].contains(&x[i])).collect();
        if sorted {
            firsts.sort_by(|&a, &b| x[a].partial_cmp(&x[b]).unwrap());
        }
        let y: Vec<f32> = firsts.iter().map(|&i| x[i]).collect();
        let inv = x
            .iter()
            .map(|v| y.iter().position(|w| w == v).unwrap() as i64)
            .collect();
        let counts = y
            .iter()
            .map(|v| x.iter().filter(|w| *w == v).count() as i64)
            .collect();
        (y, firsts.iter().map(|&i| i as i64).collect(), inv, counts)
    }

    #[test]
    fn unique_flat_matches_the_reference() {
        let xs = [2.0f32, 1.0, 1.0, 3.0, 4.0, 3.0, -1.0];
        let x = Owned::new(&[7], &xs);
        for sorted in [false, true] {
            let outs = run_kernel(
                &Unique { axis: None, sorted },
                &[Some(&x)],
                &[DType::F32, DType::I64, DType::I64, DType::I64],
            )
            .unwrap();
            let (y, idx, inv, counts) = reference(&xs, sorted);
            assert_eq!(outs[0].to::<f32>(), y);
            assert_eq!(outs[1].to::<i64>(), idx);
            assert_eq!(outs[2].to::<i64>(), inv);
            assert_eq!(outs[3].to::<i64>(), counts);
        }
    }

    #[test]
    fn unique_rows_sorted() {
        // Rows: [1,0],[0,1],[1,0] → sorted distinct rows [0,1],[1,0].
        let x = Owned::new(&[3, 2], &[1i64, 0, 0, 1, 1, 0]);
        let outs = run_kernel(
            &Unique {
                axis: Some(0),
                sorted: true,
            },
            &[Some(&x)],
            &[DType::I64, DType::I64, DType::I64, DType::I64],
        )
        .unwrap();
        assert_eq!(outs[0].dims(), &[2, 2]);
        assert_eq!(outs[0].to::<i64>(), [0, 1, 1, 0]);
        assert_eq!(outs[1].to::<i64>(), [1, 0]);
        assert_eq!(outs[2].to::<i64>(), [1, 0, 1]);
        assert_eq!(outs[3].to::<i64>(), [1, 2]);
    }
}
