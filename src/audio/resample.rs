//! Streaming resampling between rates of any rational ratio, by a
//! Kaiser-windowed sinc filter evaluated at each output instant (one
//! polyphase filter per output phase, computed once).
use super::error::{AudioError, at_least};

/// Zero crossings of the sinc on each side, at the lower of the two rates.
const ZEROS: usize = 16;
/// Kaiser β: about 80 dB of stopband attenuation.
const KAISER_BETA: f64 = 8.0;
/// The cutoff as a fraction of the lower Nyquist frequency, leaving the
/// transition band below it so that it does not alias.
const ROLLOFF: f64 = 0.94;

/// The zeroth-order modified Bessel function of the first kind.
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term, mut k) = (1.0, 1.0, 1.0);
    while term > 1e-12 * sum {
        term *= (x / (2.0 * k)) * (x / (2.0 * k));
        sum += term;
        k += 1.0;
    }
    sum
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A resampler from `from` Hz to `to` Hz that takes input in chunks of any
/// size: output sample `k` is the band-limited signal at input time
/// `k · from / to`, so a whole stream (after [`Resampler::flush`]) has
/// `ceil(len · to / from)` samples aligned with the input. Each output
/// waits for `taps/2` later input samples before it is written.
#[derive(Debug, Clone)]
pub struct Resampler {
    /// Output phases per input step (`to / g`) and input step per output
    /// (`from / g`).
    up: usize,
    down: usize,
    half: usize,
    /// `up` filters of `2·half` taps, the taps of phase `p` weighting input
    /// samples `base + 1 - half ..= base + half` of an output at
    /// `base + p/up`.
    filters: Vec<f32>,
    /// The last `2·half` input samples, stored twice so that the window is
    /// always one contiguous slice (`ring[pos..pos + 2·half]`, oldest first).
    ring: Vec<f32>,
    pos: usize,
    /// Index of the next input sample; samples before 0 are zeros.
    next: u64,
    /// Input samples of the stream, the zeros of `flush` not counted.
    taken: u64,
    /// Outputs written.
    emitted: u64,
    /// The next output's instant: input position `base + phase/up`.
    base: u64,
    phase: usize,
}

impl Resampler {
    /// A resampler from `from` to `to` samples per second.
    pub fn new(from: u32, to: u32) -> Result<Resampler, AudioError> {
        if from == 0 || to == 0 {
            return Err(AudioError::Invalid(format!(
                "resampling {from} Hz to {to} Hz: rates must be positive"
            )));
        }
        let g = gcd(from as u64, to as u64);
        let (up, down) = ((to as u64 / g) as usize, (from as u64 / g) as usize);
        // The filter runs at the input rate; its cutoff is the lower
        // Nyquist frequency, in input-rate cycles per sample.
        let cutoff = ROLLOFF * (up as f64 / down as f64).min(1.0) / 2.0;
        // Equal rates: a copy (one tap of weight one), nothing filtered.
        let same = up == down;
        let half = if same {
            1
        } else {
            ((ZEROS as f64 / (2.0 * cutoff)).ceil() as usize).max(1)
        };
        let taps = 2 * half;
        let len = up
            .checked_mul(taps)
            .filter(|&l| l <= 1 << 26)
            .ok_or(AudioError::TooLarge(
                "resampling filter (rates too far from a simple ratio)",
            ))?;
        let mut filters = vec![0.0f32; len];
        let i0_beta = bessel_i0(KAISER_BETA);
        if same {
            filters[0] = 1.0;
        }
        for p in (0..up).filter(|_| !same) {
            let frac = p as f64 / up as f64;
            for j in 0..taps {
                // Distance from the output instant to input sample j.
                let d = frac + (half - 1) as f64 - j as f64;
                let x = 2.0 * cutoff * d;
                let sinc = if x == 0.0 {
                    1.0
                } else {
                    (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x)
                };
                let r = d / half as f64;
                let window = if r.abs() >= 1.0 {
                    0.0
                } else {
                    bessel_i0(KAISER_BETA * (1.0 - r * r).sqrt()) / i0_beta
                };
                filters[p * taps + j] = (2.0 * cutoff * sinc * window) as f32;
            }
        }
        let mut r = Resampler {
            up,
            down,
            half,
            filters,
            ring: vec![0.0; 2 * taps],
            pos: 0,
            next: 0,
            taken: 0,
            emitted: 0,
            base: 0,
            phase: 0,
        };
        r.reset();
        Ok(r)
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.ring.fill(0.0);
        self.pos = 0;
        self.next = 0;
        self.taken = 0;
        self.emitted = 0;
        self.base = 0;
        self.phase = 0;
    }

    /// An upper bound of the samples [`Resampler::process`] writes for
    /// `input` new samples.
    pub fn max_output(&self, input: usize) -> usize {
        (input as u128 * self.up as u128 / self.down as u128) as usize + 2
    }

    /// Takes `input` and writes every output sample it completes into
    /// `out` (at least [`Resampler::max_output`]`(input.len())` values);
    /// returns how many.
    pub fn process(&mut self, input: &[f32], out: &mut [f32]) -> Result<usize, AudioError> {
        at_least("resampler output", self.max_output(input.len()), out.len())?;
        let mut written = 0;
        for &x in input {
            written += self.push(x, &mut out[written..]);
        }
        self.taken += input.len() as u64;
        Ok(written)
    }

    /// Pushes the zeros that complete the outputs of the samples taken so
    /// far into `out` (at least [`Resampler::max_output`]`(2·half)`
    /// values, `half` being the filter's half length), then starts a new
    /// stream.
    pub fn flush(&mut self, out: &mut [f32]) -> Result<usize, AudioError> {
        at_least(
            "resampler output",
            self.max_output(2 * self.half),
            out.len(),
        )?;
        // Outputs at instants before the end of the input.
        let total = (self.taken * self.up as u64).div_ceil(self.down as u64);
        let mut written = 0;
        while self.emitted < total && written < out.len() {
            written += self.push(0.0, &mut out[written..]);
        }
        // The last zeros may complete outputs past the end: not written.
        written -= (self.emitted - total.min(self.emitted)) as usize;
        self.reset();
        Ok(written)
    }

    /// Takes one sample; writes the outputs whose window it completes.
    fn push(&mut self, x: f32, out: &mut [f32]) -> usize {
        let taps = 2 * self.half;
        self.ring[self.pos] = x;
        self.ring[self.pos + taps] = x;
        self.pos = (self.pos + 1) % taps;
        let i = self.next;
        self.next += 1;
        let mut written = 0;
        // An output at `base` weights samples `base + 1 - half ..= base +
        // half`: the ring's window once sample `base + half` is in.
        while self.base + self.half as u64 <= i && written < out.len() {
            let window = &self.ring[self.pos..self.pos + taps];
            let filter = &self.filters[self.phase * taps..(self.phase + 1) * taps];
            out[written] = window.iter().zip(filter).map(|(a, b)| a * b).sum();
            written += 1;
            self.emitted += 1;
            self.phase += self.down;
            self.base += (self.phase / self.up) as u64;
            self.phase %= self.up;
        }
        written
    }
}
