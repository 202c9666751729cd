//! `Lstm`.
//!
//! The input projection of both directions is one GEMM before the time
//! loop (biases folded in); each step adds `h·Rᵀ` to a copy of its row and
//! applies the gates with the vectorized sigmoid and tanh. With more than
//! one thread and a large hidden size the steps are split over the threads
//! by hidden units (`split.rs`: each thread's share of `R` stays in its
//! L2); otherwise the two directions of a bidirectional layer run at once,
//! one per thread.
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

const OP: &str = "LSTM";

#[cfg(feature = "std")]
pub(super) mod split;
#[cfg(feature = "std")]
use split::split_tasks;

/// One direction's private buffers (carved from the kernel's scratch).
struct DirState<'a> {
    /// Gate pre-activations of the current step, `[batch, 4H]`.
    pre: &'a mut [f32],
    /// Gate activations of one batch entry, `[4H]`.
    act: &'a mut [f32],
    /// Hidden state, `[batch, H]`.
    h: &'a mut [f32],
    /// The next step's hidden state when steps are split over threads
    /// (written while `h` is read), `[batch, H]`. Reserved without `std`
    /// too, so the scratch size does not depend on the build.
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    h_next: &'a mut [f32],
    /// Cell state, `[batch, H]`.
    c: &'a mut [f32],
    /// The hidden state after every step, `[seq, batch, H]` (zero where a
    /// sequence is shorter), copied to `Y` at the end.
    hist: &'a mut [f32],
}

impl<'a> DirState<'a> {
    /// Floats one direction needs.
    fn len(d: &Dims) -> usize {
        let (g4, h) = (4 * d.hidden, d.hidden);
        d.batch * g4 + g4 + 3 * d.batch * h + d.seq * d.batch * h
    }

    /// Splits `buf` (at least [`DirState::len`] floats).
    fn new(buf: &'a mut [f32], d: &Dims) -> Self {
        let (g4, h) = (4 * d.hidden, d.hidden);
        let (pre, buf) = buf.split_at_mut(d.batch * g4);
        let (act, buf) = buf.split_at_mut(g4);
        let (hs, buf) = buf.split_at_mut(d.batch * h);
        let (h_next, buf) = buf.split_at_mut(d.batch * h);
        let (c, buf) = buf.split_at_mut(d.batch * h);
        let hist = &mut buf[..d.seq * d.batch * h];
        DirState {
            pre,
            act,
            h: hs,
            h_next,
            c,
            hist,
        }
    }
}

/// What every direction reads.
struct Shared<'s, 'i> {
    d: &'s Dims,
    inputs: &'s [Option<TensorRef<'i>>],
    /// `X·Wᵀ + biases`, `[seq·batch, dirs·4H]`.
    xw: &'s [f32],
    /// `R` of all directions.
    r: &'s [f32],
    /// `P` of all directions.
    peep: Option<&'s [f32]>,
}

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

    /// `(xw, directions, gemm)` scratch lengths in floats; when they would
    /// not fit (a hostile `hidden_size` or sizing shape), `[usize::MAX, 0,
    /// 0]`, which the arena cap, the build-time evaluator and [`Lstm::run`]
    /// refuse.
    fn scratch_parts(d: &Dims) -> [usize; 3] {
        Self::checked_parts(d).unwrap_or([usize::MAX, 0, 0])
    }

    fn checked_parts(d: &Dims) -> Option<[usize; 3]> {
        let (g, h) = (d.hidden.checked_mul(4)?, d.hidden);
        let rows = d.seq.checked_mul(d.batch)?;
        let xw = rows.checked_mul(d.dirs)?.checked_mul(g)?;
        // DirState::len, checked.
        let dir = d
            .batch
            .checked_mul(g)?
            .checked_add(g)?
            .checked_add(d.batch.checked_mul(h)?.checked_mul(3)?)?
            .checked_add(rows.checked_mul(h)?)?;
        let dirs = d.dirs.checked_mul(dir)?;
        // Far past any arena: keeps the products' own arithmetic small.
        if xw.checked_add(dirs)? > MAX_PART {
            return None;
        }
        let gemm = sgemm_scratch_len(rows, d.dirs * g, d.input)
            .max(sgemm_scratch_len(d.batch, g, d.hidden));
        Some([xw, dirs, gemm])
    }

    /// Runs every direction (at once when there are threads to spare) and
    /// returns their states; the first error wins.
    fn run_directions<'a>(
        &self,
        sh: &Shared<'_, '_>,
        mut states: [Option<DirState<'a>>; 2],
        gs: &mut [f32],
    ) -> Result<[Option<DirState<'a>>; 2], KernelError> {
        #[cfg(feature = "std")]
        if let tasks @ 2.. = split_tasks(sh.d)
            && let Some(res) = self.run_split(sh, &mut states, tasks, gs)
        {
            return res.map(|()| states);
        }
        #[cfg(feature = "std")]
        if sh.d.dirs == 2 && crate::threads::num_threads() > 1 {
            use std::sync::Mutex;
            let slots = states.map(|st| Mutex::new((st, Ok(()))));
            crate::threads::run(2, gs, &|dir, s| {
                let mut slot = slots[dir].lock().unwrap_or_else(|e| e.into_inner());
                let (st, res) = &mut *slot;
                if let Some(st) = st {
                    *res = self.run_direction(sh, dir, st, s);
                }
            });
            let mut first_err = Ok(());
            let states = slots.map(|m| {
                let (st, res) = m.into_inner().unwrap_or_else(|e| e.into_inner());
                if first_err.is_ok() {
                    first_err = res;
                }
                st
            });
            return first_err.map(|()| states);
        }
        for (dir, st) in states.iter_mut().enumerate() {
            if let Some(st) = st {
                self.run_direction(sh, dir, st, gs)?;
            }
        }
        Ok(states)
    }

    /// Every time step of direction `dir`; `gs` is GEMM scratch.
    fn run_direction(
        &self,
        sh: &Shared<'_, '_>,
        dir: usize,
        st: &mut DirState<'_>,
        gs: &mut [f32],
    ) -> Result<(), KernelError> {
        let d = sh.d;
        let (h, g4) = (d.hidden, 4 * d.hidden);
        let ldx = d.dirs * g4;
        let reverse = self.direction == Direction::Reverse || dir == 1;
        let rd = &sh.r[dir * g4 * h..(dir + 1) * g4 * h];
        let pd = sh.peep.map(|p| &p[dir * 3 * h..(dir + 1) * 3 * h]);
        // The time index batch entry `b` (of length `len`) reads at `step`.
        let time = |step: usize, len: usize| if reverse { len - 1 - step } else { step };
        for step in 0..d.seq {
            for (b, pre) in st.pre.chunks_exact_mut(g4).enumerate() {
                let len = seq_len(sh.inputs, d, b, OP)?;
                if step < len {
                    let row = d.x_row(time(step, len), b);
                    pre.copy_from_slice(&sh.xw[row * ldx + dir * g4..][..g4]);
                } else {
                    pre.fill(0.0);
                }
            }
            let reverse_r = alternates(step, 4 * rd.len());
            state_times_rt(reverse_r, d.batch, g4, h, st.h, rd, 1.0, st.pre, g4, gs)?;
            for b in 0..d.batch {
                let len = seq_len(sh.inputs, d, b, OP)?;
                if step >= len {
                    continue;
                }
                let hb = &mut st.h[b * h..(b + 1) * h];
                self.cell(
                    pd,
                    &mut st.pre[b * g4..(b + 1) * g4],
                    st.act,
                    hb,
                    &mut st.c[b * h..(b + 1) * h],
                );
                let t = time(step, len);
                st.hist[(t * d.batch + b) * h..][..h].copy_from_slice(hb);
            }
        }
        Ok(())
    }

    /// One cell update of one batch entry: `pre` holds the gates'
    /// pre-activations (`i, o, f, c`, `H` each; overwritten), `act` is
    /// scratch of the same length, `hb`/`cb` are the states, updated.
    fn cell(
        &self,
        peep: Option<&[f32]>,
        pre: &mut [f32],
        act: &mut [f32],
        hb: &mut [f32],
        cb: &mut [f32],
    ) {
        let h = hb.len();
        let (pre_i, rest) = pre.split_at_mut(h);
        let (pre_o, rest) = rest.split_at_mut(h);
        let (pre_f, pre_g) = rest.split_at_mut(h);
        let (act_i, rest) = act.split_at_mut(h);
        let (act_o, rest) = rest.split_at_mut(h);
        let (act_f, act_g) = rest.split_at_mut(h);
        let peep = peep.map(|p| [&p[..h], &p[h..2 * h], &p[2 * h..3 * h]]);
        self.cell_gates(
            peep,
            [pre_i, pre_o, pre_f, pre_g],
            [act_i, act_o, act_f, act_g],
            hb,
            cb,
        );
    }

    /// [`Lstm::cell`] on hidden units given gate by gate (`i, o, f, c`;
    /// peepholes `i, o, f`), each as long as `hb`.
    fn cell_gates(
        &self,
        peep: Option<[&[f32]; 3]>,
        pre: [&mut [f32]; 4],
        act: [&mut [f32]; 4],
        hb: &mut [f32],
        cb: &mut [f32],
    ) {
        let [pre_i, pre_o, pre_f, pre_g] = pre;
        let [act_i, act_o, act_f, act_g] = act;
        let clip = |v: &mut [f32]| {
            if let Some(c) = self.clip {
                v.iter_mut().for_each(|x| *x = x.clamp(-c, c));
            }
        };
        if let Some([p_i, _, p_f]) = peep {
            for (k, &c) in cb.iter().enumerate() {
                pre_i[k] += p_i[k] * c;
                pre_f[k] += p_f[k] * c;
            }
        }
        clip(pre_i);
        sigmoid_slice(pre_i, act_i);
        if self.input_forget {
            for (f, &i) in act_f.iter_mut().zip(act_i.iter()) {
                *f = 1.0 - i;
            }
        } else {
            clip(pre_f);
            sigmoid_slice(pre_f, act_f);
        }
        clip(pre_g);
        tanh_slice(pre_g, act_g);
        for (((c, &f), &i), &g) in cb
            .iter_mut()
            .zip(act_f.iter())
            .zip(act_i.iter())
            .zip(act_g.iter())
        {
            *c = f * *c + i * g;
        }
        if let Some([_, p_o, _]) = peep {
            for ((o, &po), &c) in pre_o.iter_mut().zip(p_o).zip(cb.iter()) {
                *o += po * c;
            }
        }
        clip(pre_o);
        sigmoid_slice(pre_o, act_o);
        // tanh(c) into the spent candidate gate's slot.
        tanh_slice(cb, act_g);
        for ((hv, &o), &t) in hb.iter_mut().zip(act_o.iter()).zip(act_g.iter()) {
            *hv = o * t;
        }
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
        let (per_dir, gs) = s.split_at_mut(parts[1]);
        let (h, g4, inp) = (d.hidden, 4 * d.hidden, d.input);
        // X · Wᵀ for every (step, batch) row and both directions in one
        // product (W is `[dirs·4H, input]` row-major), plus both biases.
        let ldx = d.dirs * g4;
        sgemm(
            d.seq * d.batch,
            ldx,
            inp,
            1.0,
            MatRef::row_major(x, inp),
            MatRef::transposed(w, inp),
            0.0,
            xw,
            ldx,
            gs,
        )?;
        if let Some(bv) = bias {
            for row in xw.chunks_exact_mut(ldx) {
                for (seg, bd) in row.chunks_exact_mut(g4).zip(bv.chunks_exact(2 * g4)) {
                    let (wb, rb) = bd.split_at(g4);
                    for ((v, &a), &b) in seg.iter_mut().zip(wb).zip(rb) {
                        *v += a + b;
                    }
                }
            }
        }
        let mut states: [Option<DirState<'_>>; 2] = [None, None];
        for (dir, (chunk, slot)) in per_dir
            .chunks_exact_mut(DirState::len(&d).max(1))
            .zip(&mut states)
            .enumerate()
            .take(d.dirs)
        {
            let st = DirState::new(chunk, &d);
            for b in 0..d.batch {
                let off = d.state_off(dir, b);
                let (hb, cb) = (&mut st.h[b * h..][..h], &mut st.c[b * h..][..h]);
                match h0 {
                    Some(v) => hb.copy_from_slice(&v[off..off + h]),
                    None => hb.fill(0.0),
                }
                match c0 {
                    Some(v) => cb.copy_from_slice(&v[off..off + h]),
                    None => cb.fill(0.0),
                }
            }
            st.hist.fill(0.0);
            *slot = Some(st);
        }
        let shared = Shared {
            d: &d,
            inputs,
            xw,
            r,
            peep,
        };
        let states = self.run_directions(&shared, states, gs)?;
        for (dir, st) in states.iter().enumerate() {
            let Some(st) = st else { continue };
            if let Some(y) = y.as_deref_mut() {
                for t in 0..d.seq {
                    for b in 0..d.batch {
                        let o = d.y_off(t, dir, b);
                        y[o..o + h].copy_from_slice(&st.hist[(t * d.batch + b) * h..][..h]);
                    }
                }
            }
            for b in 0..d.batch {
                let o = d.state_off(dir, b);
                if let Some(yh) = yh.as_deref_mut() {
                    yh[o..o + h].copy_from_slice(&st.h[b * h..(b + 1) * h]);
                }
                if let Some(yc) = yc.as_deref_mut() {
                    yc[o..o + h].copy_from_slice(&st.c[b * h..(b + 1) * h]);
                }
            }
        }
        Ok(())
    }
}
