//! Choosing the next token from logits: greedy, or drawn after a
//! repetition penalty, temperature, top-k, min-p and top-p, from a seeded
//! generator (the same seed and logits give the same tokens).

/// How [`Sampler`] picks tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; 0 picks the largest logit (greedy).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0 keeps all).
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities add up to `top_p`
    /// (1 keeps all).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one
    /// (0 keeps all).
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens by this
    /// (1 leaves them).
    pub repetition_penalty: f32,
    /// How many of the last tokens the penalty looks at.
    pub repeat_last: usize,
    /// The random generator's seed.
    pub seed: u64,
}

impl SamplerConfig {
    /// Always the largest logit.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        }
    }
}

impl Default for SamplerConfig {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p
    /// 0.05, no repetition penalty.
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            repeat_last: 64,
            seed: 0x5eed,
        }
    }
}

/// Picks tokens by a [`SamplerConfig`]; its buffer grows to the vocabulary
/// on the first pick and is reused after.
pub struct Sampler {
    config: SamplerConfig,
    state: u64,
    candidates: Vec<(f32, u32)>,
}

impl Sampler {
    /// A sampler seeded by `config.seed`.
    pub fn new(config: SamplerConfig) -> Sampler {
        Sampler {
            state: config.seed,
            config,
            candidates: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// A uniform draw in [0, 1) (splitmix64).
    fn uniform(&mut self) -> f32 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }

    /// The next token after `logits` (one per vocabulary entry), `recent`
    /// being the tokens so far (for the repetition penalty). Empty logits
    /// give token 0; NaN logits are never picked over numbers.
    pub fn sample(&mut self, logits: &[f32], recent: &[u32]) -> u32 {
        let c = &self.config;
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (if l.is_nan() { f32::NEG_INFINITY } else { l }, i as u32)),
        );
        if c.repetition_penalty != 1.0 && c.repetition_penalty > 0.0 {
            let from = recent.len().saturating_sub(c.repeat_last);
            for &t in &recent[from..] {
                if let Some((l, _)) = self.candidates.get_mut(t as usize) {
                    *l = if *l > 0.0 {
                        *l / c.repetition_penalty
                    } else {
                        *l * c.repetition_penalty
                    };
                }
            }
        }
        let by_logit = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if c.temperature <= 0.0 || self.candidates.len() <= 1 {
            return self
                .candidates
                .iter()
                .min_by(|a, b| by_logit(a, b))
                .map_or(0, |&(_, t)| t);
        }
        let mut keep = self.candidates.len();
        if c.top_k > 0 && c.top_k < keep {
            self.candidates
                .select_nth_unstable_by(c.top_k - 1, by_logit);
            keep = c.top_k;
        }
        let kept = &mut self.candidates[..keep];
        kept.sort_unstable_by(by_logit);
        // Probabilities (unnormalized) in place of the logits.
        let top = kept[0].0;
        for (l, _) in kept.iter_mut() {
            *l = ((*l - top) / c.temperature).exp();
        }
        if c.min_p > 0.0 {
            let floor = c.min_p * kept[0].0;
            keep = kept.iter().take_while(|(p, _)| *p >= floor).count().max(1);
        }
        if c.top_p < 1.0 {
            let total: f32 = kept[..keep].iter().map(|(p, _)| p).sum();
            let mut sum = 0f32;
            let mut n = 0;
            for (p, _) in &kept[..keep] {
                sum += p;
                n += 1;
                if sum >= c.top_p * total {
                    break;
                }
            }
            keep = n.max(1);
        }
        let total: f32 = self.candidates[..keep].iter().map(|(p, _)| p).sum();
        let mut draw = self.uniform() * total;
        for &(p, t) in &self.candidates[..keep] {
            if draw < p {
                return t;
            }
            draw -= p;
        }
        self.candidates[keep - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_largest_logit_and_the_first_on_ties() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0], &[]), 1);
        assert_eq!(s.sample(&[f32::NAN, -5.0], &[]), 1);
    }

    #[test]
    fn the_repetition_penalty_moves_greedy_off_a_recent_token() {
        let config = SamplerConfig {
            repetition_penalty: 2.0,
            ..SamplerConfig::greedy()
        };
        let mut s = Sampler::new(config);
        assert_eq!(s.sample(&[2.0, 1.5], &[]), 0);
        assert_eq!(s.sample(&[2.0, 1.5], &[0]), 1);
    }

    #[test]
    fn draws_follow_the_probabilities_and_the_seed() {
        let config = SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..SamplerConfig::default()
        };
        // ln 3: token 1 is three times as likely as token 0.
        let logits = [0.0, 3f32.ln(), f32::NEG_INFINITY];
        let mut s = Sampler::new(config.clone());
        let draws: Vec<u32> = (0..4000).map(|_| s.sample(&logits, &[])).collect();
        let ones = draws.iter().filter(|&&t| t == 1).count();
        assert!((2800..3200).contains(&ones), "{ones} of 4000");
        assert!(!draws.contains(&2));
        let mut again = Sampler::new(config);
        let repeat: Vec<u32> = (0..4000).map(|_| again.sample(&logits, &[])).collect();
        assert_eq!(draws, repeat);
    }

    #[test]
    fn top_k_min_p_and_top_p_cut_the_tail() {
        let logits = [5.0, 4.0, 0.0, -1.0];
        for config in [
            SamplerConfig {
                top_k: 1,
                top_p: 1.0,
                min_p: 0.0,
                ..SamplerConfig::default()
            },
            SamplerConfig {
                top_k: 0,
                top_p: 1.0,
                min_p: 0.5,
                ..SamplerConfig::default()
            },
            SamplerConfig {
                top_k: 0,
                top_p: 0.5,
                min_p: 0.0,
                ..SamplerConfig::default()
            },
        ] {
            let mut s = Sampler::new(config.clone());
            for _ in 0..500 {
                let t = s.sample(&logits, &[]);
                // At temperature 0.8, p1/p0 = e^(-1/0.8) ≈ 0.29 and p0 ≈ 0.77
                // of the whole: each cut keeps token 0 alone.
                assert_eq!(t, 0, "{config:?}");
            }
        }
    }
}
