//! Signal operators: `DFT`, `STFT`, the window generators and
//! `MelWeightMatrix`, over the any-length FFT of [`fft`].
pub mod dft;
pub mod fft;
pub mod mel;
pub mod stft;
pub mod window;

#[cfg(test)]
mod tests;

use crate::error::KernelError;
use crate::tensor::TensorRef;
use fft::{Complex, Plan};

/// Lanes of the widest vector the frames of a transform may be spread
/// over (AVX-512: 16 floats).
pub(crate) const MAX_LANES: usize = 16;

/// `f32`s of scratch for transforms of length `n` run one per vector lane:
/// `n/2 + 1` points of data and `n/2` of work, each `2 · MAX_LANES`
/// floats.
fn lanes_floats(n: usize) -> Option<usize> {
    n.checked_add(1)?.checked_mul(2 * MAX_LANES)
}

/// Scratch of a transform of length at most `n_max`: the plan (unless the
/// compiler supplies it as a constant input), one line of `n_max` complex
/// values and the transform's work memory, and with `lanes` the buffers
/// of transforms run one per vector lane, in bytes.
pub(crate) fn transform_scratch_bytes(n_max: usize, plan_given: bool, lanes: bool) -> usize {
    let plan = if plan_given {
        Some(0)
    } else {
        fft::plan_len_bound(n_max)
    };
    let lanes = if lanes { lanes_floats(n_max) } else { Some(0) };
    let complex = fft::work_len_bound(n_max).and_then(|w| w.checked_add(n_max));
    plan.zip(complex)
        .zip(lanes)
        .and_then(|((p, c), l)| {
            p.checked_add(c.checked_mul(2)?)?
                .checked_add(l)?
                .checked_mul(4)
        })
        // An impossible size: planning reports it as too large.
        .unwrap_or(usize::MAX)
}

/// The memory of one call.
pub(crate) struct Buffers<'a> {
    /// The transform's plan.
    pub plan: Plan<'a>,
    /// One line of `n` complex values.
    pub line: &'a mut [Complex],
    /// The transform's work memory.
    pub work: &'a mut [Complex],
    /// Buffers of transforms run one per vector lane (empty unless asked
    /// for).
    pub lanes: &'a mut [f32],
}

/// The plan, line, work and lane memory of one call: the plan comes from
/// the constant input `given` (computed by the compiler for this length)
/// or is built in `scratch`.
pub(crate) fn transform_buffers<'a>(
    n: usize,
    n_max: usize,
    given: Option<&TensorRef<'a>>,
    lanes: bool,
    scratch: &'a mut [u8],
    op: &'static str,
) -> Result<Buffers<'a>, KernelError> {
    let too_small = KernelError::Buffer { op };
    if n > n_max {
        return Err(too_small);
    }
    let plan_len = fft::plan_len(n).ok_or(KernelError::Buffer { op })?;
    let work_len = fft::work_len(n).ok_or(KernelError::Buffer { op })?;
    let plan_space = if given.is_some() { 0 } else { plan_len };
    let lane_space = if lanes {
        lanes_floats(n).ok_or(KernelError::Buffer { op })?
    } else {
        0
    };
    let floats = crate::ops::gemm::operands::scratch_f32(
        scratch,
        plan_space + 2 * (n + work_len) + lane_space,
        op,
    )?;
    let (plan_floats, rest) = floats.split_at_mut(plan_space);
    let (lanes, rest) = rest.split_at_mut(lane_space);
    let rest: &mut [Complex] = bytemuck::try_cast_slice_mut(rest).map_err(|_| too_small)?;
    let (line, work) = rest.split_at_mut(n);
    let plan = match given {
        Some(t) => {
            let values = t.typed::<f32>(op)?;
            if values.len() != plan_len {
                return Err(KernelError::Invalid {
                    op,
                    msg: "the precomputed FFT plan is for another length",
                });
            }
            Plan::new(n, values)
        }
        None => {
            fft::build_plan(n, plan_floats, work).ok_or(KernelError::Buffer { op })?;
            Plan::new(n, plan_floats)
        }
    }
    .ok_or(KernelError::Buffer { op })?;
    Ok(Buffers {
        plan,
        line,
        work,
        lanes,
    })
}

/// A scalar length input (`frame_length`, `dft_length`, a window size) as a
/// positive `usize`.
pub(crate) fn length_input(
    t: &TensorRef<'_>,
    op: &'static str,
    msg: &'static str,
) -> Result<usize, KernelError> {
    let v = t.scalar_i64(op)?;
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(KernelError::Invalid { op, msg })
}

/// The usual `5 n log2 n` operations of `lines` complex transforms of
/// length `n`, saturating.
pub(crate) fn fft_flops(lines: usize, n: usize) -> u64 {
    let log = usize::BITS - n.max(1).leading_zeros();
    (lines as u64)
        .saturating_mul(n as u64)
        .saturating_mul(5 * log as u64)
}

/// Bins `n/2 + 1 .. bins` of a real signal's spectrum (`line` of length
/// `n`) from the lower half, which [`Plan::forward_real`] computed.
pub(crate) fn mirror_upper_bins(line: &mut [Complex], bins: usize) {
    let n = line.len();
    for k in n / 2 + 1..bins.min(n) {
        line[k] = line[n - k].conj();
    }
}
