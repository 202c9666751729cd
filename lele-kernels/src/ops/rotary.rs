//! ONNX `RotaryEmbedding` (RoPE) and `SwiGLU`, the elementwise building
//! blocks of transformer decoders.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{check_data, check_out};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "RotaryEmbedding";

/// ONNX `RotaryEmbedding`: inputs `X` (`[batch, heads, seq, head]`, or
/// `[batch, seq, hidden]` with `num_heads`), `cos_cache` and `sin_cache`
/// (`[max_pos, rotary_dim/2]` indexed by `position_ids`, or
/// `[batch, seq, rotary_dim/2]` without them), optional `position_ids`
/// (`[batch, seq]`, int64). The first `rotary_dim` values of each head are
/// rotated pairwise (halves, or even/odd when `interleaved`); the rest are
/// copied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotaryEmbedding {
    /// Heads of a rank-3 input (0 for rank 4).
    pub num_heads: usize,
    /// Rotated values per head (0: all).
    pub rotary_dim: usize,
    /// Rotate (even, odd) pairs instead of the two halves.
    pub interleaved: bool,
}
crate::to_rust_struct!(ops::rotary::RotaryEmbedding {
    num_heads,
    rotary_dim,
    interleaved
});

/// `(batch, seq, heads, head, rotary_dim, rank4)`.
type Geometry = (usize, usize, usize, usize, usize, bool);

impl RotaryEmbedding {
    fn geometry(&self, x: &TensorRef<'_>) -> Result<Geometry, KernelError> {
        let bad = |msg| KernelError::Shape { op: OP, msg };
        let (b, s, h, d, rank4) = match *x.shape.dims() {
            [b, h, s, d] => (b, s, h, d, true),
            [b, s, hidden] => {
                if self.num_heads == 0 || hidden % self.num_heads != 0 {
                    return Err(bad(
                        "num_heads must divide the hidden size of a rank-3 input",
                    ));
                }
                (b, s, self.num_heads, hidden / self.num_heads, false)
            }
            _ => return Err(bad("X must have rank 3 or 4")),
        };
        let rd = if self.rotary_dim == 0 {
            d
        } else {
            self.rotary_dim
        };
        if rd > d || rd % 2 != 0 {
            return Err(bad(
                "rotary_embedding_dim must be even and at most the head size",
            ));
        }
        Ok((b, s, h, d, rd, rank4))
    }
}

impl Kernel for RotaryEmbedding {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        self.geometry(x)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = x.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        let (cos, sin) = (input(inputs, 1, OP)?, input(inputs, 2, OP)?);
        for t in [x, cos, sin] {
            check_data(t, OP)?;
        }
        let (b, s, h, d, rd, rank4) = self.geometry(x)?;
        let half = rd / 2;
        let pos = opt_input(inputs, 3);
        let positions = match pos {
            Some(p) => {
                if p.numel() != b * s {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "position_ids must have shape [batch, seq]",
                    });
                }
                Some(p.typed::<i64>(OP)?)
            }
            None => None,
        };
        let rows = cos.numel() / half.max(1);
        if cos.shape != sin.shape || cos.shape.dims().last() != Some(&half) {
            return Err(KernelError::Shape {
                op: OP,
                msg: "cos/sin caches must end in rotary_dim / 2",
            });
        }
        if positions.is_none() && rows != b * s {
            return Err(KernelError::Shape {
                op: OP,
                msg: "without position_ids the caches must be [batch, seq, rotary_dim/2]",
            });
        }
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &x.shape, OP)?;
        dispatch!(x.dtype, OP, [F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16], |T| {
            let (xv, cv, sv) = (x.typed::<T>(OP)?, cos.typed::<T>(OP)?, sin.typed::<T>(OP)?);
            let y = out.typed::<T>(OP)?;
            for bi in 0..b {
                for si in 0..s {
                    let row = match positions {
                        Some(p) => {
                            let v = p[bi * s + si];
                            usize::try_from(v).ok().filter(|&r| r < rows).ok_or(
                                KernelError::IndexOutOfRange { op: OP },
                            )?
                        }
                        None => bi * s + si,
                    };
                    let (c, sn) = (&cv[row * half..][..half], &sv[row * half..][..half]);
                    for hi in 0..h {
                        let off = if rank4 {
                            ((bi * h + hi) * s + si) * d
                        } else {
                            ((bi * s + si) * h + hi) * d
                        };
                        let (xs, ys) = (&xv[off..off + d], &mut y[off..off + d]);
                        ys[rd..].copy_from_slice(&xs[rd..]);
                        for i in 0..half {
                            let (i1, i2) = if self.interleaved {
                                (2 * i, 2 * i + 1)
                            } else {
                                (i, i + half)
                            };
                            let (x1, x2) = (xs[i1].to_f64(), xs[i2].to_f64());
                            let (cc, ss) = (c[i].to_f64(), sn[i].to_f64());
                            ys[i1] = T::from_f64(cc * x1 - ss * x2);
                            ys[i2] = T::from_f64(ss * x1 + cc * x2);
                        }
                    }
                }
            }
            Ok(())
        })
    }
}

/// ONNX `SwiGLU`: `Y = A · sigmoid(alpha · A) · B` for same-shaped `A`, `B`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwiGlu {
    /// The Swish slope.
    pub alpha: f32,
}
crate::to_rust_struct!(ops::rotary::SwiGlu { alpha });

impl Kernel for SwiGlu {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (a, b) = (input(inputs, 0, "SwiGLU")?, input(inputs, 1, "SwiGLU")?);
        if a.shape != b.shape {
            return Err(KernelError::Shape {
                op: "SwiGLU",
                msg: "A and B must have the same shape",
            });
        }
        *outputs.first_mut().ok_or(KernelError::MissingInput {
            op: "SwiGLU",
            index: 0,
        })? = a.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const SW: &str = "SwiGLU";
        let (a, b) = (input(inputs, 0, SW)?, input(inputs, 1, SW)?);
        check_data(a, SW)?;
        check_data(b, SW)?;
        let out = output(outputs, 0, SW)?;
        check_out(out, a.dtype, &a.shape, SW)?;
        let alpha = self.alpha as f64;
        dispatch!(a.dtype, SW, [F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16], |T| {
            let (av, bv, y) = (a.typed::<T>(SW)?, b.typed::<T>(SW)?, out.typed::<T>(SW)?);
            for ((y, &x), &g) in y.iter_mut().zip(av).zip(bv) {
                let x = x.to_f64();
                *y = T::from_f64(x / (1.0 + (-alpha * x).exp()) * g.to_f64());
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::test_util::{Owned, run_kernel};

    /// Direct RoPE of one head vector.
    fn rope(x: &[f32], c: &[f32], s: &[f32], rd: usize, interleaved: bool) -> Vec<f32> {
        let mut y = x.to_vec();
        for i in 0..rd / 2 {
            let (i1, i2) = if interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + rd / 2)
            };
            y[i1] = c[i] * x[i1] - s[i] * x[i2];
            y[i2] = s[i] * x[i1] + c[i] * x[i2];
        }
        y
    }

    #[test]
    fn rotary_rank3_with_positions_matches_a_direct_rotation() {
        // batch 1, seq 2, 2 heads of 6, rotary_dim 4, caches of 3 positions.
        let x: Vec<f32> = (0..24).map(|v| v as f32 * 0.25 - 2.0).collect();
        let cos: Vec<f32> = (0..6).map(|v| (v as f32 * 0.3).cos()).collect();
        let sin: Vec<f32> = (0..6).map(|v| (v as f32 * 0.3).sin()).collect();
        let pos = [2i64, 0];
        for interleaved in [false, true] {
            let k = RotaryEmbedding {
                num_heads: 2,
                rotary_dim: 4,
                interleaved,
            };
            let y = run_kernel(
                &k,
                &[
                    Some(&Owned::new(&[1, 2, 12], &x)),
                    Some(&Owned::new(&[3, 2], &cos)),
                    Some(&Owned::new(&[3, 2], &sin)),
                    Some(&Owned::new(&[1, 2], &pos)),
                ],
                &[DType::F32],
            )
            .unwrap()[0]
                .to::<f32>();
            for (si, &p) in pos.iter().enumerate() {
                let p = p as usize;
                for h in 0..2 {
                    let off = (si * 2 + h) * 6;
                    let want = rope(
                        &x[off..off + 6],
                        &cos[p * 2..],
                        &sin[p * 2..],
                        4,
                        interleaved,
                    );
                    for (g, w) in y[off..off + 6].iter().zip(&want) {
                        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn swiglu_is_swish_times_value() {
        let a = Owned::new(&[3], &[-1.0f32, 0.5, 2.0]);
        let b = Owned::new(&[3], &[2.0f32, -1.0, 0.25]);
        let y = run_kernel(&SwiGlu { alpha: 1.5 }, &[Some(&a), Some(&b)], &[DType::F32]).unwrap();
        for ((g, &x), &v) in y[0]
            .to::<f32>()
            .iter()
            .zip(&[-1.0f32, 0.5, 2.0])
            .zip(&[2.0f32, -1.0, 0.25])
        {
            let want = x / (1.0 + (-1.5 * x).exp()) * v;
            assert!((g - want).abs() < 1e-6);
        }
    }
}
