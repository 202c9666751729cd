//! ONNX `STFT`: windowed frames of a signal, each transformed by the FFT.
use super::fft::Complex;
use super::{
    fft_flops, length_input, mirror_upper_bins, transform_buffers, transform_scratch_bytes,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::shape::Shape;
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

    /// The longest frame the scratch must hold: the signal length.
    fn n_max(inputs: &[Option<TensorRef<'_>>]) -> usize {
        opt_input(inputs, 0).map_or(1, |x| x.shape.dims().get(1).copied().unwrap_or(1))
    }
}

impl Kernel for Stft {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geometry(inputs)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = Self::out_shape(&g)?;
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let given = opt_input(inputs, STFT_PLAN_INPUT).is_some();
        transform_scratch_bytes(Self::n_max(inputs), given)
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
        let (plan, line, work) = transform_buffers(
            g.n,
            Self::n_max(inputs),
            opt_input(inputs, STFT_PLAN_INPUT),
            scratch,
            OP,
        )?;
        let c = g.channels;
        let frame_out = g.bins * 2;
        for b in 0..g.batch {
            let signal = &x[b * g.length * c..(b + 1) * g.length * c];
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
                let at = (b * g.frames + f) * frame_out;
                for (o, v) in y[at..at + frame_out].chunks_exact_mut(2).zip(line.iter()) {
                    o[0] = v.re;
                    o[1] = v.im;
                }
            }
        }
        Ok(())
    }
}
