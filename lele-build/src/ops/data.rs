//! Data movement and shape operators: views, transposes, concatenation,
//! slicing, gathering, padding and generators.
use lele_kernels::DType;
use lele_kernels::IntList;
use lele_kernels::ops::concat::{Concat, Split};
use lele_kernels::ops::gather::{
    Gather, GatherElements, GatherNd, ScatterElements, ScatterNd, ScatterReduction,
};
use lele_kernels::ops::generate::{ConstantOfShape, Range, ScalarValue};
use lele_kernels::ops::layout::{Flatten, Identity, Reshape, ShapeOf, Size, Squeeze, Unsqueeze};
use lele_kernels::ops::pad::{Pad, PadMode};
use lele_kernels::ops::select::{Expand, NonZero, Tile, TopK, Where};
use lele_kernels::ops::slice::Slice;
use lele_kernels::ops::transpose::Transpose;

use super::{LowerCtx, LowerResult, Lowered};
use crate::ir::{OutDType, Tensor};

fn i64_list(v: &[i64]) -> Tensor {
    Tensor::i64_vector(v)
}

fn scatter_reduction(s: &str) -> Result<ScatterReduction, String> {
    Ok(match s {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        r => return Err(format!("reduction `{r}`")),
    })
}

/// Lowers the ops of this family; `None` when `op_type` is not one of them.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    let a = ctx.attrs();
    let opset = ctx.opset;
    Some(match op_type {
        "Shape" => Ok(Lowered::with(
            ShapeOf {
                start: a.int("start", 0),
                end: a.int_opt("end"),
            },
            vec![OutDType::Fixed(DType::I64)],
        )),
        "Size" => Ok(Lowered::with(Size, vec![OutDType::Fixed(DType::I64)])),
        "Reshape" => {
            if opset < 5 {
                let shape = a.ints_opt("shape").unwrap_or(&[]).to_vec();
                ctx.set_const_input(1, i64_list(&shape));
            }
            Ok(Lowered::view(Reshape {
                allowzero: a.int("allowzero", 0) != 0,
            }))
        }
        "Flatten" => Ok(Lowered::view(Flatten {
            axis: a.int("axis", 1),
        })),
        "Squeeze" | "Unsqueeze" => {
            if opset < 13
                && let Some(axes) = a.ints_opt("axes")
            {
                let axes = axes.to_vec();
                ctx.set_const_input(1, i64_list(&axes));
            }
            if op_type == "Squeeze" {
                Ok(Lowered::view(Squeeze))
            } else {
                Ok(Lowered::view(Unsqueeze))
            }
        }
        "Identity" => Ok(Lowered::view(Identity)),
        "Dropout" => {
            // Inference dropout is the identity with an all-true mask;
            // training mode is random unless the ratio is zero.
            let is_const_zero = |v: Option<usize>| {
                v.and_then(|v| ctx.graph.values[v].constant.as_ref())
                    .is_some_and(|t| t.bytes().iter().all(|&b| b == 0))
            };
            let training = ctx.inputs.get(2).copied().flatten();
            let ratio = ctx.inputs.get(1).copied().flatten();
            let inference = training.is_none() || is_const_zero(training);
            let ratio_known_nonzero = match ratio {
                None => true,
                Some(v) => ctx.graph.values[v].constant.is_some() && !is_const_zero(Some(v)),
            };
            if !inference && ratio_known_nonzero {
                Err("Dropout in training mode with a non-zero ratio (random)".into())
            } else if inference && ctx.n_outputs() == 1 {
                ctx.inputs.truncate(1);
                Ok(Lowered::view(Identity))
            } else {
                if inference {
                    ctx.inputs.truncate(1);
                }
                Ok(Lowered::with(
                    lele_kernels::ops::dropout::Dropout,
                    vec![OutDType::Input(0), OutDType::Fixed(DType::Bool)]
                        [..ctx.n_outputs().min(2)]
                        .to_vec(),
                ))
            }
        }
        "Trilu" => Ok(Lowered::same(
            lele_kernels::ops::trilu::Trilu {
                upper: a.int("upper", 1) != 0,
            },
            1,
        )),
        "Transpose" => match a.ints_opt("perm") {
            Some(p) => match IntList::new(p) {
                Ok(perm) => Ok(Lowered::same(Transpose { perm }, 1)),
                Err(e) => Err(e.to_string()),
            },
            None => Ok(Lowered::same(
                Transpose {
                    perm: IntList::EMPTY,
                },
                1,
            )),
        },
        "Concat" => Ok(Lowered::same(
            Concat {
                axis: a.int("axis", 0),
            },
            1,
        )),
        "Split" => {
            if opset < 13
                && let Some(split) = a.ints_opt("split")
            {
                let split = split.to_vec();
                ctx.set_const_input(1, i64_list(&split));
            }
            let n = ctx.n_outputs();
            Ok(Lowered::same(
                Split {
                    axis: a.int("axis", 0),
                    num_outputs: n,
                },
                n,
            ))
        }
        "Slice" => {
            if opset < 10 {
                let starts = a.ints_opt("starts").unwrap_or(&[]).to_vec();
                let ends = a.ints_opt("ends").unwrap_or(&[]).to_vec();
                ctx.set_const_input(1, i64_list(&starts));
                ctx.set_const_input(2, i64_list(&ends));
                if let Some(axes) = a.ints_opt("axes") {
                    let axes = axes.to_vec();
                    ctx.set_const_input(3, i64_list(&axes));
                }
            }
            Ok(Lowered::same(Slice, 1))
        }
        "Gather" => Ok(Lowered::same(
            Gather {
                axis: a.int("axis", 0),
            },
            1,
        )),
        "GatherElements" => Ok(Lowered::same(
            GatherElements {
                axis: a.int("axis", 0),
            },
            1,
        )),
        "GatherND" => Ok(Lowered::same(
            GatherNd {
                batch_dims: a.int("batch_dims", 0).max(0) as usize,
            },
            1,
        )),
        "ScatterND" => scatter_reduction(&a.string("reduction", "none")).map(|reduction| {
            Lowered::same(
                ScatterNd {
                    reduction,
                    runs: false,
                },
                1,
            )
        }),
        // `Scatter` (opsets 9-10) is `ScatterElements` without reduction.
        "Scatter" => Ok(Lowered::same(
            ScatterElements {
                axis: a.int("axis", 0),
                reduction: ScatterReduction::None,
            },
            1,
        )),
        "ScatterElements" => scatter_reduction(&a.string("reduction", "none")).map(|reduction| {
            Lowered::same(
                ScatterElements {
                    axis: a.int("axis", 0),
                    reduction,
                },
                1,
            )
        }),
        "Range" => Ok(Lowered::same(Range, 1)),
        "ReverseSequence" => {
            let axis =
                |n: &str, d: i64| usize::try_from(a.int(n, d)).map_err(|_| format!("bad {n}"));
            axis("time_axis", 0).and_then(|time_axis| {
                Ok(Lowered::same(
                    lele_kernels::ops::reverse_sequence::ReverseSequence {
                        time_axis,
                        batch_axis: axis("batch_axis", 1)?,
                    },
                    1,
                ))
            })
        }
        "NonMaxSuppression" => Ok(Lowered::with(
            lele_kernels::ops::nms::NonMaxSuppression {
                center_point_box: a.int("center_point_box", 0) != 0,
            },
            vec![OutDType::Fixed(DType::I64)],
        )),
        "Compress" => Ok(Lowered::same(
            lele_kernels::ops::filter::Compress {
                axis: a.int_opt("axis"),
            },
            1,
        )),
        "Unique" => {
            let mut dtypes = vec![OutDType::Input(0)];
            dtypes.resize(ctx.n_outputs(), OutDType::Fixed(DType::I64));
            Ok(Lowered::with(
                lele_kernels::ops::filter::Unique {
                    axis: a.int_opt("axis"),
                    sorted: a.int("sorted", 1) != 0,
                },
                dtypes,
            ))
        }
        "ConstantOfShape" => {
            let value = match a.tensor("value") {
                Some(tp) => match crate::onnx_file::tensor_from_proto(
                    tp,
                    std::path::Path::new("."),
                    &Default::default(),
                ) {
                    Ok(t) if t.numel() == 1 => {
                        let mut bits = [0u8; 8];
                        bits[..t.bytes().len()].copy_from_slice(t.bytes());
                        Ok(ScalarValue {
                            dtype: t.dtype,
                            bits: u64::from_le_bytes(bits),
                        })
                    }
                    Ok(_) => Err("ConstantOfShape value must hold one element".to_string()),
                    Err(e) => Err(e.to_string()),
                },
                None => Ok(ScalarValue {
                    dtype: DType::F32,
                    bits: 0,
                }),
            };
            value.map(|v| {
                Lowered::with(ConstantOfShape { value: v }, vec![OutDType::Fixed(v.dtype)])
            })
        }
        "Pad" => {
            let mode = match a.string("mode", "constant").as_str() {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                "wrap" => PadMode::Wrap,
                m => return Some(Err(format!("mode `{m}`"))),
            };
            if opset < 11 {
                let pads = a.ints_opt("pads").unwrap_or(&[]).to_vec();
                let value = a.float("value", 0.0);
                ctx.set_const_input(1, i64_list(&pads));
                ctx.set_const_input(2, Tensor::f32_scalar(value));
            }
            Ok(Lowered::same(Pad { mode }, 1))
        }
        "Where" => Ok(Lowered::with(Where, vec![OutDType::Input(1)])),
        "Expand" => Ok(Lowered::same(Expand, 1)),
        "Tile" => Ok(Lowered::same(Tile, 1)),
        "NonZero" => Ok(Lowered::with(NonZero, vec![OutDType::Fixed(DType::I64)])),
        "TopK" => {
            if opset < 10 {
                let k = a.int("k", 1);
                ctx.set_const_input(1, i64_list(&[k]));
            }
            Ok(Lowered::with(
                TopK {
                    axis: a.int("axis", -1),
                    largest: a.int("largest", 1) != 0,
                    sorted: a.int("sorted", 1) != 0,
                },
                vec![OutDType::Input(0), OutDType::Fixed(DType::I64)],
            ))
        }
        _ => return None,
    })
}
