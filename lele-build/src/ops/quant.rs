//! Lowering of the quantization operators.
use lele_kernels::ops::conv::AutoPad;
use lele_kernels::ops::quant::{
    ConvInteger, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QConvAttrs, QLinearConv,
    QLinearMatMul, QuantizeLinear,
};
use lele_kernels::{DType, IntList};

use super::{Attrs, LowerCtx, LowerResult, Lowered};
use crate::ir::OutDType;

/// The integer dtypes quantized values may have.
const QUANT_DTYPES: [DType; 4] = [DType::I8, DType::U8, DType::I16, DType::U16];

/// ONNX dtype code of an attribute (`output_dtype`, `precision`), 0 = unset.
fn dtype_attr(a: &Attrs<'_>, name: &str) -> Result<Option<DType>, String> {
    match a.int(name, 0) {
        0 => Ok(None),
        code => DType::from_onnx_code(i32::try_from(code).unwrap_or(-1))
            .map(Some)
            .ok_or_else(|| {
                format!("{name} {code} (float8, 4-bit and 2-bit types are not supported)")
            }),
    }
}

/// The dtype of input `i`, if present and known.
fn input_dtype(ctx: &LowerCtx<'_>, i: usize) -> Option<DType> {
    ctx.inputs
        .get(i)
        .copied()
        .flatten()
        .and_then(|v| ctx.graph.values[v].dtype)
}

fn has_input(ctx: &LowerCtx<'_>, i: usize) -> bool {
    ctx.inputs.get(i).copied().flatten().is_some()
}

fn block_size(a: &Attrs<'_>) -> Result<usize, String> {
    usize::try_from(a.int("block_size", 0)).map_err(|_| "negative block_size".to_string())
}

fn auto_pad(a: &Attrs<'_>) -> Result<AutoPad, String> {
    Ok(match a.string("auto_pad", "NOTSET").as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        s => return Err(format!("auto_pad `{s}`")),
    })
}

fn int_list(a: &Attrs<'_>, name: &str) -> Result<IntList, String> {
    let v = a.ints_opt(name).unwrap_or(&[]);
    if v.iter().any(|&x| x < 0) {
        return Err(format!("negative {name}"));
    }
    IntList::new(v).map_err(|e| format!("{name}: {e}"))
}

fn conv_attrs(a: &Attrs<'_>) -> Result<QConvAttrs, String> {
    Ok(QConvAttrs {
        group: usize::try_from(a.int("group", 1)).map_err(|_| "bad group")?,
        kernel: int_list(a, "kernel_shape")?,
        strides: int_list(a, "strides")?,
        pads: int_list(a, "pads")?,
        dilations: int_list(a, "dilations")?,
        auto_pad: auto_pad(a)?,
    })
}

/// Lowers `op_type` if it belongs here.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    let a = ctx.attrs();
    Some(match op_type {
        "QuantizeLinear" => (|| {
            let output_dtype = dtype_attr(&a, "output_dtype")?;
            let precision = dtype_attr(&a, "precision")?;
            if let Some(p) = precision
                && !matches!(p, DType::F32 | DType::F16 | DType::BF16)
            {
                return Err(format!("precision {p:?}"));
            }
            let zp = has_input(ctx, 2);
            let out = if zp {
                let z = input_dtype(ctx, 2);
                if let (Some(o), Some(z)) = (output_dtype, z)
                    && o != z
                {
                    return Err(format!(
                        "output_dtype {o:?} differs from the zero point's dtype {z:?}"
                    ));
                }
                z.or(output_dtype)
            } else {
                Some(output_dtype.unwrap_or(DType::U8))
            };
            if let Some(d) = out
                && !QUANT_DTYPES.contains(&d)
            {
                return Err(format!("quantization to {d:?}"));
            }
            let k = QuantizeLinear {
                axis: a.int("axis", 1),
                block_size: block_size(&a)?,
                precision,
            };
            Ok(match (zp, out) {
                (true, _) => Lowered::with(k, vec![OutDType::Input(2)]),
                (false, o) => Lowered::with(k, vec![OutDType::Fixed(o.unwrap_or(DType::U8))]),
            })
        })(),
        "DequantizeLinear" => (|| {
            if let Some(x) = input_dtype(ctx, 0)
                && !matches!(
                    x,
                    DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
                )
            {
                return Err(format!("dequantization of {x:?}"));
            }
            let out = match dtype_attr(&a, "output_dtype")? {
                Some(d @ (DType::F32 | DType::F16 | DType::BF16)) => OutDType::Fixed(d),
                Some(d) => return Err(format!("output_dtype {d:?}")),
                None => OutDType::Input(1),
            };
            let k = DequantizeLinear {
                axis: a.int("axis", 1),
                block_size: block_size(&a)?,
            };
            Ok(Lowered::with(k, vec![out]))
        })(),
        "DynamicQuantizeLinear" => Ok(Lowered::with(
            DynamicQuantizeLinear,
            vec![
                OutDType::Fixed(DType::U8),
                OutDType::Fixed(DType::F32),
                OutDType::Fixed(DType::U8),
            ],
        )),
        "MatMulInteger" => Ok(Lowered::with(
            MatMulInteger,
            vec![OutDType::Fixed(DType::I32)],
        )),
        "QLinearMatMul" => Ok(Lowered::with(QLinearMatMul, vec![OutDType::Input(7)])),
        "ConvInteger" => conv_attrs(&a)
            .map(|attrs| Lowered::with(ConvInteger { attrs }, vec![OutDType::Fixed(DType::I32)])),
        "QLinearConv" => conv_attrs(&a)
            .map(|attrs| Lowered::with(QLinearConv { attrs }, vec![OutDType::Input(7)])),
        _ => return None,
    })
}
