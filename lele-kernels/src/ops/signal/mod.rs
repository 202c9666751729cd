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

/// Scratch of a transform of length at most `n_max`: the plan (unless the
/// compiler supplies it as a constant input), one line of `n_max` complex
/// values and the transform's work memory, in bytes.
pub(crate) fn transform_scratch_bytes(n_max: usize, plan_given: bool) -> usize {
    let plan = if plan_given {
        Some(0)
    } else {
        fft::plan_len_bound(n_max)
    };
    let complex = fft::work_len_bound(n_max).and_then(|w| w.checked_add(n_max));
    plan.zip(complex)
        .and_then(|(p, c)| p.checked_add(c.checked_mul(2)?)?.checked_mul(4))
        // An impossible size: planning reports it as too large.
        .unwrap_or(usize::MAX)
}

/// The plan, line and work memory of one call: the plan comes from the
/// constant input `given` (computed by the compiler for this length) or is
/// built in `scratch`.
pub(crate) fn transform_buffers<'a>(
    n: usize,
    n_max: usize,
    given: Option<&TensorRef<'a>>,
    scratch: &'a mut [u8],
    op: &'static str,
) -> Result<(Plan<'a>, &'a mut [Complex], &'a mut [Complex]), KernelError> {
    let too_small = KernelError::Buffer { op };
    if n > n_max {
        return Err(too_small);
    }
    let plan_len = fft::plan_len(n).ok_or(KernelError::Buffer { op })?;
    let work_len = fft::work_len(n).ok_or(KernelError::Buffer { op })?;
    let plan_space = if given.is_some() { 0 } else { plan_len };
    let floats =
        crate::ops::gemm::operands::scratch_f32(scratch, plan_space + 2 * (n + work_len), op)?;
    let (plan_floats, rest) = floats.split_at_mut(plan_space);
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
    Ok((plan, line, work))
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
