//! Multi-head scaled dot-product attention on head-interleaved tensors,
//! the kernel the decomposed attention of transformer exports (BERT,
//! MiniLM: `Transpose`s, `MatMul`, `Div`, `Add` mask, `Softmax`, `MatMul`,
//! `Transpose`) is fused into.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::gemm::{MatRef, check_f32, f32_in, f32_out, scratch_f32, sgemm, sgemm_scratch_len};
use crate::ops::unary::{MaskRows, softmax_rows};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Attention";

/// `Y[b, i, h, :] = Σ_j softmax_j(scale·Q[b,i,h,:]·K[b,j,h,:] + mask[b,h,i,j]) · V[b,j,h,:]`.
///
/// Inputs: `Q` `[B, S, H, D]`, `K` `[B, T, H, D]`, `V` `[B, T, H, Dv]`
/// (the heads interleaved as a Linear layer writes them, reshaped, not
/// transposed), optional additive f32 `mask` broadcast to `[B, H, S, T]`.
/// Output: `Y` `[B, S, H, Dv]`. Per batch and head the scores are one GEMM
/// into scratch, masked and normalized there, and one more GEMM writes the
/// head's columns of `Y`: no `[B, H, S, T]` tensor and no transposed copy
/// of `Q`, `K`, `V` or `Y` is ever stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultiHeadAttention {
    /// Factor on `Q·Kᵀ` (the reciprocal of the exported `Div`'s divisor).
    pub scale: f32,
}
crate::to_rust_struct!(ops::mha::MultiHeadAttention { scale });

/// Sizes of one call.
#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    s: usize,
    t: usize,
    h: usize,
    d: usize,
    dv: usize,
}

fn bad(msg: &'static str) -> KernelError {
    KernelError::Shape { op: OP, msg }
}

/// Element strides of a mask broadcast to `[B, H, S, T]` (0 along a
/// broadcast dim).
fn mask_strides(mask: &Shape, d: &Dims) -> Result<[usize; 4], KernelError> {
    let md = mask.dims();
    if md.len() > 4 {
        return Err(bad("the mask has more than 4 dims"));
    }
    let full = [d.b, d.h, d.s, d.t];
    let mut strides = [0usize; 4];
    let mut step = 1;
    for (i, &n) in md.iter().enumerate().rev() {
        let axis = 4 - md.len() + i;
        if n != 1 && n != full[axis] {
            return Err(bad("the mask does not broadcast to [B, H, S, T]"));
        }
        strides[axis] = if n == 1 { 0 } else { step };
        step *= n;
    }
    Ok(strides)
}

impl MultiHeadAttention {
    fn dims(inputs: &[Option<TensorRef<'_>>]) -> Result<Dims, KernelError> {
        let (q, k, v) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        for x in [q, k, v] {
            check_f32(x, OP)?;
            if x.shape.rank() != 4 {
                return Err(bad(
                    "Q, K and V must be [batch, sequence, heads, head size]",
                ));
            }
        }
        let (qd, kd, vd) = (q.shape.dims(), k.shape.dims(), v.shape.dims());
        let d = Dims {
            b: qd[0],
            s: qd[1],
            h: qd[2],
            d: qd[3],
            t: kd[1],
            dv: vd[3],
        };
        if kd[0] != d.b || vd[0] != d.b || kd[2] != d.h || vd[2] != d.h {
            return Err(bad("Q, K and V differ in batch or heads"));
        }
        if kd[3] != d.d || vd[1] != d.t {
            return Err(bad("K must match Q's head size and V K's length"));
        }
        if let Some(m) = opt_input(inputs, 3) {
            check_f32(m, OP)?;
            mask_strides(&m.shape, &d)?;
        }
        Ok(d)
    }

    /// Floats of scratch one head needs: its output, the reciprocals of
    /// its rows' softmax sums, its scores, one row of masked scores and
    /// the GEMMs' packing.
    fn scratch_floats(d: &Dims) -> usize {
        d.s * d.dv
            + d.s
            + d.s * d.t
            + d.t
            + sgemm_scratch_len(d.s, d.t, d.d).max(sgemm_scratch_len(d.s, d.dv, d.t))
    }

    /// Head `h` of batch `b`: its rows' unnormalized outputs into the first
    /// `S × Dv` floats of `s`, each row's softmax normalization (the
    /// reciprocal of its sum) into the next `S`. Scaling the `Dv` outputs of
    /// a row instead of its `T` probabilities saves a pass over the scores.
    fn head(
        &self,
        d: &Dims,
        x: &Operands<'_>,
        b: usize,
        h: usize,
        s: &mut [f32],
    ) -> Result<(), KernelError> {
        let (qs, ks, vs) = (d.h * d.d, d.h * d.d, d.h * d.dv);
        let (o, rest) = s.split_at_mut(d.s * d.dv);
        let (norms, rest) = rest.split_at_mut(d.s);
        let (scores, gemm) = rest.split_at_mut(d.s * d.t);
        // The head's rows of Q (stride H·D), and Kᵀ read in place: element
        // (p, j) is K[b, j, h, p].
        let qh = MatRef::row_major(&x.q[b * d.s * qs + h * d.d..], qs);
        let kt = MatRef::transposed(&x.k[b * d.t * ks + h * d.d..], ks);
        if d.t > 0 {
            sgemm(d.s, d.t, d.d, self.scale, qh, kt, 0.0, scores, d.t, gemm)?;
        }
        let (shifted, gemm) = gemm.split_at_mut(d.t);
        // No keys: the rows stay zero (an empty sum), unscaled.
        norms.fill(1.0);
        // The masked scores go to a row buffer (one pass), the softmax back
        // into the row: P overwrites the scores.
        let mask = x.mask.map(|(m, st)| MaskRows {
            data: m,
            start: b * st[0] + h * st[1],
            row_stride: st[2],
            col_stride: st[3],
        });
        softmax_rows(&mut scores[..d.s * d.t], d.t, mask, shifted, norms);
        let vh = MatRef::row_major(&x.v[b * d.t * vs + h * d.dv..], vs);
        let p = MatRef::row_major(scores, d.t);
        sgemm(d.s, d.dv, d.t, 1.0, p, vh, 0.0, o, d.dv, gemm)
    }
}

/// Row `i` of a head, normalized, goes to `Y[b, i, h, :]`.
fn normalize_row(dst: &mut [f32], src: &[f32], r: f32) {
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = v * r;
    }
}

/// The inputs of one call.
struct Operands<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    mask: Option<(&'a [f32], [usize; 4])>,
}

impl Kernel for MultiHeadAttention {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let d = Self::dims(inputs)?;
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: OP,
            msg: "no output",
        })? = Shape::new(&[d.b, d.s, d.h, d.dv])?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        Self::dims(inputs).map_or(0, |d| 4 * Self::scratch_floats(&d))
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        // Q·Kᵀ and the probabilities times V, per head.
        Self::dims(inputs).map_or(0, |d| {
            let rows = [d.b, d.h, d.s, d.t]
                .iter()
                .fold(1usize, |a, &v| a.saturating_mul(v));
            crate::kernel::product_flops(rows, d.d.saturating_add(d.dv))
        })
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let d = Self::dims(inputs)?;
        let q = f32_in(input(inputs, 0, OP)?, OP)?;
        let k = f32_in(input(inputs, 1, OP)?, OP)?;
        let v = f32_in(input(inputs, 2, OP)?, OP)?;
        let mask = match opt_input(inputs, 3) {
            Some(m) => Some((f32_in(m, OP)?, mask_strides(&m.shape, &d)?)),
            None => None,
        };
        let y = f32_out(output(outputs, 0, OP)?, OP)?;
        let (qs, ks, vs) = (d.h * d.d, d.h * d.d, d.h * d.dv);
        if q.len() != d.b * d.s * qs
            || k.len() != d.b * d.t * ks
            || v.len() != d.b * d.t * vs
            || y.len() != d.b * d.s * vs
        {
            return Err(KernelError::Buffer { op: OP });
        }
        if y.is_empty() {
            return Ok(());
        }
        let need = Self::scratch_floats(&d);
        let s = scratch_f32(scratch, need, OP)?;
        let x = Operands { q, k, v, mask };
        let tasks = d.b * d.h;
        #[cfg(feature = "std")]
        if tasks > 1 && crate::threads::num_threads() > 1 && need <= crate::threads::WORKER_SCRATCH
        {
            // Heads over the threads; each writes only its own row
            // segments of Y.
            let shared = crate::threads::SharedMut::new(y);
            let failed = core::sync::atomic::AtomicBool::new(false);
            crate::threads::run(tasks, s, &|t, s| {
                let (b, h) = (t / d.h, t % d.h);
                if self.head(&d, &x, b, h, s).is_err() {
                    failed.store(true, core::sync::atomic::Ordering::Relaxed);
                    return;
                }
                let (rows, norms) = s.split_at(d.s * d.dv);
                for (i, (src, &r)) in rows.chunks_exact(d.dv).zip(norms).enumerate() {
                    // SAFETY: these Dv floats of Y belong to head (b, h)
                    // alone, and Y outlives the run (its length was
                    // checked, `range` checks the bounds).
                    let dst = unsafe { shared.range((b * d.s + i) * vs + h * d.dv, d.dv) };
                    normalize_row(dst, src, r);
                }
            });
            return match failed.into_inner() {
                true => Err(KernelError::Buffer { op: OP }),
                false => Ok(()),
            };
        }
        for t in 0..tasks {
            let (b, h) = (t / d.h, t % d.h);
            self.head(&d, &x, b, h, s)?;
            let (rows, norms) = s.split_at(d.s * d.dv);
            for (i, (src, &r)) in rows.chunks_exact(d.dv).zip(norms).enumerate() {
                let at = (b * d.s + i) * vs + h * d.dv;
                normalize_row(&mut y[at..at + d.dv], src, r);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Plain reference in f64: scores, mask, softmax, weighted sum.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<(&[f32], [usize; 4])>,
        (b_n, s_n, t_n, h_n, d_n, dv_n): (usize, usize, usize, usize, usize, usize),
        scale: f32,
    ) -> Vec<f32> {
        let mut y = vec![0f32; b_n * s_n * h_n * dv_n];
        for b in 0..b_n {
            for h in 0..h_n {
                for i in 0..s_n {
                    let mut sc: Vec<f64> = (0..t_n)
                        .map(|j| {
                            let dot: f64 = (0..d_n)
                                .map(|p| {
                                    q[((b * s_n + i) * h_n + h) * d_n + p] as f64
                                        * k[((b * t_n + j) * h_n + h) * d_n + p] as f64
                                })
                                .sum();
                            let mk = mask.map_or(0.0, |(m, st)| {
                                m[b * st[0] + h * st[1] + i * st[2] + j * st[3]] as f64
                            });
                            dot * scale as f64 + mk
                        })
                        .collect();
                    let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = sc
                        .iter_mut()
                        .map(|x| {
                            *x = (*x - mx).exp();
                            *x
                        })
                        .sum();
                    for e in 0..dv_n {
                        let o: f64 = (0..t_n)
                            .map(|j| sc[j] / sum * v[((b * t_n + j) * h_n + h) * dv_n + e] as f64)
                            .sum();
                        y[((b * s_n + i) * h_n + h) * dv_n + e] = o as f32;
                    }
                }
            }
        }
        y
    }

    /// Against the reference: odd sequence lengths and head sizes, query
    /// and key lengths that differ, masks broadcast along every subset of
    /// axes (BERT's `[B, 1, 1, T]` included), long rows, no mask.
    #[test]
    fn matches_reference() {
        let cases = [
            (1, 7, 7, 3, 5, 5),
            (2, 5, 9, 2, 8, 3),
            (1, 33, 300, 2, 16, 16),
            (2, 128, 128, 12, 32, 32),
        ];
        for (ci, &(b, s, tl, h, dd, dv)) in cases.iter().enumerate() {
            let q = rand_vec(b * s * h * dd, 1 + ci as u64);
            let k = rand_vec(b * tl * h * dd, 2 + ci as u64);
            let v = rand_vec(b * tl * h * dv, 3 + ci as u64);
            let scale = 1.0 / (dd as f32).sqrt();
            let kernel = MultiHeadAttention { scale };
            let mask_shapes: [&[usize]; 4] = [&[b, 1, 1, tl], &[tl], &[b, h, s, tl], &[1, s, 1]];
            for (mi, ms) in mask_shapes.iter().enumerate() {
                let mut mv = rand_vec(ms.iter().product(), 9 + mi as u64);
                // BERT's -10000 where the mask varies along the keys; a
                // mask constant along a row (which shifts the whole row)
                // gets a milder value, since a row shifted by -10000
                // keeps only about three digits of its scores in f32.
                let masked = if ms.last() == Some(&tl) {
                    -10000.0
                } else {
                    -30.0
                };
                mv.iter_mut().step_by(3).for_each(|x| *x = masked);
                let strides = mask_strides(
                    &Shape::new(ms).unwrap(),
                    &Dims {
                        b,
                        s,
                        t: tl,
                        h,
                        d: dd,
                        dv,
                    },
                )
                .unwrap();
                let out = run(
                    &kernel,
                    &[
                        Some(t(&q, &[b, s, h, dd])),
                        Some(t(&k, &[b, tl, h, dd])),
                        Some(t(&v, &[b, tl, h, dv])),
                        Some(t(&mv, ms)),
                    ],
                    1,
                )
                .unwrap();
                assert_eq!(out[0].0, vec![b, s, h, dv]);
                let want = reference(
                    &q,
                    &k,
                    &v,
                    Some((&mv, strides)),
                    (b, s, tl, h, dd, dv),
                    scale,
                );
                assert_close(&out[0].1, &want, 2e-5);
            }
            let out = run(
                &kernel,
                &[
                    Some(t(&q, &[b, s, h, dd])),
                    Some(t(&k, &[b, tl, h, dd])),
                    Some(t(&v, &[b, tl, h, dv])),
                ],
                1,
            )
            .unwrap();
            let want = reference(&q, &k, &v, None, (b, s, tl, h, dd, dv), scale);
            assert_close(&out[0].1, &want, 2e-5);
        }
    }

    /// Heads split over threads give bit for bit the one-thread result.
    #[cfg(feature = "std")]
    #[test]
    fn threads_give_bit_identical_results() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for &(b, s, tl, h, dd) in &[(2, 37, 41, 3, 8), (1, 128, 128, 12, 32)] {
            let q = rand_vec(b * s * h * dd, 1);
            let k = rand_vec(b * tl * h * dd, 2);
            let v = rand_vec(b * tl * h * dd, 3);
            let m = rand_vec(b * tl, 4);
            let ins = [
                Some(t(&q, &[b, s, h, dd])),
                Some(t(&k, &[b, tl, h, dd])),
                Some(t(&v, &[b, tl, h, dd])),
                Some(t(&m, &[b, 1, 1, tl])),
            ];
            let kernel = MultiHeadAttention { scale: 0.3 };
            crate::threads::set_num_threads(1);
            let one = run(&kernel, &ins, 1).unwrap();
            for threads in [2, 3] {
                crate::threads::set_test_threads(threads);
                let many = run(&kernel, &ins, 1).unwrap();
                assert!(
                    one[0]
                        .1
                        .iter()
                        .zip(&many[0].1)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{b}x{s}x{tl}x{h}x{dd} on {threads} threads"
                );
            }
            crate::threads::set_num_threads(1);
        }
    }

    /// Mismatched heads, head sizes or lengths and a mask that does not
    /// broadcast are refused.
    #[test]
    fn rejects_mismatches() {
        let x = rand_vec(2 * 3 * 4 * 5, 1);
        let kernel = MultiHeadAttention { scale: 1.0 };
        let ok = [
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
        ];
        assert!(run(&kernel, &ok, 1).is_ok());
        let heads = [
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 4, 3, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
        ];
        assert!(run(&kernel, &heads, 1).is_err());
        let size = [
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 5, 4, 3])),
        ];
        assert!(run(&kernel, &size, 1).is_err());
        let m = rand_vec(4, 2);
        let mask = [
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&x, &[2, 3, 4, 5])),
            Some(t(&m, &[4])),
        ];
        assert!(run(&kernel, &mask, 1).is_err());
    }
}
