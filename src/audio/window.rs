//! Analysis and synthesis windows.
use std::f64::consts::PI;

/// A window shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// All ones.
    Rectangular,
    /// `0.5 - 0.5 cos(2πj/N)`.
    Hann,
    /// The square root of [`Window::Hann`]: used for both analysis and
    /// synthesis, the pair overlap-adds to one at half overlap.
    SqrtHann,
    /// `0.54 - 0.46 cos(2πj/N)`.
    Hamming,
    /// `0.42 - 0.5 cos(2πj/N) + 0.08 cos(4πj/N)`.
    Blackman,
    /// Kaldi's default: the symmetric Hann window raised to 0.85.
    Povey,
    /// `sin(π/2 · sin²(π(j + ½)/L))`, the power-complementary window of
    /// DeepFilterNet and Vorbis: at half overlap its squares add to one
    /// (defined on half-sample positions, so [`Symmetry`] does not apply).
    Vorbis,
}

/// Whether a window of length `L` is one period of a periodic function
/// (`N = L`, what spectral analysis wants) or symmetric (`N = L - 1`, as
/// NumPy's `hanning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symmetry {
    /// `N = L`.
    Periodic,
    /// `N = L - 1`.
    Symmetric,
}

impl Window {
    /// The window's value at `j` of a period `n` (computed in f64).
    fn at(self, j: usize, n: f64) -> f64 {
        let x = 2.0 * PI * j as f64 / n;
        let hann = || 0.5 - 0.5 * x.cos();
        match self {
            Window::Rectangular => 1.0,
            Window::Hann => hann(),
            Window::SqrtHann => hann().max(0.0).sqrt(),
            Window::Hamming => 0.54 - 0.46 * x.cos(),
            Window::Blackman => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
            Window::Povey => hann().max(0.0).powf(0.85),
            Window::Vorbis => {
                let s = (PI * (j as f64 + 0.5) / n).sin();
                (0.5 * PI * s * s).sin()
            }
        }
    }

    /// Fills `out` with the window of length `out.len()`. [`Window::Povey`]
    /// is symmetric by definition and ignores `symmetry`.
    pub fn fill(self, symmetry: Symmetry, out: &mut [f32]) {
        let len = out.len();
        let symmetric =
            (symmetry == Symmetry::Symmetric || self == Window::Povey) && self != Window::Vorbis;
        let n = if symmetric {
            len.saturating_sub(1)
        } else {
            len
        };
        if n == 0 {
            out.fill(1.0);
            return;
        }
        for (j, v) in out.iter_mut().enumerate() {
            *v = self.at(j, n as f64) as f32;
        }
    }

    /// The window of length `len` as a new vector.
    pub fn build(self, symmetry: Symmetry, len: usize) -> Vec<f32> {
        let mut out = vec![0.0; len];
        self.fill(symmetry, &mut out);
        out
    }
}
