//! Language models compiled from GGUF: the [`Decoder`] a generated model
//! implements, its [`Tokenizer`], token [`Sampler`]s and the [`Generator`]
//! that feeds a prompt and decodes token by token with the key/value cache
//! in the workspace (no allocation per token).
//!
//! ```text
//! #[lele::model("gemma3.toml")]       // [model] path = "….gguf"
//! struct Gemma3;
//!
//! let model = Gemma3::new()?;
//! let tokenizer = model.tokenizer()?;
//! let mut generator = Generator::new(&model, SamplerConfig::greedy())?;
//! let first = generator.prefill(&tokenizer.encode("The capital of France is", true, false))?;
//! for token in generator.tokens(first, 32) {
//!     print!("{}", tokenizer.decode(&[token?]));
//! }
//! ```
mod generate;
mod sample;
mod text;
mod tokenizer;

pub use generate::{Generator, Tokens};
pub use sample::{Sampler, SamplerConfig};
pub use text::TextStream;
pub use tokenizer::{TokenKind, Tokenizer};

use crate::kernels::rt::{CONTEXT_KEY, TOKENIZER_KEY};

/// Errors of tokenization and generation.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The model failed (a kernel, the weights, an input check).
    #[error(transparent)]
    Model(#[from] crate::Error),
    /// The tokenizer data are missing or malformed.
    #[error("tokenizer: {0}")]
    Tokenizer(&'static str),
    /// The tokens would pass the context bound (`[decoder] context`).
    #[error("the context of {context} tokens is full")]
    ContextFull {
        /// The bound.
        context: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token {0} is not in the vocabulary")]
    UnknownToken(u32),
    /// Nothing to feed.
    #[error("no tokens to feed")]
    Empty,
    /// The compiled model lacks what generation needs.
    #[error("the model is not a compiled decoder: {0}")]
    NotADecoder(&'static str),
}

/// A compiled causal language model: tokens and their first position in,
/// the logits of the last token out; its key/value cache lives in the
/// workspace. The `#[lele::model]` of a GGUF decoder implements it.
pub trait Decoder {
    /// The generated workspace type (arena and caches).
    type Workspace;
    /// Most tokens one call takes (the toml's `[inputs] tokens` bound).
    const MAX_TOKENS: usize;

    /// A fresh workspace (empty cache).
    fn workspace(&self) -> Self::Workspace;

    /// Feeds `tokens` at positions `position..`, after the ones the cache
    /// holds; the logits of the last one.
    fn logits<'w>(
        &self,
        ws: &'w mut Self::Workspace,
        tokens: &[i64],
        position: i64,
    ) -> Result<&'w [f32], crate::Error>;

    /// A metadata entry of the compiled model.
    fn metadata_value(&self, key: &str) -> Option<&'static str>;

    /// The weights (the tokenizer data are at their end).
    fn weights_bytes(&self) -> &[u8];

    /// Positions the cache holds (`[decoder] context`).
    fn context(&self) -> Option<usize> {
        self.metadata_value(CONTEXT_KEY)?.parse().ok()
    }

    /// The model's tokenizer, read from the data the compiler stored.
    fn tokenizer(&self) -> Result<Tokenizer, LlmError> {
        let place = self
            .metadata_value(TOKENIZER_KEY)
            .ok_or(LlmError::Tokenizer("the model was compiled without one"))?;
        let bad = || LlmError::Tokenizer("its place in the weights is malformed");
        let (offset, len) = place.split_once(',').ok_or_else(bad)?;
        let (Ok(offset), Ok(len)) = (offset.parse::<usize>(), len.parse::<usize>()) else {
            return Err(bad());
        };
        let end = offset.checked_add(len).ok_or_else(bad)?;
        let bytes = self
            .weights_bytes()
            .get(offset..end)
            .ok_or(LlmError::Tokenizer("it lies outside the weights"))?;
        Tokenizer::from_bytes(bytes)
    }
}
