//! ONNX `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (f32).
//!
//! Input `[N, C, d…]` (log-probabilities, or scores for the softmax
//! variant), target `[N, d…]` (int32/int64 class indices), optional weight
//! `[C]`. A target equal to `ignore_index` contributes 0. `mean` divides by
//! the summed weights of the counted elements — except, as in the ONNX
//! reference, for NLL with `ignore_index = -1` and no weight, which divides
//! by the element count.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{f32_in, f32_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// How the per-element losses are reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossReduction {
    /// Per-element losses, shape of the target.
    None,
    /// Their sum (a scalar).
    Sum,
    /// Their weighted mean (a scalar).
    Mean,
}
crate::to_rust_enum!(ops::loss::LossReduction { None, Sum, Mean });

/// ONNX `NegativeLogLikelihoodLoss`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NegativeLogLikelihoodLoss {
    /// Reduction.
    pub reduction: LossReduction,
    /// Whether `ignore_index` is set.
    pub has_ignore: bool,
    /// The ignored class.
    pub ignore_index: i64,
}
crate::to_rust_struct!(ops::loss::NegativeLogLikelihoodLoss {
    reduction,
    has_ignore,
    ignore_index
});

/// ONNX `SoftmaxCrossEntropyLoss`: log-softmax over dim 1, then the NLL
/// loss; optional second output `log_prob`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftmaxCrossEntropyLoss {
    /// Reduction.
    pub reduction: LossReduction,
    /// Whether `ignore_index` is set.
    pub has_ignore: bool,
    /// The ignored class.
    pub ignore_index: i64,
}
crate::to_rust_struct!(ops::loss::SoftmaxCrossEntropyLoss {
    reduction,
    has_ignore,
    ignore_index
});

struct Dims {
    n: usize,
    c: usize,
    d: usize,
    x: Shape,
    target: Shape,
}

fn dims(op: &'static str, inputs: &[Option<TensorRef<'_>>]) -> Result<Dims, KernelError> {
    let x = input(inputs, 0, op)?;
    let t = input(inputs, 1, op)?;
    let xd = x.shape.dims();
    let td = t.shape.dims();
    if xd.len() < 2 || td.len() + 1 != xd.len() || td[0] != xd[0] || td[1..] != xd[2..] {
        return Err(KernelError::Shape {
            op,
            msg: "expected input [N, C, d…] and target [N, d…]",
        });
    }
    if !matches!(t.dtype, DType::I32 | DType::I64) {
        return Err(KernelError::UnsupportedDType { op, dtype: t.dtype });
    }
    if let Some(w) = opt_input(inputs, 2)
        && w.shape.dims() != [xd[1]]
    {
        return Err(KernelError::Shape {
            op,
            msg: "weight must have shape [C]",
        });
    }
    Ok(Dims {
        n: xd[0],
        c: xd[1],
        d: xd[2..].iter().product(),
        x: x.shape,
        target: t.shape,
    })
}

fn loss_shape(r: LossReduction, target: Shape) -> Shape {
    match r {
        LossReduction::None => target,
        _ => Shape::SCALAR,
    }
}

/// The NLL loss of log-probabilities `lp` (`[N, C, D]` flattened).
#[allow(clippy::too_many_arguments)]
fn nll(
    op: &'static str,
    dm: &Dims,
    lp: &[f32],
    target: &TensorRef<'_>,
    weight: Option<&[f32]>,
    ignore: Option<i64>,
    reduction: LossReduction,
    weighted_mean: bool,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let total = dm.n * dm.d;
    if out.len()
        != if reduction == LossReduction::None {
            total
        } else {
            1
        }
    {
        return Err(KernelError::Buffer { op });
    }
    let (mut sum, mut wsum) = (0f64, 0f64);
    enum Targets<'t> {
        I32(&'t [i32]),
        I64(&'t [i64]),
    }
    let targets = match target.dtype {
        DType::I32 => Targets::I32(target.typed::<i32>(op)?),
        _ => Targets::I64(target.typed::<i64>(op)?),
    };
    let read = |k: usize| -> i64 {
        match targets {
            Targets::I32(t) => t[k] as i64,
            Targets::I64(t) => t[k],
        }
    };
    for i in 0..dm.n {
        for j in 0..dm.d {
            let k = i * dm.d + j;
            let t = read(k);
            let (l, w) = if ignore == Some(t) {
                (0f32, 0f32)
            } else {
                if t < 0 || t as usize >= dm.c {
                    return Err(KernelError::Invalid {
                        op,
                        msg: "target class out of range",
                    });
                }
                let c = t as usize;
                let w = weight.map_or(1.0, |w| w[c]);
                (-lp[(i * dm.c + c) * dm.d + j] * w, w)
            };
            if reduction == LossReduction::None {
                out[k] = l;
            }
            sum += l as f64;
            wsum += w as f64;
        }
    }
    match reduction {
        LossReduction::None => {}
        LossReduction::Sum => out[0] = sum as f32,
        LossReduction::Mean => {
            out[0] = if weighted_mean {
                (sum / wsum) as f32
            } else {
                (sum / total.max(1) as f64) as f32
            }
        }
    }
    Ok(())
}

impl Kernel for NegativeLogLikelihoodLoss {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let dm = dims("NegativeLogLikelihoodLoss", inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "NegativeLogLikelihoodLoss",
            msg: "expected one output",
        })? = loss_shape(self.reduction, dm.target);
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "NegativeLogLikelihoodLoss";
        let dm = dims(OP, inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let weight = match opt_input(inputs, 2) {
            Some(w) => Some(f32_in(w, OP)?),
            None => None,
        };
        let ignore = self.has_ignore.then_some(self.ignore_index);
        let weighted_mean = weight.is_some() || ignore != Some(-1);
        let t = input(inputs, 1, OP)?;
        let out = f32_out(output(outputs, 0, OP)?, OP)?;
        nll(
            OP,
            &dm,
            x,
            t,
            weight,
            ignore,
            self.reduction,
            weighted_mean,
            out,
        )
    }
}

impl Kernel for SoftmaxCrossEntropyLoss {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let dm = dims("SoftmaxCrossEntropyLoss", inputs)?;
        if outputs.is_empty() || outputs.len() > 2 {
            return Err(KernelError::Invalid {
                op: "SoftmaxCrossEntropyLoss",
                msg: "expected 1 or 2 outputs",
            });
        }
        outputs[0] = loss_shape(self.reduction, dm.target);
        if let Some(o) = outputs.get_mut(1) {
            *o = dm.x;
        }
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        inputs
            .first()
            .and_then(|x| x.as_ref())
            .map_or(0, |x| x.shape.numel() * 4)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "SoftmaxCrossEntropyLoss";
        let dm = dims(OP, inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let lp: &mut [f32] = bytemuck::try_cast_slice_mut(
            scratch
                .get_mut(..x.len() * 4)
                .ok_or(KernelError::Buffer { op: OP })?,
        )
        .map_err(|_| KernelError::Buffer { op: OP })?;
        // log_softmax over C for every (n, d).
        for i in 0..dm.n {
            for j in 0..dm.d {
                let at = |c: usize| (i * dm.c + c) * dm.d + j;
                let max = (0..dm.c)
                    .map(|c| x[at(c)])
                    .fold(f32::NEG_INFINITY, f32::max);
                let sum: f32 = (0..dm.c).map(|c| (x[at(c)] - max).exp()).sum();
                let log_sum = sum.ln();
                for c in 0..dm.c {
                    lp[at(c)] = x[at(c)] - max - log_sum;
                }
            }
        }
        let weight = match opt_input(inputs, 2) {
            Some(w) => Some(f32_in(w, OP)?),
            None => None,
        };
        let ignore = self.has_ignore.then_some(self.ignore_index);
        let weighted_mean = weight.is_some() || ignore.is_some();
        let t = input(inputs, 1, OP)?;
        let (first, rest) = outputs.split_at_mut(1.min(outputs.len()));
        let out = f32_out(first.first_mut().ok_or(KernelError::Buffer { op: OP })?, OP)?;
        nll(
            OP,
            &dm,
            lp,
            t,
            weight,
            ignore,
            self.reduction,
            weighted_mean,
            out,
        )?;
        if let Some(o) = rest.first_mut() {
            let o = f32_out(o, OP)?;
            if o.len() != lp.len() {
                return Err(KernelError::Buffer { op: OP });
            }
            o.copy_from_slice(lp);
        }
        Ok(())
    }
}
