//! `LayerNormalization` and `RMSNormalization`: statistics over the trailing
//! dims `axis..`.
use super::{moments, moments_lanes};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::Shape;
use crate::simd::{Simd, SimdKernel, dispatch};
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `LayerNormalization`: normalizes over dims `axis..` (statistics in
/// f32), then applies `Scale` and `B`.
///
/// Inputs: `X`, `Scale`, optional `B`; `Scale`/`B` broadcast to the
/// normalized dims `X.shape[axis..]` when, without leading 1s, their shape is
/// a suffix of those dims (e.g. `[D]`, `[1, D]`, the full block or a scalar);
/// other broadcasts (inner 1s) are rejected.
/// Outputs: `Y`, optional `Mean`, optional `InvStdDev` (shape of `X` with
/// dims `axis..` set to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerNormalization {
    /// First normalized axis (negative counts from the end).
    pub axis: i64,
    /// Added to the variance.
    pub epsilon: f32,
}
crate::to_rust_struct!(ops::norm::LayerNormalization { axis, epsilon });

impl LayerNormalization {
    /// `(shape, axis, outer, norm size)`.
    fn dims(
        &self,
        inputs: &[Option<TensorRef<'_>>],
    ) -> Result<(Shape, usize, usize, usize), KernelError> {
        const OP: &str = "LayerNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        let a = x.shape.axis(self.axis, OP)?;
        // Checked: either side's product can overflow while a zero dim on
        // the other keeps the whole count small.
        let product = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |p, &v| p.checked_mul(v))
                .ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "dims too large",
                })
        };
        let outer = product(&x.shape.dims()[..a])?;
        let d = product(&x.shape.dims()[a..])?;
        let params = [Some(input(inputs, 1, OP)?), opt_input(inputs, 2)];
        for p in params.into_iter().flatten() {
            check_f32(p, OP)?;
            // Without its leading 1s the shape must be a suffix of the
            // normalized dims (so element i of the block uses i % numel).
            let pd = p.shape.dims();
            let first = pd.iter().position(|&v| v != 1).unwrap_or(pd.len());
            let core = &pd[first..];
            let xd = &x.shape.dims()[a..];
            let ok = core.len() <= xd.len() && core == &xd[xd.len() - core.len()..];
            if !ok {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "Scale/B do not broadcast to the normalized dims",
                });
            }
        }
        Ok((x.shape, a, outer, d))
    }
}

impl Kernel for LayerNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (s, a, ..) = self.dims(inputs)?;
        if outputs.is_empty() || outputs.len() > 3 {
            return Err(KernelError::Invalid {
                op: "LayerNormalization",
                msg: "expected 1 to 3 outputs",
            });
        }
        outputs[0] = s;
        let mut stat = s;
        for d in &mut stat.dims_mut()[a..] {
            *d = 1;
        }
        for o in &mut outputs[1..] {
            *o = stat;
        }
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "LayerNormalization";
        let (_, _, outer, d) = self.dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = match opt_input(inputs, 2) {
            Some(b) => Some(f32_in(b, OP)?),
            None => None,
        };
        if outputs.is_empty() || outputs.len() > 3 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "expected 1 to 3 outputs",
            });
        }
        let (first, stats) = outputs.split_at_mut(1);
        let y = f32_out(&mut first[0], OP)?;
        if x.len() != outer * d || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        let mut mean_out: Option<&mut [f32]> = None;
        let mut inv_out: Option<&mut [f32]> = None;
        for (i, t) in stats.iter_mut().enumerate() {
            let s = f32_out(t, OP)?;
            if s.len() != outer {
                return Err(KernelError::Buffer { op: OP });
            }
            if i == 0 {
                mean_out = Some(s);
            } else {
                inv_out = Some(s);
            }
        }
        if d == 0 {
            return Ok(());
        }
        let rows = Rows {
            x,
            d,
            scale,
            bias,
            epsilon: self.epsilon,
        };
        if let Err(k) = dispatch(VectorRows {
            rows: &rows,
            y,
            mean_out,
            inv_out,
        }) {
            rows.normalize(k.y, k.mean_out, k.inv_out);
        }
        Ok(())
    }
}

/// The rows of one `LayerNormalization` call and its parameters.
struct Rows<'a> {
    x: &'a [f32],
    d: usize,
    scale: &'a [f32],
    bias: Option<&'a [f32]>,
    epsilon: f32,
}

impl Rows<'_> {
    /// Normalizes every `d`-float row of `x` into `y`, its mean and
    /// reciprocal standard deviation into the optional outputs.
    fn normalize(&self, y: &mut [f32], mean_out: Option<&mut [f32]>, inv_out: Option<&mut [f32]>) {
        let mut outs = (mean_out, inv_out);
        let rows = self.x.chunks_exact(self.d).zip(y.chunks_exact_mut(self.d));
        for (r, (xr, yr)) in rows.enumerate() {
            self.write_row(r, xr, yr, moments(xr, self.epsilon), &mut outs);
        }
    }

    /// Row `r`'s statistics into the optional outputs and its normalized
    /// values into `yr`.
    #[inline(always)]
    fn write_row(
        &self,
        r: usize,
        xr: &[f32],
        yr: &mut [f32],
        (mean, inv): (f32, f32),
        (mean_out, inv_out): &mut (Option<&mut [f32]>, Option<&mut [f32]>),
    ) {
        let (d, scale, bias) = (self.d, self.scale, self.bias);
        if let Some(m) = mean_out.as_deref_mut() {
            m[r] = mean;
        }
        if let Some(s) = inv_out.as_deref_mut() {
            s[r] = inv;
        }
        let sn = scale.len();
        match bias {
            // The usual case: scale and bias cover the whole row.
            Some(b) if sn == d && b.len() == d => {
                for ((o, &v), (&g, &c)) in yr.iter_mut().zip(xr).zip(scale.iter().zip(b)) {
                    *o = (v - mean) * inv * g + c;
                }
            }
            None if sn == d => {
                for ((o, &v), &g) in yr.iter_mut().zip(xr).zip(scale) {
                    *o = (v - mean) * inv * g;
                }
            }
            Some(b) => {
                let bn = b.len();
                for (i, (o, &v)) in yr.iter_mut().zip(xr).enumerate() {
                    *o = (v - mean) * inv * scale[i % sn] + b[i % bn];
                }
            }
            None => {
                for (i, (o, &v)) in yr.iter_mut().zip(xr).enumerate() {
                    *o = (v - mean) * inv * scale[i % sn];
                }
            }
        }
    }
}

/// [`Rows::normalize`] on a vector backend, the statistics by
/// `moments_lanes`: the same operations in the same order (the same
/// partial sums, separate multiplies and adds), so the same results, and
/// the row loops compiled for the backend (a transformer's normalizations
/// gained from compiling the loop for the backend with more partial sums,
/// and again from computing the statistics in vectors).
struct VectorRows<'a, 'r> {
    rows: &'r Rows<'a>,
    y: &'r mut [f32],
    mean_out: Option<&'r mut [f32]>,
    inv_out: Option<&'r mut [f32]>,
}

impl SimdKernel for VectorRows<'_, '_> {
    type Output = ();
    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let VectorRows {
            rows,
            y,
            mean_out,
            inv_out,
        } = self;
        let mut outs = (mean_out, inv_out);
        let pairs = rows.x.chunks_exact(rows.d).zip(y.chunks_exact_mut(rows.d));
        for (r, (xr, yr)) in pairs.enumerate() {
            let stats = moments_lanes(s, xr, rows.epsilon);
            rows.write_row(r, xr, yr, stats, &mut outs);
        }
    }
}

/// ONNX `RMSNormalization`: `Y = X / sqrt(mean(X² over dims axis..) + epsilon) * Scale`
/// (statistics in f32).
///
/// Inputs: `X`, `Scale` (broadcast to the normalized dims like
/// [`LayerNormalization`]'s). Output: `Y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNormalization {
    /// First normalized axis (negative counts from the end).
    pub axis: i64,
    /// Added to the mean square.
    pub epsilon: f32,
}
crate::to_rust_struct!(ops::norm::RmsNormalization { axis, epsilon });

impl Kernel for RmsNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let ln = LayerNormalization {
            axis: self.axis,
            epsilon: self.epsilon,
        };
        let (s, ..) = ln.dims(&inputs[..inputs.len().min(2)])?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: "RMSNormalization",
            msg: "expected 1 output",
        })? = s;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "RMSNormalization";
        let ln = LayerNormalization {
            axis: self.axis,
            epsilon: self.epsilon,
        };
        let (_, _, outer, d) = ln.dims(&inputs[..inputs.len().min(2)])?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != outer * d || y.len() != x.len() || scale.is_empty() {
            return Err(KernelError::Buffer { op: OP });
        }
        if d == 0 {
            return Ok(());
        }
        let sn = scale.len();
        for (xr, yr) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)) {
            let ms = xr.iter().map(|v| v * v).sum::<f32>() / d as f32;
            let inv = 1.0 / (ms + self.epsilon).sqrt();
            for (i, (o, &v)) in yr.iter_mut().zip(xr).enumerate() {
                *o = v * inv * scale[i % sn];
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Rows, VectorRows};
    use crate::ops::test_util::rand_vec;
    use crate::simd::{Isa, dispatch_on};
    use alloc::vec;
    use alloc::vec::Vec;

    /// The vector row loop gives the portable one's results bit for bit on
    /// every backend this CPU runs: every row length 1..70 (all tails) and
    /// MiniLM's 384 and 385, with and without bias, with the statistics
    /// outputs.
    #[test]
    fn vector_rows_equal_portable_rows() {
        let rows = 3;
        let isas = crate::simd::runnable_isas();
        for isa in isas.into_iter().filter(|&i| i != Isa::Scalar) {
            for d in (1..70).chain([384, 385]) {
                let x: Vec<f32> = rand_vec(rows * d, d as u64)
                    .iter()
                    .map(|v| 3.0 * v + 0.5)
                    .collect();
                let scale = rand_vec(d, 100 + d as u64);
                let bias = rand_vec(d, 200 + d as u64);
                for b in [None, Some(&bias[..])] {
                    let r = Rows {
                        x: &x,
                        d,
                        scale: &scale,
                        bias: b,
                        epsilon: 1e-5,
                    };
                    let (mut y0, mut m0, mut i0) =
                        (vec![0f32; rows * d], vec![0f32; rows], vec![0f32; rows]);
                    let (mut y1, mut m1, mut i1) =
                        (vec![0f32; rows * d], vec![0f32; rows], vec![0f32; rows]);
                    r.normalize(&mut y0, Some(&mut m0), Some(&mut i0));
                    let k = VectorRows {
                        rows: &r,
                        y: &mut y1,
                        mean_out: Some(&mut m1),
                        inv_out: Some(&mut i1),
                    };
                    assert!(dispatch_on(isa, k).is_ok(), "{isa:?}");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&y0), bits(&y1), "{isa:?} d={d} bias={}", b.is_some());
                    assert_eq!(bits(&m0), bits(&m1), "{isa:?} d={d}");
                    assert_eq!(bits(&i0), bits(&i1), "{isa:?} d={d}");
                }
            }
        }
    }
}
