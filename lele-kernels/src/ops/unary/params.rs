//! Parameterised activations (`HardSigmoid`, `LeakyRelu`, …), `Clip` and
//! `Shrink`.
use super::{Real, float_map, hard_sigmoid, map, map_f32, same_shape, tanh_f32};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

// ---------------------------------------------------------------------------
// Parameterised activations.

#[derive(Clone, Copy)]
enum Param {
    HardSigmoid(f32, f32),
    LeakyRelu(f32),
    Elu(f32),
    Selu(f32, f32),
    Celu(f32),
    ThresholdedRelu(f32),
    GeluTanh,
    GeluErf,
    Swish(f32),
}

fn apply_param<T: Real>(p: Param, x: &[T], y: &mut [T]) {
    let zero = T::ZERO;
    let one = T::ONE;
    match p {
        Param::HardSigmoid(a, b) => {
            let (a, b) = (T::c(a as f64), T::c(b as f64));
            map(x, y, |v| hard_sigmoid(v, a, b))
        }
        Param::LeakyRelu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v < zero { a * v } else { v })
        }
        Param::Elu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v < zero { a * v.exp_m1() } else { v })
        }
        Param::Selu(a, g) => {
            let (a, g) = (T::c(a as f64), T::c(g as f64));
            map(x, y, |v| {
                if v > zero {
                    g * v
                } else {
                    g * (a * v.exp() - a)
                }
            })
        }
        Param::Celu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| {
                let pos = if v > zero { v } else { zero };
                let neg = a * (v / a).exp_m1();
                pos + if neg < zero { neg } else { zero }
            })
        }
        Param::ThresholdedRelu(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| if v > a { v } else { zero })
        }
        Param::Swish(a) => {
            let a = T::c(a as f64);
            map(x, y, |v| v / (one + (-(a * v)).exp()))
        }
        Param::GeluErf => {
            let half = T::c(0.5);
            let r = T::c(core::f64::consts::FRAC_1_SQRT_2);
            map(x, y, |v| half * v * (one + (v * r).erf()))
        }
        Param::GeluTanh => {
            let k = T::c((2.0 / core::f64::consts::PI).sqrt());
            let c = T::c(0.044715);
            let half = T::c(0.5);
            map(x, y, |v| {
                half * v * (one + (k * (v + c * v * v * v)).tanh())
            })
        }
    }
}

fn run_param(
    p: Param,
    op: &'static str,
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let x = input(inputs, 0, op)?;
    let out = output(outputs, 0, op)?;
    check_data(x, op)?;
    check_out(out, x.dtype, &x.shape, op)?;
    let f32_fn = |a: &[f32], b: &mut [f32]| match p {
        Param::Swish(alpha) => super::math::swish_slice(alpha, a, b),
        Param::GeluTanh => map_f32(a, b, |v| {
            let k = 0.797_884_6_f32;
            0.5 * v * (1.0 + tanh_f32(k * (v + 0.044715 * v * v * v)))
        }),
        Param::GeluErf => super::math::gelu_slice(a, b),
        _ => apply_param(p, a, b),
    };
    float_map(x, out, f32_fn, |a, b| apply_param(p, a, b)).map_err(|e| match e {
        KernelError::UnsupportedDType { dtype, .. } => KernelError::UnsupportedDType { op, dtype },
        e => e,
    })
}

macro_rules! param_kernel {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident),* } => $p:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: f32,)*
        }
        crate::to_rust_struct!(ops::unary::$name { $($field),* });

        impl Kernel for $name {
            fn elementwise(&self) -> bool {
                true
            }

            fn infer(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [Shape],
            ) -> Result<(), KernelError> {
                same_shape(inputs, outputs, stringify!($name))
            }

            fn run(
                &self,
                inputs: &[Option<TensorRef<'_>>],
                outputs: &mut [TensorMut<'_>],
                _scratch: &mut [u8],
            ) -> Result<(), KernelError> {
                #[allow(unused_variables)]
                let $name { $($field),* } = *self;
                run_param($p, stringify!($name), inputs, outputs)
            }
        }
    };
}

param_kernel!(
    /// ONNX `HardSigmoid`: `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        /// Slope (default 0.2).
        alpha,
        /// Offset (default 0.5).
        beta
    } => Param::HardSigmoid(alpha, beta)
);
param_kernel!(
    /// ONNX `LeakyRelu`: `x` for `x >= 0`, else `alpha * x`.
    LeakyRelu {
        /// Negative slope (default 0.01).
        alpha
    } => Param::LeakyRelu(alpha)
);
param_kernel!(
    /// ONNX `Elu`: `x` for `x >= 0`, else `alpha * (e^x - 1)`.
    Elu {
        /// Scale of the negative part (default 1).
        alpha
    } => Param::Elu(alpha)
);
param_kernel!(
    /// ONNX `Selu`: `gamma * x` for `x > 0`, else `gamma * (alpha * e^x - alpha)`.
    Selu {
        /// Default 1.67326319217681884765625.
        alpha,
        /// Default 1.05070102214813232421875.
        gamma
    } => Param::Selu(alpha, gamma)
);
param_kernel!(
    /// ONNX `Celu`: `max(0, x) + min(0, alpha * (e^(x/alpha) - 1))`.
    Celu {
        /// Default 1.
        alpha
    } => Param::Celu(alpha)
);
param_kernel!(
    /// ONNX `ThresholdedRelu`: `x` for `x > alpha`, else 0.
    ThresholdedRelu {
        /// Threshold (default 1).
        alpha
    } => Param::ThresholdedRelu(alpha)
);
param_kernel!(
    /// ONNX `Swish`: `x * sigmoid(alpha * x)`.
    Swish {
        /// Default 1.
        alpha
    } => Param::Swish(alpha)
);
param_kernel!(
    /// ONNX `Gelu` with `approximate="tanh"`.
    GeluTanh {} => Param::GeluTanh
);
param_kernel!(
    /// GELU in erf form evaluated the way its decomposed ONNX subgraph is,
    /// `0.5·x·(1 + erf(x/√2))` in the element type (what the fusion pass
    /// puts in place of that subgraph; ONNX `Gelu` itself is the more
    /// careful [`super::UnaryOp::Gelu`]).
    GeluErf {} => Param::GeluErf
);

/// ONNX `Clip`: inputs `input`, optional scalar `min`, optional scalar `max`
/// (same dtype as `input`); any numeric dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clip;
crate::to_rust_struct!(ops::unary::Clip {});

impl Kernel for Clip {
    fn elementwise(&self) -> bool {
        true
    }

    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape(inputs, outputs, "Clip")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Clip";
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(x, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let lo = opt_input(inputs, 1).filter(|t| t.numel() > 0 || t.shape.rank() == 0);
        let hi = opt_input(inputs, 2).filter(|t| t.numel() > 0 || t.shape.rank() == 0);
        crate::ops::dtype_dispatch::dispatch_num!(x.dtype, OP, |T| {
            let scalar = |t: Option<&TensorRef<'_>>| -> Result<Option<T>, KernelError> {
                match t {
                    None => Ok(None),
                    Some(t) => {
                        let v = t.typed::<T>(OP)?;
                        if v.len() != 1 {
                            return Err(KernelError::Shape {
                                op: OP,
                                msg: "min/max must be scalars",
                            });
                        }
                        Ok(Some(v[0]))
                    }
                }
            };
            let (lo, hi) = (scalar(lo)?, scalar(hi)?);
            let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
            match (lo, hi) {
                (Some(l), Some(h)) => map(xv, y, |v| {
                    let v = if v < l { l } else { v };
                    if v > h { h } else { v }
                }),
                (Some(l), None) => map(xv, y, |v| if v < l { l } else { v }),
                (None, Some(h)) => map(xv, y, |v| if v > h { h } else { v }),
                (None, None) => y.copy_from_slice(xv),
            }
            Ok(())
        })
    }
}

/// ONNX `Shrink`: `x + bias` for `x < -lambd`, `x - bias` for `x > lambd`,
/// else 0. Any numeric dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shrink {
    /// Default 0.
    pub bias: f32,
    /// Default 0.5.
    pub lambd: f32,
}
crate::to_rust_struct!(ops::unary::Shrink { bias, lambd });

impl Kernel for Shrink {
    fn elementwise(&self) -> bool {
        true
    }

    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        same_shape(inputs, outputs, "Shrink")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "Shrink";
        let x = input(inputs, 0, OP)?;
        let out = output(outputs, 0, OP)?;
        check_data(x, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        let (bias, lambd) = (self.bias as f64, self.lambd as f64);
        crate::ops::dtype_dispatch::dispatch_num!(x.dtype, OP, |T| {
            let (xv, y) = (x.typed::<T>(OP)?, out.typed::<T>(OP)?);
            map(xv, y, |v| {
                let f = v.to_f64();
                if f < -lambd {
                    T::from_f64(f + bias)
                } else if f > lambd {
                    T::from_f64(f - bias)
                } else {
                    T::ZERO
                }
            });
            Ok(())
        })
    }
}
