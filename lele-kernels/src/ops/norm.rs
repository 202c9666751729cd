//! Normalizations: `BatchNormalization` (inference), `LayerNormalization`,
//! `InstanceNormalization`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{check_f32, f32_in, f32_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// Checks that `t` is an f32 vector of `n` elements.
fn check_vec(t: &TensorRef<'_>, n: usize, op: &'static str) -> Result<(), KernelError> {
    check_f32(t, op)?;
    if t.numel() != n {
        return Err(KernelError::Shape {
            op,
            msg: "per-channel parameter has the wrong length",
        });
    }
    Ok(())
}

fn only_first_output(n: usize, op: &'static str) -> Result<(), KernelError> {
    if n != 1 {
        return Err(KernelError::Invalid {
            op,
            msg: "only the first output (inference mode) is supported",
        });
    }
    Ok(())
}

/// Mean and `1 / sqrt(var + eps)` of `x` (two passes).
#[inline]
fn moments(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// ONNX `BatchNormalization` in inference mode:
/// `Y = (X - mean) / sqrt(var + epsilon) * scale + B`, per channel (dim 1).
///
/// Inputs: `X` `[N, C, …]`, `scale`, `B`, `input_mean`, `input_var` (each
/// `[C]`). Output: `Y` only (training-mode outputs are rejected).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormalization {
    /// Added to the variance.
    pub epsilon: f32,
}
crate::to_rust_struct!(ops::norm::BatchNormalization { epsilon });

impl BatchNormalization {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize, usize), KernelError> {
        const OP: &str = "BatchNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        let c = x.shape.dim(1);
        for i in 1..5 {
            check_vec(input(inputs, i, OP)?, c, OP)?;
        }
        let inner = x.shape.dims()[2..].iter().product();
        Ok((x.shape, x.shape.dim(0), c, inner))
    }
}

impl Kernel for BatchNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "BatchNormalization")?;
        outputs[0] = Self::dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "BatchNormalization";
        only_first_output(outputs.len(), OP)?;
        let (_, n, c, inner) = Self::dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let mean = f32_in(input(inputs, 3, OP)?, OP)?;
        let var = f32_in(input(inputs, 4, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != n * c * inner || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        if inner == 0 {
            return Ok(());
        }
        for (i, (xp, yp)) in x
            .chunks_exact(inner)
            .zip(y.chunks_exact_mut(inner))
            .enumerate()
        {
            let ch = i % c;
            let a = scale[ch] / (var[ch] + self.epsilon).sqrt();
            let b = bias[ch] - mean[ch] * a;
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * a + b;
            }
        }
        Ok(())
    }
}

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
        let outer: usize = x.shape.dims()[..a].iter().product();
        let d: usize = x.shape.dims()[a..].iter().product();
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
        for (r, (xr, yr)) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)).enumerate() {
            let (mean, inv) = moments(xr, self.epsilon);
            if let Some(m) = mean_out.as_deref_mut() {
                m[r] = mean;
            }
            if let Some(s) = inv_out.as_deref_mut() {
                s[r] = inv;
            }
            let sn = scale.len();
            match bias {
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
        Ok(())
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

/// ONNX `InstanceNormalization`: per `(n, c)` normalization over the
/// spatial dims, then per-channel `scale` and `B`.
///
/// Inputs: `input` `[N, C, …]`, `scale` `[C]`, `B` `[C]`. Output: `output`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceNormalization {
    /// Added to the variance.
    pub epsilon: f32,
}
crate::to_rust_struct!(ops::norm::InstanceNormalization { epsilon });

impl InstanceNormalization {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, usize, usize), KernelError> {
        const OP: &str = "InstanceNormalization";
        let x = input(inputs, 0, OP)?;
        check_f32(x, OP)?;
        if x.shape.rank() < 2 {
            return Err(KernelError::Shape {
                op: OP,
                msg: "expected an input of rank >= 2",
            });
        }
        let c = x.shape.dim(1);
        check_vec(input(inputs, 1, OP)?, c, OP)?;
        check_vec(input(inputs, 2, OP)?, c, OP)?;
        Ok((x.shape, c, x.shape.dims()[2..].iter().product()))
    }
}

impl Kernel for InstanceNormalization {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        only_first_output(outputs.len(), "InstanceNormalization")?;
        outputs[0] = Self::dims(inputs)?.0;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "InstanceNormalization";
        let (s, c, inner) = Self::dims(inputs)?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let scale = f32_in(input(inputs, 1, OP)?, OP)?;
        let bias = f32_in(input(inputs, 2, OP)?, OP)?;
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        if x.len() != s.numel() || y.len() != x.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        if inner == 0 {
            return Ok(());
        }
        for (i, (xp, yp)) in x
            .chunks_exact(inner)
            .zip(y.chunks_exact_mut(inner))
            .enumerate()
        {
            let ch = i % c;
            let (mean, inv) = moments(xp, self.epsilon);
            let a = inv * scale[ch];
            let b = bias[ch] - mean * a;
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * a + b;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::gemm::testutil::*;
    use alloc::vec::Vec;

    #[test]
    fn batch_norm() {
        let x = rand_vec(2 * 3 * 4, 1);
        let sc = [0.5f32, 1.0, 2.0];
        let b = [0.1f32, -0.2, 0.3];
        let m = [0.0f32, 0.5, -0.5];
        let v = [1.0f32, 0.25, 4.0];
        let ins = [
            Some(t(&x, &[2, 3, 2, 2])),
            Some(t(&sc, &[3])),
            Some(t(&b, &[3])),
            Some(t(&m, &[3])),
            Some(t(&v, &[3])),
        ];
        let bn = BatchNormalization { epsilon: 1e-5 };
        let out = run(&bn, &ins, 1).unwrap();
        let want: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let c = (i / 4) % 3;
                (xv - m[c]) / (v[c] + 1e-5).sqrt() * sc[c] + b[c]
            })
            .collect();
        assert_close(&out[0].1, &want, 1e-6);
        assert!(run(&bn, &ins, 3).is_err());
        assert!(run(&bn, &ins[..4], 1).is_err());
    }

    #[test]
    fn layer_norm_reference_literal() {
        // import numpy as np
        // x = np.array([[1, 2, 3, 4], [2, 2, 2, 6]], dtype=np.float32)
        // m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
        // y = (x - m) / np.sqrt(v + 1e-5) * np.array([1, 2, 1, 0.5]) + 0.5
        // print(y.ravel(), m.ravel(), 1 / np.sqrt(v + 1e-5).ravel())
        // -> [-0.84163547, -0.39442366, 0.94721183, 1.17081773, -0.07734931, -0.65469861, -0.07734931, 1.36602396]
        //    [2.5 3.0] [0.8944236, 0.5773493]
        let x = [1f32, 2., 3., 4., 2., 2., 2., 6.];
        let sc = [1f32, 2., 1., 0.5];
        let b = [0.5f32; 4];
        let ln = LayerNormalization {
            axis: -1,
            epsilon: 1e-5,
        };
        let ins = [Some(t(&x, &[2, 4])), Some(t(&sc, &[4])), Some(t(&b, &[4]))];
        let out = run(&ln, &ins, 3).unwrap();
        assert_eq!(out[1].0, vec![2, 1]);
        assert_close(
            &out[0].1,
            &[
                -0.84163547,
                -0.39442366,
                0.94721183,
                1.17081773,
                -0.07734931,
                -0.65469861,
                -0.07734931,
                1.36602396,
            ],
            1e-5,
        );
        assert_close(&out[1].1, &[2.5, 3.0], 1e-6);
        assert_close(&out[2].1, &[0.8944236, 0.5773493], 1e-5);
    }

    #[test]
    fn layer_norm_axis_and_broadcast() {
        let x = rand_vec(2 * 3 * 5, 4);
        let sc = rand_vec(15, 5);
        let ln = LayerNormalization {
            axis: 1,
            epsilon: 1e-3,
        };
        let out = run(
            &ln,
            &[Some(t(&x, &[2, 3, 5])), Some(t(&sc, &[3, 5])), None],
            1,
        )
        .unwrap();
        for r in 0..2 {
            let xr = &x[r * 15..(r + 1) * 15];
            let mean = xr.iter().sum::<f32>() / 15.0;
            let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 15.0;
            let want: Vec<f32> = xr
                .iter()
                .zip(&sc)
                .map(|(v, s)| (v - mean) / (var + 1e-3).sqrt() * s)
                .collect();
            assert_close(&out[0].1[r * 15..(r + 1) * 15], &want, 1e-5);
        }
        // Scale [5] and B [1, 5] broadcast over the [3, 5] block.
        let s5 = rand_vec(5, 6);
        let b5 = rand_vec(5, 7);
        let out = run(
            &ln,
            &[
                Some(t(&x, &[2, 3, 5])),
                Some(t(&s5, &[5])),
                Some(t(&b5, &[1, 5])),
            ],
            1,
        )
        .unwrap();
        for r in 0..2 {
            let xr = &x[r * 15..(r + 1) * 15];
            let mean = xr.iter().sum::<f32>() / 15.0;
            let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 15.0;
            let want: Vec<f32> = xr
                .iter()
                .enumerate()
                .map(|(i, v)| (v - mean) / (var + 1e-3).sqrt() * s5[i % 5] + b5[i % 5])
                .collect();
            assert_close(&out[0].1[r * 15..(r + 1) * 15], &want, 1e-5);
        }
        let bad = rand_vec(3, 6);
        assert!(
            run(
                &ln,
                &[Some(t(&x, &[2, 3, 5])), Some(t(&bad, &[3, 1])), None],
                1
            )
            .is_err()
        );
        assert!(
            run(
                &ln,
                &[Some(t(&x, &[2, 3, 5])), Some(t(&bad, &[3])), None],
                1
            )
            .is_err()
        );
    }

    #[test]
    fn instance_norm() {
        let x = rand_vec(2 * 3 * 6, 7);
        let sc = [1f32, 2., 3.];
        let b = [0f32, 1., -1.];
        let op = InstanceNormalization { epsilon: 1e-5 };
        let out = run(
            &op,
            &[
                Some(t(&x, &[2, 3, 6])),
                Some(t(&sc, &[3])),
                Some(t(&b, &[3])),
            ],
            1,
        )
        .unwrap();
        for p in 0..6 {
            let xr = &x[p * 6..(p + 1) * 6];
            let mean = xr.iter().sum::<f32>() / 6.0;
            let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 6.0;
            let want: Vec<f32> = xr
                .iter()
                .map(|v| (v - mean) / (var + 1e-5).sqrt() * sc[p % 3] + b[p % 3])
                .collect();
            assert_close(&out[0].1[p * 6..(p + 1) * 6], &want, 1e-5);
        }
    }
}
