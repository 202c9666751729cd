//! ONNX `MelWeightMatrix`: triangular filters on the mel scale.
use super::length_input;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "MelWeightMatrix";

/// ONNX `MelWeightMatrix`: inputs `num_mel_bins`, `dft_length`,
/// `sample_rate` (integer scalars), `lower_edge_hertz`, `upper_edge_hertz`
/// (float scalars); output `[dft_length/2 + 1, num_mel_bins]` of `dtype`,
/// each column a triangle peaking at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MelWeightMatrix {
    /// Output element type.
    pub dtype: DType,
}
crate::to_rust_struct!(ops::signal::mel::MelWeightMatrix { dtype });

/// `mel(f) = 2595·log10(1 + f/700)`.
fn hz_to_mel(f: f64) -> f64 {
    2595.0 * (f / 700.0).ln_1p() / core::f64::consts::LN_10
}

fn mel_to_hz(m: f64) -> f64 {
    700.0 * (m / 2595.0 * core::f64::consts::LN_10).exp_m1()
}

struct Params {
    mels: usize,
    dft_length: usize,
    sample_rate: f64,
    low: f64,
    high: f64,
}

impl MelWeightMatrix {
    fn params(inputs: &[Option<TensorRef<'_>>]) -> Result<Params, KernelError> {
        let mels = length_input(input(inputs, 0, OP)?, OP, "num_mel_bins must be positive")?;
        let dft_length = length_input(input(inputs, 1, OP)?, OP, "dft_length must be positive")?;
        let rate = length_input(input(inputs, 2, OP)?, OP, "sample_rate must be positive")?;
        let low = input(inputs, 3, OP)?.scalar_f64(OP)?;
        let high = input(inputs, 4, OP)?.scalar_f64(OP)?;
        if !(low.is_finite() && high.is_finite() && 0.0 <= low && low <= high) {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz",
            });
        }
        Ok(Params {
            mels,
            dft_length,
            sample_rate: rate as f64,
            low,
            high,
        })
    }

    fn out_shape(p: &Params) -> Result<Shape, KernelError> {
        Shape::new(&[p.dft_length / 2 + 1, p.mels])
    }
}

impl Kernel for MelWeightMatrix {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = Self::params(inputs)?;
        set_out(outputs, Self::out_shape(&p)?, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let p = Self::params(inputs)?;
        let shape = Self::out_shape(&p)?;
        let out = output(outputs, 0, OP)?;
        if out.dtype != self.dtype || out.shape != shape {
            return Err(KernelError::Buffer { op: OP });
        }
        let bins = p.dft_length / 2 + 1;
        // The band edges: `mels + 2` points evenly spaced in mel from the
        // lower edge with a step of (high - low) / (mels + 2), as the ONNX
        // reference defines it, each mapped to the DFT bin below it.
        let (lo, hi) = (hz_to_mel(p.low), hz_to_mel(p.high));
        let step = (hi - lo) / (p.mels as f64 + 2.0);
        let edge = |i: usize| -> Result<usize, KernelError> {
            let hz = mel_to_hz(lo + step * i as f64);
            let bin = ((p.dft_length as f64 + 1.0) * hz / p.sample_rate).floor();
            if (0.0..bins as f64).contains(&bin) {
                Ok(bin as usize)
            } else {
                Err(KernelError::Invalid {
                    op: OP,
                    msg: "upper_edge_hertz lies above the Nyquist frequency",
                })
            }
        };
        dispatch_num!(self.dtype, OP, |T| {
            let y = out.typed::<T>(OP)?;
            y.fill(T::ZERO);
            for m in 0..p.mels {
                let (left, centre, right) = (edge(m)?, edge(m + 1)?, edge(m + 2)?);
                let mut set = |bin: usize, v: f64| {
                    if let Some(o) = y.get_mut(bin * p.mels + m) {
                        *o = T::from_f64(v);
                    }
                };
                if centre == left {
                    set(centre, 1.0);
                } else {
                    for bin in left..=centre {
                        set(bin, (bin - left) as f64 / (centre - left) as f64);
                    }
                }
                if right > centre {
                    for bin in centre..right {
                        set(bin, (right - bin) as f64 / (right - centre) as f64);
                    }
                }
            }
            Ok(())
        })
    }
}
