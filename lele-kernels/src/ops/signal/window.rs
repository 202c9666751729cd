//! ONNX `HannWindow`, `HammingWindow` and `BlackmanWindow`.
use super::length_input;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// Which window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// `sin²(πk/N)`.
    Hann,
    /// `α - (1 - α)·cos(2πk/N)` with `α = 25/46`.
    Hamming,
    /// `0.42 - 0.5·cos(2πk/N) + 0.08·cos(4πk/N)`.
    Blackman,
}
crate::to_rust_enum!(ops::signal::window::WindowKind {
    Hann,
    Hamming,
    Blackman
});

impl WindowKind {
    fn name(self) -> &'static str {
        match self {
            WindowKind::Hann => "HannWindow",
            WindowKind::Hamming => "HammingWindow",
            WindowKind::Blackman => "BlackmanWindow",
        }
    }

    /// Value `k` of a window whose period is `period` samples.
    pub fn value(self, k: usize, period: f64) -> f64 {
        let x = core::f64::consts::PI * k as f64 / period;
        match self {
            WindowKind::Hann => {
                let s = x.sin();
                s * s
            }
            WindowKind::Hamming => {
                let a = 25.0 / 46.0;
                a - (1.0 - a) * (2.0 * x).cos()
            }
            WindowKind::Blackman => 0.42 - 0.5 * (2.0 * x).cos() + 0.08 * (4.0 * x).cos(),
        }
    }
}

/// A window generator: input `size` (an integer scalar), output `[size]`
/// of `dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Which window.
    pub kind: WindowKind,
    /// Periodic (period `size`, for spectral analysis) or symmetric
    /// (period `size - 1`).
    pub periodic: bool,
    /// Output element type.
    pub dtype: DType,
}
crate::to_rust_struct!(ops::signal::window::Window {
    kind,
    periodic,
    dtype
});

impl Window {
    fn size(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<usize, KernelError> {
        let op = self.kind.name();
        length_input(
            input(inputs, 0, op)?,
            op,
            "the window size must be positive",
        )
    }
}

impl Kernel for Window {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let n = self.size(inputs)?;
        set_out(outputs, Shape::new(&[n])?, self.kind.name())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let op = self.kind.name();
        let n = self.size(inputs)?;
        let out = output(outputs, 0, op)?;
        if out.dtype != self.dtype || out.shape.dims() != [n] {
            return Err(KernelError::Buffer { op });
        }
        // A symmetric window of one sample has period 0; NumPy's reference
        // then gives NaN, as this does (0/0).
        let period = if self.periodic { n } else { n - 1 } as f64;
        dispatch_num!(self.dtype, op, |T| {
            for (k, v) in out.typed::<T>(op)?.iter_mut().enumerate() {
                *v = T::from_f64(self.kind.value(k, period));
            }
            Ok(())
        })
    }
}
