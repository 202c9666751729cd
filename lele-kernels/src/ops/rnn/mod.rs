//! Recurrent layers: `Lstm`, `Gru` and `Rnn` with the default activations
//! (sigmoid / tanh / tanh for LSTM, sigmoid / tanh for GRU, tanh for RNN).
//!
//! The input projection of every time step is one GEMM before the loop;
//! each step then multiplies the hidden state by `Rᵀ` for the whole batch.
//! `sequence_lens` is honoured: steps past a sequence's length leave its
//! state unchanged and write zeros to `Y`; the reverse direction of a short
//! sequence starts at its last valid step.
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{input, opt_input};
use crate::ops::gemm::check_f32;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

mod gru;
mod lstm;
mod simple;
#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::needless_range_loop)]
mod tests;

pub use gru::Gru;
pub use lstm::Lstm;
pub use simple::Rnn;

/// `direction` of a recurrent layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Time steps in order.
    Forward,
    /// Time steps in reverse order.
    Reverse,
    /// Both; outputs stack the forward then the reverse direction.
    Bidirectional,
}
crate::to_rust_enum!(ops::rnn::Direction {
    Forward,
    Reverse,
    Bidirectional
});

impl Direction {
    fn count(self) -> usize {
        if self == Direction::Bidirectional {
            2
        } else {
            1
        }
    }
}

/// Sizes shared by LSTM and GRU.
#[derive(Clone, Copy, Debug)]
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    layout1: bool,
}

impl Dims {
    /// Row of `X` (viewed as `[rows, input]`) holding step `t` of batch `b`.
    fn x_row(&self, t: usize, b: usize) -> usize {
        if self.layout1 {
            b * self.seq + t
        } else {
            t * self.batch + b
        }
    }

    /// Offset of `Y[t, d, b, :]` (layout 0) or `Y[b, t, d, :]` (layout 1).
    fn y_off(&self, t: usize, d: usize, b: usize) -> usize {
        let h = self.hidden;
        if self.layout1 {
            ((b * self.seq + t) * self.dirs + d) * h
        } else {
            ((t * self.dirs + d) * self.batch + b) * h
        }
    }

    /// Offset of `Y_h[d, b, :]` (layout 0) or `Y_h[b, d, :]` (layout 1);
    /// also the layout of `initial_h`/`initial_c`.
    fn state_off(&self, d: usize, b: usize) -> usize {
        if self.layout1 {
            (b * self.dirs + d) * self.hidden
        } else {
            (d * self.batch + b) * self.hidden
        }
    }

    fn y_shape(&self) -> Result<Shape, KernelError> {
        if self.layout1 {
            Shape::new(&[self.batch, self.seq, self.dirs, self.hidden])
        } else {
            Shape::new(&[self.seq, self.dirs, self.batch, self.hidden])
        }
    }

    fn state_shape(&self) -> Result<Shape, KernelError> {
        if self.layout1 {
            Shape::new(&[self.batch, self.dirs, self.hidden])
        } else {
            Shape::new(&[self.dirs, self.batch, self.hidden])
        }
    }
}

/// Validates the shared inputs; `gates` is 4 (LSTM) or 3 (GRU).
#[allow(clippy::too_many_arguments)]
fn rnn_dims(
    inputs: &[Option<TensorRef<'_>>],
    n_outputs: usize,
    hidden_size: usize,
    direction: Direction,
    layout: i64,
    gates: usize,
    n_outputs_max: usize,
    op: &'static str,
) -> Result<Dims, KernelError> {
    let bad = |msg| KernelError::Shape { op, msg };
    if n_outputs == 0 || n_outputs > n_outputs_max {
        return Err(KernelError::Invalid {
            op,
            msg: "unexpected number of outputs",
        });
    }
    if layout != 0 && layout != 1 {
        return Err(KernelError::Invalid {
            op,
            msg: "layout must be 0 or 1",
        });
    }
    let x = input(inputs, 0, op)?;
    let w = input(inputs, 1, op)?;
    let r = input(inputs, 2, op)?;
    for t in [x, w, r] {
        check_f32(t, op)?;
    }
    let [a, b, input_size] = *x.shape.dims() else {
        return Err(bad("X must have rank 3"));
    };
    let (seq, batch) = if layout == 1 { (b, a) } else { (a, b) };
    let dirs = direction.count();
    let &[rd, rg, hidden] = r.shape.dims() else {
        return Err(bad("R must have rank 3"));
    };
    if hidden_size != 0 && hidden_size != hidden {
        return Err(bad("hidden_size does not match R"));
    }
    // Checked: a hostile R can make `gates × hidden` overflow, and a wrapped
    // product that matches would let the run slice past the weights.
    let gate_rows = gates
        .checked_mul(hidden)
        .filter(|&g| g == rg && rd == dirs)
        .ok_or_else(|| bad("R has the wrong shape"))?;
    if w.shape.dims() != [dirs, gate_rows, input_size] {
        return Err(bad("W has the wrong shape"));
    }
    let d = Dims {
        seq,
        batch,
        input: input_size,
        hidden,
        dirs,
        layout1: layout == 1,
    };
    if let Some(bias) = opt_input(inputs, 3) {
        check_f32(bias, op)?;
        if bias.shape.dims() != [dirs, 2 * gate_rows] {
            return Err(bad("B has the wrong shape"));
        }
    }
    if let Some(sl) = opt_input(inputs, 4) {
        if !matches!(sl.dtype, DType::I32 | DType::I64) {
            return Err(KernelError::UnsupportedDType {
                op,
                dtype: sl.dtype,
            });
        }
        if sl.shape.dims() != [batch] {
            return Err(bad("sequence_lens must have shape [batch]"));
        }
    }
    let state = d.state_shape()?;
    for i in [5, 6] {
        if i == 6 && gates != 4 {
            break;
        }
        if let Some(s) = opt_input(inputs, i) {
            check_f32(s, op)?;
            if s.shape != state {
                return Err(bad("initial state has the wrong shape"));
            }
        }
    }
    if gates == 4
        && let Some(p) = opt_input(inputs, 7)
    {
        check_f32(p, op)?;
        if hidden
            .checked_mul(3)
            .is_none_or(|n| p.shape.dims() != [dirs, n])
        {
            return Err(bad("P has the wrong shape"));
        }
    }
    Ok(d)
}

/// Reads `sequence_lens[b]` (all steps when absent), checked against `seq`.
fn seq_len(
    inputs: &[Option<TensorRef<'_>>],
    d: &Dims,
    b: usize,
    op: &'static str,
) -> Result<usize, KernelError> {
    let Some(sl) = opt_input(inputs, 4) else {
        return Ok(d.seq);
    };
    let v = match sl.dtype {
        DType::I32 => *sl
            .typed::<i32>(op)?
            .get(b)
            .ok_or(KernelError::Buffer { op })? as i64,
        DType::I64 => *sl
            .typed::<i64>(op)?
            .get(b)
            .ok_or(KernelError::Buffer { op })?,
        dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
    };
    if v < 0 || v as usize > d.seq {
        return Err(KernelError::Invalid {
            op,
            msg: "sequence_lens value out of range",
        });
    }
    Ok(v as usize)
}

/// The largest scratch part (floats) a recurrent layer plans: far past any
/// arena, it keeps the parts' own sums small (2^40, or 1/8 of a 32-bit
/// address space).
const MAX_PART: usize = if usize::BITS >= 64 {
    1 << (usize::BITS - 24)
} else {
    usize::MAX / 8
};

fn infer_rnn(d: &Dims, outputs: &mut [Shape]) -> Result<(), KernelError> {
    for (i, o) in outputs.iter_mut().enumerate() {
        *o = if i == 0 {
            d.y_shape()?
        } else {
            d.state_shape()?
        };
    }
    Ok(())
}

/// Checks output buffers and zero-fills them (`Y` stays zero at padded steps).
fn prepare_outputs<'o>(
    outputs: &'o mut [TensorMut<'_>],
    d: &Dims,
    op: &'static str,
) -> Result<[Option<&'o mut [f32]>; 3], KernelError> {
    let mut outs: [Option<&'o mut [f32]>; 3] = [None, None, None];
    for (i, t) in outputs.iter_mut().enumerate().take(3) {
        let want = if i == 0 {
            d.y_shape()?
        } else {
            d.state_shape()?
        }
        .numel();
        let s = t.typed::<f32>(op)?;
        if s.len() != want {
            return Err(KernelError::Buffer { op });
        }
        s.fill(0.0);
        outs[i] = Some(s);
    }
    Ok(outs)
}

/// Bytes of recurrent weight a step reads above which it alternates the
/// order of its rows from step to step (below this they stay cached in
/// any order).
const ALTERNATE_MIN_BYTES: usize = 1 << 20;

/// Bytes of `R` each product of an alternating step covers.
const ALTERNATE_CHUNK_BYTES: usize = 256 << 10;

/// Whether a step that reads `bytes` of recurrent weight takes its rows in
/// reverse order: on odd steps, when they are more than
/// [`ALTERNATE_MIN_BYTES`].
///
/// A step multiplies the hidden state by all of `R` (4 MiB per direction
/// for an LSTM of 512 units). When that is more than a core's L2, reading
/// it in the same order every step finds none of it cached (the oldest
/// lines, needed first, were the first evicted); reading it back to front
/// every other step starts with the lines the last step left in L2 (a
/// bidirectional LSTM of 512 units gains markedly on one thread and on
/// two).
fn alternates(step: usize, bytes: usize) -> bool {
    step % 2 == 1 && bytes > ALTERNATE_MIN_BYTES
}

/// `R` blocks of at most this many floats (`rows · hidden`) are multiplied
/// by direct dot products.
const SMALL_RECURRENCE: usize = 768;

/// `c[i, j] = h[i, ..] · r[j, ..] + beta · c[i, j]` for `m` rows of the
/// state `hs` (`k` floats each) and `n` rows of `r` (`k` floats each):
/// the state times `rᵀ`, written to `c` at row stride `ldc`. With
/// `reverse`, the rows of `r` are read back to front, in runs of about
/// [`ALTERNATE_CHUNK_BYTES`] (a multiple of 8 rows, so that on the
/// dot-product path, up to 96 state rows, every column goes through the
/// same register tile as in one product: the result is the same either
/// way; a larger batch takes the blocked product, whose edge tiles may
/// round differently).
#[allow(clippy::too_many_arguments)]
fn state_times_rt(
    reverse: bool,
    m: usize,
    n: usize,
    k: usize,
    hs: &[f32],
    r: &[f32],
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    gs: &mut [f32],
) -> Result<(), KernelError> {
    use crate::ops::gemm::{MatRef, sgemm};
    if k > 0 && n * k <= SMALL_RECURRENCE {
        // A few dozen products per step (hidden sizes up to ~16): direct
        // dot products cost less than setting up a product call, and
        // the order of `r`'s rows does not matter at this size.
        for i in 0..m {
            let hi = &hs[i * k..(i + 1) * k];
            for (j, rj) in r[..n * k].chunks_exact(k).enumerate() {
                let dot: f32 = hi.iter().zip(rj).map(|(a, b)| a * b).sum();
                let cij = &mut c[i * ldc + j];
                *cij = if beta == 0.0 { dot } else { dot + beta * *cij };
            }
        }
        return Ok(());
    }
    let rows = (ALTERNATE_CHUNK_BYTES / (4 * k.max(1))).max(8) / 8 * 8;
    if !reverse || rows >= n {
        let (a, b) = (MatRef::row_major(hs, k), MatRef::transposed(r, k));
        return sgemm(m, n, k, 1.0, a, b, beta, c, ldc, gs);
    }
    for q in (0..n.div_ceil(rows)).rev() {
        let j0 = q * rows;
        let w = rows.min(n - j0);
        let (a, b) = (
            MatRef::row_major(hs, k),
            MatRef::transposed(&r[j0 * k..], k),
        );
        sgemm(m, w, k, 1.0, a, b, beta, &mut c[j0..], ldc, gs)?;
    }
    Ok(())
}

/// [`crate::kernel::Kernel::flops`] of a recurrent layer: every step of
/// every sequence multiplies its input by `W` and its state by `R` (all
/// directions and gates), inputs `X`, `W`, `R` first.
fn recurrent_flops(inputs: &[Option<TensorRef<'_>>]) -> u64 {
    let numel = |i: usize| {
        inputs
            .get(i)
            .copied()
            .flatten()
            .map_or(0, |t| t.shape.numel())
    };
    let steps = numel(0) / crate::kernel::last_dim(inputs, 0).max(1);
    crate::kernel::product_flops(steps, numel(1).saturating_add(numel(2)))
}
