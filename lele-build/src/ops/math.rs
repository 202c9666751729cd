//! Elementwise, comparison, cast and reduction operators.
use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp, Variadic, VariadicOp};
use lele_kernels::ops::cast::{Cast, CastLike};
use lele_kernels::ops::reduce::{ArgMax, ArgMin, CumSum, Reduce, ReduceOp};
use lele_kernels::ops::unary::{
    Celu, Clip, Elu, GeluTanh, HardSigmoid, LeakyRelu, Selu, Shrink, Swish, ThresholdedRelu, Unary,
    UnaryOp,
};

use super::{LowerCtx, LowerResult, Lowered};
use crate::ir::{OutDType, Tensor};

fn binary(op: BinaryOp, bool_out: bool) -> LowerResult {
    let dt = if bool_out {
        OutDType::Fixed(DType::Bool)
    } else {
        OutDType::Input(0)
    };
    Ok(Lowered::with(Binary { op }, vec![dt]))
}

fn unary(op: UnaryOp) -> LowerResult {
    let dt = match op {
        UnaryOp::IsNaN | UnaryOp::IsInf | UnaryOp::IsPosInf | UnaryOp::IsNegInf => {
            OutDType::Fixed(DType::Bool)
        }
        _ => OutDType::Input(0),
    };
    Ok(Lowered::with(Unary { op }, vec![dt]))
}

fn variadic(ctx: &LowerCtx<'_>, op: VariadicOp, binop: Option<BinaryOp>) -> LowerResult {
    let n = ctx.inputs.iter().filter(|i| i.is_some()).count();
    match (n, binop) {
        (2, Some(b)) => binary(b, false),
        _ => Ok(Lowered::same(Variadic { op }, 1)),
    }
}

/// ONNX dtype code from the `to` attribute of Cast.
/// Compiles an Einsum equation to label ids. Ellipses need the input ranks
/// (from the model's declared shapes); their dims are right-aligned across
/// inputs and lead the output, as in NumPy.
fn einsum(ctx: &LowerCtx<'_>, equation: &str) -> LowerResult {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ctx.inputs.len() {
        return Err(format!(
            "Einsum `{equation}`: {} terms for {} inputs",
            terms.len(),
            ctx.inputs.len()
        ));
    }
    let letters = |t: &str| t.replace("...", "").chars().count();
    let mut ell_len = vec![0usize; terms.len()];
    for (k, t) in terms.iter().enumerate() {
        if !t.contains("...") {
            continue;
        }
        let rank = ctx.inputs[k]
            .and_then(|v| ctx.graph.values[v].declared.as_ref())
            .map(Vec::len)
            .ok_or("Einsum with `...` on an input of unknown rank")?;
        ell_len[k] = rank
            .checked_sub(letters(t))
            .ok_or("Einsum term longer than its input's rank")?;
    }
    let ell_max = ell_len.iter().copied().max().unwrap_or(0);
    // Ids 0..ell_max are the ellipsis dims; letters follow.
    let mut ids: Vec<char> = Vec::new();
    let mut id_of = |c: char| -> Result<usize, String> {
        if !c.is_ascii_alphabetic() {
            return Err(format!("Einsum `{equation}`: bad label `{c}`"));
        }
        Ok(ell_max
            + match ids.iter().position(|&x| x == c) {
                Some(i) => i,
                None => {
                    ids.push(c);
                    ids.len() - 1
                }
            })
    };
    let mut expand = |t: &str, ell: usize| -> Result<Vec<usize>, String> {
        let mut out = Vec::new();
        let mut rest = t;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("...") {
                out.extend(ell_max - ell..ell_max);
                rest = r;
            } else {
                let c = rest.chars().next().ok_or("empty")?;
                out.push(id_of(c)?);
                rest = &rest[c.len_utf8()..];
            }
        }
        Ok(out)
    };
    let mut inputs = Vec::new();
    for (k, t) in terms.iter().enumerate() {
        inputs.push(expand(t, ell_len[k])?);
    }
    let out = match rhs {
        Some(r) => expand(r, ell_max)?,
        None => {
            // Implicit output: the ellipsis dims, then the labels used once,
            // alphabetically.
            let mut once: Vec<(char, usize)> = ids
                .iter()
                .enumerate()
                .filter(|&(_, &c)| terms.iter().map(|t| t.matches(c).count()).sum::<usize>() == 1)
                .map(|(i, &c)| (c, ell_max + i))
                .collect();
            once.sort_unstable();
            (0..ell_max)
                .chain(once.into_iter().map(|(_, id)| id))
                .collect()
        }
    };
    let refs: Vec<&[usize]> = inputs.iter().map(Vec::as_slice).collect();
    lele_kernels::ops::einsum::Einsum::new(&refs, &out)
        .map(|k| Lowered::same(k, 1))
        .map_err(|e| format!("Einsum `{equation}`: {e}"))
}

pub fn dtype_attr(code: i64) -> Result<DType, String> {
    DType::from_onnx_code(code as i32).ok_or_else(|| format!("dtype code {code} is not supported"))
}

fn reduce(ctx: &mut LowerCtx<'_>, op: ReduceOp) -> LowerResult {
    let a = ctx.attrs();
    let keepdims = a.int("keepdims", 1) != 0;
    let noop = a.int("noop_with_empty_axes", 0) != 0;
    let axes_are_input = if op == ReduceOp::Sum {
        ctx.opset >= 13
    } else {
        ctx.opset >= 18
    };
    if !axes_are_input && let Some(axes) = a.ints_opt("axes") {
        let axes = axes.to_vec();
        let t = Tensor::from_values::<i64>(&[axes.len()], &axes).ok_or("bad axes")?;
        ctx.set_const_input(1, t);
    }
    Ok(Lowered::same(
        Reduce {
            op,
            keepdims,
            noop_with_empty_axes: noop,
        },
        1,
    ))
}

fn f32_scalar(v: f32) -> Tensor {
    Tensor::f32_scalar(v)
}

/// Lowers the ops of this family; `None` when `op_type` is not one of them.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    use BinaryOp as B;
    use UnaryOp as U;
    let a = ctx.attrs();
    Some(match op_type {
        "Add" => binary(B::Add, false),
        "PRelu" => binary(B::PRelu, false),
        "Sub" => binary(B::Sub, false),
        "Mul" => binary(B::Mul, false),
        "Div" => binary(B::Div, false),
        "Pow" => binary(B::Pow, false),
        "Mod" => binary(
            if a.int("fmod", 0) != 0 {
                B::FMod
            } else {
                B::Mod
            },
            false,
        ),
        "Max" => variadic(ctx, VariadicOp::Max, Some(B::Max)),
        "Min" => variadic(ctx, VariadicOp::Min, Some(B::Min)),
        "Sum" => variadic(ctx, VariadicOp::Sum, Some(B::Add)),
        "Mean" => variadic(ctx, VariadicOp::Mean, None),
        "Equal" => binary(B::Equal, true),
        "Less" => binary(B::Less, true),
        "Greater" => binary(B::Greater, true),
        "LessOrEqual" => binary(B::LessOrEqual, true),
        "GreaterOrEqual" => binary(B::GreaterOrEqual, true),
        "And" => binary(B::And, true),
        "Or" => binary(B::Or, true),
        "Xor" => binary(B::Xor, true),
        "BitShift" => match a.string("direction", "").as_str() {
            "LEFT" => binary(B::BitShiftLeft, false),
            "RIGHT" => binary(B::BitShiftRight, false),
            d => Err(format!("BitShift direction `{d}`")),
        },
        "BitwiseAnd" => binary(B::BitwiseAnd, false),
        "BitwiseOr" => binary(B::BitwiseOr, false),
        "BitwiseXor" => binary(B::BitwiseXor, false),
        "Relu" => unary(U::Relu),
        "Sigmoid" => unary(U::Sigmoid),
        "Tanh" => unary(U::Tanh),
        "Exp" => unary(U::Exp),
        "Log" => unary(U::Log),
        "Sqrt" => unary(U::Sqrt),
        "Abs" => unary(U::Abs),
        "Neg" => unary(U::Neg),
        "Reciprocal" => unary(U::Reciprocal),
        "Floor" => unary(U::Floor),
        "Ceil" => unary(U::Ceil),
        "Round" => unary(U::Round),
        "Sin" => unary(U::Sin),
        "Cos" => unary(U::Cos),
        "Tan" => unary(U::Tan),
        "Asin" => unary(U::Asin),
        "Acos" => unary(U::Acos),
        "Atan" => unary(U::Atan),
        "Sinh" => unary(U::Sinh),
        "Cosh" => unary(U::Cosh),
        "Asinh" => unary(U::Asinh),
        "Acosh" => unary(U::Acosh),
        "Atanh" => unary(U::Atanh),
        "Erf" => unary(U::Erf),
        "Sign" => unary(U::Sign),
        "Softplus" => unary(U::Softplus),
        "Softsign" => unary(U::Softsign),
        "Not" => unary(U::Not),
        "BitwiseNot" => unary(U::BitwiseNot),
        "Swish" => Ok(Lowered::same(
            Swish {
                alpha: a.float("alpha", 1.0),
            },
            1,
        )),
        "IsNaN" => unary(U::IsNaN),
        "IsInf" => {
            match (
                a.int("detect_negative", 1) != 0,
                a.int("detect_positive", 1) != 0,
            ) {
                (true, true) => unary(U::IsInf),
                (false, true) => unary(U::IsPosInf),
                (true, false) => unary(U::IsNegInf),
                (false, false) => Err("IsInf detecting neither sign (always false)".into()),
            }
        }
        "HardSwish" => unary(U::HardSwish),
        "Mish" => unary(U::Mish),
        "Gelu" => match a.string("approximate", "none").as_str() {
            "none" => unary(U::Gelu),
            "tanh" => Ok(Lowered::same(GeluTanh {}, 1)),
            s => Err(format!("Gelu approximate=`{s}`")),
        },
        "HardSigmoid" => Ok(Lowered::same(
            HardSigmoid {
                alpha: a.float("alpha", 0.2),
                beta: a.float("beta", 0.5),
            },
            1,
        )),
        "LeakyRelu" => Ok(Lowered::same(
            LeakyRelu {
                alpha: a.float("alpha", 0.01),
            },
            1,
        )),
        "Elu" => Ok(Lowered::same(
            Elu {
                alpha: a.float("alpha", 1.0),
            },
            1,
        )),
        "Selu" => Ok(Lowered::same(
            Selu {
                alpha: a.float("alpha", 1.673_263_2),
                gamma: a.float("gamma", 1.050_701),
            },
            1,
        )),
        "Celu" => Ok(Lowered::same(
            Celu {
                alpha: a.float("alpha", 1.0),
            },
            1,
        )),
        "ThresholdedRelu" => Ok(Lowered::same(
            ThresholdedRelu {
                alpha: a.float("alpha", 1.0),
            },
            1,
        )),
        "Shrink" => Ok(Lowered::same(
            Shrink {
                bias: a.float("bias", 0.0),
                lambd: a.float("lambd", 0.5),
            },
            1,
        )),
        "Clip" => {
            if ctx.opset < 11 {
                let min = a.float("min", f32::MIN);
                let max = a.float("max", f32::MAX);
                ctx.set_const_input(1, f32_scalar(min));
                ctx.set_const_input(2, f32_scalar(max));
            }
            Ok(Lowered::same(Clip, 1))
        }
        "CastLike" => Ok(Lowered::with(CastLike, vec![OutDType::Input(1)])),
        "BitCast" => match dtype_attr(a.int("to", 0)) {
            Ok(to) => Ok(Lowered::with(
                lele_kernels::ops::cast::BitCast { to },
                vec![OutDType::Fixed(to)],
            )),
            Err(e) => Err(e),
        },
        "Einsum" => einsum(ctx, &a.string("equation", "")),
        "Det" => Ok(Lowered::same(lele_kernels::ops::det::Det, 1)),
        "SwiGLU" => Ok(Lowered::same(
            lele_kernels::ops::rotary::SwiGlu {
                alpha: a.float("alpha", 1.0),
            },
            1,
        )),
        "RotaryEmbedding" => {
            let attr = |n: &str| usize::try_from(a.int(n, 0)).map_err(|_| format!("bad {n}"));
            attr("num_heads").and_then(|num_heads| {
                Ok(Lowered::same(
                    lele_kernels::ops::rotary::RotaryEmbedding {
                        num_heads,
                        rotary_dim: attr("rotary_embedding_dim")?,
                        interleaved: a.int("interleaved", 0) != 0,
                    },
                    1,
                ))
            })
        }
        "EyeLike" => {
            let k = lele_kernels::ops::generate::EyeLike { k: a.int("k", 0) };
            match a.int_opt("dtype") {
                None => Ok(Lowered::same(k, 1)),
                Some(code) => dtype_attr(code).map(|d| Lowered::with(k, vec![OutDType::Fixed(d)])),
            }
        }
        "Cast" => match dtype_attr(a.int("to", 0)) {
            Ok(to) => Ok(Lowered::with(Cast { to }, vec![OutDType::Fixed(to)])),
            Err(e) => Err(e),
        },
        "ReduceSum" => reduce(ctx, ReduceOp::Sum),
        "ReduceMean" => reduce(ctx, ReduceOp::Mean),
        "ReduceMax" => reduce(ctx, ReduceOp::Max),
        "ReduceMin" => reduce(ctx, ReduceOp::Min),
        "ReduceProd" => reduce(ctx, ReduceOp::Prod),
        "ReduceL1" => reduce(ctx, ReduceOp::L1),
        "ReduceL2" => reduce(ctx, ReduceOp::L2),
        "ReduceLogSum" => reduce(ctx, ReduceOp::LogSum),
        "ReduceLogSumExp" => reduce(ctx, ReduceOp::LogSumExp),
        "ReduceSumSquare" => reduce(ctx, ReduceOp::SumSquare),
        "ArgMax" => Ok(Lowered::with(
            ArgMax {
                axis: a.int("axis", 0),
                keepdims: a.int("keepdims", 1) != 0,
                select_last_index: a.int("select_last_index", 0) != 0,
            },
            vec![OutDType::Fixed(DType::I64)],
        )),
        "ArgMin" => Ok(Lowered::with(
            ArgMin {
                axis: a.int("axis", 0),
                keepdims: a.int("keepdims", 1) != 0,
                select_last_index: a.int("select_last_index", 0) != 0,
            },
            vec![OutDType::Fixed(DType::I64)],
        )),
        "CumSum" | "CumProd" => Ok(Lowered::same(
            CumSum {
                exclusive: a.int("exclusive", 0) != 0,
                reverse: a.int("reverse", 0) != 0,
                product: op_type == "CumProd",
            },
            1,
        )),
        _ => return None,
    })
}
