//! Staging of the direct convolution's input: zero padded and split into
//! phase planes, one band of output rows at a time.
use super::{ConvGeom, KernelError, Layout};
use crate::ops::conv::im2col::{strided_copy, valid_range};

/// Zero-pads band `band` of `xg` (the group's `cg` input planes) into the
/// staged layout.
pub(in crate::ops::conv) fn stage(
    strides: [usize; 2],
    g: &ConvGeom,
    l: &Layout,
    xg: &[f32],
    staged: &mut [f32],
    band: usize,
) -> Result<(), KernelError> {
    stage_channels(strides, g, l, xg, staged, band, 0..g.cg)
}

/// [`stage`] of the input channels `channels` only: `staged` starts at
/// the first one's planes and, when they run to the last channel, holds
/// the slack after it too (zeroed here).
pub(super) fn stage_channels(
    strides: [usize; 2],
    g: &ConvGeom,
    l: &Layout,
    xg: &[f32],
    staged: &mut [f32],
    band: usize,
    channels: core::ops::Range<usize>,
) -> Result<(), KernelError> {
    let [sh, sw] = strides;
    let (h, w) = (g.x.h, g.x.w);
    let sub = l.phase_rows * l.phase_w;
    let c0 = channels.start;
    if channels.end == g.cg {
        // The slack after the last plane is read (discarded lanes) but
        // never written below.
        let tail = (g.cg - c0) * l.plane;
        staged
            .get_mut(tail..)
            .ok_or(KernelError::Buffer { op: "Conv" })?
            .fill(0.0);
    }
    // Padded rows first.. of the whole input; the last band may need
    // fewer than `l.rows` (the rest is never read).
    let first = band * l.band * strides[0];
    let rows = l.rows.min(l.total_rows.saturating_sub(first));
    for c in channels {
        let xc = xg
            .get(c * h * w..(c + 1) * h * w)
            .ok_or(KernelError::Buffer { op: "Conv" })?;
        for r in 0..rows {
            // Row r / sh of the planes of row phase r % sh, one per column
            // phase.
            let at = (c - c0) * l.plane + (r % sh) * sw * sub + (r / sh) * l.phase_w;
            let Some(ih) = (first + r).checked_sub(g.pt).filter(|&ih| ih < h) else {
                for ph in 0..sw {
                    staged[at + ph * sub..][..l.phase_w].fill(0.0);
                }
                continue;
            };
            let src = &xc[ih * w..(ih + 1) * w];
            // The same row of the next channel, toward L1 while this one
            // is copied: each channel's rows are a separate run of memory,
            // where the hardware prefetchers start over.
            #[cfg(target_arch = "x86_64")]
            if c + 1 < g.cg {
                for line in (0..w).step_by(16) {
                    // SAFETY: a prefetch never faults, whatever the address.
                    unsafe {
                        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                            src.as_ptr().wrapping_add(h * w + line) as *const i8,
                        )
                    };
                }
            }
            for ph in 0..sw {
                let dst = &mut staged[at + ph * sub..][..l.phase_w];
                // Padded column q·sw + ph is input column q·sw + ph - pl;
                // the q inside the input form one range, zeros around it.
                let first = ph as isize - g.pl as isize;
                let (lo, hi) = valid_range(first, sw as isize, w as isize, l.phase_w);
                dst[..lo].fill(0.0);
                dst[hi..].fill(0.0);
                if hi > lo {
                    let start = (first + (lo * sw) as isize) as usize;
                    strided_copy(&src[start..], sw, &mut dst[lo..hi]);
                }
            }
        }
    }
    Ok(())
}
