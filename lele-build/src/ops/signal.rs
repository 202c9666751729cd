//! Lowering of the signal operators: `DFT`, `STFT`, the windows and
//! `MelWeightMatrix`.
use lele_kernels::ops::signal::dft::Dft;
use lele_kernels::ops::signal::mel::MelWeightMatrix;
use lele_kernels::ops::signal::stft::Stft;
use lele_kernels::ops::signal::window::{Window, WindowKind};

use super::math::dtype_attr;
use super::{LowerCtx, LowerResult, Lowered};
use crate::ir::{OutDType, Tensor};

/// Lowers `op_type` if it belongs here.
pub fn lower(op_type: &str, ctx: &mut LowerCtx<'_>) -> Option<LowerResult> {
    let a = ctx.attrs();
    let flag = |name: &str, default: i64| a.int(name, default) != 0;
    let out_dtype = || dtype_attr(a.int("output_datatype", 1));
    let window = |kind: WindowKind| -> LowerResult {
        let dtype = out_dtype()?;
        Ok(Lowered::with(
            Window {
                kind,
                periodic: flag("periodic", 1),
                dtype,
            },
            vec![OutDType::Fixed(dtype)],
        ))
    };
    Some(match op_type {
        "DFT" => {
            let k = Dft {
                inverse: flag("inverse", 0),
                onesided: flag("onesided", 0),
            };
            // Before opset 20 the axis was an attribute (default 1); it
            // becomes input 2 as in opset 20.
            if ctx.opset < 20 {
                let axis = a.int("axis", 1);
                match Tensor::from_values::<i64>(&[], &[axis]) {
                    Some(t) => ctx.set_const_input(2, t),
                    None => return Some(Err("bad axis".into())),
                }
            }
            Ok(Lowered::same(k, 1))
        }
        "STFT" => Ok(Lowered::same(
            Stft {
                onesided: flag("onesided", 1),
            },
            1,
        )),
        "HannWindow" => window(WindowKind::Hann),
        "HammingWindow" => window(WindowKind::Hamming),
        "BlackmanWindow" => window(WindowKind::Blackman),
        "MelWeightMatrix" => out_dtype()
            .map(|dtype| Lowered::with(MelWeightMatrix { dtype }, vec![OutDType::Fixed(dtype)])),
        _ => return None,
    })
}
