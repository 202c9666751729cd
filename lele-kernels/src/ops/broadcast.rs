//! Shared helpers of the elementwise and data-movement kernels: NumPy
//! broadcasting without allocation, numeric traits over every dtype and the
//! dtype dispatch macros.
#![allow(clippy::needless_range_loop)]
use half::{bf16, f16};

use crate::dtype::{DType, Elem};
use crate::error::KernelError;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

/// Iterates over the contiguous rows of a broadcast output.
///
/// The output shape and the (broadcast) input shapes are collapsed into as
/// few dims as possible; the last collapsed dim is the "row". For every row
/// the visitor gets the output offset, the row length, each input's offset
/// and each input's stride inside the row (0 when broadcast along it, else 1).
#[derive(Debug, Clone, Copy)]
pub struct Rows<const N: usize> {
    rank: usize,
    dims: [usize; MAX_RANK],
    strides: [[usize; MAX_RANK]; N],
}

impl<const N: usize> Rows<N> {
    /// Plans the iteration of `out`, each input broadcasting to it.
    pub fn new(ins: [&Shape; N], out: &Shape, op: &'static str) -> Result<Self, KernelError> {
        let r = out.rank();
        let mut aligned = [[0usize; MAX_RANK]; N];
        for (k, s) in ins.iter().enumerate() {
            if s.rank() > r {
                return Err(KernelError::Shape {
                    op,
                    msg: "input rank exceeds the output rank",
                });
            }
            let st = s.strides();
            let lead = r - s.rank();
            for i in 0..r {
                if i < lead {
                    continue;
                }
                let d = s.dims()[i - lead];
                if d == out.dims()[i] {
                    aligned[k][i] = if d == 1 { 0 } else { st[i - lead] };
                } else if d == 1 {
                    aligned[k][i] = 0;
                } else {
                    return Err(KernelError::Shape {
                        op,
                        msg: "shapes cannot be broadcast",
                    });
                }
            }
        }
        let mut plan = Rows {
            rank: 0,
            dims: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; N],
        };
        for i in 0..r {
            let d = out.dims()[i];
            if d == 1 {
                continue;
            }
            if plan.rank > 0 {
                let p = plan.rank - 1;
                if (0..N).all(|k| plan.strides[k][p] == aligned[k][i] * d) {
                    plan.dims[p] *= d;
                    for k in 0..N {
                        plan.strides[k][p] = aligned[k][i];
                    }
                    continue;
                }
            }
            let p = plan.rank;
            plan.dims[p] = d;
            for k in 0..N {
                plan.strides[k][p] = aligned[k][i];
            }
            plan.rank += 1;
        }
        if plan.rank == 0 {
            plan.rank = 1;
        }
        Ok(plan)
    }

    /// Calls `f(out_offset, len, in_offsets, in_strides)` for every row.
    #[inline]
    pub fn for_each(&self, f: impl FnMut(usize, usize, [usize; N], [usize; N])) {
        self.for_each_in(0, usize::MAX, f)
    }

    /// Elements per row (the output's contiguous innermost run).
    pub fn row_len(&self) -> usize {
        self.dims[self.rank - 1]
    }

    /// Rows in all.
    pub fn rows(&self) -> usize {
        self.dims[..self.rank - 1].iter().product()
    }

    /// [`Rows::for_each`] over rows `first..first + count` only (output
    /// offsets still counted from the whole output's start).
    #[inline]
    pub fn for_each_in(
        &self,
        first: usize,
        count: usize,
        mut f: impl FnMut(usize, usize, [usize; N], [usize; N]),
    ) {
        let rank = self.rank;
        if self.dims[..rank].contains(&0) || count == 0 || first >= self.rows() {
            return;
        }
        let inner = self.dims[rank - 1];
        let mut inner_st = [0usize; N];
        for (k, s) in inner_st.iter_mut().enumerate() {
            *s = self.strides[k][rank - 1];
        }
        // The multi-index of row `first` and its input offsets.
        let mut idx = [0usize; MAX_RANK];
        let mut offs = [0usize; N];
        let mut rest = first;
        for d in (0..rank - 1).rev() {
            idx[d] = rest % self.dims[d];
            rest /= self.dims[d];
            for (k, off) in offs.iter_mut().enumerate() {
                *off += idx[d] * self.strides[k][d];
            }
        }
        let mut o = first * inner;
        let mut left = count;
        loop {
            f(o, inner, offs, inner_st);
            left -= 1;
            if left == 0 {
                return;
            }
            o += inner;
            let mut d = rank - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                for (k, off) in offs.iter_mut().enumerate() {
                    *off += self.strides[k][d];
                }
                if idx[d] < self.dims[d] {
                    break;
                }
                for (k, off) in offs.iter_mut().enumerate() {
                    *off -= self.strides[k][d] * self.dims[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Applies `f` elementwise over two broadcast inputs.
#[inline]
pub fn zip2<A: Copy, B: Copy, O>(
    rows: &Rows<2>,
    a: &[A],
    b: &[B],
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    zip2_rows(rows, 0, usize::MAX, a, b, out, f)
}

/// [`zip2`] over rows `first..first + count` of the output only, `out`
/// holding those rows (it starts at row `first`).
#[inline]
pub fn zip2_rows<A: Copy, B: Copy, O>(
    rows: &Rows<2>,
    first: usize,
    count: usize,
    a: &[A],
    b: &[B],
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    let start = first * rows.row_len();
    rows.for_each_in(first, count, |o, n, [oa, ob], [sa, sb]| {
        let y = &mut out[o - start..o - start + n];
        match (sa, sb) {
            (1, 1) => {
                for ((y, &x), &z) in y.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                    *y = f(x, z);
                }
            }
            (0, 1) => {
                let x = a[oa];
                for (y, &z) in y.iter_mut().zip(&b[ob..ob + n]) {
                    *y = f(x, z);
                }
            }
            (1, 0) => {
                let z = b[ob];
                for (y, &x) in y.iter_mut().zip(&a[oa..oa + n]) {
                    *y = f(x, z);
                }
            }
            _ => {
                for (j, y) in y.iter_mut().enumerate() {
                    *y = f(a[oa + j * sa], b[ob + j * sb]);
                }
            }
        }
    });
}

/// Copies `src` broadcast to the shape planned by `rows` into `out`.
#[inline]
pub fn broadcast_copy<T: Copy>(rows: &Rows<1>, src: &[T], out: &mut [T]) {
    rows.for_each(|o, n, [oa], [sa]| {
        let y = &mut out[o..o + n];
        if sa == 1 {
            y.copy_from_slice(&src[oa..oa + n]);
        } else {
            y.fill(src[oa]);
        }
    });
}

/// The output shape of broadcasting all of `shapes` together.
pub fn broadcast_all<'a>(
    shapes: impl IntoIterator<Item = &'a Shape>,
    op: &'static str,
) -> Result<Shape, KernelError> {
    let mut out = Shape::SCALAR;
    for s in shapes {
        out = crate::shape::broadcast(&out, s, op)?;
    }
    Ok(out)
}

/// Elements of `t` reinterpreted as `T` without a dtype check (data
/// movement kernels only care about the element size).
pub fn raw<'a, T: bytemuck::Pod>(
    t: &TensorRef<'a>,
    op: &'static str,
) -> Result<&'a [T], KernelError> {
    if !t.has_data() {
        return Err(KernelError::NeedsData { op });
    }
    if t.data.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(t.data).map_err(|_| KernelError::Buffer { op })
}

/// Output elements reinterpreted as `T` without a dtype check.
pub fn raw_mut<'a, T: bytemuck::Pod>(
    t: &'a mut TensorMut<'_>,
    op: &'static str,
) -> Result<&'a mut [T], KernelError> {
    if t.data.len() != t.shape.numel() * t.dtype.size() {
        return Err(KernelError::Buffer { op });
    }
    bytemuck::try_cast_slice_mut(t.data).map_err(|_| KernelError::Buffer { op })
}

/// Checks that an input's data is present and its length matches its shape.
pub fn check_data(t: &TensorRef<'_>, op: &'static str) -> Result<(), KernelError> {
    if t.has_data() {
        Ok(())
    } else {
        Err(KernelError::NeedsData { op })
    }
}

/// Checks an output's dtype, shape and buffer length.
pub fn check_out(
    t: &TensorMut<'_>,
    dtype: DType,
    shape: &Shape,
    op: &'static str,
) -> Result<(), KernelError> {
    if t.dtype != dtype {
        return Err(KernelError::DTypeMismatch {
            op,
            expected: dtype,
            found: t.dtype,
        });
    }
    if t.shape != *shape {
        return Err(KernelError::Shape {
            op,
            msg: "output shape differs from the inferred one",
        });
    }
    if t.data.len() != shape.numel() * dtype.size() {
        return Err(KernelError::Buffer { op });
    }
    Ok(())
}

/// Reads a 1-D shape-like integer input into a stack array.
pub fn read_list(
    t: &TensorRef<'_>,
    op: &'static str,
) -> Result<([i64; 2 * MAX_RANK], usize), KernelError> {
    if t.shape.rank() > 1 {
        return Err(KernelError::Shape {
            op,
            msg: "expected a 1-D list",
        });
    }
    let mut v = [0i64; 2 * MAX_RANK];
    if t.numel() == 0 {
        // Nothing to read (and an empty placeholder slice may be unaligned).
        return Ok((v, 0));
    }
    let n = t.read_i64s(op, &mut v)?;
    Ok((v, n))
}

/// Numeric element types: conversions and arithmetic with ONNX/NumPy
/// semantics (integers wrap, integer division truncates, division by zero
/// yields 0 for integers instead of trapping).
pub trait Num: Elem + Copy {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Whether the type is a floating-point type.
    const FLOAT: bool;
    /// The value as `f64` (may round for 64-bit integers).
    fn to_f64(self) -> f64;
    /// From `f64`: rounding for floats, truncation toward zero then
    /// wrapping for integers (like NumPy `astype`).
    fn from_f64(v: f64) -> Self;
    /// The value as `i128` (floats are truncated toward zero).
    fn to_i128(self) -> i128;
    /// From `i128`: wrapping for integers, rounding for floats.
    fn from_i128(v: i128) -> Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// `self / o`.
    fn div(self, o: Self) -> Self;
    /// Remainder with the sign of the divisor (Python `%`).
    fn rem_py(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`).
    fn fmod(self, o: Self) -> Self;
    /// Whether the value is NaN.
    #[inline]
    fn is_nan(self) -> bool {
        #[allow(clippy::eq_op)]
        let r = self != self;
        r
    }
    /// NaN-propagating maximum.
    #[inline]
    fn max_nan(self, o: Self) -> Self {
        if self > o || self.is_nan() { self } else { o }
    }
    /// NaN-propagating minimum.
    #[inline]
    fn min_nan(self, o: Self) -> Self {
        if self < o || self.is_nan() { self } else { o }
    }
}

macro_rules! impl_num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const FLOAT: bool = false;
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { (v as i128) as $t }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_i128(v: i128) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline] fn div(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline] fn rem_py(self, o: Self) -> Self {
                if o == 0 { return 0; }
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                let fix = r != 0 && ((r < 0) != (o < 0));
                if fix { r.wrapping_add(o) } else { r }
            }
            #[inline] fn fmod(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_rem(o) } }
        }
    )*};
}
impl_num_int!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! impl_num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const FLOAT: bool = true;
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_i128(v: i128) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn rem_py(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) { r + o } else { r }
            }
            #[inline] fn fmod(self, o: Self) -> Self { self % o }
        }
    )*};
}
impl_num_float!(f32, f64);

macro_rules! impl_num_half {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            const FLOAT: bool = true;
            #[inline] fn to_f64(self) -> f64 { self.to_f64() }
            #[inline] fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            #[inline] fn to_i128(self) -> i128 { self.to_f32() as i128 }
            #[inline] fn from_i128(v: i128) -> Self { <$t>::from_f64(v as f64) }
            #[inline] fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline] fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline] fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            #[inline] fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline] fn rem_py(self, o: Self) -> Self { <$t>::from_f32(self.to_f32().rem_py(o.to_f32())) }
            #[inline] fn fmod(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() % o.to_f32()) }
        }
    )*};
}
impl_num_half!(f16, bf16);

/// Matches a dtype against a list of `DType => type` arms, binding the Rust
/// type to `$T` inside `$body`; other dtypes are `UnsupportedDType`.
macro_rules! dispatch {
    ($dt:expr, $op:expr, [$($d:ident => $t:ty),* $(,)?], |$T:ident| $body:expr) => {
        match $dt {
            $($crate::dtype::DType::$d => {
                #[allow(dead_code)]
                type $T = $t;
                $body
            })*
            #[allow(unreachable_patterns)]
            dt => Err($crate::error::KernelError::UnsupportedDType { op: $op, dtype: dt }),
        }
    };
}
pub(crate) use dispatch;

/// [`dispatch!`] over every numeric dtype (not Bool).
macro_rules! dispatch_num {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::ops::broadcast::dispatch!($dt, $op, [
            F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
            I8 => i8, U8 => u8, I16 => i16, U16 => u16,
            I32 => i32, U32 => u32, I64 => i64, U64 => u64,
        ], |$T| $body)
    };
}
pub(crate) use dispatch_num;

/// [`dispatch!`] over the element sizes 1, 2, 4 and 8 (data movement).
macro_rules! dispatch_size {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        match $dt.size() {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            _ => Err($crate::error::KernelError::UnsupportedDType {
                op: $op,
                dtype: $dt,
            }),
        }
    };
}
pub(crate) use dispatch_size;

#[cfg(test)]
pub(crate) mod test_util {
    //! Helpers to build tensors in tests.
    use alloc::vec::Vec;

    use super::*;

    /// An owned tensor for tests.
    #[derive(Debug, Clone)]
    pub struct Owned {
        pub dtype: DType,
        pub shape: Shape,
        pub bytes: Vec<u64>,
    }

    impl Owned {
        pub fn new<T: Elem>(dims: &[usize], data: &[T]) -> Owned {
            let shape = Shape::new(dims).unwrap();
            assert_eq!(shape.numel(), data.len());
            Owned::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(data))
        }
        pub fn boolean(dims: &[usize], data: &[bool]) -> Owned {
            let shape = Shape::new(dims).unwrap();
            let b: Vec<u8> = data.iter().map(|&x| x as u8).collect();
            Owned::from_bytes(DType::Bool, shape, &b)
        }
        pub fn from_bytes(dtype: DType, shape: Shape, b: &[u8]) -> Owned {
            let mut bytes = alloc::vec![0u64; b.len().div_ceil(8)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut bytes)[..b.len()].copy_from_slice(b);
            Owned {
                dtype,
                shape,
                bytes,
            }
        }
        pub fn zeros(dtype: DType, shape: Shape) -> Owned {
            Owned::from_bytes(
                dtype,
                shape,
                &alloc::vec![0u8; shape.numel() * dtype.size()],
            )
        }
        pub fn data(&self) -> &[u8] {
            &bytemuck::cast_slice::<u64, u8>(&self.bytes)[..self.shape.numel() * self.dtype.size()]
        }
        pub fn r(&self) -> TensorRef<'_> {
            TensorRef::new(self.dtype, self.shape, self.data()).unwrap()
        }
        pub fn to<T: Elem>(&self) -> Vec<T> {
            bytemuck::cast_slice::<u8, T>(self.data()).to_vec()
        }
        pub fn dims(&self) -> &[usize] {
            self.shape.dims()
        }
    }

    /// Runs a kernel: infers the output shapes, allocates the outputs with
    /// the given dtypes and runs it.
    pub fn run_kernel<K: crate::Kernel>(
        k: &K,
        inputs: &[Option<&Owned>],
        out_dtypes: &[DType],
    ) -> Result<Vec<Owned>, KernelError> {
        let ins: Vec<Option<TensorRef<'_>>> = inputs.iter().map(|o| o.map(|o| o.r())).collect();
        let mut shapes = alloc::vec![Shape::SCALAR; out_dtypes.len()];
        k.infer(&ins, &mut shapes)?;
        // Shape inference without data must agree (or ask for data).
        let blind: Vec<Option<TensorRef<'_>>> = inputs
            .iter()
            .map(|o| o.map(|o| TensorRef::shape_only(o.dtype, o.shape)))
            .collect();
        let mut shapes2 = alloc::vec![Shape::SCALAR; out_dtypes.len()];
        match k.infer(&blind, &mut shapes2) {
            Ok(()) => assert_eq!(shapes, shapes2),
            Err(KernelError::NeedsData { .. }) => {
                // A stated bound must hold.
                let mut bounds = alloc::vec![0usize; out_dtypes.len()];
                if k.max_output_elems(&blind, &mut bounds)? {
                    for (s, b) in shapes.iter().zip(&bounds) {
                        assert!(s.numel() <= *b, "{s:?} exceeds the bound {b}");
                    }
                }
            }
            Err(e) => panic!("blind infer failed: {e:?}"),
        }
        let mut outs: Vec<Owned> = out_dtypes
            .iter()
            .zip(&shapes)
            .map(|(&d, &s)| Owned::zeros(d, s))
            .collect();
        let scratch_n = k.scratch_bytes(&ins, &shapes);
        let mut scratch_store = alloc::vec![0u128; scratch_n.div_ceil(16)];
        let scratch = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut scratch_store)[..scratch_n];
        {
            let mut muts: Vec<TensorMut<'_>> = outs
                .iter_mut()
                .map(|o| {
                    let n = o.shape.numel() * o.dtype.size();
                    let data = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut o.bytes)[..n];
                    TensorMut::new(o.dtype, o.shape, data).unwrap()
                })
                .collect();
            k.run(&ins, &mut muts, scratch)?;
        }
        Ok(outs)
    }

    /// Runs a single-output kernel.
    pub fn run1<K: crate::Kernel>(
        k: &K,
        inputs: &[Option<&Owned>],
        out_dtype: DType,
    ) -> Result<Owned, KernelError> {
        Ok(run_kernel(k, inputs, &[out_dtype])?.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn rows_collapse_and_visit() {
        let a = Shape::new(&[2, 1, 3]).unwrap();
        let b = Shape::new(&[4, 1]).unwrap();
        let out = crate::shape::broadcast(&a, &b, "t").unwrap();
        let rows = Rows::new([&a, &b], &out, "t").unwrap();
        let av: Vec<i64> = (0..6).collect();
        let bv: Vec<i64> = (0..4).map(|x| x * 100).collect();
        let mut o = alloc::vec![0i64; out.numel()];
        zip2(&rows, &av, &bv, &mut o, |x, y| x + y);
        // Reference by explicit indexing.
        let mut k = 0;
        for i in 0..2 {
            for j in 0..4 {
                for l in 0..3 {
                    assert_eq!(o[k], av[i * 3 + l] + bv[j]);
                    k += 1;
                }
            }
        }
        let same = Rows::new([&out, &out], &out, "t").unwrap();
        assert_eq!(same.rank, 1);
        assert!(
            Rows::new(
                [&Shape::new(&[3]).unwrap()],
                &Shape::new(&[4]).unwrap(),
                "t"
            )
            .is_err()
        );
    }

    #[test]
    fn num_semantics() {
        assert_eq!((-7i32).rem_py(3), 2);
        assert_eq!(7i32.rem_py(-3), -2);
        assert_eq!((-7i32).fmod(3), -1);
        assert_eq!((-7i64).div(2), -3);
        assert_eq!(5i64.div(0), 0);
        assert_eq!((-7.5f32).rem_py(2.0), 0.5);
        assert!(f32::NAN.max_nan(1.0).is_nan());
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert_eq!(u8::from_f64(-1.0), 255);
        assert_eq!(i32::from_f64(-2.7), -2);
    }
}
