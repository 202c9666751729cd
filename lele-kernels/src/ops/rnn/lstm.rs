//! `Lstm`.
use super::{Dims, Direction, infer_rnn, prepare_outputs, rnn_dims, seq_len, sigmoid};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::ops::gemm::{MatRef, f32_in, scratch_f32, sgemm, sgemm_scratch_len};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `LSTM` with the default activations (gate order `i, o, f, c`).
///
/// Inputs: `X` (`[seq, batch, input]`, or `[batch, seq, input]` with
/// `layout = 1`), `W` `[dirs, 4H, input]`, `R` `[dirs, 4H, H]`, optional `B`
/// `[dirs, 8H]`, optional `sequence_lens` `[batch]` (i32/i64), optional
/// `initial_h` and `initial_c` (`[dirs, batch, H]`, layout 1:
/// `[batch, dirs, H]`), optional `P` `[dirs, 3H]` (peepholes `i, o, f`).
/// Outputs (any prefix of): `Y` `[seq, dirs, batch, H]` (layout 1:
/// `[batch, seq, dirs, H]`), `Y_h`, `Y_c` (shaped like `initial_h`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lstm {
    /// `hidden_size` (0: take it from `R`).
    pub hidden_size: usize,
    /// Direction(s) to run.
    pub direction: Direction,
    /// 0: sequence-major tensors; 1: batch-major.
    pub layout: i64,
    /// Clip gate pre-activations to `[-clip, clip]`.
    pub clip: Option<f32>,
    /// Couple the input and forget gates (`f = 1 - i`).
    pub input_forget: bool,
}
crate::to_rust_struct!(ops::rnn::Lstm {
    hidden_size,
    direction,
    layout,
    clip,
    input_forget
});

impl Lstm {
    fn dims(&self, inputs: &[Option<TensorRef<'_>>], n_out: usize) -> Result<Dims, KernelError> {
        rnn_dims(
            inputs,
            n_out,
            self.hidden_size,
            self.direction,
            self.layout,
            4,
            3,
            "LSTM",
        )
    }

    /// `(xw, gates, h, c, bias, gemm)` scratch lengths in floats.
    fn scratch_parts(d: &Dims) -> [usize; 6] {
        let g = 4 * d.hidden;
        [
            d.seq * d.batch * g,
            d.batch * g,
            d.batch * d.hidden,
            d.batch * d.hidden,
            g,
            sgemm_scratch_len(d.seq * d.batch, g, d.input)
                .max(sgemm_scratch_len(d.batch, g, d.hidden)),
        ]
    }
}

impl Kernel for Lstm {
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
            Ok(d) => 4 * Self::scratch_parts(&d).iter().sum::<usize>(),
            Err(_) => 0,
        }
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        const OP: &str = "LSTM";
        let d = self.dims(inputs, outputs.len())?;
        let x = f32_in(input(inputs, 0, OP)?, OP)?;
        let w = f32_in(input(inputs, 1, OP)?, OP)?;
        let r = f32_in(input(inputs, 2, OP)?, OP)?;
        let opt = |i| -> Result<Option<&[f32]>, KernelError> {
            opt_input(inputs, i).map(|t| f32_in(t, OP)).transpose()
        };
        let (bias, h0, c0, peep) = (opt(3)?, opt(5)?, opt(6)?, opt(7)?);
        for b in 0..d.batch {
            seq_len(inputs, &d, b, OP)?;
        }
        let [mut y, mut yh, mut yc] = prepare_outputs(outputs, &d, OP)?;
        let parts = Self::scratch_parts(&d);
        let s = scratch_f32(scratch, parts.iter().sum(), OP)?;
        let (xw, s) = s.split_at_mut(parts[0]);
        let (gates, s) = s.split_at_mut(parts[1]);
        let (hs, s) = s.split_at_mut(parts[2]);
        let (cs, s) = s.split_at_mut(parts[3]);
        let (bsum, gs) = s.split_at_mut(parts[4]);
        let (h, g4, inp) = (d.hidden, 4 * d.hidden, d.input);
        let clip = self.clip.unwrap_or(f32::INFINITY);
        let cl = |v: f32| v.clamp(-clip, clip);
        for dir in 0..d.dirs {
            let reverse = self.direction == Direction::Reverse || dir == 1;
            let wd = &w[dir * g4 * inp..(dir + 1) * g4 * inp];
            let rd = &r[dir * g4 * h..(dir + 1) * g4 * h];
            match bias {
                Some(bv) => {
                    let bd = &bv[dir * 2 * g4..(dir + 1) * 2 * g4];
                    for (k, o) in bsum.iter_mut().enumerate() {
                        *o = bd[k] + bd[g4 + k];
                    }
                }
                None => bsum.fill(0.0),
            }
            let pd = peep.map(|p| &p[dir * 3 * h..(dir + 1) * 3 * h]);
            for b in 0..d.batch {
                let off = d.state_off(dir, b);
                let hb = &mut hs[b * h..(b + 1) * h];
                match h0 {
                    Some(v) => hb.copy_from_slice(&v[off..off + h]),
                    None => hb.fill(0.0),
                }
                let cb = &mut cs[b * h..(b + 1) * h];
                match c0 {
                    Some(v) => cb.copy_from_slice(&v[off..off + h]),
                    None => cb.fill(0.0),
                }
            }
            // XW for every (step, batch) row: X · Wᵀ.
            let rows = d.seq * d.batch;
            sgemm(
                rows,
                g4,
                inp,
                1.0,
                MatRef::row_major(x, inp),
                MatRef::transposed(wd, inp),
                0.0,
                xw,
                g4,
                gs,
            )?;
            for step in 0..d.seq {
                sgemm(
                    d.batch,
                    g4,
                    h,
                    1.0,
                    MatRef::row_major(hs, h),
                    MatRef::transposed(rd, h),
                    0.0,
                    gates,
                    g4,
                    gs,
                )?;
                for b in 0..d.batch {
                    let len = seq_len(inputs, &d, b, OP)?;
                    if step >= len {
                        continue;
                    }
                    let t = if reverse { len - 1 - step } else { step };
                    let xr = &xw[d.x_row(t, b) * g4..][..g4];
                    let gr = &gates[b * g4..(b + 1) * g4];
                    let hb = &mut hs[b * h..(b + 1) * h];
                    let cb = &mut cs[b * h..(b + 1) * h];
                    for k in 0..h {
                        let pre = |gi: usize| gr[gi * h + k] + xr[gi * h + k] + bsum[gi * h + k];
                        let c_prev = cb[k];
                        let (pi, po, pf) = match pd {
                            Some(p) => (p[k], p[h + k], p[2 * h + k]),
                            None => (0.0, 0.0, 0.0),
                        };
                        let ig = sigmoid(cl(pre(0) + pi * c_prev));
                        let fg = if self.input_forget {
                            1.0 - ig
                        } else {
                            sigmoid(cl(pre(2) + pf * c_prev))
                        };
                        let cand = cl(pre(3)).tanh();
                        let c_new = fg * c_prev + ig * cand;
                        let og = sigmoid(cl(pre(1) + po * c_new));
                        cb[k] = c_new;
                        hb[k] = og * c_new.tanh();
                    }
                    if let Some(y) = y.as_deref_mut() {
                        let o = d.y_off(t, dir, b);
                        y[o..o + h].copy_from_slice(hb);
                    }
                }
            }
            for b in 0..d.batch {
                let o = d.state_off(dir, b);
                if let Some(yh) = yh.as_deref_mut() {
                    yh[o..o + h].copy_from_slice(&hs[b * h..(b + 1) * h]);
                }
                if let Some(yc) = yc.as_deref_mut() {
                    yc[o..o + h].copy_from_slice(&cs[b * h..(b + 1) * h]);
                }
            }
        }
        Ok(())
    }
}
