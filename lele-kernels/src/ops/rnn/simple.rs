//! `Rnn`: the plain (Elman) recurrent layer.
use super::{Dims, Direction, MAX_PART, infer_rnn, prepare_outputs, rnn_dims, seq_len};
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::ops::gemm::{MatRef, f32_in, scratch_f32, sgemm, sgemm_scratch_len};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// ONNX `RNN` with the default `tanh` activation:
/// `H_t = tanh(X_t·Wᵀ + H_{t-1}·Rᵀ + Wb + Rb)`.
///
/// Inputs: `X`, `W` `[dirs, H, input]`, `R` `[dirs, H, H]`, optional `B`
/// `[dirs, 2H]`, optional `sequence_lens`, optional `initial_h`; layouts as
/// for [`Lstm`](super::Lstm). Outputs (any prefix of): `Y`, `Y_h`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rnn {
    /// `hidden_size` (0: take it from `R`).
    pub hidden_size: usize,
    /// Direction(s) to run.
    pub direction: Direction,
    /// 0: sequence-major tensors; 1: batch-major.
    pub layout: i64,
}
crate::to_rust_struct!(ops::rnn::Rnn {
    hidden_size,
    direction,
    layout
});

impl Rnn {
    fn dims(&self, inputs: &[Option<TensorRef<'_>>], n_out: usize) -> Result<Dims, KernelError> {
        rnn_dims(
            inputs,
            n_out,
            self.hidden_size,
            self.direction,
            self.layout,
            1,
            2,
            "RNN",
        )
    }

    /// `(xw, rec, h, bias, gemm)` scratch lengths in floats; `None` when a
    /// part overflows or passes [`MAX_PART`] (hostile shapes).
    fn scratch_parts(d: &Dims) -> Option<[usize; 5]> {
        let h = d.hidden;
        let rows = d.seq.checked_mul(d.batch)?;
        let xw = rows.checked_mul(h)?;
        let bh = d.batch.checked_mul(h)?;
        if xw.max(bh).max(d.input) > MAX_PART || h > MAX_PART {
            return None;
        }
        Some([
            xw,
            bh,
            bh,
            2 * h,
            sgemm_scratch_len(rows, h, d.input).max(sgemm_scratch_len(d.batch, h, h)),
        ])
    }
}

impl Kernel for Rnn {
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
            // Saturated: the arena cap and the build-time evaluator refuse it.
            Ok(d) => Self::scratch_parts(&d).map_or(usize::MAX, |p| 4 * p.iter().sum::<usize>()),
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
        const OP: &str = "RNN";
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
        let parts = Self::scratch_parts(&d).ok_or(KernelError::Invalid {
            op: OP,
            msg: "sizes too large",
        })?;
        let s = scratch_f32(scratch, parts.iter().sum(), OP)?;
        let (xw, s) = s.split_at_mut(parts[0]);
        let (rec, s) = s.split_at_mut(parts[1]);
        let (hs, s) = s.split_at_mut(parts[2]);
        let (bd, gs) = s.split_at_mut(parts[3]);
        let (h, inp) = (d.hidden, d.input);
        for dir in 0..d.dirs {
            let reverse = self.direction == Direction::Reverse || dir == 1;
            let wd = &w[dir * h * inp..(dir + 1) * h * inp];
            let rd = &r[dir * h * h..(dir + 1) * h * h];
            match bias {
                Some(bv) => bd.copy_from_slice(&bv[dir * 2 * h..(dir + 1) * 2 * h]),
                None => bd.fill(0.0),
            }
            let (wb, rb) = bd.split_at(h);
            for b in 0..d.batch {
                let off = d.state_off(dir, b);
                let hb = &mut hs[b * h..(b + 1) * h];
                match h0 {
                    Some(v) => hb.copy_from_slice(&v[off..off + h]),
                    None => hb.fill(0.0),
                }
            }
            sgemm(
                d.seq * d.batch,
                h,
                inp,
                1.0,
                MatRef::row_major(x, inp),
                MatRef::transposed(wd, inp),
                0.0,
                xw,
                h,
                gs,
            )?;
            for step in 0..d.seq {
                sgemm(
                    d.batch,
                    h,
                    h,
                    1.0,
                    MatRef::row_major(hs, h),
                    MatRef::transposed(rd, h),
                    0.0,
                    rec,
                    h,
                    gs,
                )?;
                for b in 0..d.batch {
                    let len = seq_len(inputs, &d, b, OP)?;
                    let t = if step >= len {
                        continue;
                    } else if reverse {
                        len - 1 - step
                    } else {
                        step
                    };
                    let xr = &xw[d.x_row(t, b) * h..][..h];
                    let rr = &rec[b * h..(b + 1) * h];
                    let hb = &mut hs[b * h..(b + 1) * h];
                    for k in 0..h {
                        hb[k] = (xr[k] + rr[k] + wb[k] + rb[k]).tanh();
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
