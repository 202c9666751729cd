//! Activations that other kernels apply to their own output as they write
//! it (a convolution's epilogue), so no separate pass over the tensor runs.
use super::math::{gelu_slice, sigmoid_slice, swish_slice};
use super::vector::{self, Pointwise, VectorOp};
use super::{hard_sigmoid, map_f32, map_in_place_f32};

/// An activation applied in place to an f32 output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// Identity.
    #[default]
    None,
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `x · sigmoid(x)` (SiLU).
    Swish,
    /// `x · clamp(x/6 + 1/2, 0, 1)`.
    HardSwish,
    /// `x · Φ(x)`, GELU in erf form (the f32 arithmetic of ONNX `Gelu` and
    /// of the fused erf subgraph, which are the same for f32).
    Gelu,
}
crate::to_rust_enum!(ops::unary::Activation {
    None,
    Relu,
    Sigmoid,
    Swish,
    HardSwish,
    Gelu
});

impl Activation {
    /// Applies the activation to `y` in place, with the same arithmetic as
    /// the standalone kernel (`Unary`/`Swish`), so fusing changes no result.
    pub fn apply_in_place(self, y: &mut [f32]) {
        let f = |x: &[f32], out: &mut [f32]| match self {
            Activation::None => out.copy_from_slice(x),
            Activation::Relu => map_f32(x, out, relu),
            Activation::Sigmoid => sigmoid_slice(x, out),
            Activation::Swish => swish_slice(1.0, x, out),
            Activation::HardSwish => map_f32(x, out, hard_swish),
            Activation::Gelu => gelu_slice(x, out),
        };
        if self == Activation::None {
            return;
        }
        let vector_op = match self {
            Activation::Swish => Some(VectorOp::Swish(1.0)),
            Activation::Sigmoid => Some(VectorOp::Sigmoid),
            Activation::Gelu => Some(VectorOp::Gelu),
            _ => None,
        };
        if let Some(op) = vector_op
            && vector::apply_in_place(op, y)
        {
            return;
        }
        if self == Activation::Relu && vector::pointwise(Pointwise::Relu, y) {
            return;
        }
        match self {
            Activation::Relu => return map_in_place_f32(y, relu),
            Activation::HardSwish => return map_in_place_f32(y, hard_swish),
            _ => {}
        }
        // The slice kernels read and write distinct slices: go through a
        // small stack copy (only here: zeroing it costs as much as a short
        // segment's activation, and the in-place kernels above need none).
        let mut tmp = [0f32; 256];
        for chunk in y.chunks_mut(tmp.len()) {
            let t = &mut tmp[..chunk.len()];
            t.copy_from_slice(chunk);
            f(t, chunk);
        }
    }
}

/// One pass over a finished output segment `y` doing, per element and in
/// this order, what separate passes would: add `bias` (when given), apply
/// `act`, multiply by `mul` and add `add` (when they are not 1 and 0), add
/// the residual's element (when given; the caller passes one exactly as
/// long as `y`). Each step rounds as its own pass did, so results are
/// bit-identical. Takes the activations that are plain functions of one
/// value (identity, ReLU, HardSwish); returns `false`, touching nothing,
/// for those with kernels of their own (sigmoid, swish, GELU).
pub(crate) fn pointwise_tail(
    y: &mut [f32],
    bias: Option<f32>,
    act: Activation,
    affine: (f32, f32),
    residual: Option<&[f32]>,
) -> bool {
    debug_assert!(residual.is_none_or(|r| r.len() == y.len()));
    match act {
        Activation::None => tail_with(y, bias, |v| v, affine, residual),
        Activation::Relu => tail_with(y, bias, relu, affine, residual),
        Activation::HardSwish => tail_with(y, bias, hard_swish, affine, residual),
        Activation::Sigmoid | Activation::Swish | Activation::Gelu => return false,
    }
    true
}

/// [`pointwise_tail`] for one activation function (inlined into each loop).
#[inline(always)]
fn tail_with(
    y: &mut [f32],
    bias: Option<f32>,
    act: impl Fn(f32) -> f32 + Copy,
    (mul, add): (f32, f32),
    residual: Option<&[f32]>,
) {
    let affine = mul != 1.0 || add != 0.0;
    // One monomorphized loop per combination, so none tests per element.
    macro_rules! run {
        ($f:expr) => {{
            let f = $f;
            match residual {
                Some(r) => super::zip_in_place_f32(y, r, |v, x| f(v) + x),
                None => map_in_place_f32(y, f),
            }
        }};
    }
    match (bias, affine) {
        (Some(b), true) => run!(move |v: f32| act(v + b) * mul + add),
        (Some(b), false) => run!(move |v: f32| act(v + b)),
        (None, true) => run!(move |v: f32| act(v) * mul + add),
        (None, false) => run!(act),
    }
}

/// `y[i] += x[i]` over the shorter of the two (a Linear layer's bias or a
/// residual added to a finished output segment), a vector at a time on the
/// best backend (the generic build's loop is four lanes wide).
pub(crate) fn add_slice_in_place(y: &mut [f32], x: &[f32]) {
    if vector::add_slice_in_place(y, x) {
        return;
    }
    for (v, &x) in y.iter_mut().zip(x) {
        *v += x;
    }
}

/// The `HardSwish` kernel's arithmetic.
fn hard_swish(v: f32) -> f32 {
    v * hard_sigmoid(v, (1.0f64 / 6.0) as f32, 0.5)
}

/// The `Relu` kernel's arithmetic: negatives to zero, NaN kept.
fn relu(v: f32) -> f32 {
    if v < 0.0 { 0.0 } else { v }
}

/// `y += b` in place (a convolution's bias added to a finished output
/// segment), a vector at a time on the best backend.
pub(crate) fn add_in_place(y: &mut [f32], b: f32) {
    if !vector::pointwise(Pointwise::Add(b), y) {
        map_in_place_f32(y, |v| v + b);
    }
}
