//! ONNX `DFT`: the discrete Fourier transform along one axis, forward or
//! inverse, full or one-sided (real-to-complex and complex-to-real).
use super::fft::Complex;
use super::{
    fft_flops, length_input, mirror_upper_bins, transform_buffers, transform_scratch_bytes,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output, set_out};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "DFT";

/// Input index of the compiler-supplied FFT plan (after `input`,
/// `dft_length` and `axis`).
pub const DFT_PLAN_INPUT: usize = 3;

/// ONNX `DFT` (opset 20 form: `axis` is input 2; the compiler turns the
/// older attribute into that input). Inputs `[.., L, .., c]` with `c` 1
/// (real) or 2 (complex), float32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dft {
    /// Inverse transform (scaled by `1/n`).
    pub inverse: bool,
    /// Forward: keep bins `0..=n/2`; inverse: the input holds those bins of
    /// a real signal's spectrum and the output is real.
    pub onesided: bool,
}
crate::to_rust_struct!(ops::signal::dft::Dft { inverse, onesided });

/// What one call transforms.
struct Geometry {
    /// Input dims.
    dims: Shape,
    /// Transformed axis.
    axis: usize,
    /// Transform length.
    n: usize,
    /// Output length along the axis.
    n_out: usize,
    /// Complex components of input and output (1 or 2).
    c_in: usize,
    c_out: usize,
}

impl Dft {
    fn irfft(&self) -> bool {
        self.inverse && self.onesided
    }

    fn geometry(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Geometry, KernelError> {
        let x = input(inputs, 0, OP)?;
        if x.dtype != DType::F32 {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: x.dtype,
            });
        }
        let dims = x.shape;
        let r = dims.rank();
        let c_in = dims.dims().last().copied().unwrap_or(0);
        if r < 2 || !(c_in == 1 || c_in == 2) {
            return Err(KernelError::Shape {
                op: OP,
                msg: "the input must have rank >= 2 and a last dim of 1 (real) or 2 (complex)",
            });
        }
        let axis = match opt_input(inputs, 2) {
            None => r - 2,
            Some(t) => {
                let a = t.scalar_i64(OP)?;
                let r = r as i64;
                let a = if a < 0 { a + r } else { a };
                if !(0..=r - 2).contains(&a) {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "axis must be a signal axis (not the last, complex axis)",
                    });
                }
                a as usize
            }
        };
        let len = dims.dim(axis);
        let n = match opt_input(inputs, 1) {
            Some(t) => length_input(t, OP, "dft_length must be positive")?,
            None if self.irfft() => len.saturating_sub(1).saturating_mul(2),
            None => len,
        };
        if n == 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "the transform length is 0",
            });
        }
        let n_out = if self.onesided && !self.inverse {
            n / 2 + 1
        } else {
            n
        };
        let c_out = if self.irfft() { 1 } else { 2 };
        Ok(Geometry {
            dims,
            axis,
            n,
            n_out,
            c_in,
            c_out,
        })
    }

    /// The transform length for these inputs (for the compiler, which
    /// computes the plan of a length known at build time).
    pub fn transform_len(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<usize, KernelError> {
        Ok(self.geometry(inputs)?.n)
    }

    fn out_shape(g: &Geometry) -> Shape {
        let mut s = g.dims;
        let d = s.dims_mut();
        d[g.axis] = g.n_out;
        if let Some(last) = d.last_mut() {
            *last = g.c_out;
        }
        s
    }

    /// The largest transform length the scratch must hold for these
    /// shapes (the output's axis holds `n`, or `n/2 + 1` bins).
    fn n_max(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        let widest = |s: &Shape| s.dims().iter().copied().max().unwrap_or(1);
        let mut m = outputs.first().map_or(1, widest);
        if let Some(x) = opt_input(inputs, 0) {
            m = m.max(widest(&x.shape));
        }
        if self.onesided && !self.inverse {
            m.saturating_mul(2).saturating_add(1)
        } else {
            m
        }
    }
}

impl Kernel for Dft {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let g = self.geometry(inputs)?;
        set_out(outputs, Self::out_shape(&g), OP)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        let given = opt_input(inputs, DFT_PLAN_INPUT).is_some();
        transform_scratch_bytes(self.n_max(inputs, outputs), given, false)
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        self.geometry(inputs).map_or(0, |g| {
            let per_line = g.dims.dim(g.axis).saturating_mul(g.c_in);
            fft_flops(g.dims.numel().checked_div(per_line).unwrap_or(0), g.n)
        })
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let g = self.geometry(inputs)?;
        let out_shape = Self::out_shape(&g);
        let n_max = self.n_max(inputs, core::slice::from_ref(&out_shape));
        let x = input(inputs, 0, OP)?.typed::<f32>(OP)?;
        let out = output(outputs, 0, OP)?;
        if out.shape != out_shape {
            return Err(KernelError::Buffer { op: OP });
        }
        let y = out.typed::<f32>(OP)?;
        let super::Buffers {
            plan, line, work, ..
        } = transform_buffers(
            g.n,
            n_max,
            opt_input(inputs, DFT_PLAN_INPUT),
            false,
            scratch,
            OP,
        )?;
        let dims = g.dims.dims();
        let len = dims[g.axis];
        let outer: usize = dims[..g.axis].iter().product();
        let inner: usize = dims[g.axis + 1..dims.len() - 1].iter().product();
        let scale = if self.inverse { 1.0 / g.n as f32 } else { 1.0 };
        let n = g.n;
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| ((o * len + j) * inner + i) * g.c_in;
                let read = |j: usize| {
                    let p = at(j);
                    let im = if g.c_in == 2 { x[p + 1] } else { 0.0 };
                    Complex::new(x[p], im)
                };
                if self.irfft() {
                    // Bins 0..=n/2 from the input (zero past its end), the
                    // rest by conjugate symmetry.
                    let half = n / 2;
                    for (j, v) in line[..=half].iter_mut().enumerate() {
                        *v = if j < len { read(j) } else { Complex::ZERO };
                    }
                    for j in half + 1..n {
                        line[j] = line[n - j].conj();
                    }
                } else if g.c_in == 1 && !self.inverse {
                    let sample = |j: usize| if j < len { x[at(j)] } else { 0.0 };
                    plan.forward_real(sample, line, work);
                    mirror_upper_bins(line, g.n_out);
                } else {
                    for (j, v) in line.iter_mut().enumerate() {
                        *v = if j < len { read(j) } else { Complex::ZERO };
                    }
                }
                if self.inverse {
                    plan.backward(line, work);
                } else if g.c_in == 2 {
                    plan.forward(line, work);
                }
                for (j, v) in line[..g.n_out].iter().enumerate() {
                    let p = ((o * g.n_out + j) * inner + i) * g.c_out;
                    y[p] = v.re * scale;
                    if g.c_out == 2 {
                        y[p + 1] = v.im * scale;
                    }
                }
            }
        }
        Ok(())
    }
}
