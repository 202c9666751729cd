//! Neural-network operators: GEMM, convolution, pooling, normalization,
//! softmax, resizing and recurrent layers.
use lele_kernels::ops::conv::{AutoPad, Conv, ConvTranspose};
use lele_kernels::ops::matmul::{Gemm, MatMul};
use lele_kernels::ops::norm::{InstanceNormalization, LayerNormalization, RmsNormalization};
use lele_kernels::ops::pool::{GlobalAveragePool, GlobalMaxPool};
use lele_kernels::ops::resize::{AspectPolicy, CoordMode, NearestMode, Resize, ResizeMode};
use lele_kernels::ops::rnn::{Direction, Gru, Lstm};
use lele_kernels::ops::softmax::{LogSoftmax, Softmax};
use lele_kernels::ops::unary::Activation;
use lele_kernels::{DType, IntList};

use super::{Attrs, LowerCtx, LowerResult, Lowered};
use crate::ir::{OutDType, Tensor};

pub(super) fn auto_pad(a: &Attrs<'_>) -> Result<AutoPad, String> {
    Ok(match a.string("auto_pad", "NOTSET").as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        s => return Err(format!("auto_pad `{s}`")),
    })
}

/// Spatial parameters of conv/pool ops, normalized to 2-D (1-D ops get a
/// leading dimension of size 1).
struct Spatial {
    kernel: [usize; 2],
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
}

pub(super) fn to_usize(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter()
        .map(|&x| usize::try_from(x).map_err(|_| format!("negative {what}")))
        .collect()
}

fn spatial(a: &Attrs<'_>, kernel: Vec<usize>) -> Result<Spatial, String> {
    let n = kernel.len();
    if n == 0 || n > 2 {
        return Err(format!(
            "{n}-D spatial operators are not supported (1-D and 2-D are)"
        ));
    }
    let strides = to_usize(a.ints_opt("strides").unwrap_or(&[]), "stride")?;
    let dil = to_usize(a.ints_opt("dilations").unwrap_or(&[]), "dilation")?;
    let pads = to_usize(a.ints_opt("pads").unwrap_or(&[]), "pad")?;
    let get = |v: &Vec<usize>, i: usize, d: usize| v.get(i).copied().unwrap_or(d);
    if n == 1 {
        Ok(Spatial {
            kernel: [1, kernel[0]],
            strides: [1, get(&strides, 0, 1)],
            pads: [0, get(&pads, 0, 0), 0, get(&pads, 1, 0)],
            dilations: [1, get(&dil, 0, 1)],
        })
    } else {
        Ok(Spatial {
            kernel: [kernel[0], kernel[1]],
            strides: [get(&strides, 0, 1), get(&strides, 1, 1)],
            pads: [
                get(&pads, 0, 0),
                get(&pads, 1, 0),
                get(&pads, 2, 0),
                get(&pads, 3, 0),
            ],
            dilations: [get(&dil, 0, 1), get(&dil, 1, 1)],
        })
    }
}

fn kernel_shape(ctx: &LowerCtx<'_>, a: &Attrs<'_>) -> Result<Vec<usize>, String> {
    if let Some(k) = a.ints_opt("kernel_shape") {
        return to_usize(k, "kernel size");
    }
    let w = ctx
        .inputs
        .get(1)
        .copied()
        .flatten()
        .ok_or("missing weights")?;
    let v = &ctx.graph.values[w];
    if let Some(t) = &v.constant
        && t.dims.len() >= 3
    {
        return Ok(t.dims[2..].to_vec());
    }
    // Weights fed as a model input: their declared (fixed) dims, which
    // `forward` checks at run time.
    let declared: Option<Vec<usize>> = v.declared.as_ref().and_then(|d| {
        d.iter()
            .map(|x| match x {
                crate::ir::DeclaredDim::Fixed(n) => Some(*n),
                crate::ir::DeclaredDim::Dynamic(_) => None,
            })
            .collect()
    });
    match declared {
        Some(d) if d.len() >= 3 => Ok(d[2..].to_vec()),
        _ => Err("kernel_shape is absent and the weights are neither constant nor of fixed declared shape".into()),
    }
}

fn direction(a: &Attrs<'_>) -> Result<Direction, String> {
    Ok(match a.string("direction", "forward").as_str() {
        "forward" => Direction::Forward,
        "reverse" => Direction::Reverse,
        "bidirectional" => Direction::Bidirectional,
        s => return Err(format!("direction `{s}`")),
    })
}

fn check_activations(a: &Attrs<'_>, defaults: &[&str]) -> Result<(), String> {
    let acts = a.strings("activations");
    if acts.is_empty() {
        return Ok(());
    }
    let per_dir = defaults.len();
    for (i, act) in acts.iter().enumerate() {
        if !act.eq_ignore_ascii_case(defaults[i % per_dir]) {
            return Err(format!("non-default activation `{act}`"));
        }
    }
    Ok(())
}

fn resize(ctx: &mut LowerCtx<'_>, upsample: bool) -> LowerResult {
    let a = ctx.attrs();
    let mode = match a.string("mode", "nearest").as_str() {
        "nearest" => ResizeMode::Nearest,
        "linear" | "bilinear" => ResizeMode::Linear,
        "cubic" | "bicubic" => ResizeMode::Cubic,
        m => return Err(format!("mode `{m}`")),
    };
    let legacy = upsample || ctx.opset < 11;
    let coord = if legacy {
        CoordMode::Asymmetric
    } else {
        match a
            .string("coordinate_transformation_mode", "half_pixel")
            .as_str()
        {
            "half_pixel" => CoordMode::HalfPixel,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            "tf_crop_and_resize" => CoordMode::TfCropAndResize,
            "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
            m => return Err(format!("coordinate_transformation_mode `{m}`")),
        }
    };
    let nearest = if legacy {
        NearestMode::Floor
    } else {
        match a.string("nearest_mode", "round_prefer_floor").as_str() {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            m => return Err(format!("nearest_mode `{m}`")),
        }
    };
    let aspect = match a.string("keep_aspect_ratio_policy", "stretch").as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        p => return Err(format!("keep_aspect_ratio_policy `{p}`")),
    };
    let axes = IntList::new(a.ints_opt("axes").unwrap_or(&[])).map_err(|e| e.to_string())?;
    let k = Resize {
        mode,
        coord,
        nearest,
        cubic_coeff_a: a.float("cubic_coeff_a", -0.75),
        exclude_outside: a.int("exclude_outside", 0) != 0,
        extrapolation_value: a.float("extrapolation_value", 0.0),
        antialias: a.int("antialias", 0) != 0,
        axes,
        aspect,
    };
    // Normalize to inputs (X, roi, scales, sizes).
    if upsample || ctx.opset < 11 {
        let scales_in = if upsample && ctx.opset < 9 {
            let s = a
                .floats_opt("scales")
                .ok_or("Upsample without scales")?
                .to_vec();
            let t = Tensor::from_values::<f32>(&[s.len()], &s).ok_or("bad scales")?;
            let id = ctx.graph.add_constant(&format!("{}::scales", ctx.name), t);
            Some(id)
        } else {
            ctx.inputs.get(1).copied().flatten()
        };
        ctx.inputs.truncate(1);
        ctx.inputs.push(None);
        ctx.inputs.push(scales_in);
    }
    Ok(Lowered::same(k, 1))
}

/// Lowers the ops of this family; `None` when `op_type` is not one of them.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    if let Some(r) = super::pool_norm::lower(op_type, ctx) {
        return Some(r);
    }
    let a = ctx.attrs();
    Some((|| -> LowerResult {
        match op_type {
            "MatMul" => Ok(Lowered::same(MatMul, 1)),
            "Gemm" => Ok(Lowered::same(
                Gemm {
                    alpha: a.float("alpha", 1.0),
                    beta: a.float("beta", 1.0),
                    trans_a: a.int("transA", 0) != 0,
                    trans_b: a.int("transB", 0) != 0,
                },
                1,
            )),
            "Conv" => {
                let s = spatial(&a, kernel_shape(ctx, &a)?)?;
                Ok(Lowered::same(
                    Conv {
                        group: usize::try_from(a.int("group", 1)).map_err(|_| "bad group")?,
                        kernel: s.kernel,
                        strides: s.strides,
                        pads: s.pads,
                        dilations: s.dilations,
                        auto_pad: auto_pad(&a)?,
                        activation: Activation::None,
                        post_mul: 1.0,
                        post_add: 0.0,
                    },
                    1,
                ))
            }
            "ConvTranspose" => {
                let kernel = kernel_shape(ctx, &a)?;
                let nd = kernel.len();
                let s = spatial(&a, kernel)?;
                let op = to_usize(
                    a.ints_opt("output_padding").unwrap_or(&[]),
                    "output_padding",
                )?;
                let output_padding = if nd == 1 {
                    [0, op.first().copied().unwrap_or(0)]
                } else {
                    [
                        op.first().copied().unwrap_or(0),
                        op.get(1).copied().unwrap_or(0),
                    ]
                };
                let output_shape = match a.ints_opt("output_shape") {
                    Some(v) => {
                        let v = to_usize(v, "output_shape")?;
                        Some(match v.as_slice() {
                            [w] => [1, *w],
                            [h, w] => [*h, *w],
                            [.., h, w] => [*h, *w],
                            _ => return Err("bad output_shape".into()),
                        })
                    }
                    None => None,
                };
                Ok(Lowered::same(
                    ConvTranspose {
                        group: usize::try_from(a.int("group", 1)).map_err(|_| "bad group")?,
                        kernel: s.kernel,
                        strides: s.strides,
                        pads: s.pads,
                        dilations: s.dilations,
                        output_padding,
                        output_shape,
                        auto_pad: auto_pad(&a)?,
                        activation: Activation::None,
                    },
                    1,
                ))
            }
            "GlobalAveragePool" => Ok(Lowered::same(GlobalAveragePool {}, 1)),
            "GlobalMaxPool" => Ok(Lowered::same(GlobalMaxPool {}, 1)),
            "LayerNormalization" => {
                if a.int("stash_type", 1) != 1 {
                    return Err("LayerNormalization with stash_type other than float".into());
                }
                // Mean and InvStdDev are computed in float (stash_type 1).
                let dtypes = [
                    OutDType::Input(0),
                    OutDType::Fixed(DType::F32),
                    OutDType::Fixed(DType::F32),
                ];
                Ok(Lowered::with(
                    LayerNormalization {
                        axis: a.int("axis", -1),
                        epsilon: a.float("epsilon", 1e-5),
                    },
                    dtypes[..ctx.n_outputs().clamp(1, 3)].to_vec(),
                ))
            }
            "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
                use lele_kernels::ops::loss::{
                    LossReduction, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss,
                };
                let reduction = match a.string("reduction", "mean").as_str() {
                    "none" => LossReduction::None,
                    "sum" => LossReduction::Sum,
                    "mean" => LossReduction::Mean,
                    other => {
                        return Err(format!("reduction `{other}` is not one of none, sum, mean"));
                    }
                };
                let ignore = a.int_opt("ignore_index");
                let (has_ignore, ignore_index) = (ignore.is_some(), ignore.unwrap_or(0));
                if op_type == "NegativeLogLikelihoodLoss" {
                    Ok(Lowered::same(
                        NegativeLogLikelihoodLoss {
                            reduction,
                            has_ignore,
                            ignore_index,
                        },
                        1,
                    ))
                } else {
                    Ok(Lowered::same(
                        SoftmaxCrossEntropyLoss {
                            reduction,
                            has_ignore,
                            ignore_index,
                        },
                        ctx.n_outputs(),
                    ))
                }
            }
            "Attention" => {
                if a.int_opt("softmax_precision").is_some_and(|p| p != 1) {
                    return Err("Attention with softmax_precision other than float".into());
                }
                let heads = |name: &str| -> Result<usize, String> {
                    usize::try_from(a.int(name, 0)).map_err(|_| format!("negative {name}"))
                };
                Ok(Lowered::same(
                    lele_kernels::ops::attention::Attention {
                        scale: a.float("scale", 0.0),
                        is_causal: a.int("is_causal", 0) != 0,
                        q_num_heads: heads("q_num_heads")?,
                        kv_num_heads: heads("kv_num_heads")?,
                        softcap: a.float("softcap", 0.0),
                        qk_mode: a.int("qk_matmul_output_mode", 0),
                        left_window: a.int("left_window_size", -1),
                        right_window: a.int("right_window_size", -1),
                    },
                    ctx.n_outputs(),
                ))
            }
            "RMSNormalization" => {
                if a.int("stash_type", 1) != 1 {
                    return Err("RMSNormalization with stash_type other than float".into());
                }
                Ok(Lowered::same(
                    RmsNormalization {
                        axis: a.int("axis", -1),
                        epsilon: a.float("epsilon", 1e-5),
                    },
                    1,
                ))
            }
            "InstanceNormalization" => Ok(Lowered::same(
                InstanceNormalization {
                    epsilon: a.float("epsilon", 1e-5),
                },
                1,
            )),
            "Softmax" | "LogSoftmax" => {
                let axis = a.int("axis", if ctx.opset >= 13 { -1 } else { 1 });
                // Before opset 13 the input is coerced to 2-D at `axis`; that
                // equals a single-axis softmax only over the last axis. The
                // rank check happens during shape inference.
                if ctx.opset < 13
                    && axis != -1
                    && let Some(&out) = ctx.outputs.first()
                {
                    ctx.graph.legacy_softmax.push((out, axis));
                }
                if op_type == "Softmax" {
                    Ok(Lowered::same(Softmax { axis }, 1))
                } else {
                    Ok(Lowered::same(LogSoftmax { axis }, 1))
                }
            }
            "Resize" => resize(ctx, false),
            "Upsample" => resize(ctx, true),
            "LSTM" => {
                check_activations(&a, &["Sigmoid", "Tanh", "Tanh"])?;
                let hidden = a.int_opt("hidden_size").ok_or("LSTM without hidden_size")?;
                Ok(Lowered::same(
                    Lstm {
                        hidden_size: usize::try_from(hidden).map_err(|_| "bad hidden_size")?,
                        direction: direction(&a)?,
                        layout: a.int("layout", 0),
                        clip: a.float_opt("clip"),
                        input_forget: a.int("input_forget", 0) != 0,
                    },
                    ctx.n_outputs(),
                ))
            }
            "GRU" => {
                check_activations(&a, &["Sigmoid", "Tanh"])?;
                let hidden = a.int_opt("hidden_size").ok_or("GRU without hidden_size")?;
                if a.has("clip") {
                    return Err("GRU with clip".into());
                }
                Ok(Lowered::same(
                    Gru {
                        hidden_size: usize::try_from(hidden).map_err(|_| "bad hidden_size")?,
                        direction: direction(&a)?,
                        linear_before_reset: a.int("linear_before_reset", 0) != 0,
                        layout: a.int("layout", 0),
                    },
                    ctx.n_outputs(),
                ))
            }
            "RNN" => {
                check_activations(&a, &["Tanh"])?;
                let hidden = a.int_opt("hidden_size").ok_or("RNN without hidden_size")?;
                if a.has("clip") {
                    return Err("RNN with clip".into());
                }
                Ok(Lowered::same(
                    lele_kernels::ops::rnn::Rnn {
                        hidden_size: usize::try_from(hidden).map_err(|_| "bad hidden_size")?,
                        direction: direction(&a)?,
                        layout: a.int("layout", 0),
                    },
                    ctx.n_outputs(),
                ))
            }
            _ => Err(String::new()),
        }
    })())
    .filter(|r| !matches!(r, Err(e) if e.is_empty()))
}
