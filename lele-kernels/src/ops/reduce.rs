//! Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
//! ArgMax/ArgMin and CumSum.
//!
//! Reductions accumulate in f64 (floats, and integer Mean/L2/Log*) or i128
//! (other integer reductions, wrapping to the output width at the end) in
//! scratch memory, except f32 Sum and Mean over trailing axes (an SE
//! block's mean, a global average pool): those sum each contiguous run in
//! 64 f32 partial sums at the CPU's vector width ([`sum_f32`]; the eight
//! f64 partials took 16 µs for PP-OCRv6 rec's 92K-float means, 5–9 now).
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::broadcast::{Num, Rows, check_data, check_out, dispatch_num, read_list};
use crate::shape::{MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

/// The operation of a [`Reduce`] kernel (ONNX `Reduce<Op>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Arithmetic mean.
    Mean,
    /// Maximum (NaN-propagating).
    Max,
    /// Minimum (NaN-propagating).
    Min,
    /// Product.
    Prod,
    /// Sum of absolute values.
    L1,
    /// Square root of the sum of squares.
    L2,
    /// Log of the sum.
    LogSum,
    /// Log of the sum of exponentials (computed stably).
    LogSumExp,
    /// Sum of squares.
    SumSquare,
}
crate::to_rust_enum!(ops::reduce::ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare
});

/// ONNX `Reduce<Op>`: inputs `data`, optional `axes` (i64). Empty or absent
/// axes reduce everything unless `noop_with_empty_axes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reduce {
    /// The reduction.
    pub op: ReduceOp,
    /// Keep reduced dims as size 1.
    pub keepdims: bool,
    /// With empty axes, return the input unchanged.
    pub noop_with_empty_axes: bool,
}
crate::to_rust_struct!(ops::reduce::Reduce {
    op,
    keepdims,
    noop_with_empty_axes
});

const OP: &str = "Reduce";

impl Reduce {
    /// Reduced-axes mask (`None` = identity) and output shape.
    fn plan(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Option<[bool; MAX_RANK]>, Shape), KernelError> {
        let x = input(inputs, 0, OP)?;
        let rank = x.shape.rank();
        let mut mask = [false; MAX_RANK];
        let axes = opt_input(inputs, 1).filter(|t| t.numel() > 0);
        match axes {
            Some(t) => {
                let (v, n) = read_list(t, OP)?;
                for &a in &v[..n] {
                    mask[normalize_axis(a, rank, OP)?] = true;
                }
            }
            None if self.noop_with_empty_axes => return Ok((None, x.shape)),
            None => mask[..rank].fill(true),
        }
        let mut out = Shape::SCALAR;
        for (i, &d) in x.shape.dims().iter().enumerate() {
            if !mask[i] {
                out.push(d)?;
            } else if self.keepdims {
                out.push(1)?;
            }
        }
        Ok((Some(mask), out))
    }
}

impl Kernel for Reduce {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (_, s) = self.plan(inputs)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = s;
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // Reducing never adds elements, except that an empty reduced axis
        // still yields one value (kept as 1).
        let x = input(inputs, 0, OP)?;
        let n = x.shape.dims().iter().map(|&d| d.max(1)).product();
        crate::kernel::bound_outputs(outputs, n)
    }

    fn scratch_bytes(&self, _inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        // Accumulators (i128 or f64) plus the LogSumExp maxima.
        outputs.first().map_or(0, |s| s.numel() * 32)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let (mask, shape) = self.plan(inputs)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &shape, OP)?;
        let Some(mask) = mask else {
            out.data.copy_from_slice(x.data);
            return Ok(());
        };
        let mut keep = x.shape;
        for (i, d) in keep.dims_mut().iter_mut().enumerate() {
            if mask[i] {
                *d = 1;
            }
        }
        let count = x.numel() / keep.numel().max(1);
        let rows = Rows::new([&keep], &x.shape, OP)?;
        let n = keep.numel();
        if scratch.len() < n * 32 {
            return Err(KernelError::Buffer { op: OP });
        }
        let op = self.op;
        let int_acc = !x.dtype.is_float()
            && !matches!(
                op,
                ReduceOp::Mean | ReduceOp::L2 | ReduceOp::LogSum | ReduceOp::LogSumExp
            );
        if x.dtype == DType::Bool {
            // Max/Min of booleans are any/all: reduce the 0/1 bytes; the
            // empty Min (all of nothing) is true.
            if !matches!(op, ReduceOp::Max | ReduceOp::Min) {
                return Err(KernelError::UnsupportedDType {
                    op: OP,
                    dtype: x.dtype,
                });
            }
            let acc: &mut [i128] = bytemuck::try_cast_slice_mut(&mut scratch[..n * 16])
                .map_err(|_| KernelError::Buffer { op: OP })?;
            reduce_into::<u8, i128>(op, &rows, x.data, acc, count, out.data, &mut []);
            for b in out.data.iter_mut() {
                *b = (*b).min(1);
            }
            return Ok(());
        }
        let trailing = mask[..x.shape.rank()]
            .iter()
            .skip_while(|&&m| !m)
            .all(|&m| m);
        if x.dtype == DType::F32 && matches!(op, ReduceOp::Sum | ReduceOp::Mean) && trailing {
            // Every output sums a contiguous run of x (a global average
            // pool, a squeeze-and-excitation block's mean).
            let (xv, y) = (x.typed::<f32>(OP)?, out.typed::<f32>(OP)?);
            let mean = op == ReduceOp::Mean;
            #[cfg(feature = "std")]
            {
                let threads = crate::threads::num_threads();
                if threads > 1
                    && y.len() >= threads
                    && xv.len() >= crate::threads::PARALLEL_MIN_ELEMS
                {
                    // A run of outputs per thread (each sum is the same
                    // wherever it runs): an SE block's mean then reads the
                    // channels each core wrote in the layer before.
                    let (outputs, per) = (y.len(), y.len().div_ceil(threads));
                    let shared = crate::threads::SharedMut::new(y);
                    crate::threads::run(outputs.div_ceil(per), &mut [], &|t, _| {
                        let first = t * per;
                        let n = per.min(outputs - first);
                        // SAFETY: task t alone writes outputs first..first
                        // + n, and `run` returns after every task.
                        let part = unsafe { shared.range(first, n) };
                        sum_runs_f32(&xv[first * count..(first + n) * count], count, mean, part);
                    });
                    return Ok(());
                }
            }
            sum_runs_f32(xv, count, mean, y);
            return Ok(());
        }
        dispatch_num!(x.dtype, OP, |T| {
            let xv = x.typed::<T>(OP)?;
            let y = out.typed::<T>(OP)?;
            if int_acc {
                let acc: &mut [i128] = bytemuck::try_cast_slice_mut(&mut scratch[..n * 16])
                    .map_err(|_| KernelError::Buffer { op: OP })?;
                reduce_into::<T, i128>(op, &rows, xv, acc, count, y, &mut []);
            } else {
                let (a, b) = scratch[..n * 16].split_at_mut(n * 8);
                let acc: &mut [f64] =
                    bytemuck::try_cast_slice_mut(a).map_err(|_| KernelError::Buffer { op: OP })?;
                let aux: &mut [f64] =
                    bytemuck::try_cast_slice_mut(b).map_err(|_| KernelError::Buffer { op: OP })?;
                reduce_into::<T, f64>(op, &rows, xv, acc, count, y, aux);
            }
            Ok(())
        })
    }
}

/// Accumulator arithmetic.
trait Acc: Copy + PartialOrd {
    fn of<T: Num>(v: T) -> Self;
    fn to<T: Num>(self) -> T;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn abs(self) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn finish(self, op: ReduceOp, count: usize, max: Self) -> Self;
    fn exp_shift(self, m: Self) -> Self;
    fn is_nan(self) -> bool;
}

impl Acc for f64 {
    #[inline(always)]
    fn of<T: Num>(v: T) -> Self {
        v.to_f64()
    }
    #[inline(always)]
    fn to<T: Num>(self) -> T {
        T::from_f64(self)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f64::abs(self)
    }
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
    fn lowest() -> Self {
        f64::NEG_INFINITY
    }
    fn highest() -> Self {
        f64::INFINITY
    }
    fn finish(self, op: ReduceOp, count: usize, max: Self) -> Self {
        match op {
            ReduceOp::Mean => self / count as f64,
            ReduceOp::L2 => self.sqrt(),
            ReduceOp::LogSum => self.ln(),
            ReduceOp::LogSumExp => {
                if max.is_finite() {
                    max + self.ln()
                } else {
                    max
                }
            }
            _ => self,
        }
    }
    #[inline(always)]
    fn exp_shift(self, m: Self) -> Self {
        if m.is_finite() { (self - m).exp() } else { 0.0 }
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

impl Acc for i128 {
    #[inline(always)]
    fn of<T: Num>(v: T) -> Self {
        v.to_i128()
    }
    #[inline(always)]
    fn to<T: Num>(self) -> T {
        T::from_i128(self)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        self.wrapping_abs()
    }
    fn zero() -> Self {
        0
    }
    fn one() -> Self {
        1
    }
    fn lowest() -> Self {
        i128::MIN
    }
    fn highest() -> Self {
        i128::MAX
    }
    fn finish(self, _op: ReduceOp, _count: usize, _max: Self) -> Self {
        self
    }
    fn exp_shift(self, _m: Self) -> Self {
        0
    }
    fn is_nan(self) -> bool {
        false
    }
}

#[inline(always)]
fn max_nan<A: Acc>(a: A, b: A) -> A {
    if a > b || a.is_nan() { a } else { b }
}

#[inline(always)]
fn min_nan<A: Acc>(a: A, b: A) -> A {
    if a < b || a.is_nan() { a } else { b }
}

/// Independent partial sums [`sum_f32`] keeps: four 16-lane vectors, so
/// four chains of adds overlap.
const PARTIAL_SUMS: usize = 64;

/// `y[i]` = the sum (or, with `mean`, the mean) of run `i` of `x`, runs of
/// `count` elements back to back (0, or NaN for the mean, when `count` is
/// 0).
fn sum_runs_f32(x: &[f32], count: usize, mean: bool, y: &mut [f32]) {
    if count == 0 {
        // The mean of nothing divides zero by zero, as the general path.
        y.fill(if mean { f32::NAN } else { 0.0 });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    match crate::ops::gemm::best_isa() {
        // SAFETY: AVX-512F (with AVX2 and FMA) was detected.
        crate::ops::gemm::Isa::Avx512 => return unsafe { sum_runs_avx512(x, count, mean, y) },
        // SAFETY: AVX2 and FMA were detected.
        crate::ops::gemm::Isa::Avx2 => return unsafe { sum_runs_avx2(x, count, mean, y) },
        crate::ops::gemm::Isa::Scalar => {}
    }
    sum_runs(x, count, mean, y)
}

/// [`sum_runs`] compiled with AVX-512F.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn sum_runs_avx512(x: &[f32], count: usize, mean: bool, y: &mut [f32]) {
    sum_runs(x, count, mean, y)
}

/// [`sum_runs`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_runs_avx2(x: &[f32], count: usize, mean: bool, y: &mut [f32]) {
    sum_runs(x, count, mean, y)
}

/// The loop of [`sum_runs_f32`] (`count` > 0): the same operations in the
/// same order at every vector width, so every CPU gets the same sums.
#[inline(always)]
fn sum_runs(x: &[f32], count: usize, mean: bool, y: &mut [f32]) {
    for (yo, run) in y.iter_mut().zip(x.chunks_exact(count)) {
        let s = sum_f32(run);
        *yo = if mean {
            (f64::from(s) / count as f64) as f32
        } else {
            s
        };
    }
}

/// The sum of `x` in [`PARTIAL_SUMS`] partial sums (element `i` of each
/// whole group of them into partial `i`, then of each whole group of 16
/// left into partial `i`), added pairwise, then the last few elements in
/// order.
#[inline(always)]
fn sum_f32(x: &[f32]) -> f32 {
    let mut part = [0f32; PARTIAL_SUMS];
    let chunks = x.chunks_exact(PARTIAL_SUMS);
    let sixteens = chunks.remainder().chunks_exact(16);
    let rest = sixteens.remainder();
    for c in chunks {
        for (p, &v) in part.iter_mut().zip(c) {
            *p += v;
        }
    }
    for c in sixteens {
        for (p, &v) in part.iter_mut().zip(c) {
            *p += v;
        }
    }
    let mut width = PARTIAL_SUMS;
    while width > 1 {
        width /= 2;
        let (lo, hi) = part.split_at_mut(width);
        for (a, &b) in lo.iter_mut().zip(&hi[..width]) {
            *a += b;
        }
    }
    rest.iter().fold(part[0], |a, &v| a + v)
}

/// Folds every element of `x` into `acc[offset]` with `f`.
#[inline(always)]
fn fold<T: Num, A: Acc>(rows: &Rows<1>, x: &[T], acc: &mut [A], f: impl Fn(A, T) -> A) {
    rows.for_each(|o, n, [oa], [sa]| {
        let xs = &x[o..o + n];
        if sa == 0 {
            let mut a = acc[oa];
            for &v in xs {
                a = f(a, v);
            }
            acc[oa] = a;
        } else {
            for (a, &v) in acc[oa..oa + n].iter_mut().zip(xs) {
                *a = f(*a, v);
            }
        }
    });
}

/// [`fold`] for a sum of `g(v)`: a contiguous run that folds into one
/// accumulator is summed in eight independent partial sums (one long
/// chain of dependent adds would wait on every add's latency).
#[inline(always)]
fn fold_sum<T: Num, A: Acc>(rows: &Rows<1>, x: &[T], acc: &mut [A], g: impl Fn(T) -> A) {
    rows.for_each(|o, n, [oa], [sa]| {
        let xs = &x[o..o + n];
        if sa == 0 {
            let mut part = [A::zero(); 8];
            let chunks = xs.chunks_exact(8);
            let rest = chunks.remainder();
            for c in chunks {
                for (p, &v) in part.iter_mut().zip(c) {
                    *p = p.add(g(v));
                }
            }
            let mut a = acc[oa];
            for p in part {
                a = a.add(p);
            }
            for &v in rest {
                a = a.add(g(v));
            }
            acc[oa] = a;
        } else {
            for (a, &v) in acc[oa..oa + n].iter_mut().zip(xs) {
                *a = a.add(g(v));
            }
        }
    });
}

fn reduce_into<T: Num, A: Acc>(
    op: ReduceOp,
    rows: &Rows<1>,
    x: &[T],
    acc: &mut [A],
    count: usize,
    y: &mut [T],
    aux: &mut [A],
) {
    let init = match op {
        ReduceOp::Max => A::lowest(),
        ReduceOp::Min => A::highest(),
        ReduceOp::Prod => A::one(),
        _ => A::zero(),
    };
    acc.fill(init);
    match op {
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::LogSum => fold_sum(rows, x, acc, A::of),
        ReduceOp::Max => fold(rows, x, acc, |a, v| max_nan(a, A::of(v))),
        ReduceOp::Min => fold(rows, x, acc, |a, v| min_nan(a, A::of(v))),
        ReduceOp::Prod => fold(rows, x, acc, |a, v| a.mul(A::of(v))),
        ReduceOp::L1 => fold_sum(rows, x, acc, |v| A::of(v).abs()),
        ReduceOp::L2 | ReduceOp::SumSquare => fold_sum(rows, x, acc, |v| {
            let v = A::of(v);
            v.mul(v)
        }),
        ReduceOp::LogSumExp => {
            let m = &mut aux[..acc.len()];
            m.fill(A::lowest());
            fold(rows, x, m, |a, v| max_nan(a, A::of(v)));
            let m = &*m;
            rows.for_each(|o, n, [oa], [sa]| {
                for (j, &v) in x[o..o + n].iter().enumerate() {
                    let k = oa + j * sa;
                    acc[k] = acc[k].add(A::of(v).exp_shift(m[k]));
                }
            });
            for ((y, a), &mx) in y.iter_mut().zip(acc.iter()).zip(m.iter()) {
                *y = a.finish(op, count, mx).to();
            }
            return;
        }
    }
    for (y, a) in y.iter_mut().zip(acc.iter()) {
        *y = a.finish(op, count, A::zero()).to();
    }
}

/// Splits a shape at `axis` into (outer, axis dim, inner) element counts.
fn split3(s: &Shape, axis: usize) -> (usize, usize, usize) {
    let d = s.dims();
    (
        d[..axis].iter().product(),
        d[axis],
        d[axis + 1..].iter().product(),
    )
}

macro_rules! arg_kernel {
    ($(#[$doc:meta])* $name:ident, $onnx:literal, $better:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            /// The reduced axis.
            pub axis: i64,
            /// Keep the reduced dim as size 1.
            pub keepdims: bool,
            /// On ties, return the last index instead of the first.
            pub select_last_index: bool,
        }
        crate::to_rust_struct!(ops::reduce::$name { axis, keepdims, select_last_index });

        impl $name {
            fn shape(&self, x: &Shape) -> Result<(Shape, usize), KernelError> {
                let axis = x.axis(self.axis, $onnx)?;
                let mut out = Shape::SCALAR;
                for (i, &d) in x.dims().iter().enumerate() {
                    if i != axis {
                        out.push(d)?;
                    } else if self.keepdims {
                        out.push(1)?;
                    }
                }
                Ok((out, axis))
            }
        }

        impl Kernel for $name {
            fn infer(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [Shape],
            ) -> Result<(), KernelError> {
                let x = input(inputs, 0, $onnx)?;
                let (s, _) = self.shape(&x.shape)?;
                *outputs.first_mut().ok_or(KernelError::MissingInput { op: $onnx, index: 0 })? = s;
                Ok(())
            }

            fn run(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [TensorMut<'_>],
                _scratch: &mut [u8],
            ) -> Result<(), KernelError> {
                let x = input(inputs, 0, $onnx)?;
                check_data(x, $onnx)?;
                let (shape, axis) = self.shape(&x.shape)?;
                let out = output(outputs, 0, $onnx)?;
                check_out(out, DType::I64, &shape, $onnx)?;
                let (outer, n, inner) = split3(&x.shape, axis);
                if n == 0 && shape.numel() > 0 {
                    return Err(KernelError::Shape { op: $onnx, msg: "empty axis" });
                }
                let last = self.select_last_index;
                let y = out.typed::<i64>($onnx)?;
                dispatch_num!(x.dtype, $onnx, |T| {
                    let xv = x.typed::<T>($onnx)?;
                    for o in 0..outer {
                        for j in 0..inner {
                            let base = o * n * inner + j;
                            let mut best = xv[base];
                            let mut bi = 0usize;
                            for k in 1..n {
                                let v = xv[base + k * inner];
                                if best.is_nan() {
                                    break;
                                }
                                let take = v.is_nan() || (v $better best) || (last && v == best);
                                if take {
                                    best = v;
                                    bi = k;
                                }
                            }
                            y[o * inner + j] = bi as i64;
                        }
                    }
                    Ok(())
                })
            }
        }
    };
}

arg_kernel!(
    /// ONNX `ArgMax`: i64 indices of the maxima along `axis` (first NaN wins).
    ArgMax, "ArgMax", >
);
arg_kernel!(
    /// ONNX `ArgMin`: i64 indices of the minima along `axis` (first NaN wins).
    ArgMin, "ArgMin", <
);

/// ONNX `CumSum` (and `CumProd` with `product`): inputs `x`, `axis`
/// (scalar i32/i64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CumSum {
    /// Exclude the current element from its sum.
    pub exclusive: bool,
    /// Sum from the end.
    pub reverse: bool,
    /// Multiply instead of add (`CumProd`).
    pub product: bool,
}
crate::to_rust_struct!(ops::reduce::CumSum {
    exclusive,
    reverse,
    product
});

impl Kernel for CumSum {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "CumSum")?;
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "CumSum",
            index: 0,
        })? = x.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "CumSum";
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let axis = input(inputs, 1, OP)?.scalar_i64(OP)?;
        let axis = x.shape.axis(axis, OP)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let (outer, n, inner) = split3(&x.shape, axis);
        let (excl, rev, prod) = (self.exclusive, self.reverse, self.product);
        dispatch_num!(x.dtype, OP, |T| {
            let xv = x.typed::<T>(OP)?;
            let y = out.typed::<T>(OP)?;
            for o in 0..outer {
                let base = o * n * inner;
                for step in 0..n {
                    let k = if rev { n - 1 - step } else { step };
                    let row = base + k * inner;
                    if step == 0 {
                        let yr = &mut y[row..row + inner];
                        if excl {
                            yr.fill(if prod { T::ONE } else { T::ZERO });
                        } else {
                            yr.copy_from_slice(&xv[row..row + inner]);
                        }
                        continue;
                    }
                    let prev_k = if rev { k + 1 } else { k - 1 };
                    let prev = base + prev_k * inner;
                    let src = if excl { prev } else { row };
                    // y[row] = y[prev] + x[src]
                    let (lo, hi) = if prev < row {
                        let (a, b) = y.split_at_mut(row);
                        (&a[prev..prev + inner], &mut b[..inner])
                    } else {
                        let (a, b) = y.split_at_mut(prev);
                        (&b[..inner], &mut a[row..row + inner])
                    };
                    for ((d, &p), &v) in hi.iter_mut().zip(lo).zip(&xv[src..src + inner]) {
                        *d = if prod { Num::mul(p, v) } else { Num::add(p, v) };
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
    use crate::ops::broadcast::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn reduce(x: &Owned, op: ReduceOp, axes: Option<&[i64]>, keepdims: bool) -> Owned {
        let a = axes.map(|a| Owned::new(&[a.len()], a));
        let k = Reduce {
            op,
            keepdims,
            noop_with_empty_axes: false,
        };
        run1(&k, &[Some(x), a.as_ref()], x.dtype).unwrap()
    }

    /// Reference: reduce a [2, 3, 4] tensor over a mask by brute force.
    fn reference(data: &[f64], mask: [bool; 3], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
        let dims = [2usize, 3, 4];
        let od: Vec<usize> = (0..3).map(|i| if mask[i] { 1 } else { dims[i] }).collect();
        let mut res = Vec::new();
        for i in 0..od[0] {
            for j in 0..od[1] {
                for k in 0..od[2] {
                    let mut vals = Vec::new();
                    for a in 0..2 {
                        for b in 0..3 {
                            for c in 0..4 {
                                if (mask[0] || a == i) && (mask[1] || b == j) && (mask[2] || c == k)
                                {
                                    vals.push(data[a * 12 + b * 4 + c]);
                                }
                            }
                        }
                    }
                    res.push(f(&vals));
                }
            }
        }
        res
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn all_ops_all_axes() {
        let data: Vec<f64> = (0..24)
            .map(|v| ((v * 7) % 11) as f64 * 0.25 - 1.0)
            .collect();
        let x = Owned::new(&[2, 3, 4], &data);
        let ops: [(ReduceOp, fn(&[f64]) -> f64); 10] = [
            (ReduceOp::Sum, |v| v.iter().sum()),
            (ReduceOp::Mean, |v| v.iter().sum::<f64>() / v.len() as f64),
            (ReduceOp::Max, |v| {
                v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            }),
            (ReduceOp::Min, |v| {
                v.iter().cloned().fold(f64::INFINITY, f64::min)
            }),
            (ReduceOp::Prod, |v| v.iter().product()),
            (ReduceOp::L1, |v| v.iter().map(|a| a.abs()).sum()),
            (ReduceOp::L2, |v| {
                v.iter().map(|a| a * a).sum::<f64>().sqrt()
            }),
            (ReduceOp::LogSum, |v| v.iter().sum::<f64>().ln()),
            (ReduceOp::LogSumExp, |v| {
                v.iter().map(|a| a.exp()).sum::<f64>().ln()
            }),
            (ReduceOp::SumSquare, |v| v.iter().map(|a| a * a).sum()),
        ];
        let axes_cases: [(&[i64], [bool; 3]); 6] = [
            (&[0], [true, false, false]),
            (&[1], [false, true, false]),
            (&[-1], [false, false, true]),
            (&[0, 2], [true, false, true]),
            (&[1, 2], [false, true, true]),
            (&[], [true, true, true]),
        ];
        for (op, f) in ops {
            for (axes, mask) in axes_cases {
                let got = reduce(&x, op, Some(axes), true).to::<f64>();
                let want = reference(&data, mask, f);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        g == w
                            || (g - w).abs() <= 1e-12 * w.abs().max(1.0)
                            || (g.is_nan() && w.is_nan()),
                        "{op:?} {axes:?}: {g} vs {w}"
                    );
                }
            }
        }
        // Long contiguous runs (eight partial sums and a tail) and strided
        // ones, f32 data.
        let long: Vec<f32> = (0..3 * 37)
            .map(|v| ((v * 5) % 13) as f32 * 0.5 - 3.0)
            .collect();
        let xl = Owned::new(&[3, 37], &long);
        for (op, f) in &ops {
            if !matches!(
                op,
                ReduceOp::Sum | ReduceOp::Mean | ReduceOp::L1 | ReduceOp::L2 | ReduceOp::SumSquare
            ) {
                continue;
            }
            for (axis, outer, inner, stride_o, stride_i) in
                [(1i64, 3, 37, 37, 1), (0, 37, 3, 1, 37)]
            {
                let got = reduce(&xl, *op, Some(&[axis]), false).to::<f32>();
                for (o, g) in got.iter().enumerate().take(outer) {
                    let vals: Vec<f64> = (0..inner)
                        .map(|i| long[o * stride_o + i * stride_i] as f64)
                        .collect();
                    let w = f(&vals) as f32;
                    assert!(
                        (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                        "{op:?} {axis}: {g} vs {w}"
                    );
                }
            }
        }
        let y = reduce(&x, ReduceOp::Sum, Some(&[1]), false);
        assert_eq!(y.dims(), &[2, 4]);
        let y = reduce(&x, ReduceOp::Sum, None, false);
        assert_eq!(y.dims(), &[] as &[usize]);
        let noop = Reduce {
            op: ReduceOp::Sum,
            keepdims: true,
            noop_with_empty_axes: true,
        };
        let y = run1(&noop, &[Some(&x), None], DType::F64).unwrap();
        assert_eq!(y.to::<f64>(), data);
    }

    /// The f32 sum of contiguous runs: every vector width gives the
    /// portable loop's sums bit for bit, within the error bound of its
    /// summation order from the f64 sum, over run lengths around the 64
    /// partial sums and their tails; a NaN or infinity in a run shows in
    /// its sum; and the kernel takes axes that end at the last one.
    #[test]
    fn f32_sums_of_runs() {
        let lens: Vec<usize> = (1..=200).chain([255, 480, 961]).collect();
        for &count in &lens {
            let runs = 3;
            let mut xs: Vec<f32> = (0..runs * count)
                .map(|i| ((i * 37 + count) % 101) as f32 * 0.173 - 8.1)
                .collect();
            if count > 7 {
                xs[count + 7] = f32::NAN;
                xs[2 * count + 3] = f32::INFINITY;
            }
            for mean in [false, true] {
                let mut want = vec![0f32; runs];
                sum_runs(&xs, count, mean, &mut want);
                #[cfg(target_arch = "x86_64")]
                {
                    let isa = crate::ops::gemm::best_isa();
                    let mut got = vec![0f32; runs];
                    if isa == crate::ops::gemm::Isa::Avx512 {
                        // SAFETY: AVX-512F was detected.
                        unsafe { sum_runs_avx512(&xs, count, mean, &mut got) };
                        assert_eq!(bits(&got), bits(&want), "avx512 {count}");
                    }
                    if isa != crate::ops::gemm::Isa::Scalar {
                        // SAFETY: AVX2 and FMA were detected.
                        unsafe { sum_runs_avx2(&xs, count, mean, &mut got) };
                        assert_eq!(bits(&got), bits(&want), "avx2 {count}");
                    }
                }
                for (r, &w) in want.iter().enumerate() {
                    let run = &xs[r * count..(r + 1) * count];
                    if run.iter().any(|v| !v.is_finite()) {
                        assert!(!w.is_finite(), "{count} run {r}: {w}");
                        continue;
                    }
                    let exact: f64 = run.iter().map(|&v| f64::from(v)).sum();
                    let magnitude: f64 = run.iter().map(|&v| f64::from(v).abs()).sum();
                    // Each addition rounds once: at most count / 64 + 3
                    // into a partial sum, six pairwise levels, 15 leftovers.
                    let adds = (count / PARTIAL_SUMS + 3 + 6 + 15) as f64;
                    let mut bound = adds * f64::from(f32::EPSILON) * magnitude;
                    let mut exact = exact;
                    if mean {
                        exact /= count as f64;
                        bound = bound / count as f64 + f64::from(f32::EPSILON) * exact.abs();
                    }
                    assert!(
                        (f64::from(w) - exact).abs() <= bound,
                        "{count} {mean}: {w} vs {exact}"
                    );
                }
            }
        }
        // Through the kernel: [2, 3, 5, 7] reduced over (2, 3) and (1, 2, 3)
        // against the f64 kernel path on the same values.
        let data: Vec<f32> = (0..210)
            .map(|i| ((i * 11) % 23) as f32 * 0.37 - 4.0)
            .collect();
        let x32 = Owned::new(&[2, 3, 5, 7], &data);
        let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        let x64 = Owned::new(&[2, 3, 5, 7], &wide);
        for op in [ReduceOp::Sum, ReduceOp::Mean] {
            for axes in [&[2i64, 3][..], &[1, 2, -1], &[3]] {
                let got = reduce(&x32, op, Some(axes), false).to::<f32>();
                let want = reduce(&x64, op, Some(axes), false).to::<f64>();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{op:?} {axes:?}"
                    );
                }
            }
        }
    }

    /// Sums of runs split over the threads (an input of 35K floats, 37
    /// outputs, so the last thread gets fewer): the same bits on 1, 2 and 3
    /// threads, close to the f64 path.
    #[cfg(feature = "std")]
    #[test]
    fn f32_sums_of_runs_over_threads() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dims = [1, 37, 33, 29];
        let len: usize = dims.iter().product();
        assert!(len >= crate::threads::PARALLEL_MIN_ELEMS);
        let data: Vec<f32> = (0..len)
            .map(|i| ((i * 7) % 31) as f32 * 0.21 - 3.0)
            .collect();
        let x32 = Owned::new(&dims, &data);
        let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        let want = reduce(
            &Owned::new(&dims, &wide),
            ReduceOp::Mean,
            Some(&[2, 3]),
            true,
        )
        .to::<f64>();
        let mut first: Option<Vec<u32>> = None;
        for threads in [1, 2, 3] {
            crate::threads::set_num_threads(threads);
            let got = reduce(&x32, ReduceOp::Mean, Some(&[2, 3]), true).to::<f32>();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{threads} threads"
                );
            }
            match &first {
                None => first = Some(bits(&got)),
                Some(one) => assert_eq!(&bits(&got), one, "{threads} threads"),
            }
        }
        crate::threads::set_num_threads(1);
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn ints_and_f32() {
        let x = Owned::new(&[2, 3], &[1i64, -2, 3, i64::MAX, 1, 0]);
        assert_eq!(
            reduce(&x, ReduceOp::Sum, Some(&[1]), false).to::<i64>(),
            [2, i64::MIN]
        );
        assert_eq!(
            reduce(&x, ReduceOp::Max, Some(&[0]), false).to::<i64>(),
            [i64::MAX, 1, 3]
        );
        assert_eq!(
            reduce(&x, ReduceOp::Prod, Some(&[1]), false).to::<i64>(),
            [-6, 0]
        );
        let x = Owned::new(&[3], &[1i32, 2, 2]);
        assert_eq!(reduce(&x, ReduceOp::Mean, None, false).to::<i32>(), [1]);
        let xf: Vec<f32> = (0..1001).map(|v| v as f32 * 0.001).collect();
        let x = Owned::new(&[7, 11, 13], &xf);
        let y = reduce(&x, ReduceOp::Mean, Some(&[-1]), true).to::<f32>();
        let want: f32 = xf[..13].iter().sum::<f32>() / 13.0;
        assert!((y[0] - want).abs() < 1e-6);
        let nan = Owned::new(&[3], &[1.0f32, f32::NAN, 3.0]);
        assert!(reduce(&nan, ReduceOp::Max, None, false).to::<f32>()[0].is_nan());
        let big = Owned::new(&[2], &[1000.0f32, 1000.0]);
        let lse = reduce(&big, ReduceOp::LogSumExp, None, false).to::<f32>()[0];
        assert!((lse - (1000.0 + 2f32.ln())).abs() < 1e-3);
    }

    #[test]
    fn argmax_argmin() {
        // np.argmax(x, axis=1) with ties
        let x = Owned::new(
            &[2, 4],
            &[1.0f32, 3.0, 3.0, 2.0, 5.0, f32::NAN, 7.0, f32::NAN],
        );
        let run = |k: &dyn Kernel| run1_dyn(k, &x);
        let am = ArgMax {
            axis: 1,
            keepdims: false,
            select_last_index: false,
        };
        assert_eq!(run(&am), [1, 1]);
        let am = ArgMax {
            axis: -1,
            keepdims: true,
            select_last_index: true,
        };
        assert_eq!(run(&am), [2, 1]);
        let am = ArgMin {
            axis: 0,
            keepdims: false,
            select_last_index: false,
        };
        assert_eq!(run(&am), [0, 1, 0, 1]);
        let xi = Owned::new(&[3, 1], &[4i32, -1, 9]);
        let y = run1(
            &ArgMin {
                axis: 0,
                keepdims: true,
                select_last_index: false,
            },
            &[Some(&xi)],
            DType::I64,
        )
        .unwrap();
        assert_eq!((y.dims(), y.to::<i64>()), (&[1usize, 1][..], [1].to_vec()));
    }

    fn run1_dyn(k: &dyn Kernel, x: &Owned) -> Vec<i64> {
        struct W<'a>(&'a dyn Kernel);
        impl Kernel for W<'_> {
            fn infer(
                &self,
                i: &[Option<TensorRef<'_>>],
                o: &mut [Shape],
            ) -> Result<(), KernelError> {
                self.0.infer(i, o)
            }
            fn run(
                &self,
                i: &[Option<TensorRef<'_>>],
                o: &mut [TensorMut<'_>],
                s: &mut [u8],
            ) -> Result<(), KernelError> {
                self.0.run(i, o, s)
            }
        }
        run1(&W(k), &[Some(x)], DType::I64).unwrap().to::<i64>()
    }

    #[test]
    fn cumsum_modes() {
        // np.cumsum([[1,2,3],[4,5,6]], axis=...)
        let x = Owned::new(&[2, 3], &[1.0f64, 2., 3., 4., 5., 6.]);
        let run = |axis: i64, exclusive, reverse| {
            let a = Owned::new(&[], &[axis]);
            run1(
                &CumSum {
                    exclusive,
                    reverse,
                    product: false,
                },
                &[Some(&x), Some(&a)],
                DType::F64,
            )
            .unwrap()
            .to::<f64>()
        };
        assert_eq!(run(1, false, false), [1., 3., 6., 4., 9., 15.]);
        assert_eq!(run(0, false, false), [1., 2., 3., 5., 7., 9.]);
        assert_eq!(run(-1, true, false), [0., 1., 3., 0., 4., 9.]);
        assert_eq!(run(1, false, true), [6., 5., 3., 15., 11., 6.]);
        assert_eq!(run(1, true, true), [5., 3., 0., 11., 6., 0.]);
        assert_eq!(run(0, true, true), [4., 5., 6., 0., 0., 0.]);
        let xi = Owned::new(&[4], &[1i32, 2, 3, 4]);
        let a = Owned::new(&[1], &[0i32]);
        let y = run1(
            &CumSum {
                exclusive: false,
                reverse: false,
                product: false,
            },
            &[Some(&xi), Some(&a)],
            DType::I32,
        );
        assert_eq!(y.unwrap().to::<i32>(), [1, 3, 6, 10]);
        // CumProd, exclusive and reversed.
        let prod = |exclusive, reverse| {
            run1(
                &CumSum {
                    exclusive,
                    reverse,
                    product: true,
                },
                &[Some(&xi), Some(&a)],
                DType::I32,
            )
            .unwrap()
            .to::<i32>()
        };
        assert_eq!(prod(false, false), [1, 2, 6, 24]);
        assert_eq!(prod(true, false), [1, 1, 2, 6]);
        assert_eq!(prod(false, true), [24, 24, 12, 4]);
        assert_eq!(prod(true, true), [24, 12, 4, 1]);
    }
}
