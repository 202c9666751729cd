//! Lowering of the spatial and rearrangement operators: `GridSample`,
//! `AffineGrid`, `Col2Im`, `CenterCropPad`, `SpaceToDepth`, `DepthToSpace`.
use lele_kernels::IntList;
use lele_kernels::ops::spatial::affine_grid::AffineGrid;
use lele_kernels::ops::spatial::center_crop_pad::CenterCropPad;
use lele_kernels::ops::spatial::col2im::Col2Im;
use lele_kernels::ops::spatial::depth_space::{BlockMode, DepthToSpace, SpaceToDepth};
use lele_kernels::ops::spatial::grid_sample::{GridPadding, GridSample, GridSampleMode};

use super::{Attrs, LowerCtx, LowerResult, Lowered};

/// An optional integer list attribute (absent: empty, meaning the default).
fn int_list(a: &Attrs<'_>, name: &str) -> Result<IntList, String> {
    IntList::new(a.ints_opt(name).unwrap_or(&[])).map_err(|_| format!("`{name}` is too long"))
}

/// The `blocksize` and `mode` of SpaceToDepth / DepthToSpace.
fn block(a: &Attrs<'_>) -> Result<(usize, BlockMode), String> {
    let bs = a
        .int_opt("blocksize")
        .ok_or("missing `blocksize` attribute")?;
    let bs = usize::try_from(bs)
        .ok()
        .filter(|&b| b > 0)
        .ok_or(format!("blocksize {bs} (must be positive)"))?;
    let mode = match a.string("mode", "DCR").as_str() {
        "DCR" => BlockMode::Dcr,
        "CRD" => BlockMode::Crd,
        m => return Err(format!("mode `{m}`")),
    };
    Ok((bs, mode))
}

fn grid_sample(a: &Attrs<'_>) -> Result<GridSample, String> {
    // Opsets before 20 spell the modes `bilinear` and `bicubic`.
    let mode = match a.string("mode", "linear").as_str() {
        "linear" | "bilinear" => GridSampleMode::Linear,
        "nearest" => GridSampleMode::Nearest,
        "cubic" | "bicubic" => GridSampleMode::Cubic,
        m => return Err(format!("mode `{m}`")),
    };
    let padding = match a.string("padding_mode", "zeros").as_str() {
        "zeros" => GridPadding::Zeros,
        "border" => GridPadding::Border,
        "reflection" => GridPadding::Reflection,
        m => return Err(format!("padding_mode `{m}`")),
    };
    Ok(GridSample {
        mode,
        padding,
        align_corners: a.int("align_corners", 0) != 0,
    })
}

/// Lowers `op_type` if it belongs here.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    let a = ctx.attrs();
    Some(match op_type {
        "GridSample" => grid_sample(&a).map(|k| Lowered::same(k, 1)),
        "AffineGrid" => Ok(Lowered::same(
            AffineGrid {
                align_corners: a.int("align_corners", 0) != 0,
            },
            1,
        )),
        "Col2Im" => (|| {
            Ok(Lowered::same(
                Col2Im {
                    strides: int_list(&a, "strides")?,
                    pads: int_list(&a, "pads")?,
                    dilations: int_list(&a, "dilations")?,
                },
                1,
            ))
        })(),
        "CenterCropPad" => {
            int_list(&a, "axes").map(|axes| Lowered::same(CenterCropPad { axes }, 1))
        }
        "SpaceToDepth" => {
            block(&a).map(|(blocksize, mode)| Lowered::same(SpaceToDepth { blocksize, mode }, 1))
        }
        "DepthToSpace" => {
            block(&a).map(|(blocksize, mode)| Lowered::same(DepthToSpace { blocksize, mode }, 1))
        }
        _ => return None,
    })
}
