//! End to end: a fixed sentence set (`examples/data/sentences.txt`, query
//! first) through the tokenizer and the compiled MiniLM, against the same
//! pipeline run with the HF tokenizer and ONNX Runtime (`cargo xtask
//! fixtures` writes `target/fixtures/apps/embed.json`).
use std::path::PathBuf;

use lele_example_embed::{Embedder, rank};
use serde_json::Value;

fn zoo() -> PathBuf {
    std::env::var_os("LELE_ZOO")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("lele/zoo")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/lele/zoo")))
        .expect("set LELE_ZOO")
}

fn reference() -> Value {
    let dir = std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fixtures"));
    let path = dir.join("apps/embed.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures` first)", path.display()));
    serde_json::from_str(&text).expect("embed.json")
}

#[test]
fn ranking_matches_hf_tokenizer_and_ort() {
    let reference = reference();
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/sentences.txt"),
    )
    .unwrap();
    let sentences: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(reference["query"].as_str(), Some(sentences[0]));
    let mut embedder = Embedder::new(&zoo().join("minilm_tokenizer.json")).unwrap();

    let mut embeddings = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let ids: Vec<u64> = embedder
            .tokenize(s)
            .unwrap()
            .into_iter()
            .map(u64::from)
            .collect();
        let expected: Vec<u64> = reference["token_ids"][i]
            .as_array()
            .expect("token ids")
            .iter()
            .map(|v| v.as_u64().expect("id"))
            .collect();
        assert_eq!(ids, expected, "tokens of {s:?}");
        let e = embedder.embed(s).unwrap();
        let ort: Vec<f64> = reference["embeddings"][i]
            .as_array()
            .expect("embedding")
            .iter()
            .map(|v| v.as_f64().expect("float"))
            .collect();
        assert_eq!(e.len(), ort.len());
        for (k, (&a, &b)) in e.iter().zip(&ort).enumerate() {
            assert!(
                (f64::from(a) - b).abs() <= 1e-4 + 1e-3 * b.abs(),
                "{s:?}[{k}]: {a} vs {b}"
            );
        }
        embeddings.push(e);
    }

    let ranked = rank(&embeddings[0], &embeddings[1..]);
    let order: Vec<u64> = ranked.iter().map(|&(i, _)| i as u64).collect();
    let expected: Vec<u64> = reference["ranking"]
        .as_array()
        .expect("ranking")
        .iter()
        .map(|v| v.as_u64().expect("index"))
        .collect();
    assert_eq!(order, expected, "ranking");
    for &(i, score) in &ranked {
        let ort = reference["scores"][i].as_f64().expect("score");
        assert!(
            (f64::from(score) - ort).abs() <= 1e-4,
            "score of {i}: {score} vs {ort}"
        );
    }
}
