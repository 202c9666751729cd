//! Lowering of the windowed pools (`MaxPool`, `AveragePool`, `LpPool`,
//! `MaxUnpool`) and of the normalizations that are not in `nn.rs`
//! (`BatchNormalization`, `GroupNormalization`, `LRN`, `LpNormalization`,
//! `MeanVarianceNormalization`, `Hardmax`). Called from [`super::nn`].
use lele_kernels::ops::hardmax::Hardmax;
use lele_kernels::ops::norm::{
    BatchNormalization, GroupNormalization, LpNormalization, Lrn, MeanVarianceNormalization,
};
use lele_kernels::ops::pool::{AveragePool, LpPool, MAX_SPATIAL, MaxPool, MaxUnpool, Window};
use lele_kernels::{DType, IntList};

use super::nn::{auto_pad, to_usize};
use super::{Attrs, LowerCtx, LowerResult, Lowered};
use crate::ir::OutDType;

/// Window attributes right-aligned in [`MAX_SPATIAL`] slots, as the pool
/// kernels take them.
struct Spatial {
    spatial: usize,
    kernel: [usize; MAX_SPATIAL],
    strides: [usize; MAX_SPATIAL],
    pads: [usize; 2 * MAX_SPATIAL],
    dilations: [usize; MAX_SPATIAL],
}

/// Reads `kernel_shape`, `strides`, `pads` and `dilations`.
fn spatial(a: &Attrs<'_>) -> Result<Spatial, String> {
    let kernel = to_usize(
        a.ints_opt("kernel_shape").ok_or("no kernel_shape")?,
        "kernel",
    )?;
    let n = kernel.len();
    if n == 0 || n > MAX_SPATIAL {
        return Err(format!(
            "{n}-D pooling is not supported (1-D to {MAX_SPATIAL}-D are)"
        ));
    }
    let list = |name: &str, len: usize, default: usize| -> Result<Vec<usize>, String> {
        match a.ints_opt(name) {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len => to_usize(v, name),
            Some(v) => Err(format!("{name} has {} entries for a {n}-D kernel", v.len())),
        }
    };
    let strides = list("strides", n, 1)?;
    let dilations = list("dilations", n, 1)?;
    let pads = list("pads", 2 * n, 0)?;
    let lead = MAX_SPATIAL - n;
    let mut s = Spatial {
        spatial: n,
        kernel: [1; MAX_SPATIAL],
        strides: [1; MAX_SPATIAL],
        pads: [0; 2 * MAX_SPATIAL],
        dilations: [1; MAX_SPATIAL],
    };
    s.kernel[lead..].copy_from_slice(&kernel);
    s.strides[lead..].copy_from_slice(&strides);
    s.dilations[lead..].copy_from_slice(&dilations);
    s.pads[lead..MAX_SPATIAL].copy_from_slice(&pads[..n]);
    s.pads[MAX_SPATIAL + lead..].copy_from_slice(&pads[n..]);
    Ok(s)
}

fn window(a: &Attrs<'_>) -> Result<Window, String> {
    let s = spatial(a)?;
    Ok(Window {
        spatial: s.spatial,
        kernel: s.kernel,
        strides: s.strides,
        pads: s.pads,
        dilations: s.dilations,
        ceil_mode: a.int("ceil_mode", 0) != 0,
        auto_pad: auto_pad(a)?,
    })
}

/// A positive integer attribute that may be stored as an int or (LpPool-1)
/// as a float.
fn int_like(a: &Attrs<'_>, name: &str, default: i64) -> Result<i64, String> {
    if let Some(v) = a.int_opt(name) {
        return Ok(v);
    }
    match a.float_opt(name) {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e9 => Ok(f as i64),
        Some(f) => Err(format!("non-integer {name} {f}")),
        None => Ok(default),
    }
}

fn batch_norm(ctx: &LowerCtx<'_>, a: &Attrs<'_>) -> LowerResult {
    let n_out = ctx.n_outputs();
    // Opset 14 names training with an attribute; before, extra outputs
    // request it (opsets 9-13 list running mean/var first, like 14).
    let training = if ctx.opset >= 14 {
        a.int("training_mode", 0) != 0
    } else {
        n_out > 1
    };
    if ctx.opset < 9 && a.int("spatial", 1) == 0 {
        return Err("BatchNormalization with spatial=0".into());
    }
    if n_out > 3 {
        return Err("BatchNormalization with the saved_mean/saved_var outputs".into());
    }
    if !training && n_out > 1 {
        return Err("BatchNormalization with running statistics outside training mode".into());
    }
    Ok(Lowered::same(
        BatchNormalization {
            epsilon: a.float("epsilon", 1e-5),
            momentum: a.float("momentum", 0.9),
            training,
        },
        n_out,
    ))
}

/// Lowers the ops of this file; `None` when `op_type` is not one of them.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    let a = ctx.attrs();
    let r = match op_type {
        "MaxPool" => (|| {
            let n_out = ctx.n_outputs();
            if n_out > 2 {
                return Err("MaxPool with more than 2 outputs".to_string());
            }
            let k = MaxPool {
                window: window(&a)?,
                column_major: a.int("storage_order", 0) != 0,
            };
            let dtypes = [OutDType::Input(0), OutDType::Fixed(DType::I64)];
            Ok(Lowered::with(k, dtypes[..n_out.clamp(1, 2)].to_vec()))
        })(),
        "AveragePool" => window(&a).map(|window| {
            Lowered::same(
                AveragePool {
                    window,
                    count_include_pad: a.int("count_include_pad", 0) != 0,
                },
                1,
            )
        }),
        "LpPool" => (|| {
            let p = int_like(&a, "p", 2)?;
            let p = u32::try_from(p)
                .ok()
                .filter(|&p| p > 0)
                .ok_or(format!("LpPool with p = {p}"))?;
            Ok(Lowered::same(
                LpPool {
                    window: window(&a)?,
                    p,
                },
                1,
            ))
        })(),
        "MaxUnpool" => spatial(&a).map(|s| {
            Lowered::same(
                MaxUnpool {
                    spatial: s.spatial,
                    kernel: s.kernel,
                    strides: s.strides,
                    pads: s.pads,
                },
                1,
            )
        }),
        "BatchNormalization" => batch_norm(ctx, &a),
        "GroupNormalization" => (|| {
            if a.int("stash_type", 1) != 1 {
                return Err("GroupNormalization with stash_type other than float".to_string());
            }
            let g = a
                .int_opt("num_groups")
                .ok_or("GroupNormalization without num_groups")?;
            Ok(Lowered::same(
                GroupNormalization {
                    num_groups: usize::try_from(g).map_err(|_| "negative num_groups")?,
                    epsilon: a.float("epsilon", 1e-5),
                    per_channel: ctx.opset >= 21,
                },
                1,
            ))
        })(),
        "LRN" => (|| {
            let size = a.int_opt("size").ok_or("LRN without size")?;
            Ok(Lowered::same(
                Lrn {
                    size: usize::try_from(size)
                        .ok()
                        .filter(|&s| s > 0)
                        .ok_or("LRN size must be positive")?,
                    alpha: a.float("alpha", 1e-4),
                    beta: a.float("beta", 0.75),
                    bias: a.float("bias", 1.0),
                },
                1,
            ))
        })(),
        "LpNormalization" => match a.int("p", 2) {
            p @ (1 | 2) => Ok(Lowered::same(
                LpNormalization {
                    axis: a.int("axis", -1),
                    p: p as u32,
                },
                1,
            )),
            p => Err(format!(
                "LpNormalization with p = {p} (1 and 2 are defined)"
            )),
        },
        "MeanVarianceNormalization" => {
            let axes = a.ints_opt("axes").unwrap_or(&[0, 2, 3]);
            IntList::new(axes)
                .map(|axes| Lowered::same(MeanVarianceNormalization { axes }, 1))
                .map_err(|_| "too many axes".to_string())
        }
        "Hardmax" => {
            let coerce_2d = ctx.opset < 13;
            Ok(Lowered::same(
                Hardmax {
                    axis: a.int("axis", if coerce_2d { 1 } else { -1 }),
                    coerce_2d,
                },
                1,
            ))
        }
        _ => return None,
    };
    Some(r)
}
