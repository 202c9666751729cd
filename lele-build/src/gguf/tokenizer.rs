//! The tokenizer of a GGUF file (its `tokenizer.ggml.*` metadata) in the
//! compact form the generated model carries at the end of its weights and
//! `lele::llm::Tokenizer` reads back:
//!
//! `LELETOK1`, then little-endian: kind (u32, 1 = SentencePiece as
//! llama.cpp's `llama` tokenizer), token count (u32), BOS, EOS, unknown
//! and end-of-turn ids (i32, −1 for none), flags (u32: bit 0 add BOS,
//! bit 1 add a space prefix); then per token its score (f32), type (u8,
//! llama.cpp's: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
//! 6 byte), text length (u32) and text (UTF-8).
use super::{Gguf, Value};
use crate::error::{BuildError, Result};
use lele_kernels::rt::TOKENIZER_MAGIC;

/// The tokenizer blob of `g`, or `None` when the file has no tokenizer.
/// A tokenizer of a kind lele does not implement is an error (the model
/// would compile but could not be fed text).
pub fn tokenizer_blob(g: &Gguf) -> Result<Option<Vec<u8>>> {
    let bad = |msg: String| BuildError::Gguf(msg);
    let Some(model) = g.get("tokenizer.ggml.model") else {
        return Ok(None);
    };
    match model.as_str() {
        Some("llama") => {}
        Some(other) => {
            return Err(bad(format!(
                "tokenizer.ggml.model `{}` is not supported (SentencePiece `llama` is)",
                crate::error::escape_controls(other)
            )));
        }
        None => return Err(bad("tokenizer.ggml.model is not a string".into())),
    }
    let Some(Value::Array(_, tokens)) = g.get("tokenizer.ggml.tokens") else {
        return Err(bad("no tokenizer.ggml.tokens array".into()));
    };
    let scores = match g.get("tokenizer.ggml.scores") {
        Some(Value::Array(_, s)) => Some(s),
        None => None,
        Some(_) => return Err(bad("tokenizer.ggml.scores is not an array".into())),
    };
    let types = match g.get("tokenizer.ggml.token_type") {
        Some(Value::Array(_, t)) => Some(t),
        None => None,
        Some(_) => return Err(bad("tokenizer.ggml.token_type is not an array".into())),
    };
    let n = tokens.len();
    if scores.is_some_and(|s| s.len() != n) || types.is_some_and(|t| t.len() != n) {
        return Err(bad(
            "tokenizer.ggml.scores or token_type has another length than tokens".into(),
        ));
    }
    let count = u32::try_from(n).map_err(|_| bad("too many tokens".into()))?;
    let id = |key: &str| -> Result<i32> {
        match g.get(key) {
            None => Ok(-1),
            Some(v) => match v.as_u64() {
                Some(i) if (i as usize) < n => Ok(i as i32),
                _ => Err(bad(format!("{key} is not a token id"))),
            },
        }
    };
    let flag = |key: &str, default: bool| match g.get(key) {
        Some(Value::Bool(b)) => *b,
        _ => default,
    };
    let mut out = Vec::with_capacity(32 + n * 16);
    out.extend_from_slice(TOKENIZER_MAGIC);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    for key in [
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.eot_token_id",
    ] {
        out.extend_from_slice(&id(key)?.to_le_bytes());
    }
    let flags = u32::from(flag("tokenizer.ggml.add_bos_token", true))
        | (u32::from(flag("tokenizer.ggml.add_space_prefix", true)) << 1);
    out.extend_from_slice(&flags.to_le_bytes());
    for (i, token) in tokens.iter().enumerate() {
        let text = token
            .as_str()
            .ok_or_else(|| bad(format!("token {i} is not a string")))?;
        let score = match scores.map(|s| &s[i]) {
            Some(Value::F32(v)) if v.is_finite() => *v,
            Some(_) => return Err(bad(format!("the score of token {i} is not a finite f32"))),
            None => 0.0,
        };
        let ty = match types.map(|t| t[i].as_u64()) {
            Some(Some(t @ 1..=6)) => t as u8,
            Some(_) => return Err(bad(format!("the type of token {i} is not 1..=6"))),
            None => 1,
        };
        out.extend_from_slice(&score.to_le_bytes());
        out.push(ty);
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    Ok(Some(out))
}
