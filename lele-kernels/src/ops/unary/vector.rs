//! The vector loops of the f32 activations and of softmax's row
//! operations, written once over [`Simd`] and run on the best backend by
//! [`dispatch`]: each entry returns `false` (touching nothing) when the
//! CPU has only the portable code, and the caller then runs its scalar
//! form (`math.rs`, also the reference the tests compare against).
//!
//! The loops take raw pointers so that one loop serves both out of place
//! and in place (every vector is loaded before its lanes are stored).
//! Tails go through partial loads and stores (masked on AVX-512, a padded
//! stack block elsewhere), so each element gets the same arithmetic
//! wherever it sits: a fused epilogue, which sees a tensor in pieces, is
//! bit-identical to the standalone kernel.
// Builds without any vector backend (wasm32 without `simd128`) use none of
// this.
#![cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )),
    allow(dead_code)
)]
mod lanes;

#[cfg(test)]
use crate::simd::{Isa, dispatch_on};
use crate::simd::{Simd, SimdKernel, dispatch};

/// The bits of the first `len` (at most 16) lanes.
#[inline(always)]
fn first_bits(len: usize) -> u32 {
    (1u32 << len) - 1
}

/// An activation with a vector form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum VectorOp {
    /// `e^x`.
    Exp,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `x · sigmoid(alpha · x)`.
    Swish(f32),
    /// `tanh(x)`.
    Tanh,
    /// `erf(x)`.
    Erf,
    /// GELU (erf form).
    Gelu,
}

/// `y = op(x)` over the shorter of the two on the best backend; `false`
/// when there is none (the caller runs the portable code).
pub(crate) fn apply(op: VectorOp, x: &[f32], y: &mut [f32]) -> bool {
    let n = x.len().min(y.len());
    dispatch(Map {
        op,
        x: x.as_ptr(),
        y: y.as_mut_ptr(),
        n,
    })
    .is_ok()
}

/// [`apply`] in place.
pub(crate) fn apply_in_place(op: VectorOp, y: &mut [f32]) -> bool {
    let (p, n) = (y.as_mut_ptr(), y.len());
    dispatch(Map { op, x: p, y: p, n }).is_ok()
}

/// [`apply`] on `isa` (tests compare backends); `false` when this CPU
/// cannot run it.
#[cfg(test)]
pub(crate) fn apply_on(isa: Isa, op: VectorOp, x: &[f32], y: &mut [f32]) -> bool {
    let n = x.len().min(y.len());
    dispatch_on(
        isa,
        Map {
            op,
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            n,
        },
    )
    .is_ok()
}

/// [`apply_in_place`] on `isa`.
#[cfg(test)]
pub(crate) fn apply_in_place_on(isa: Isa, op: VectorOp, y: &mut [f32]) -> bool {
    let (p, n) = (y.as_mut_ptr(), y.len());
    dispatch_on(isa, Map { op, x: p, y: p, n }).is_ok()
}

/// `y = op(x)` over `n` floats; `x` and `y` are the same floats or
/// disjoint (made only from slices by the functions above).
struct Map {
    op: VectorOp,
    x: *const f32,
    y: *mut f32,
    n: usize,
}

impl SimdKernel for Map {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let Map { op, x, y, n } = self;
        // SAFETY (each arm): `x` is readable and `y` writable for `n`
        // floats, the same or disjoint (how `Map`s are made).
        unsafe {
            match op {
                VectorOp::Exp => map_lanes::<S, 2>(s, x, y, n, Exp),
                VectorOp::Sigmoid => map_lanes::<S, 2>(s, x, y, n, Sigmoid),
                // Four vectors per step: Swish's chain (exponential, then
                // division) is the longest for its arithmetic.
                VectorOp::Swish(alpha) => map_lanes::<S, 4>(s, x, y, n, Swish(alpha)),
                VectorOp::Tanh => map_lanes::<S, 2>(s, x, y, n, Tanh),
                VectorOp::Erf => map_lanes::<S, 2>(s, x, y, n, Erf),
                VectorOp::Gelu => map_lanes::<S, 2>(s, x, y, n, Gelu),
            }
        }
    }
}

/// A function computed a vector at a time ([`LaneFn::lanes`], which flags
/// the lanes it cannot do) with a scalar form for the flagged lanes. A
/// trait, not closures: see `lanes.rs`.
trait LaneFn: Copy {
    /// The vector form: results and the bits of the flagged lanes.
    fn lanes<S: Simd>(self, s: S, v: S::F32) -> (S::F32, u32);
    /// The scalar form of a flagged lane, from its input.
    fn fix(self, x: f32) -> f32;
}

macro_rules! lane_fns {
    ($($(#[$doc:meta])* $name:ident => $lanes:path, $fix:path;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy)]
        struct $name;
        impl LaneFn for $name {
            #[inline(always)]
            fn lanes<S: Simd>(self, s: S, v: S::F32) -> (S::F32, u32) {
                $lanes(s, v)
            }
            fn fix(self, x: f32) -> f32 {
                $fix(x)
            }
        }
    )*};
}

lane_fns! {
    /// `e^x`.
    Exp => lanes::exp, f32::exp;
    /// `sigmoid(x)`.
    Sigmoid => lanes::sigmoid, super::sigmoid;
    /// `tanh(x)`.
    Tanh => lanes::tanh, super::math::tanh_f32;
    /// `erf(x)`.
    Erf => lanes::erf, super::math::erf_f32;
    /// GELU; flagged (non-finite) lanes take the tail form, which equals
    /// `gelu_f32` there.
    Gelu => lanes::gelu, super::math::gelu_tail_form;
}

/// `x · sigmoid(alpha · x)`.
#[derive(Clone, Copy)]
struct Swish(f32);

impl LaneFn for Swish {
    #[inline(always)]
    fn lanes<S: Simd>(self, s: S, v: S::F32) -> (S::F32, u32) {
        lanes::swish(s, s.splat(-self.0), v)
    }
    fn fix(self, v: f32) -> f32 {
        v * super::sigmoid(self.0 * v)
    }
}

/// `e^(x - shift)`, lanes below the flush point 0 (softmax's numerators).
#[derive(Clone, Copy)]
struct ExpFlushed(f32);

impl LaneFn for ExpFlushed {
    #[inline(always)]
    fn lanes<S: Simd>(self, s: S, v: S::F32) -> (S::F32, u32) {
        lanes::exp_flushed(s, s.sub(v, s.splat(self.0)))
    }
    fn fix(self, v: f32) -> f32 {
        (v - self.0).exp()
    }
}

/// `y = f(x)` over `n` floats, `STEP` vectors per step (their dependency
/// chains overlap), then single and partial vectors; lanes that `f.lanes`
/// flags get `f.fix(x)` instead.
///
/// # Safety
/// `x` is readable and `y` writable for `n` floats; they are the same
/// floats or disjoint.
#[inline(always)]
unsafe fn map_lanes<S: Simd, const STEP: usize>(
    s: S,
    x: *const f32,
    y: *mut f32,
    n: usize,
    f: impl LaneFn,
) {
    let w = S::LANES;
    let step = STEP * w;
    let mut at = 0;
    // SAFETY (the whole body): every access is to lanes `at..at + w` with
    // `at + w <= n`, or a partial one of `n - at` lanes; each vector is
    // loaded before its lanes are stored.
    unsafe {
        while at + step <= n {
            let mut xv = [s.splat(0.0); STEP];
            let mut v = [s.splat(0.0); STEP];
            let mut bad = [0u32; STEP];
            for (j, xv) in xv.iter_mut().enumerate() {
                *xv = s.load(x.add(at + j * w));
            }
            for ((v, bad), &xv) in v.iter_mut().zip(bad.iter_mut()).zip(&xv) {
                (*v, *bad) = f.lanes(s, xv);
            }
            if bad.iter().fold(0, |a, &b| a | b) == 0 {
                for (j, &v) in v.iter().enumerate() {
                    s.store(y.add(at + j * w), v);
                }
            } else {
                for (j, ((&xv, &v), &bad)) in xv.iter().zip(&v).zip(&bad).enumerate() {
                    finish(s, xv, y.add(at + j * w), w, v, bad, f);
                }
            }
            at += step;
        }
        while at < n {
            let len = (n - at).min(w);
            let xv = s.load_partial(x.add(at), len, 0.0);
            let (v, bad) = f.lanes(s, xv);
            finish(s, xv, y.add(at), len, v, bad & first_bits(len), f);
            at += w;
        }
    }
}

/// Stores the first `len` lanes of `v` at `y`, then `f.fix` of the
/// input's lanes (`input`, the vector `v` was computed from) over the
/// lanes set in `bad`. The inputs come from the register, not memory: `y`
/// may be where they were loaded from.
///
/// # Safety
/// `y` is writable for `len <= LANES` floats.
#[inline(always)]
unsafe fn finish<S: Simd>(
    s: S,
    input: S::F32,
    y: *mut f32,
    len: usize,
    v: S::F32,
    bad: u32,
    f: impl LaneFn,
) {
    // SAFETY: the caller's contract; `xs` holds 16 >= LANES floats.
    unsafe {
        if bad == 0 {
            if len == S::LANES {
                s.store(y, v);
            } else {
                s.store_partial(y, len, v);
            }
            return;
        }
        let mut xs = [0f32; 16];
        s.store(xs.as_mut_ptr(), input);
        s.store_partial(y, len, v);
        fix_lanes(&xs[..len], core::slice::from_raw_parts_mut(y, len), bad, f);
    }
}

/// `y[i] = f.fix(x[i])` for the lanes set in `bad` (rare: out-of-range or
/// NaN inputs).
#[cold]
fn fix_lanes(x: &[f32], y: &mut [f32], bad: u32, f: impl LaneFn) {
    for (i, (y, &x)) in y.iter_mut().zip(x).enumerate() {
        if bad & (1 << i) != 0 {
            *y = f.fix(x);
        }
    }
}

/// `y = e^(x - shift)` (softmax's numerators) through
/// [`lanes::exp_flushed`], returning the sum of `y`; `None` without a
/// vector backend.
pub(crate) fn exp_shifted(x: &[f32], y: &mut [f32], shift: f32) -> Option<f32> {
    let n = x.len().min(y.len());
    dispatch(ExpShifted {
        x: x.as_ptr(),
        y: y.as_mut_ptr(),
        n,
        shift,
    })
    .ok()
}

/// [`exp_shifted`] over `y` in place (the same bits and sum).
pub(crate) fn exp_shifted_in_place(y: &mut [f32], shift: f32) -> Option<f32> {
    let (p, n) = (y.as_mut_ptr(), y.len());
    dispatch(ExpShifted {
        x: p,
        y: p,
        n,
        shift,
    })
    .ok()
}

/// [`exp_shifted`] on `isa` (tests).
#[cfg(test)]
pub(crate) fn exp_shifted_on(isa: Isa, x: &[f32], y: &mut [f32], shift: f32) -> Option<f32> {
    let n = x.len().min(y.len());
    dispatch_on(
        isa,
        ExpShifted {
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            n,
            shift,
        },
    )
    .ok()
}

/// [`exp_shifted_in_place`] on `isa` (tests).
#[cfg(test)]
pub(crate) fn exp_shifted_in_place_on(isa: Isa, y: &mut [f32], shift: f32) -> Option<f32> {
    let (p, n) = (y.as_mut_ptr(), y.len());
    dispatch_on(
        isa,
        ExpShifted {
            x: p,
            y: p,
            n,
            shift,
        },
    )
    .ok()
}

/// `y = e^(x - shift)` over `n` floats, the same or disjoint.
struct ExpShifted {
    x: *const f32,
    y: *mut f32,
    n: usize,
    shift: f32,
}

impl SimdKernel for ExpShifted {
    type Output = f32;
    #[inline(always)]
    fn run<S: Simd>(self, s: S) -> f32 {
        // SAFETY: as `Map`.
        unsafe { exp_shifted_raw(s, self.x, self.y, self.n, self.shift) }
    }
}

/// The loop of [`exp_shifted`]: two vector accumulators; a vector with
/// flagged lanes (NaN, or at least 88 above the shift) is fixed by the
/// scalar `exp` and then summed as stored.
///
/// # Safety
/// `x` is readable and `y` writable for `n` floats, the same or disjoint.
#[inline(always)]
unsafe fn exp_shifted_raw<S: Simd>(s: S, x: *const f32, y: *mut f32, n: usize, shift: f32) -> f32 {
    let w = S::LANES;
    let f = ExpFlushed(shift);
    let mut acc = [s.splat(0.0); 2];
    let mut at = 0;
    // SAFETY (the whole body): as in `map_lanes`; the reloads read lanes
    // just stored.
    unsafe {
        while at + 2 * w <= n {
            let (x0, x1) = (s.load(x.add(at)), s.load(x.add(at + w)));
            let (e0, b0) = f.lanes(s, x0);
            let (e1, b1) = f.lanes(s, x1);
            if (b0 | b1) == 0 {
                s.store(y.add(at), e0);
                s.store(y.add(at + w), e1);
                acc[0] = s.add(acc[0], e0);
                acc[1] = s.add(acc[1], e1);
            } else {
                finish(s, x0, y.add(at), w, e0, b0, f);
                finish(s, x1, y.add(at + w), w, e1, b1, f);
                acc[0] = s.add(acc[0], s.load(y.add(at)));
                acc[1] = s.add(acc[1], s.load(y.add(at + w)));
            }
            at += 2 * w;
        }
        while at < n {
            let len = (n - at).min(w);
            let xv = s.load_partial(x.add(at), len, shift);
            let (e, bad) = f.lanes(s, xv);
            finish(s, xv, y.add(at), len, e, bad & first_bits(len), f);
            // Only the row's lanes are summed.
            acc[0] = s.add(acc[0], s.load_partial(y.add(at), len, 0.0));
            at += w;
        }
    }
    s.reduce_add(s.add(acc[0], acc[1]))
}

/// The largest element of `x` ignoring NaN (`-inf` when empty or all NaN);
/// `None` without a vector backend.
pub(crate) fn max_of(x: &[f32]) -> Option<f32> {
    dispatch(MaxOf { x }).ok()
}

/// [`max_of`] on `isa` (tests).
#[cfg(test)]
pub(crate) fn max_of_on(isa: Isa, x: &[f32]) -> Option<f32> {
    dispatch_on(isa, MaxOf { x }).ok()
}

/// The largest element of a slice.
struct MaxOf<'a> {
    x: &'a [f32],
}

impl SimdKernel for MaxOf<'_> {
    type Output = f32;
    #[inline(always)]
    fn run<S: Simd>(self, s: S) -> f32 {
        max_lanes(s, self.x)
    }
}

/// [`max_of`] in four vector accumulators.
#[inline(always)]
fn max_lanes<S: Simd>(s: S, x: &[f32]) -> f32 {
    let w = S::LANES;
    let n = x.len();
    let mut acc = [s.splat(f32::NEG_INFINITY); 4];
    let mut at = 0;
    // SAFETY (the whole body): lanes `at..at + 4w <= n`, then partial
    // loads of `n - at` lanes.
    unsafe {
        while at + 4 * w <= n {
            for (j, a) in acc.iter_mut().enumerate() {
                // `max` returns its second operand (the running maximum)
                // when the element is NaN.
                *a = s.max(s.load(x.as_ptr().add(at + j * w)), *a);
            }
            at += 4 * w;
        }
        while at < n {
            let len = (n - at).min(w);
            let v = s.load_partial(x.as_ptr().add(at), len, f32::NEG_INFINITY);
            acc[0] = s.max(v, acc[0]);
            at += w;
        }
    }
    s.reduce_max(s.max(s.max(acc[0], acc[1]), s.max(acc[2], acc[3])))
}

/// Softmax numerators of the rows of `scores` (`t > 0` floats each) in
/// place, each row first offset by its mask row (`t` floats at
/// `mask[start + i·stride..]`, the sum going to `shifted`), and the
/// reciprocal of each row's sum into `norms`: [`max_of`] and
/// [`exp_shifted`] row by row, without a dispatch per row. `false`
/// without a vector backend.
pub(crate) fn softmax_rows(
    scores: &mut [f32],
    t: usize,
    mask: Option<(&[f32], usize, usize)>,
    shifted: &mut [f32],
    norms: &mut [f32],
) -> bool {
    dispatch(SoftmaxRows {
        scores,
        t,
        mask,
        shifted,
        norms,
    })
    .is_ok()
}

/// [`softmax_rows`] on `isa` (tests).
#[cfg(test)]
pub(crate) fn softmax_rows_on(
    isa: Isa,
    scores: &mut [f32],
    t: usize,
    mask: Option<(&[f32], usize, usize)>,
    shifted: &mut [f32],
    norms: &mut [f32],
) -> bool {
    dispatch_on(
        isa,
        SoftmaxRows {
            scores,
            t,
            mask,
            shifted,
            norms,
        },
    )
    .is_ok()
}

/// [`softmax_rows`]' arguments.
struct SoftmaxRows<'a> {
    scores: &'a mut [f32],
    t: usize,
    mask: Option<(&'a [f32], usize, usize)>,
    shifted: &'a mut [f32],
    norms: &'a mut [f32],
}

impl SimdKernel for SoftmaxRows<'_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let SoftmaxRows {
            scores,
            t,
            mask,
            shifted,
            norms,
        } = self;
        let w = S::LANES;
        let shifted = &mut shifted[..t];
        for (i, (row, norm)) in scores.chunks_exact_mut(t).zip(norms.iter_mut()).enumerate() {
            let sum = match mask {
                Some((m, start, stride)) => {
                    let m = &m[start + i * stride..][..t];
                    let mut at = 0;
                    while at < t {
                        let len = (t - at).min(w);
                        // SAFETY: the three rows hold `t` floats each; the
                        // partial accesses touch lanes `at..at + len`.
                        unsafe {
                            let v = s.add(
                                s.load_partial(row.as_ptr().add(at), len, 0.0),
                                s.load_partial(m.as_ptr().add(at), len, 0.0),
                            );
                            s.store_partial(shifted.as_mut_ptr().add(at), len, v);
                        }
                        at += w;
                    }
                    let top = max_lanes(s, shifted);
                    // SAFETY: `shifted` and `row` hold `t` floats each and
                    // are distinct.
                    unsafe { exp_shifted_raw(s, shifted.as_ptr(), row.as_mut_ptr(), t, top) }
                }
                None => {
                    let top = max_lanes(s, row);
                    let p = row.as_mut_ptr();
                    // SAFETY: `row` holds `t` floats, read and written in
                    // place.
                    unsafe { exp_shifted_raw(s, p, p, t, top) }
                }
            };
            *norm = 1.0 / sum;
        }
    }
}

/// An elementwise pass over `y` in place.
#[derive(Clone, Copy)]
pub(crate) enum Pointwise {
    /// `y = max(y, 0)`, NaN kept.
    Relu,
    /// `y += b`.
    Add(f32),
    /// `y *= r`.
    Scale(f32),
}

/// `pass` over `y` on the best backend; `false` without one.
pub(crate) fn pointwise(pass: Pointwise, y: &mut [f32]) -> bool {
    dispatch(PointwiseKernel { pass, y }).is_ok()
}

/// [`pointwise`] on `isa` (tests).
#[cfg(test)]
pub(crate) fn pointwise_on(isa: Isa, pass: Pointwise, y: &mut [f32]) -> bool {
    dispatch_on(isa, PointwiseKernel { pass, y }).is_ok()
}

/// [`pointwise`]'s arguments.
struct PointwiseKernel<'a> {
    pass: Pointwise,
    y: &'a mut [f32],
}

impl SimdKernel for PointwiseKernel<'_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let (w, n, p) = (S::LANES, self.y.len(), self.y.as_mut_ptr());
        let zero = s.splat(0.0);
        // One loop per pass (no closure, see `lanes.rs`): lanes
        // `at..at + w <= n`, then a partial vector of `n - at`.
        macro_rules! each_vector {
            (|$v:ident| $e:expr) => {{
                let mut at = 0;
                // SAFETY: as above, inside `y`.
                unsafe {
                    while at + w <= n {
                        let $v = s.load(p.add(at));
                        s.store(p.add(at), $e);
                        at += w;
                    }
                    if at < n {
                        let len = n - at;
                        let $v = s.load_partial(p.add(at), len, 0.0);
                        s.store_partial(p.add(at), len, $e);
                    }
                }
            }};
        }
        match self.pass {
            Pointwise::Relu => each_vector!(|v| s.select(s.lt(v, zero), zero, v)),
            Pointwise::Add(b) => {
                let b = s.splat(b);
                each_vector!(|v| s.add(v, b))
            }
            Pointwise::Scale(r) => {
                let r = s.splat(r);
                each_vector!(|v| s.mul(v, r))
            }
        }
    }
}

/// `y[i] += x[i]` over the shorter of the two on the best backend; `false`
/// without one.
pub(crate) fn add_slice_in_place(y: &mut [f32], x: &[f32]) -> bool {
    dispatch(AddSlice { y, x }).is_ok()
}

/// [`add_slice_in_place`]'s arguments.
struct AddSlice<'a> {
    y: &'a mut [f32],
    x: &'a [f32],
}

impl SimdKernel for AddSlice<'_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let n = self.y.len().min(self.x.len());
        let (w, p, q) = (S::LANES, self.y.as_mut_ptr(), self.x.as_ptr());
        let mut at = 0;
        // SAFETY: both hold at least `n` floats; lanes `at..at + w <= n`,
        // then a partial vector of `n - at`.
        unsafe {
            while at + w <= n {
                s.store(p.add(at), s.add(s.load(p.add(at)), s.load(q.add(at))));
                at += w;
            }
            if at < n {
                let len = n - at;
                let v = s.add(
                    s.load_partial(p.add(at), len, 0.0),
                    s.load_partial(q.add(at), len, 0.0),
                );
                s.store_partial(p.add(at), len, v);
            }
        }
    }
}

/// A closure over f32 values run inside the best backend's entry point, so
/// the compiler vectorizes its loop for that ISA (an epilogue's map with an
/// arbitrary function); `None` without a vector backend.
pub(crate) fn compiled_for_isa<R>(f: impl FnOnce() -> R) -> Result<R, ()> {
    dispatch(Compiled(f)).map_err(|_| ())
}

/// [`compiled_for_isa`]'s closure.
struct Compiled<F>(F);

impl<R, F: FnOnce() -> R> SimdKernel for Compiled<F> {
    type Output = R;
    #[inline(always)]
    fn run<S: Simd>(self, _s: S) -> R {
        (self.0)()
    }
}
