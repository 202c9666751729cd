//! Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
//! ArgMax/ArgMin and CumSum.
//!
//! Reductions accumulate in f64 (floats, and integer Mean/L2/Log*) or i128
//! (other integer reductions, wrapping to the output width at the end) in
//! scratch memory, except f32 Sum and Mean over trailing axes (an SE
//! block's mean, a global average pool): those sum each contiguous run in
//! 64 f32 partial sums at the CPU's vector width (`sum_f32`; eight f64
//! partials made large means, such as an SE block's over 92K floats,
//! markedly slower).
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{check_data, check_out, read_list};
use crate::ops::broadcast::Rows;
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::num::Num;
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
        // Saturated: a count past usize is refused by the arena cap.
        outputs.first().map_or(0, |s| s.numel().saturating_mul(32))
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
        let run_sum = match op {
            ReduceOp::Sum => Some(RunSum::Sum),
            ReduceOp::Mean => Some(RunSum::Mean),
            ReduceOp::SumSquare => Some(RunSum::SumSquare),
            ReduceOp::L2 => Some(RunSum::L2),
            _ => None,
        };
        if let Some(kind) = run_sum.filter(|_| x.dtype == DType::F32 && trailing) {
            // Every output sums a contiguous run of x (a global average
            // pool, a squeeze-and-excitation block's mean, the power of
            // each complex bin of a spectrogram).
            let (xv, y) = (x.typed::<f32>(OP)?, out.typed::<f32>(OP)?);
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
                        sum_runs_f32(&xv[first * count..(first + n) * count], count, kind, part);
                    });
                    return Ok(());
                }
            }
            sum_runs_f32(xv, count, kind, y);
            return Ok(());
        }
        if let Some(kind) = run_sum.filter(|_| x.dtype == DType::F32)
            && let Some((outer, count, inner)) = middle_block(&x.shape, &mask)
        {
            // One block of axes inside: rows of `inner` accumulate (the
            // two parts of a complex axis, a channel sum).
            let (xv, y) = (x.typed::<f32>(OP)?, out.typed::<f32>(OP)?);
            sum_rows_f32(xv, outer, count, inner, kind, y);
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

/// `(outer, count, inner)` when the reduced axes of `x` are one
/// contiguous block followed by at least one kept axis (a trailing block
/// is a run sum).
fn middle_block(x: &Shape, mask: &[bool]) -> Option<(usize, usize, usize)> {
    let dims = x.dims();
    let mask = &mask[..dims.len()];
    let first = mask.iter().position(|&m| m)?;
    let last = mask.iter().rposition(|&m| m)?;
    if last + 1 == dims.len() || !mask[first..=last].iter().all(|&m| m) {
        return None;
    }
    let product = |d: &[usize]| d.iter().product::<usize>();
    Some((
        product(&dims[..first]),
        product(&dims[first..=last]),
        product(&dims[last + 1..]),
    ))
}

/// `y[o][i]` = the [`RunSum`] over `k < count` of `x[o][k][i]`, adding
/// whole rows of `inner` in order of `k` (rows the compiler vectorizes).
fn sum_rows_f32(x: &[f32], outer: usize, count: usize, inner: usize, kind: RunSum, y: &mut [f32]) {
    if inner == 0 {
        return;
    }
    let square = matches!(kind, RunSum::SumSquare | RunSum::L2);
    for (o, yr) in y.chunks_exact_mut(inner).enumerate().take(outer) {
        yr.fill(0.0);
        for k in 0..count {
            let row = &x[(o * count + k) * inner..(o * count + k + 1) * inner];
            if square {
                for (a, &v) in yr.iter_mut().zip(row) {
                    *a += v * v;
                }
            } else {
                for (a, &v) in yr.iter_mut().zip(row) {
                    *a += v;
                }
            }
        }
        match kind {
            RunSum::Mean => {
                for a in yr.iter_mut() {
                    *a = (f64::from(*a) / count as f64) as f32;
                }
            }
            RunSum::L2 => {
                for a in yr.iter_mut() {
                    *a = a.sqrt();
                }
            }
            RunSum::Sum | RunSum::SumSquare => {}
        }
    }
}

/// What [`sum_runs_f32`] computes of each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunSum {
    /// `Σ v`.
    Sum,
    /// `Σ v / count`.
    Mean,
    /// `Σ v²`.
    SumSquare,
    /// `√(Σ v²)`.
    L2,
}

/// `y[i]` = the [`RunSum`] of run `i` of `x`, runs of `count` elements back
/// to back (an empty run sums to 0; its mean divides 0 by 0).
fn sum_runs_f32(x: &[f32], count: usize, kind: RunSum, y: &mut [f32]) {
    if count == 0 {
        // The mean of nothing divides zero by zero, as the general path.
        y.fill(if kind == RunSum::Mean { f32::NAN } else { 0.0 });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    match crate::ops::gemm::best_isa() {
        // SAFETY: AVX-512F (with AVX2 and FMA) was detected.
        crate::ops::gemm::Isa::Avx512 => return unsafe { sum_runs_avx512(x, count, kind, y) },
        // SAFETY: AVX2 and FMA were detected.
        crate::ops::gemm::Isa::Avx2 => return unsafe { sum_runs_avx2(x, count, kind, y) },
        crate::ops::gemm::Isa::Scalar => {}
    }
    sum_runs(x, count, kind, y)
}

/// [`sum_runs`] compiled with AVX-512F.
///
/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn sum_runs_avx512(x: &[f32], count: usize, kind: RunSum, y: &mut [f32]) {
    sum_runs(x, count, kind, y)
}

/// [`sum_runs`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_runs_avx2(x: &[f32], count: usize, kind: RunSum, y: &mut [f32]) {
    sum_runs(x, count, kind, y)
}

/// The loop of [`sum_runs_f32`] (`count` > 0): the same operations in the
/// same order at every vector width, so every CPU gets the same sums.
#[inline(always)]
fn sum_runs(x: &[f32], count: usize, kind: RunSum, y: &mut [f32]) {
    match kind {
        RunSum::Sum => sum_each(x, count, y, sum_f32::<false>),
        RunSum::Mean => sum_each(x, count, y, |run| {
            (f64::from(sum_f32::<false>(run)) / count as f64) as f32
        }),
        RunSum::SumSquare => sum_each(x, count, y, sum_f32::<true>),
        RunSum::L2 => sum_each(x, count, y, |run| sum_f32::<true>(run).sqrt()),
    }
}

#[inline(always)]
fn sum_each(x: &[f32], count: usize, y: &mut [f32], f: impl Fn(&[f32]) -> f32) {
    for (yo, run) in y.iter_mut().zip(x.chunks_exact(count)) {
        *yo = f(run);
    }
}

/// The sum of `x` in [`PARTIAL_SUMS`] partial sums (element `i` of each
/// whole group of them into partial `i`, then of each whole group of 16
/// left into partial `i`), added pairwise, then the last few elements in
/// order; of the squares with `SQUARE`. A run shorter than 16 is that
/// last part alone (the same sums without adding the zero partials).
#[inline(always)]
fn sum_f32<const SQUARE: bool>(x: &[f32]) -> f32 {
    let term = |v: f32| if SQUARE { v * v } else { v };
    if x.len() < 16 {
        return x.iter().fold(0.0, |a, &v| a + term(v));
    }
    let mut part = [0f32; PARTIAL_SUMS];
    let chunks = x.chunks_exact(PARTIAL_SUMS);
    let sixteens = chunks.remainder().chunks_exact(16);
    let rest = sixteens.remainder();
    for c in chunks {
        for (p, &v) in part.iter_mut().zip(c) {
            *p += term(v);
        }
    }
    for c in sixteens {
        for (p, &v) in part.iter_mut().zip(c) {
            *p += term(v);
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
    rest.iter().fold(part[0], |a, &v| a + term(v))
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
                if shape.numel() == 0 {
                    // An empty output (inner or outer extent 0) with a
                    // possibly huge other extent: nothing to do, don't spin.
                    return Ok(());
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
        if outer == 0 || n == 0 || inner == 0 {
            // Nothing to write, and an empty tensor may still have a huge
            // outer extent (`[2^31, 2, 0]`): looping over it would spin.
            return Ok(());
        }
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
mod tests;
