//! `Gru`.
use super::{
    Dims, Direction, MAX_PART, alternates, infer_rnn, prepare_outputs, rnn_dims, seq_len,
    state_times_rt,
};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::ops::gemm::{MatRef, f32_in, scratch_f32, sgemm, sgemm_scratch_len};
use crate::ops::unary::{sigmoid_slice, tanh_slice};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `GRU` with the default activations (gate order `z, r, h`).
///
/// Inputs: `X`, `W` `[dirs, 3H, input]`, `R` `[dirs, 3H, H]`, optional `B`
/// `[dirs, 6H]`, optional `sequence_lens`, optional `initial_h`; layouts as
/// for [`Lstm`](super::Lstm). Outputs (any prefix of): `Y`, `Y_h`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gru {
    /// `hidden_size` (0: take it from `R`).
    pub hidden_size: usize,
    /// Direction(s) to run.
    pub direction: Direction,
    /// Apply the reset gate after multiplying by `R_h`.
    pub linear_before_reset: bool,
    /// 0: sequence-major tensors; 1: batch-major.
    pub layout: i64,
}
crate::to_rust_struct!(ops::rnn::Gru {
    hidden_size,
    direction,
    linear_before_reset,
    layout
});

impl Gru {
    fn dims(&self, inputs: &[Option<TensorRef<'_>>], n_out: usize) -> Result<Dims, KernelError> {
        rnn_dims(
            inputs,
            n_out,
            self.hidden_size,
            self.direction,
            self.layout,
            3,
            2,
            "GRU",
        )
    }

    /// `(xw, gates, h, rh, bias, activations, gemm)` scratch lengths in
    /// floats; when they would not fit (a hostile `hidden_size` or sizing
    /// shape), `usize::MAX` first, which the arena cap, the build-time
    /// evaluator and `run` refuse.
    fn scratch_parts(d: &Dims) -> [usize; 7] {
        Self::checked_parts(d).unwrap_or([usize::MAX, 0, 0, 0, 0, 0, 0])
    }

    fn checked_parts(d: &Dims) -> Option<[usize; 7]> {
        let g = d.hidden.checked_mul(3)?;
        let rows = d.seq.checked_mul(d.batch)?;
        let xw = rows.checked_mul(g)?;
        let bh = d.batch.checked_mul(d.hidden)?;
        // Far past any arena: keeps the products' own arithmetic small.
        if xw.max(d.batch.checked_mul(g)?) > MAX_PART {
            return None;
        }
        Some([
            xw,
            d.batch * g,
            bh,
            bh,
            2 * g,
            2 * d.hidden,
            sgemm_scratch_len(rows, g, d.input).max(sgemm_scratch_len(d.batch, g, d.hidden)),
        ])
    }
}

impl Kernel for Gru {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let d = self.dims(inputs, outputs.len())?;
        infer_rnn(&d, outputs)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        match self.dims(inputs, outputs.len()) {
            Ok(d) => Self::scratch_parts(&d)
                .iter()
                .fold(0usize, |a, &p| a.saturating_add(p))
                .saturating_mul(4),
            Err(_) => 0,
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        super::recurrent_flops(inputs)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "GRU";
        let d = self.dims(inputs, outputs.len())?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let r = f32_in(input(inputs, 2, OP)?, OP)?;
        let opt = |i| -> Result<Option<&[f32]>, KernelError> {
            opt_input(inputs, i).map(|t| f32_in(t, OP)).transpose()
        };
        let (bias, h0) = (opt(3)?, opt(5)?);
        for b in 0..d.batch {
            seq_len(inputs, &d, b, OP)?;
        }
        let [mut y, mut yh, _] = prepare_outputs(outputs, &d, OP)?;
        if d.batch == 0 {
            // Every output is empty (its batch dim is 0).
            return Ok(());
        }
        let parts = Self::scratch_parts(&d);
        let total = parts
            .iter()
            .try_fold(0usize, |a, &p| a.checked_add(p))
            .filter(|_| parts[0] != usize::MAX)
            .ok_or(KernelError::Invalid {
                op: OP,
                msg: "scratch size overflows",
            })?;
        let s = scratch_f32(scratch, total, OP)?;
        let (xw, s) = s.split_at_mut(parts[0]);
        let (gates, s) = s.split_at_mut(parts[1]);
        let (hs, s) = s.split_at_mut(parts[2]);
        let (rh, s) = s.split_at_mut(parts[3]);
        let (bd, s) = s.split_at_mut(parts[4]);
        let (act, gs) = s.split_at_mut(parts[5]);
        let (h, g3, inp) = (d.hidden, 3 * d.hidden, d.input);
        let lbr = self.linear_before_reset;
        for dir in 0..d.dirs {
            let reverse = self.direction == Direction::Reverse || dir == 1;
            let wd = &w[dir * g3 * inp..(dir + 1) * g3 * inp];
            let rd = &r[dir * g3 * h..(dir + 1) * g3 * h];
            match bias {
                Some(bv) => bd.copy_from_slice(&bv[dir * 2 * g3..(dir + 1) * 2 * g3]),
                None => bd.fill(0.0),
            }
            let (wb, rb) = bd.split_at(g3);
            for b in 0..d.batch {
                let off = d.state_off(dir, b);
                let hb = &mut hs[b * h..(b + 1) * h];
                match h0 {
                    Some(v) => hb.copy_from_slice(&v[off..off + h]),
                    None => hb.fill(0.0),
                }
            }
            let rows = d.seq * d.batch;
            sgemm(
                rows,
                g3,
                inp,
                1.0,
                MatRef::row_major(x, inp),
                MatRef::transposed(wd, inp),
                0.0,
                xw,
                g3,
                gs,
            )?;
            for step in 0..d.seq {
                // z and r (and h when linear_before_reset) from H · Rᵀ.
                let ncols = if lbr { g3 } else { 2 * h };
                // Odd steps read R back to front (see `alternates`); the
                // candidate gate's rows, which need the reset gate first,
                // are read back to front within their own product.
                let reverse_r = alternates(step, 4 * rd.len());
                let zr = &rd[..ncols * h];
                state_times_rt(reverse_r, d.batch, ncols, h, hs, zr, 0.0, gates, g3, gs)?;
                for b in 0..d.batch {
                    let len = seq_len(inputs, &d, b, OP)?;
                    let t = if step >= len {
                        continue;
                    } else if reverse {
                        len - 1 - step
                    } else {
                        step
                    };
                    let xr = &xw[d.x_row(t, b) * g3..][..g3];
                    let gr = &mut gates[b * g3..(b + 1) * g3];
                    let hb = &hs[b * h..(b + 1) * h];
                    let rhb = &mut rh[b * h..(b + 1) * h];
                    // z and r: pre-activations, then one vectorized
                    // sigmoid over both gates.
                    for k in 0..2 * h {
                        gr[k] += xr[k] + wb[k] + rb[k];
                    }
                    sigmoid_slice(&gr[..2 * h], act);
                    gr[..2 * h].copy_from_slice(act);
                    for k in 0..h {
                        rhb[k] = gr[h + k] * hb[k];
                    }
                }
                if !lbr {
                    // (r ⊙ H) · R_hᵀ into the third gate block.
                    let rh_rows = &rd[2 * h * h..];
                    let out = &mut gates[2 * h..];
                    state_times_rt(reverse_r, d.batch, h, h, rh, rh_rows, 0.0, out, g3, gs)?;
                }
                for b in 0..d.batch {
                    let len = seq_len(inputs, &d, b, OP)?;
                    let t = if step >= len {
                        continue;
                    } else if reverse {
                        len - 1 - step
                    } else {
                        step
                    };
                    let xr = &xw[d.x_row(t, b) * g3..][..g3];
                    let gr = &mut gates[b * g3..(b + 1) * g3];
                    let hb = &mut hs[b * h..(b + 1) * h];
                    // The candidate's pre-activation over its own gate
                    // block, one vectorized tanh, then the blend.
                    let (zr, cand) = gr.split_at_mut(2 * h);
                    for k in 0..h {
                        let rec = cand[k] + rb[2 * h + k];
                        let rg = zr[h + k];
                        cand[k] = xr[2 * h + k] + wb[2 * h + k] + if lbr { rg * rec } else { rec };
                    }
                    let n = &mut act[..h];
                    tanh_slice(cand, n);
                    for k in 0..h {
                        let z = zr[k];
                        hb[k] = (1.0 - z) * n[k] + z * hb[k];
                    }
                    if let Some(y) = y.as_deref_mut() {
                        let o = d.y_off(t, dir, b);
                        y[o..o + h].copy_from_slice(hb);
                    }
                }
            }
            if let Some(yh) = yh.as_deref_mut() {
                for b in 0..d.batch {
                    let o = d.state_off(dir, b);
                    yh[o..o + h].copy_from_slice(&hs[b * h..(b + 1) * h]);
                }
            }
        }
        Ok(())
    }
}
