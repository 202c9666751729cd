//! Feeding a prompt and decoding: the position in the cache, the token
//! history for the sampler, batches of at most [`Decoder::MAX_TOKENS`].
use super::{Decoder, LlmError, Sampler, SamplerConfig};

/// A conversation with a [`Decoder`]: its workspace (the key/value cache),
/// the position reached and the tokens fed so far. Buffers are sized when
/// it is made; feeding and decoding allocate nothing.
pub struct Generator<'m, M: Decoder> {
    model: &'m M,
    ws: M::Workspace,
    sampler: Sampler,
    context: usize,
    /// Every token fed, in order (its length is the position).
    history: Vec<u32>,
    /// One batch as the model takes it.
    batch: Vec<i64>,
}

impl<'m, M: Decoder> Generator<'m, M> {
    /// A fresh generator (empty cache) picking tokens by `config`.
    pub fn new(model: &'m M, config: SamplerConfig) -> Result<Self, LlmError> {
        let context = model
            .context()
            .ok_or(LlmError::NotADecoder("no context bound in its metadata"))?;
        Ok(Generator {
            model,
            ws: model.workspace(),
            sampler: Sampler::new(config),
            context,
            history: Vec::with_capacity(context),
            batch: Vec::with_capacity(M::MAX_TOKENS),
        })
    }

    /// Tokens fed so far (the next position).
    pub fn position(&self) -> usize {
        self.history.len()
    }

    /// Positions the cache holds.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Forgets the conversation (the cache is overwritten from position 0).
    pub fn reset(&mut self) {
        self.history.clear();
    }

    /// Feeds `tokens` after those fed before, in batches the model takes,
    /// and picks the token that follows them.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<u32, LlmError> {
        if tokens.is_empty() {
            return Err(LlmError::Empty);
        }
        if self.history.len() + tokens.len() > self.context {
            return Err(LlmError::ContextFull {
                context: self.context,
            });
        }
        let chunks = tokens.chunks(M::MAX_TOKENS.max(1));
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.enumerate() {
            self.batch.clear();
            self.batch.extend(chunk.iter().map(|&t| i64::from(t)));
            let position = self.history.len() as i64;
            let logits = self.model.logits(&mut self.ws, &self.batch, position)?;
            self.history.extend_from_slice(chunk);
            // Only the last batch's logits pick a token.
            if i == last {
                return Ok(self.sampler.sample(logits, &self.history));
            }
        }
        Err(LlmError::Empty)
    }

    /// Feeds one token and picks the next.
    pub fn step(&mut self, token: u32) -> Result<u32, LlmError> {
        self.prefill(&[token])
    }

    /// The tokens from `first` on, each fed back to pick the next, at most
    /// `max` of them (a token is fed only when another one is wanted).
    pub fn tokens(&mut self, first: u32, max: usize) -> Tokens<'_, 'm, M> {
        Tokens {
            generator: self,
            next: Some(first),
            left: max,
            failed: None,
        }
    }
}

/// The iterator of [`Generator::tokens`].
pub struct Tokens<'g, 'm, M: Decoder> {
    generator: &'g mut Generator<'m, M>,
    next: Option<u32>,
    left: usize,
    failed: Option<LlmError>,
}

impl<M: Decoder> Iterator for Tokens<'_, '_, M> {
    type Item = Result<u32, LlmError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            self.left = 0;
            return Some(Err(e));
        }
        if self.left == 0 {
            return None;
        }
        let token = self.next.take()?;
        self.left -= 1;
        if self.left > 0 {
            match self.generator.step(token) {
                Ok(t) => self.next = Some(t),
                // The token stands; the failure to go on comes next.
                Err(e) => self.failed = Some(e),
            }
        }
        Some(Ok(token))
    }
}
