//! Activations that other kernels apply to their own output as they write
//! it (a convolution's epilogue), so no separate pass over the tensor runs.
use super::math::{sigmoid_slice, swish_slice};
use super::{hard_sigmoid, map_f32};

/// An activation applied in place to an f32 output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// Identity.
    #[default]
    None,
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `x · sigmoid(x)` (SiLU).
    Swish,
    /// `x · clamp(x/6 + 1/2, 0, 1)`.
    HardSwish,
}
crate::to_rust_enum!(ops::unary::Activation {
    None,
    Relu,
    Sigmoid,
    Swish,
    HardSwish
});

impl Activation {
    /// Applies the activation to `y` in place, with the same arithmetic as
    /// the standalone kernel (`Unary`/`Swish`), so fusing changes no result.
    pub fn apply_in_place(self, y: &mut [f32]) {
        // The slice kernels read and write distinct slices: go through a
        // small stack copy.
        let mut tmp = [0f32; 256];
        let f = |x: &[f32], out: &mut [f32]| match self {
            Activation::None => out.copy_from_slice(x),
            Activation::Relu => map_f32(x, out, |v| if v < 0.0 { 0.0 } else { v }),
            Activation::Sigmoid => sigmoid_slice(x, out),
            Activation::Swish => swish_slice(1.0, x, out),
            Activation::HardSwish => {
                map_f32(x, out, |v| v * hard_sigmoid(v, (1.0f64 / 6.0) as f32, 0.5))
            }
        };
        if self == Activation::None {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if matches!(self, Activation::Swish | Activation::Sigmoid)
            && matches!(
                crate::ops::gemm::best_isa(),
                crate::ops::gemm::Isa::Avx2 | crate::ops::gemm::Isa::Avx512
            )
        {
            // SAFETY: AVX2 and FMA were detected.
            unsafe {
                if self == Activation::Swish {
                    super::x86::swish_in_place(1.0, y);
                } else {
                    super::x86::sigmoid_in_place(y);
                }
            }
            return;
        }
        for chunk in y.chunks_mut(tmp.len()) {
            let t = &mut tmp[..chunk.len()];
            t.copy_from_slice(chunk);
            f(t, chunk);
        }
    }
}
