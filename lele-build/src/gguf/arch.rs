//! A decoder's hyperparameters from a GGUF file's metadata, and the check
//! that its tensor table holds every weight those hyperparameters call for
//! with the right dimensions: what an architecture builder starts from.
//! Every problem of a file is reported at once.

use super::{Gguf, TensorInfo, Value};
use crate::error::{BuildError, Result};

/// The decoder families read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Gemma 3 (`gemma3`): RMS norms before and after attention and the
    /// feed-forward, normed queries and keys, sliding-window attention in
    /// five layers of six, GELU-gated feed-forward, tied embeddings.
    Gemma3,
}

/// A decoder's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// The family.
    pub arch: Arch,
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the residual stream.
    pub width: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head's queries and keys.
    pub head_dim: usize,
    /// Width of one head's values.
    pub value_dim: usize,
    /// Width of the feed-forward's hidden layer.
    pub ffn: usize,
    /// The RMS norms' epsilon.
    pub eps: f32,
    /// RoPE base of the global-attention layers.
    pub rope_base: f32,
    /// RoPE base of the sliding-window layers.
    pub rope_base_local: f32,
    /// Tokens a sliding-window layer attends to.
    pub sliding_window: usize,
    /// Every how many layers one attends globally (the last of each group).
    pub global_every: usize,
    /// Tokens in the vocabulary.
    pub vocab: usize,
    /// Longest context trained.
    pub context: usize,
    /// Whether the output projection is the token embedding (no
    /// `output.weight`).
    pub tied_embeddings: bool,
}

impl DecoderConfig {
    /// Whether layer `layer` attends within the sliding window.
    pub fn is_local(&self, layer: usize) -> bool {
        !(layer + 1).is_multiple_of(self.global_every)
    }
}

/// Gemma 3's sliding-window layers use this RoPE base unless the file
/// says otherwise (`gemma3.rope.freq_base_swa`; llama.cpp's default).
const GEMMA3_LOCAL_ROPE_BASE: f32 = 10_000.0;
/// In Gemma 3 every sixth layer attends globally.
const GEMMA3_GLOBAL_EVERY: usize = 6;

/// Reads the decoder's configuration from `g`'s metadata and checks its
/// tensor table against it; every missing or malformed key and tensor is
/// listed in one error.
pub fn decoder_config(g: &Gguf) -> Result<DecoderConfig> {
    let mut problems = Vec::new();
    let arch = match g.architecture() {
        Some("gemma3") => Arch::Gemma3,
        Some(other) => {
            return Err(BuildError::Gguf(format!(
                "architecture `{}` is not supported (gemma3 is)",
                crate::error::escape_controls(other)
            )));
        }
        None => return Err(BuildError::Gguf("no general.architecture".into())),
    };
    let prefix = "gemma3";
    let mut int = |key: &str| -> usize {
        let full = format!("{prefix}.{key}");
        match g.get(&full).and_then(Value::as_u64).map(usize::try_from) {
            Some(Ok(v)) if v > 0 => v,
            Some(_) => {
                problems.push(format!("`{full}` is not a positive integer"));
                0
            }
            None => {
                problems.push(format!("no `{full}`"));
                0
            }
        }
    };
    let layers = int("block_count");
    let width = int("embedding_length");
    let ffn = int("feed_forward_length");
    let heads = int("attention.head_count");
    let kv_heads = int("attention.head_count_kv");
    let head_dim = int("attention.key_length");
    let value_dim = int("attention.value_length");
    let sliding_window = int("attention.sliding_window");
    let context = int("context_length");
    let mut float = |key: &str| -> f32 {
        let full = format!("{prefix}.{key}");
        match g.get(&full) {
            Some(Value::F32(v)) if v.is_finite() && *v > 0.0 => *v,
            Some(_) => {
                problems.push(format!("`{full}` is not a positive f32"));
                0.0
            }
            None => {
                problems.push(format!("no `{full}`"));
                0.0
            }
        }
    };
    let eps = float("attention.layer_norm_rms_epsilon");
    let rope_base = float("rope.freq_base");
    let rope_base_local = match g.get(&format!("{prefix}.rope.freq_base_swa")) {
        Some(Value::F32(v)) if v.is_finite() && *v > 0.0 => *v,
        Some(_) => {
            problems.push(format!(
                "`{prefix}.rope.freq_base_swa` is not a positive f32"
            ));
            0.0
        }
        None => GEMMA3_LOCAL_ROPE_BASE,
    };
    if heads > 0 && kv_heads > 0 && !heads.is_multiple_of(kv_heads) {
        problems.push(format!(
            "{heads} query heads do not group over {kv_heads} key/value heads"
        ));
    }
    let vocab = match g.get("tokenizer.ggml.tokens") {
        Some(Value::Array(_, tokens)) if !tokens.is_empty() => tokens.len(),
        _ => {
            problems.push("no `tokenizer.ggml.tokens`".into());
            0
        }
    };
    let tensor = |name: &str| g.tensors.iter().find(|t| t.name == name);
    let tied_embeddings = tensor("output.weight").is_none();
    let want = |name: String, dims: &[usize], problems: &mut Vec<String>| match tensor(&name) {
        None => problems.push(format!("no tensor `{name}`")),
        Some(TensorInfo { dims: got, .. })
            if got.len() != dims.len() || got.iter().zip(dims).any(|(&a, &b)| a != b as u64) =>
        {
            problems.push(format!("tensor `{name}` is {got:?}, {dims:?} expected"));
        }
        Some(_) => {}
    };
    // GGUF lists a matrix's dimensions innermost first: [in, out].
    want("token_embd.weight".into(), &[width, vocab], &mut problems);
    want("output_norm.weight".into(), &[width], &mut problems);
    if !tied_embeddings {
        want("output.weight".into(), &[width, vocab], &mut problems);
    }
    for l in 0..layers {
        let b = |t: &str| format!("blk.{l}.{t}.weight");
        want(b("attn_q"), &[width, heads * head_dim], &mut problems);
        want(b("attn_k"), &[width, kv_heads * head_dim], &mut problems);
        want(b("attn_v"), &[width, kv_heads * value_dim], &mut problems);
        want(b("attn_output"), &[heads * value_dim, width], &mut problems);
        want(b("attn_q_norm"), &[head_dim], &mut problems);
        want(b("attn_k_norm"), &[head_dim], &mut problems);
        want(b("ffn_gate"), &[width, ffn], &mut problems);
        want(b("ffn_up"), &[width, ffn], &mut problems);
        want(b("ffn_down"), &[ffn, width], &mut problems);
        for norm in [
            "attn_norm",
            "post_attention_norm",
            "ffn_norm",
            "post_ffw_norm",
        ] {
            want(b(norm), &[width], &mut problems);
        }
    }
    if !problems.is_empty() {
        return Err(BuildError::Gguf(format!(
            "this {prefix} file is not a decoder lele can build:\n  {}",
            problems.join("\n  ")
        )));
    }
    Ok(DecoderConfig {
        arch,
        layers,
        width,
        heads,
        kv_heads,
        head_dim,
        value_dim,
        ffn,
        eps,
        rope_base,
        rope_base_local,
        sliding_window,
        global_every: GEMMA3_GLOBAL_EVERY,
        vocab,
        context,
        tied_embeddings,
    })
}
