//! The FFT of a real signal of any length, and its inverse.
use lele_kernels::ops::signal::fft::{Plan, build_plan, plan_len, work_len};

pub use lele_kernels::ops::signal::fft::Complex;

use super::error::{AudioError, at_least, exact};

/// A real FFT of one length `n`: [`RealFft::forward`] gives the `n/2 + 1`
/// bins of non-negative frequency (as NumPy's `rfft`),
/// [`RealFft::inverse`] takes them back to `n` samples (as `irfft`). The
/// plan and the work memory are allocated by [`RealFft::new`].
#[derive(Debug, Clone)]
pub struct RealFft {
    n: usize,
    plan: Vec<f32>,
    work: Vec<Complex>,
    line: Vec<Complex>,
}

impl RealFft {
    /// Plans a transform of length `n` (`n >= 1`).
    pub fn new(n: usize) -> Result<RealFft, AudioError> {
        if n == 0 {
            return Err(AudioError::Invalid("an FFT length of 0".into()));
        }
        let too_large = || AudioError::TooLarge("FFT plan");
        let mut plan = vec![0.0; plan_len(n).ok_or_else(too_large)?];
        let mut work = vec![Complex::ZERO; work_len(n).ok_or_else(too_large)?];
        build_plan(n, &mut plan, &mut work).ok_or_else(too_large)?;
        Ok(RealFft {
            n,
            plan,
            work,
            line: vec![Complex::ZERO; n],
        })
    }

    /// The transform length.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the length is zero (never: [`RealFft::new`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bins of a spectrum: `n/2 + 1`.
    pub fn bins(&self) -> usize {
        self.n / 2 + 1
    }

    /// The spectrum of `input` (at most `n` samples, zero-padded to `n`)
    /// into `out` ([`RealFft::bins`] values): `X[k] = Σ x[j] e^{-2πi·jk/n}`.
    pub fn forward(&mut self, input: &[f32], out: &mut [Complex]) -> Result<(), AudioError> {
        if input.len() > self.n {
            return Err(AudioError::Length {
                what: "FFT input (at most the transform length)",
                expected: self.n,
                got: input.len(),
            });
        }
        exact("FFT output bins", self.bins(), out.len())?;
        let plan = Plan::new(self.n, &self.plan).ok_or(AudioError::TooLarge("FFT plan"))?;
        let sample = |j: usize| input.get(j).copied().unwrap_or(0.0);
        plan.forward_real(sample, &mut self.line, &mut self.work);
        out.copy_from_slice(&self.line[..out.len()]);
        Ok(())
    }

    /// `n` samples whose spectrum is `bins` ([`RealFft::bins`] values; the
    /// imaginary parts of the DC bin and, for an even `n`, of the Nyquist
    /// bin are ignored), scaled by `1/n` so that it inverts
    /// [`RealFft::forward`].
    pub fn inverse(&mut self, bins: &[Complex], out: &mut [f32]) -> Result<(), AudioError> {
        exact("inverse FFT input bins", self.bins(), bins.len())?;
        at_least("inverse FFT output", self.n, out.len())?;
        let n = self.n;
        // The full Hermitian spectrum, conjugated: the backward transform
        // is then a forward one whose real part is the signal.
        self.line[0] = Complex::new(bins[0].re, 0.0);
        for (k, &v) in bins.iter().enumerate().skip(1) {
            self.line[k] = v.conj();
            if n - k != k {
                self.line[n - k] = v;
            } else {
                self.line[k] = Complex::new(v.re, 0.0);
            }
        }
        let plan = Plan::new(self.n, &self.plan).ok_or(AudioError::TooLarge("FFT plan"))?;
        plan.forward(&mut self.line, &mut self.work);
        let scale = 1.0 / n as f32;
        for (o, v) in out[..n].iter_mut().zip(&self.line) {
            *o = v.re * scale;
        }
        Ok(())
    }
}
