//! Indexing operators: Gather, GatherElements, GatherND, ScatterND,
//! ScatterElements. Indices may be i64 or i32; negative indices count from
//! the end; out-of-range indices are an error.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::{check_data, check_out, raw, raw_mut};
use crate::ops::dtype_dispatch::{dispatch_num, dispatch_size};
use crate::ops::num::Num;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

/// Reads index `i` of an i64/i32 tensor, normalized against `dim`.
#[inline]
fn index_at(
    idx: &Indices<'_>,
    i: usize,
    dim: usize,
    op: &'static str,
) -> Result<usize, KernelError> {
    let v = match idx {
        Indices::I64(v) => v[i],
        Indices::I32(v) => v[i] as i64,
    };
    let d = dim as i64;
    let v = if v < 0 { v + d } else { v };
    if v < 0 || v >= d {
        return Err(KernelError::IndexOutOfRange { op });
    }
    Ok(v as usize)
}

enum Indices<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

fn indices<'a>(t: &TensorRef<'a>, op: &'static str) -> Result<Indices<'a>, KernelError> {
    match t.dtype {
        DType::I64 => Ok(Indices::I64(t.typed::<i64>(op)?)),
        DType::I32 => Ok(Indices::I32(t.typed::<i32>(op)?)),
        dtype => Err(KernelError::UnsupportedDType { op, dtype }),
    }
}

/// ONNX `Gather`: inputs `data`, `indices`; output shape
/// `data[..axis] + indices + data[axis+1..]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gather {
    /// The indexed axis of `data`.
    pub axis: i64,
}
crate::to_rust_struct!(ops::gather::Gather { axis });

impl Gather {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize), KernelError> {
        const OP: &str = "Gather";
        let x = input(inputs, 0, OP)?;
        let idx = input(inputs, 1, OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        let mut out = Shape::SCALAR;
        for &d in &x.shape.dims()[..axis] {
            out.push(d)?;
        }
        for &d in idx.shape.dims() {
            out.push(d)?;
        }
        for &d in &x.shape.dims()[axis + 1..] {
            out.push(d)?;
        }
        Ok((out, axis))
    }
}

impl Kernel for Gather {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, _) = self.shape(inputs)?;
        set_out(outputs, s, "Gather")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Gather";
        let (shape, axis) = self.shape(inputs)?;
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let idx = indices(idx_t, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let dims = x.shape.dims();
        let product = |d: &[usize], scale: usize| {
            d.iter()
                .try_fold(scale, |p, &x| p.checked_mul(x))
                .ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "element count overflows",
                })
        };
        let outer = product(&dims[..axis], 1)?;
        let dim = dims[axis];
        let inner = product(&dims[axis + 1..], x.dtype.size())?;
        let n = idx_t.numel();
        if outer == 0 || inner == 0 {
            // An empty output, but out-of-range indices are still an error;
            // the outer extent of an empty tensor may be huge, so don't loop.
            for i in 0..n {
                index_at(&idx, i, dim, OP)?;
            }
            return Ok(());
        }
        // Consecutive indices (sliding windows, slices written as
        // gathers) are copied as one block each.
        let mut o = 0;
        for b in 0..outer {
            let mut i = 0;
            while i < n {
                let k = index_at(&idx, i, dim, OP)?;
                let mut len = 1;
                while i + len < n && index_at(&idx, i + len, dim, OP)? == k + len {
                    len += 1;
                }
                let (src, bytes) = ((b * dim + k) * inner, len * inner);
                out.data[o..o + bytes].copy_from_slice(&x.data[src..src + bytes]);
                o += bytes;
                i += len;
            }
        }
        Ok(())
    }
}

/// ONNX `GatherElements`: inputs `data`, `indices` (same rank); output has
/// the shape of `indices`, `out[i][j]… = data[…index along axis…]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatherElements {
    /// The indexed axis.
    pub axis: i64,
}
crate::to_rust_struct!(ops::gather::GatherElements { axis });

/// Checks that `idx` has `data`'s rank and fits inside it except along `axis`.
fn check_elementwise_shapes(
    data: &Shape,
    idx: &Shape,
    axis: usize,
    op: &'static str,
) -> Result<(), KernelError> {
    if data.rank() != idx.rank() {
        return Err(KernelError::Shape {
            op,
            msg: "indices rank differs from data rank",
        });
    }
    for (a, (&d, &i)) in data.dims().iter().zip(idx.dims()).enumerate() {
        if a != axis && i > d {
            return Err(KernelError::Shape {
                op,
                msg: "indices larger than data",
            });
        }
    }
    Ok(())
}

/// Calls `f(position_in_idx, data_offset_without_axis)` for every element of
/// a tensor of shape `idx`, with offsets computed in `data`'s strides.
fn for_each_elem(
    idx: &Shape,
    data: &Shape,
    axis: usize,
    mut f: impl FnMut(usize, usize) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let n = idx.numel();
    if n == 0 {
        return Ok(());
    }
    let st = data.strides();
    let r = idx.rank();
    let mut pos = [0usize; MAX_RANK];
    let mut off = 0usize;
    for i in 0..n {
        f(i, off)?;
        let mut a = r;
        while a > 0 {
            a -= 1;
            pos[a] += 1;
            if a != axis {
                off += st[a];
            }
            if pos[a] < idx.dims()[a] {
                break;
            }
            if a != axis {
                off -= st[a] * idx.dims()[a];
            }
            pos[a] = 0;
        }
    }
    Ok(())
}

impl Kernel for GatherElements {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        const OP: &str = "GatherElements";
        let x = input(inputs, 0, OP)?;
        let idx = input(inputs, 1, OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        check_elementwise_shapes(&x.shape, &idx.shape, axis, OP)?;
        set_out(outputs, idx.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "GatherElements";
        let x = input(inputs, 0, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        check_elementwise_shapes(&x.shape, &idx_t.shape, axis, OP)?;
        check_data(x, OP)?;
        let idx = indices(idx_t, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &idx_t.shape, OP)?;
        let dim = x.shape.dims()[axis];
        let sa = x.shape.strides()[axis];
        dispatch_size!(x.dtype, OP, |T| {
            let src = raw::<T>(x, OP)?;
            let dst = raw_mut::<T>(out, OP)?;
            for_each_elem(&idx_t.shape, &x.shape, axis, |i, off| {
                let k = index_at(&idx, i, dim, OP)?;
                dst[i] = src[off + k * sa];
                Ok(())
            })
        })
    }
}

/// ONNX `GatherND`: inputs `data` (rank r), `indices` (rank q, last dim
/// m ≤ r - b); output shape `indices[..q-1] + data[b+m..]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatherNd {
    /// Number of leading batch dims shared by `data` and `indices`.
    pub batch_dims: usize,
}
crate::to_rust_struct!(ops::gather::GatherNd { batch_dims });

/// Geometry shared by GatherND and ScatterND.
struct NdPlan {
    /// Number of batches (product of the batch dims).
    batches: usize,
    /// Index tuples per batch.
    tuples: usize,
    /// Length of each tuple.
    m: usize,
    /// Elements per gathered slice.
    slice: usize,
    /// Elements per data batch.
    batch_elems: usize,
}

fn nd_plan(data: &Shape, idx: &Shape, b: usize, op: &'static str) -> Result<NdPlan, KernelError> {
    let (r, q) = (data.rank(), idx.rank());
    if q < 1 || b >= q || b > r {
        return Err(KernelError::Shape {
            op,
            msg: "bad indices rank or batch_dims",
        });
    }
    let m = idx.dims()[q - 1];
    if m + b > r || data.dims()[..b] != idx.dims()[..b] {
        return Err(KernelError::Shape {
            op,
            msg: "indices do not fit data",
        });
    }
    // A zero dim elsewhere keeps a shape's count small while a part of
    // it overflows.
    let product = |dims: &[usize]| {
        dims.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or(KernelError::Invalid {
                op,
                msg: "element count overflows",
            })
    };
    Ok(NdPlan {
        batches: product(&data.dims()[..b])?,
        tuples: product(&idx.dims()[b..q - 1])?,
        m,
        slice: product(&data.dims()[b + m..])?,
        batch_elems: product(&data.dims()[b..])?,
    })
}

/// Offset (in elements, within a batch) of index tuple `t`.
fn nd_offset(
    idx: &Indices<'_>,
    data: &Shape,
    strides: &[usize; MAX_RANK],
    b: usize,
    p: &NdPlan,
    tuple: usize,
    op: &'static str,
) -> Result<usize, KernelError> {
    let mut off = 0;
    for k in 0..p.m {
        let v = index_at(idx, tuple * p.m + k, data.dims()[b + k], op)?;
        off += v * strides[b + k];
    }
    Ok(off)
}

impl GatherNd {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "GatherND";
        let x = input(inputs, 0, OP)?;
        let idx = input(inputs, 1, OP)?;
        let p = nd_plan(&x.shape, &idx.shape, self.batch_dims, OP)?;
        let q = idx.shape.rank();
        let mut out = Shape::SCALAR;
        for &d in &idx.shape.dims()[..q - 1] {
            out.push(d)?;
        }
        for &d in &x.shape.dims()[self.batch_dims + p.m..] {
            out.push(d)?;
        }
        Ok(out)
    }
}

impl Kernel for GatherNd {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        set_out(outputs, s, "GatherND")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "GatherND";
        let shape = self.shape(inputs)?;
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let idx = indices(idx_t, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let b = self.batch_dims;
        let p = nd_plan(&x.shape, &idx_t.shape, b, OP)?;
        let es = x.dtype.size();
        let w = p.slice * es;
        let strides = x.shape.strides();
        for batch in 0..p.batches {
            for t in 0..p.tuples {
                let off = nd_offset(&idx, &x.shape, &strides, b, &p, batch * p.tuples + t, OP)?;
                let src = (batch * p.batch_elems + off) * es;
                let dst = (batch * p.tuples + t) * w;
                out.data[dst..dst + w].copy_from_slice(&x.data[src..src + w]);
            }
        }
        Ok(())
    }
}

/// How scattered updates combine with existing values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScatterReduction {
    /// Overwrite.
    None,
    /// Add.
    Add,
    /// Multiply.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}
crate::to_rust_enum!(ops::gather::ScatterReduction {
    None,
    Add,
    Mul,
    Max,
    Min
});

/// Applies `dst[d..d+n] (op)= src[s..s+n]` for one scattered slice.
fn scatter_slice(
    red: ScatterReduction,
    dtype: DType,
    dst: &mut [u8],
    src: &[u8],
    op: &'static str,
) -> Result<(), KernelError> {
    if red == ScatterReduction::None {
        dst.copy_from_slice(src);
        return Ok(());
    }
    dispatch_num!(dtype, op, |T| {
        let d: &mut [T] =
            bytemuck::try_cast_slice_mut(dst).map_err(|_| KernelError::Buffer { op })?;
        let s: &[T] = bytemuck::try_cast_slice(src).map_err(|_| KernelError::Buffer { op })?;
        let f: fn(T, T) -> T = match red {
            ScatterReduction::Add => T::add,
            ScatterReduction::Mul => T::mul,
            ScatterReduction::Max => T::max_nan,
            _ => T::min_nan,
        };
        for (d, &s) in d.iter_mut().zip(s) {
            *d = f(*d, s);
        }
        Ok(())
    })
}

/// ONNX `ScatterND`: inputs `data`, `indices` (last dim m), `updates`
/// (shape `indices[..q-1] + data[m..]`); output is `data` with the slices
/// replaced/combined in index order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScatterNd {
    /// How updates combine.
    pub reduction: ScatterReduction,
    /// Input 1 holds copy runs instead of ONNX indices: i64 `[R, 3]` rows
    /// of (data offset, updates offset, length) in elements, applied in
    /// order. The compiler computes them from constant indices
    /// ([`ScatterNd::copy_runs`]) so that `forward` copies blocks instead
    /// of reading an index tuple per element.
    pub runs: bool,
}
crate::to_rust_struct!(ops::gather::ScatterNd { reduction, runs });

impl ScatterNd {
    /// The copies a `ScatterND` without reduction makes, in index order,
    /// merged where consecutive tuples are contiguous in both data and
    /// updates: `emit(data_offset, updates_offset, len)` in elements.
    /// `inputs` are the node's (`data` and `updates` may be shape-only;
    /// the indices must hold values).
    pub fn copy_runs(
        inputs: &[Option<TensorRef<'_>>],
        mut emit: impl FnMut(usize, usize, usize),
    ) -> Result<(), KernelError> {
        const OP: &str = "ScatterND";
        let x = input(inputs, 0, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let upd = input(inputs, 2, OP)?;
        let idx = indices(idx_t, OP)?;
        let p = nd_plan(&x.shape, &idx_t.shape, 0, OP)?;
        if upd.numel() != p.tuples * p.slice {
            return Err(KernelError::Shape {
                op: OP,
                msg: "updates do not match indices and data",
            });
        }
        let strides = x.shape.strides();
        let mut run: Option<(usize, usize, usize)> = None;
        for t in 0..p.tuples {
            let dst = nd_offset(&idx, &x.shape, &strides, 0, &p, t, OP)?;
            let src = t * p.slice;
            match &mut run {
                Some((d, s, len)) if *d + *len == dst && *s + *len == src => *len += p.slice,
                _ => {
                    if let Some((d, s, len)) = run {
                        emit(d, s, len);
                    }
                    run = Some((dst, src, p.slice));
                }
            }
        }
        if let Some((d, s, len)) = run {
            emit(d, s, len);
        }
        Ok(())
    }

    /// `out = data` with the copy runs of input 1 applied (see
    /// [`ScatterNd::runs`]); every run is checked against both tensors.
    fn run_copies(
        x: &TensorRef<'_>,
        runs: &TensorRef<'_>,
        upd: &TensorRef<'_>,
        out: &mut TensorMut<'_>,
    ) -> Result<(), KernelError> {
        const OP: &str = "ScatterND";
        let bad = KernelError::Shape {
            op: OP,
            msg: "copy runs must be i64 [R, 3] within data and updates",
        };
        if runs.dtype != DType::I64 || runs.shape.rank() != 2 || runs.shape.dims()[1] != 3 {
            return Err(bad);
        }
        let table = raw::<i64>(runs, OP)?;
        let es = x.dtype.size();
        for row in table.chunks_exact(3) {
            let [d, s, len] = [row[0], row[1], row[2]].map(|v| usize::try_from(v).ok());
            let (Some(d), Some(s), Some(len)) = (d, s, len) else {
                return Err(bad);
            };
            let fits =
                |start: usize, total: usize| start.checked_add(len).is_some_and(|e| e <= total);
            if !fits(d, x.numel()) || !fits(s, upd.numel()) {
                return Err(bad);
            }
            out.data[d * es..(d + len) * es].copy_from_slice(&upd.data[s * es..(s + len) * es]);
        }
        Ok(())
    }
}

impl Kernel for ScatterNd {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "ScatterND")?;
        set_out(outputs, x.shape, "ScatterND")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "ScatterND";
        let x = input(inputs, 0, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let upd = input(inputs, 2, OP)?;
        check_data(x, OP)?;
        check_data(upd, OP)?;
        if self.runs {
            if upd.dtype != x.dtype {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "updates do not match data",
                });
            }
            let out = output(outputs, 0, OP)?;
            check_out(out, x.dtype, &x.shape, OP)?;
            out.data.copy_from_slice(x.data);
            return Self::run_copies(x, idx_t, upd, out);
        }
        let idx = indices(idx_t, OP)?;
        let p = nd_plan(&x.shape, &idx_t.shape, 0, OP)?;
        if upd.dtype != x.dtype || upd.numel() != p.tuples * p.slice {
            return Err(KernelError::Shape {
                op: OP,
                msg: "updates do not match indices and data",
            });
        }
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        out.data.copy_from_slice(x.data);
        let es = x.dtype.size();
        let w = p.slice * es;
        let strides = x.shape.strides();
        if self.reduction == ScatterReduction::None && p.slice == 1 {
            // One element per index tuple (a streaming model's cache
            // updates): a typed store each, without a copy call.
            return dispatch_size!(x.dtype, OP, |T| {
                let src = raw::<T>(upd, OP)?;
                let dst = raw_mut::<T>(out, OP)?;
                for (t, &v) in src.iter().enumerate().take(p.tuples) {
                    dst[nd_offset(&idx, &x.shape, &strides, 0, &p, t, OP)?] = v;
                }
                Ok(())
            });
        }
        for t in 0..p.tuples {
            let off = nd_offset(&idx, &x.shape, &strides, 0, &p, t, OP)? * es;
            scatter_slice(
                self.reduction,
                x.dtype,
                &mut out.data[off..off + w],
                &upd.data[t * w..t * w + w],
                OP,
            )?;
        }
        Ok(())
    }
}

/// ONNX `ScatterElements`: inputs `data`, `indices`, `updates` (same shape
/// as `indices`); `out[…index along axis…] (op)= updates[…]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScatterElements {
    /// The indexed axis.
    pub axis: i64,
    /// How updates combine.
    pub reduction: ScatterReduction,
}
crate::to_rust_struct!(ops::gather::ScatterElements { axis, reduction });

impl Kernel for ScatterElements {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "ScatterElements")?;
        set_out(outputs, x.shape, "ScatterElements")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "ScatterElements";
        let x = input(inputs, 0, OP)?;
        let idx_t = input(inputs, 1, OP)?;
        let upd = input(inputs, 2, OP)?;
        check_data(x, OP)?;
        check_data(upd, OP)?;
        let axis = x.shape.axis(self.axis, OP)?;
        check_elementwise_shapes(&x.shape, &idx_t.shape, axis, OP)?;
        if upd.shape != idx_t.shape || upd.dtype != x.dtype {
            return Err(KernelError::Shape {
                op: OP,
                msg: "updates must match indices",
            });
        }
        let idx = indices(idx_t, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        out.data.copy_from_slice(x.data);
        let dim = x.shape.dims()[axis];
        let sa = x.shape.strides()[axis];
        let red = self.reduction;
        if red == ScatterReduction::None {
            return dispatch_size!(x.dtype, OP, |T| {
                let src = raw::<T>(upd, OP)?;
                let dst = raw_mut::<T>(out, OP)?;
                for_each_elem(&idx_t.shape, &x.shape, axis, |i, off| {
                    dst[off + index_at(&idx, i, dim, OP)? * sa] = src[i];
                    Ok(())
                })
            });
        }
        dispatch_num!(x.dtype, OP, |T| {
            let src = upd.typed::<T>(OP)?;
            let dst = out.typed::<T>(OP)?;
            let f: fn(T, T) -> T = match red {
                ScatterReduction::Add => T::add,
                ScatterReduction::Mul => T::mul,
                ScatterReduction::Max => T::max_nan,
                _ => T::min_nan,
            };
            for_each_elem(&idx_t.shape, &x.shape, axis, |i, off| {
                let d = &mut dst[off + index_at(&idx, i, dim, OP)? * sa];
                *d = f(*d, src[i]);
                Ok(())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    #[test]
    fn gather_axes_and_negative_indices() {
        let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let x = Owned::new(&[3, 4], &data);
        let idx = Owned::new(&[2, 2], &[0i64, -1, 2, 1]);
        let y = run1(&Gather { axis: 0 }, &[Some(&x), Some(&idx)], DType::F32).unwrap();
        assert_eq!(y.dims(), &[2, 2, 4]);
        assert_eq!(&y.to::<f32>()[..8], &[0., 1., 2., 3., 8., 9., 10., 11.]);
        let idx = Owned::new(&[2], &[3i32, -4]);
        let y = run1(&Gather { axis: -1 }, &[Some(&x), Some(&idx)], DType::F32).unwrap();
        assert_eq!(y.dims(), &[3, 2]);
        assert_eq!(y.to::<f32>(), [3., 0., 7., 4., 11., 8.]);
        let s = Owned::new(&[], &[1i64]);
        let y = run1(&Gather { axis: 0 }, &[Some(&x), Some(&s)], DType::F32).unwrap();
        assert_eq!(
            (y.dims(), y.to::<f32>()),
            (&[4usize][..], [4., 5., 6., 7.].to_vec())
        );
        let bad = Owned::new(&[1], &[3i64]);
        assert!(matches!(
            run1(&Gather { axis: 0 }, &[Some(&x), Some(&bad)], DType::F32),
            Err(KernelError::IndexOutOfRange { .. })
        ));
    }

    #[test]
    fn gather_elements_and_nd() {
        // ONNX GatherElements example 2
        let x = Owned::new(&[3, 3], &[1i32, 2, 3, 4, 5, 6, 7, 8, 9]);
        let idx = Owned::new(&[2, 3], &[1i64, 2, 0, 2, 0, 0]);
        let y = run1(
            &GatherElements { axis: 0 },
            &[Some(&x), Some(&idx)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(y.to::<i32>(), [4, 8, 3, 7, 2, 3]);
        let idx = Owned::new(&[2, 2], &[0i64, 0, 1, -3]);
        let y = run1(
            &GatherElements { axis: 1 },
            &[Some(&x), Some(&idx)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(y.to::<i32>(), [1, 1, 5, 4]);
        // GatherND examples from the ONNX docs.
        let x = Owned::new(&[2, 2, 2], &[0i32, 1, 2, 3, 4, 5, 6, 7]);
        let idx = Owned::new(&[2, 2], &[0i64, 1, 1, 0]);
        let y = run1(
            &GatherNd { batch_dims: 0 },
            &[Some(&x), Some(&idx)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(
            (y.dims(), y.to::<i32>()),
            (&[2usize, 2][..], [2, 3, 4, 5].to_vec())
        );
        let idx = Owned::new(&[2, 1], &[1i64, 0]);
        let y = run1(
            &GatherNd { batch_dims: 1 },
            &[Some(&x), Some(&idx)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(
            (y.dims(), y.to::<i32>()),
            (&[2usize, 2][..], [2, 3, 4, 5].to_vec())
        );
        let idx = Owned::new(&[2, 1, 2], &[0i64, 1, 1, 0]);
        let y = run1(
            &GatherNd { batch_dims: 1 },
            &[Some(&x), Some(&idx)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(
            (y.dims(), y.to::<i32>()),
            (&[2usize, 1][..], [1, 6].to_vec())
        );
    }

    #[test]
    fn gather_runs_of_consecutive_indices_equal_element_copies() {
        // Sliding windows along the last axis (negative indices inside a
        // run), the layout streaming models unfold with.
        let data: Vec<f32> = (0..30).map(|v| v as f32).collect();
        let x = Owned::new(&[2, 3, 5], &data);
        let windows = [0i64, 1, 2, 2, 3, -1, -2, -1, 0, 4, 4, 4];
        let idx = Owned::new(&[4, 3], &windows);
        let y = run1(&Gather { axis: -1 }, &[Some(&x), Some(&idx)], DType::F32)
            .unwrap()
            .to::<f32>();
        let mut want = Vec::new();
        for row in 0..6 {
            for &k in &windows {
                want.push(data[row * 5 + k.rem_euclid(5) as usize]);
            }
        }
        assert_eq!(y, want);
        let bad = Owned::new(&[2], &[3i64, 5]);
        assert!(run1(&Gather { axis: -1 }, &[Some(&x), Some(&bad)], DType::F32).is_err());
    }

    #[test]
    fn copy_runs_do_what_the_indices_do() {
        // data [2, 4, 3]; one index tuple per element of data[:, 1..3, :]
        // (as streaming caches are written), then element (0, 0, 2) again
        // and a repeat of (1, 2, 0): later tuples win.
        let data: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let x = Owned::new(&[2, 4, 3], &data);
        let mut tuples = Vec::new();
        for a in 0..2i64 {
            for b in 1..3i64 {
                for c in 0..3i64 {
                    tuples.extend([a, b, c]);
                }
            }
        }
        tuples.extend([0, 0, 2, 1, 2, 0]);
        let n = tuples.len() / 3;
        let idx = Owned::new(&[n, 3], &tuples);
        let updates: Vec<f32> = (0..n).map(|v| 100.0 + v as f32).collect();
        let upd = Owned::new(&[n], &updates);
        let plain = ScatterNd {
            reduction: ScatterReduction::None,
            runs: false,
        };
        let want = run1(&plain, &[Some(&x), Some(&idx), Some(&upd)], DType::F32)
            .unwrap()
            .to::<f32>();
        let mut table = Vec::new();
        ScatterNd::copy_runs(&[Some(x.r()), Some(idx.r()), Some(upd.r())], |d, s, l| {
            table.extend([d as i64, s as i64, l as i64]);
        })
        .unwrap();
        // Two blocks of 6 (one per a), then the two single elements.
        assert_eq!(table, [3, 0, 6, 15, 6, 6, 2, 12, 1, 18, 13, 1]);
        let runs = Owned::new(&[table.len() / 3, 3], &table);
        let with_runs = ScatterNd {
            reduction: ScatterReduction::None,
            runs: true,
        };
        let got = run1(&with_runs, &[Some(&x), Some(&runs), Some(&upd)], DType::F32)
            .unwrap()
            .to::<f32>();
        assert_eq!(got, want);
        // Runs outside either tensor are errors, not panics.
        for bad in [[20i64, 0, 6], [0, 10, 6], [-1, 0, 1], [0, 0, i64::MAX]] {
            let runs = Owned::new(&[1, 3], &bad);
            assert!(run1(&with_runs, &[Some(&x), Some(&runs), Some(&upd)], DType::F32).is_err());
        }
    }

    #[test]
    fn scatters() {
        // ONNX ScatterND example 2
        let data: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let x = Owned::new(&[4, 2, 2], &data);
        let idx = Owned::new(&[2, 1], &[0i64, 2]);
        let upd = Owned::new(&[2, 2, 2], &[5.0f32, 5., 5., 5., 6., 6., 6., 6.]);
        let y = run1(
            &ScatterNd {
                reduction: ScatterReduction::None,
                runs: false,
            },
            &[Some(&x), Some(&idx), Some(&upd)],
            DType::F32,
        )
        .unwrap()
        .to::<f32>();
        assert_eq!(&y[..4], &[5.; 4]);
        assert_eq!(&y[4..8], &[4., 5., 6., 7.]);
        assert_eq!(&y[8..12], &[6.; 4]);
        let idx = Owned::new(&[2, 1], &[0i64, 0]);
        let y = run1(
            &ScatterNd {
                reduction: ScatterReduction::Add,
                runs: false,
            },
            &[Some(&x), Some(&idx), Some(&upd)],
            DType::F32,
        )
        .unwrap()
        .to::<f32>();
        assert_eq!(&y[..4], &[11., 12., 13., 14.]);
        // ScatterElements example: axis=1, reduction add with duplicates.
        let x = Owned::new(&[1, 5], &[1i64, 2, 3, 4, 5]);
        let idx = Owned::new(&[1, 2], &[1i64, -4]);
        let upd = Owned::new(&[1, 2], &[10i64, 20]);
        let y = run1(
            &ScatterElements {
                axis: 1,
                reduction: ScatterReduction::Add,
            },
            &[Some(&x), Some(&idx), Some(&upd)],
            DType::I64,
        )
        .unwrap();
        assert_eq!(y.to::<i64>(), [1, 32, 3, 4, 5]);
        let idx = Owned::new(&[1, 2], &[3i64, 0]);
        let y = run1(
            &ScatterElements {
                axis: -1,
                reduction: ScatterReduction::None,
            },
            &[Some(&x), Some(&idx), Some(&upd)],
            DType::I64,
        )
        .unwrap();
        assert_eq!(y.to::<i64>(), [20, 2, 3, 10, 5]);
        let y = run1(
            &ScatterElements {
                axis: 1,
                reduction: ScatterReduction::Max,
            },
            &[Some(&x), Some(&idx), Some(&Owned::new(&[1, 2], &[0i64, 7]))],
            DType::I64,
        )
        .unwrap();
        assert_eq!(y.to::<i64>(), [7, 2, 3, 4, 5]);
    }
}
