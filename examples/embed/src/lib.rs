//! Sentence embeddings with paraphrase-MiniLM-L3-v2 compiled by lele.
//!
//! The pipeline of sentence-transformers models: WordPiece tokens (the
//! `tokenizers` crate reading the model's `tokenizer.json`), the BERT
//! encoder, mean pooling of the last hidden state over real tokens, L2
//! normalization; sentences are then compared by cosine similarity.
//!
//! ```no_run
//! use lele_example_embed::{Embedder, rank};
//! let mut embedder = Embedder::new("minilm_tokenizer.json".as_ref())?;
//! let query = embedder.embed("How do I run a model in Rust?")?;
//! let docs = ["Compile ONNX to Rust", "Bake a cake"]
//!     .iter()
//!     .map(|s| embedder.embed(s))
//!     .collect::<Result<Vec<_>, _>>()?;
//! for (i, score) in rank(&query, &docs) {
//!     println!("{score:.3}  {}", i);
//! }
//! # Ok::<(), lele_example_embed::EmbedError>(())
//! ```
use std::path::Path;
use std::time::Instant;

use tokenizers::Tokenizer;

/// The encoder, compiled from `model.toml` at build time.
#[lele::model("model.toml")]
pub struct MiniLm;

/// Longest token sequence the compiled model accepts (`model.toml`).
pub const MAX_TOKENS: usize = 128;

/// Width of an embedding.
pub const DIM: usize = 384;

/// What can go wrong while embedding.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The tokenizer file could not be read or parsed.
    #[error("loading tokenizer {path}: {message}")]
    Tokenizer {
        /// The file.
        path: String,
        /// The tokenizer library's message.
        message: String,
    },
    /// The tokenizer failed on a sentence.
    #[error("tokenizing {text:?}: {message}")]
    Encode {
        /// The sentence.
        text: String,
        /// The tokenizer library's message.
        message: String,
    },
    /// The model rejected its input or could not load.
    #[error(transparent)]
    Model(#[from] lele::Error),
    /// An input tensor could not be formed.
    #[error(transparent)]
    Input(#[from] lele::kernels::KernelError),
    /// The encoder's output does not have the expected shape.
    #[error("hidden state of shape {0:?}, expected [1, tokens, {DIM}]")]
    HiddenShape(Vec<usize>),
}

/// Time spent in the model, per call.
#[derive(Clone, Debug, Default)]
pub struct CallTimes {
    /// Milliseconds of each call, in order.
    pub ms: Vec<f64>,
}

impl CallTimes {
    /// Median call time in milliseconds (0 without calls).
    pub fn median_ms(&self) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
        }
    }
}

/// Tokenizer + encoder + pooling, with buffers reused across sentences.
pub struct Embedder {
    model: MiniLm,
    ws: MiniLmWorkspace,
    tokenizer: Tokenizer,
    ids: Vec<i64>,
    mask: Vec<i64>,
    /// Time of each encoder call (tokenizing and pooling excluded).
    pub times: CallTimes,
}

impl Embedder {
    /// Loads the compiled encoder and the tokenizer file (`tokenizer.json`
    /// of the MiniLM family; `cargo xtask models` fetches one as
    /// `minilm_tokenizer.json`).
    pub fn new(tokenizer_json: &Path) -> Result<Self, EmbedError> {
        let mut tokenizer =
            Tokenizer::from_file(tokenizer_json).map_err(|e| EmbedError::Tokenizer {
                path: tokenizer_json.display().to_string(),
                message: e.to_string(),
            })?;
        // One sentence per call: no padding; long sentences are cut to what
        // the compiled model accepts.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer {
                path: tokenizer_json.display().to_string(),
                message: e.to_string(),
            })?;
        let model = MiniLm::new()?;
        let ws = model.workspace();
        Ok(Self {
            model,
            ws,
            tokenizer,
            ids: Vec::with_capacity(MAX_TOKENS),
            mask: Vec::with_capacity(MAX_TOKENS),
            times: CallTimes::default(),
        })
    }

    /// Token ids of a sentence, with `[CLS]`/`[SEP]`, truncated to
    /// [`MAX_TOKENS`].
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Encode {
                text: text.to_owned(),
                message: e.to_string(),
            })?;
        Ok(enc.get_ids().to_vec())
    }

    /// The unit-length embedding of a sentence.
    pub fn embed(&mut self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.tokenize(text)?;
        self.ids.clear();
        self.ids.extend(ids.iter().map(|&i| i64::from(i)));
        self.mask.clear();
        self.mask.resize(self.ids.len(), 1);
        let n = self.ids.len();
        let start = Instant::now();
        let out = self.model.forward(
            &mut self.ws,
            lele::TensorView::new(&self.ids, &[1, n])?,
            lele::TensorView::new(&self.mask, &[1, n])?,
        )?;
        self.times.ms.push(start.elapsed().as_secs_f64() * 1e3);
        let hidden = &out.onnx_shape_422;
        if hidden.dims() != [1, n, DIM] {
            return Err(EmbedError::HiddenShape(hidden.dims().to_vec()));
        }
        Ok(mean_pool_normalized(hidden.data(), &self.mask, DIM))
    }
}

/// Mean of the rows of `hidden` (`[tokens, dim]`) whose mask is non-zero,
/// scaled to unit length (a zero vector stays zero).
pub fn mean_pool_normalized(hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dim];
    let mut count = 0usize;
    for (row, &m) in hidden.chunks_exact(dim).zip(mask) {
        if m != 0 {
            count += 1;
            for (s, &h) in sum.iter_mut().zip(row) {
                *s += h;
            }
        }
    }
    let count = count.max(1) as f32;
    sum.iter_mut().for_each(|s| *s /= count);
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|s| *s /= norm);
    }
    sum
}

/// Cosine similarity (0 when either vector is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Candidates by decreasing cosine similarity to `query`:
/// `(candidate index, similarity)`.
pub fn rank(query: &[f32], candidates: &[Vec<f32>]) -> Vec<(usize, f32)> {
    let mut scored: Vec<(usize, f32)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (i, cosine(query, c)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_skips_masked_rows_and_normalizes() {
        let hidden = [1.0, 0.0, 3.0, 4.0, 100.0, 100.0];
        let v = mean_pool_normalized(&hidden, &[1, 1, 0], 2);
        // mean of (1,0) and (3,4) is (2,2) → (1/√2, 1/√2)
        assert!((v[0] - 0.5f32.sqrt()).abs() < 1e-6 && (v[1] - 0.5f32.sqrt()).abs() < 1e-6);
    }

    #[test]
    fn ranking_orders_by_similarity() {
        let q = [1.0, 0.0];
        let c = vec![vec![0.0, 1.0], vec![1.0, 0.1], vec![-1.0, 0.0]];
        let r: Vec<usize> = rank(&q, &c).into_iter().map(|(i, _)| i).collect();
        assert_eq!(r, [1, 0, 2]);
    }
}
