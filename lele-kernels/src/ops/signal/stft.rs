//! ONNX `STFT`: windowed frames of a signal, each transformed by the FFT.
use super::fft::{Complex, Lanes, real_half_transform};
use super::{
    Buffers, fft_flops, length_input, mirror_upper_bins, transform_buffers, transform_scratch_bytes,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output, set_out};
use crate::shape::Shape;
use crate::simd::{Simd, SimdKernel, dispatch};
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "STFT";

/// Input index of the compiler-supplied FFT plan (after `signal`,
/// `frame_step`, `window` and `frame_length`).
pub const STFT_PLAN_INPUT: usize = 4;

/// ONNX `STFT`: signal `[batch, length, c]` (`c` 1 for real, 2 for
/// complex) or `[batch, length]` (real), float32; output
/// `[batch, frames, bins, 2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stft {
    /// Return bins `0..=n/2` only (the rest mirror them for a real signal).
    pub onesided: bool,
}
crate::to_rust_struct!(ops::signal::stft::Stft { onesided });

/// What one call computes.
struct Geometry {
    batch: usize,
    length: usize,
    channels: usize,
    step: usize,
    /// Frame (and transform) length.
    n: usize,
    frames: usize,
    bins: usize,
}

impl Stft {
    fn geometry(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Geometry, KernelError> {
        let x = input(inputs, 0, OP)?;
        if x.dtype != DType::F32 {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: x.dtype,
            });
        }
        // `[batch, length]` is a real signal too, as ONNX Runtime accepts
        // (feature extractors exported from PyTorch feed it so).
        let (batch, length, channels) = match *x.shape.dims() {
            [batch, length, channels] => (batch, length, channels),
            [batch, length] => (batch, length, 1),
            _ => {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "the signal must be [batch, length] or [batch, length, 1 or 2]",
                });
            }
        };
        if !(channels == 1 || channels == 2) {
            return Err(KernelError::Shape {
                op: OP,
                msg: "the signal must be [batch, length] or [batch, length, 1 or 2]",
            });
        }
        let step = length_input(input(inputs, 1, OP)?, OP, "frame_step must be positive")?;
        let window = opt_input(inputs, 2);
        if let Some(w) = window {
            if w.shape.rank() != 1 {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "the window must be 1-D",
                });
            }
            if w.dtype != DType::F32 {
                return Err(KernelError::DTypeMismatch {
                    op: OP,
                    expected: DType::F32,
                    found: w.dtype,
                });
            }
        }
        let n = match (opt_input(inputs, 3), window) {
            (Some(t), w) => {
                let n = length_input(t, OP, "frame_length must be positive")?;
                if w.is_some_and(|w| w.shape.dim(0) != n) {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "the window's length differs from frame_length",
                    });
                }
                n
            }
            (None, Some(w)) => w.shape.dim(0),
            (None, None) => length,
        };
        if n == 0 || n > length {
            return Err(KernelError::Shape {
                op: OP,
                msg: "the frame length must be between 1 and the signal length",
            });
        }
        let frames = (length - n) / step + 1;
        let bins = if self.onesided { n / 2 + 1 } else { n };
        Ok(Geometry {
            batch,
            length,
            channels,
            step,
            n,
            frames,
            bins,
        })
    }

    /// The frame (transform) length for these inputs (for the compiler,
    /// which computes the plan of a length known at build time).
    pub fn transform_len(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<usize, KernelError> {
        Ok(self.geometry(inputs)?.n)
    }

    fn out_shape(g: &Geometry) -> Result<Shape, KernelError> {
        Shape::new(&[g.batch, g.frames, g.bins, 2])
    }

    /// The longest frame the scratch must hold: the frame length when the
    /// inputs that set it are known (constants at build time), else the
    /// signal length.
    fn n_max(&self, inputs: &[Option<TensorRef<'_>>]) -> usize {
        self.transform_len(inputs).unwrap_or_else(|_| {
            opt_input(inputs, 0).map_or(1, |x| x.shape.dims().get(1).copied().unwrap_or(1))
        })
    }
}

impl Kernel for Stft {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geometry(inputs)?;
        set_out(outputs, Self::out_shape(&g)?, OP)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let given = opt_input(inputs, STFT_PLAN_INPUT).is_some();
        transform_scratch_bytes(self.n_max(inputs), given, true)
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        self.geometry(inputs)
            .map_or(0, |g| fft_flops(g.batch.saturating_mul(g.frames), g.n))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let g = self.geometry(inputs)?;
        let out_shape = Self::out_shape(&g)?;
        let x = input(inputs, 0, OP)?.typed::<f32>(OP)?;
        let window = match opt_input(inputs, 2) {
            Some(w) => Some(w.typed::<f32>(OP)?),
            None => None,
        };
        let out = output(outputs, 0, OP)?;
        if out.shape != out_shape {
            return Err(KernelError::Buffer { op: OP });
        }
        let y = out.typed::<f32>(OP)?;
        let Buffers {
            plan,
            line,
            work,
            lanes,
        } = transform_buffers(
            g.n,
            self.n_max(inputs),
            opt_input(inputs, STFT_PLAN_INPUT),
            true,
            scratch,
            OP,
        )?;
        let c = g.channels;
        let frame_out = g.bins * 2;
        for b in 0..g.batch {
            let signal = &x[b * g.length * c..(b + 1) * g.length * c];
            let y = &mut y[b * g.frames * frame_out..(b + 1) * g.frames * frame_out];
            if let Some(roots) = plan
                .smooth_roots()
                .filter(|_| c == 1 && plan.halves_real_input())
            {
                // A real signal of even frame length: the frames go through
                // the transform a vector of them at a time, one per lane
                // (the portable build takes them one at a time below).
                let frames = Frames {
                    g: &g,
                    roots,
                    signal,
                    window,
                    y: &mut *y,
                    lanes: &mut *lanes,
                };
                if dispatch(frames).is_ok() {
                    continue;
                }
            }
            for f in 0..g.frames {
                let frame = &signal[f * g.step * c..(f * g.step + g.n) * c];
                if c == 1 {
                    match window {
                        Some(w) => plan.forward_real(|j| frame[j] * w[j], line, work),
                        None => plan.forward_real(|j| frame[j], line, work),
                    }
                    mirror_upper_bins(line, g.bins);
                } else {
                    for (j, v) in line.iter_mut().enumerate() {
                        let w = window.map_or(1.0, |w| w[j]);
                        *v = Complex::new(frame[j * 2] * w, frame[j * 2 + 1] * w);
                    }
                    plan.forward(line, work);
                }
                let at = f * frame_out;
                for (o, v) in y[at..at + frame_out].chunks_exact_mut(2).zip(line.iter()) {
                    o[0] = v.re;
                    o[1] = v.im;
                }
            }
        }
        Ok(())
    }
}

/// The frames of one batch of a real signal, transformed `LANES` at a time
/// (frame `f0 + l` in lane `l`).
struct Frames<'a, 'b> {
    g: &'b Geometry,
    roots: &'a [Complex],
    signal: &'a [f32],
    window: Option<&'a [f32]>,
    y: &'b mut [f32],
    lanes: &'b mut [f32],
}

impl SimdKernel for Frames<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<S: Simd>(self, s: S) {
        let g = self.g;
        let w = S::LANES;
        let (n, h) = (g.n, g.n / 2);
        let point = 2 * w;
        let (data, work) = self.lanes.split_at_mut((h + 1) * point);
        let work = &mut work[..h * point];
        for f0 in (0..g.frames).step_by(w) {
            let count = w.min(g.frames - f0);
            // Point j of lane l: samples 2j and 2j + 1 of frame f0 + l,
            // windowed; lanes past the last frame are zero.
            for (j, p) in data.chunks_exact_mut(point).take(h).enumerate() {
                let (re, im) = p.split_at_mut(w);
                for l in 0..w {
                    let (a, b) = if l < count {
                        let at = (f0 + l) * g.step + 2 * j;
                        let (wa, wb) = self
                            .window
                            .map_or((1.0, 1.0), |win| (win[2 * j], win[2 * j + 1]));
                        (self.signal[at] * wa, self.signal[at + 1] * wb)
                    } else {
                        (0.0, 0.0)
                    };
                    re[l] = a;
                    im[l] = b;
                }
            }
            real_half_transform(Lanes(s), data, work, n, self.roots);
            // Bins above n/2 are the conjugates of those below.
            for bin in 0..g.bins {
                let (src, sign) = if bin <= h {
                    (bin, 1.0)
                } else {
                    (n - bin, -1.0)
                };
                let p = &data[src * point..(src + 1) * point];
                for l in 0..count {
                    let at = ((f0 + l) * g.bins + bin) * 2;
                    self.y[at] = p[l];
                    self.y[at + 1] = sign * p[w + l];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::signal::fft::{self, Plan};
    use crate::simd::{dispatch_on, runnable_isas};

    /// Frames a vector at a time on every ISA this CPU runs, against the
    /// one-frame-at-a-time transform: more frames than lanes, a partial last
    /// vector, a window, every mixed-radix pass.
    #[test]
    fn frames_in_lanes_match_frames_one_at_a_time() {
        for (n, step, frames) in [
            (64usize, 7usize, 37usize),
            (400, 160, 19),
            (30, 3, 5),
            (2, 1, 17),
        ] {
            let length = (frames - 1) * step + n;
            let signal: Vec<f32> = (0..length)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let window: Vec<f32> = (0..n).map(|k| 0.5 + (k % 5) as f32 * 0.1).collect();
            let bins = n; // the full spectrum, so the mirrored bins are checked too
            let g = Geometry {
                batch: 1,
                length,
                channels: 1,
                step,
                n,
                frames,
                bins,
            };
            let mut plan_buf = vec![0f32; fft::plan_len(n).unwrap()];
            let mut work = vec![Complex::ZERO; fft::work_len(n).unwrap()];
            fft::build_plan(n, &mut plan_buf, &mut work).unwrap();
            let plan = Plan::new(n, &plan_buf).unwrap();
            assert!(plan.halves_real_input());
            let mut want = vec![0f32; frames * bins * 2];
            let mut line = vec![Complex::ZERO; n];
            for f in 0..frames {
                plan.forward_real(|j| signal[f * step + j] * window[j], &mut line, &mut work);
                crate::ops::signal::mirror_upper_bins(&mut line, bins);
                for (b, v) in line.iter().enumerate() {
                    want[(f * bins + b) * 2] = v.re;
                    want[(f * bins + b) * 2 + 1] = v.im;
                }
            }
            for isa in runnable_isas() {
                let mut y = vec![f32::NAN; frames * bins * 2];
                let mut lanes = vec![0f32; (n + 1) * 2 * crate::ops::signal::MAX_LANES];
                let frames_k = Frames {
                    g: &g,
                    roots: plan.smooth_roots().unwrap(),
                    signal: &signal,
                    window: Some(&window),
                    y: &mut y,
                    lanes: &mut lanes,
                };
                // Only the portable code has no vector form (it takes the
                // frames one at a time, the reference here).
                if dispatch_on(isa, frames_k).is_err() {
                    assert_eq!(isa, crate::simd::Isa::Scalar);
                    continue;
                }
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "{isa:?} n {n} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
