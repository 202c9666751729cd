//! Gemma 3 270M (the zoo's Q4_K_M GGUF) compiled by the macro into a
//! decoder whose key/value cache lives in the workspace.
//!
//! Run in every test run: the cache carries a prompt from call to call
//! exactly, hostile positions and tokens are errors, the tokenizer and
//! the generator work, and the first logits are as near the model in
//! float64 as llama.cpp's are. Against llama.cpp itself (`cargo xtask
//! llm-reference` writes its generations, then `cargo test --test gemma3
//! -- --ignored`): the tokenization of 16 texts, and the first step's 20
//! largest logits within 1e-2 with 64 greedy tokens equal for five
//! prompts. The latter does not hold (issue 55) and cannot for an
//! implementation that sums in another order: the f16 and 8-bit roundings
//! of attention and activations turn last-bit differences into logits
//! 0.2–0.5 apart, and llama.cpp differs from itself that much when its
//! weight repacking is off or the prompt comes a token at a time.
#![cfg(not(target_family = "wasm"))]
mod common;

use lele::TensorView;
use lele::llm::Decoder;

#[lele::model("tests/models/gemma3_270m.toml")]
struct Gemma3;

/// "The capital of France is" in Gemma's vocabulary, after BOS.
const PROMPT: [i64; 6] = [2, 818, 5279, 529, 7001, 563];

/// Feeds `tokens` from position `pos`; the last token's logits.
fn step(
    model: &Gemma3,
    ws: &mut Gemma3Workspace,
    tokens: &[i64],
    pos: i64,
) -> Result<Vec<f32>, lele::Error> {
    let t = TensorView::new(tokens, &[tokens.len()])?;
    let p = [pos];
    let p = TensorView::new(&p, &[1])?;
    Ok(model.forward(ws, t, p)?.logits.to_vec())
}

fn argmax(v: &[f32]) -> i64 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as i64
}

#[test]
fn a_prompt_fed_in_pieces_gives_the_logits_of_one_call() {
    let model = Gemma3::new().unwrap();
    let mut ws = model.workspace();
    let whole = step(&model, &mut ws, &PROMPT, 0).unwrap();
    assert_eq!(whole.len(), 262_144);
    // A fresh workspace, the prompt in pieces of 2, 1 and 3 tokens: each
    // call must find the keys and values of the ones before in the cache.
    let mut ws = model.workspace();
    step(&model, &mut ws, &PROMPT[..2], 0).unwrap();
    step(&model, &mut ws, &PROMPT[2..3], 2).unwrap();
    let pieces = step(&model, &mut ws, &PROMPT[3..], 3).unwrap();
    assert_eq!(pieces, whole);
    // Continuing from the wrong position gives other logits (the cache is
    // read, not ignored).
    let mut ws2 = model.workspace();
    step(&model, &mut ws2, &PROMPT[..3], 0).unwrap();
    let skipped = step(&model, &mut ws2, &PROMPT[3..], 4).unwrap();
    assert_ne!(skipped, whole);
}

#[test]
fn positions_past_the_context_and_unknown_tokens_are_errors() {
    let model = Gemma3::new().unwrap();
    let mut ws = model.workspace();
    // `[decoder] context = 512`.
    assert!(step(&model, &mut ws, &PROMPT, 512 - 6).is_ok());
    assert!(step(&model, &mut ws, &PROMPT, 512 - 5).is_err());
    assert!(step(&model, &mut ws, &PROMPT, -1).is_err());
    assert!(step(&model, &mut ws, &PROMPT, i64::MAX).is_err());
    assert!(step(&model, &mut ws, &[262_144], 0).is_err());
    assert!(step(&model, &mut ws, &[-3], 0).is_err());
    // More tokens than `[inputs] tokens = ["n <= 64"]`.
    assert!(step(&model, &mut ws, &[2; 65], 0).is_err());
    assert!(step(&model, &mut ws, &[], 0).is_err());
}

fn reference() -> serde_json::Value {
    let p = common::fixtures_dir().join("llm").join("gemma3_270m.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\n(run `cargo xtask llm-reference` first)",
            p.display()
        )
    });
    serde_json::from_str(&text).expect("reference JSON")
}

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .expect("id list")
        .iter()
        .map(|t| t.as_i64().expect("id"))
        .collect()
}

#[test]
#[ignore = "needs `cargo xtask llm-reference` (llama.cpp); not token-exact, nor is llama.cpp with itself (issue 55)"]
fn greedy_decoding_equals_llama_cpp() {
    let reference = reference();
    let model = Gemma3::new().unwrap();
    let mut ws = model.workspace();
    let mut failures = Vec::new();
    for case in reference["cases"].as_array().expect("cases") {
        let prompt = ids(&case["prompt_ids"]);
        let logits = step(&model, &mut ws, &prompt, 0).unwrap();
        let top = ids(&case["top_ids"]);
        let mut worst = 0f64;
        for (&id, want) in top.iter().zip(case["top_logits"].as_array().unwrap()) {
            let d = (f64::from(logits[id as usize]) - want.as_f64().unwrap()).abs();
            worst = worst.max(d);
        }
        let want = ids(&case["greedy_ids"]);
        let mut got = Vec::new();
        let mut next = argmax(&logits);
        for pos in (prompt.len() as i64..).take(want.len()) {
            got.push(next);
            next = argmax(&step(&model, &mut ws, &[next], pos).unwrap());
        }
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        eprintln!(
            "{}: first-step top-20 logits within {worst:.2e}; first {same} of {} greedy tokens equal",
            case["prompt"],
            want.len()
        );
        if worst > 1e-2 || got != want {
            failures.push(case["prompt"].to_string());
        }
    }
    assert!(failures.is_empty(), "differ from llama.cpp: {failures:?}");
}

#[test]
fn the_tokenizer_carried_with_the_model_reads_text_as_llama_cpp() {
    let model = Gemma3::new().unwrap();
    let tokenizer = model.tokenizer().unwrap();
    assert_eq!(tokenizer.vocab_size(), 262_144);
    let ids = tokenizer.encode("The capital of France is", true, false);
    assert_eq!(
        ids.iter().map(|&t| i64::from(t)).collect::<Vec<_>>(),
        PROMPT
    );
    // BOS is a control token: no text.
    assert_eq!(tokenizer.decode(&ids), "The capital of France is");
    // A spelled control token is that token only when asked.
    let turn = tokenizer.token_id("<start_of_turn>").unwrap();
    assert_eq!(tokenizer.encode("<start_of_turn>", false, true), [turn]);
    assert!(
        !tokenizer
            .encode("<start_of_turn>", false, false)
            .contains(&turn)
    );
    assert!(tokenizer.is_end(tokenizer.token_id("<end_of_turn>").unwrap()));
    assert!(tokenizer.is_end(tokenizer.token_id("<eos>").unwrap()));
    assert!(!tokenizer.is_end(turn));
    // Characters outside the vocabulary fall back to byte tokens, and the
    // bytes come back.
    let text = "a\u{7}b \u{10FFFD}";
    assert_eq!(
        tokenizer.decode(&tokenizer.encode(text, false, false)),
        text
    );
}

#[test]
fn the_generator_feeds_batches_and_steps_as_single_calls_do() {
    use lele::llm::{Generator, LlmError, SamplerConfig};
    let model = Gemma3::new().unwrap();
    let prompt: Vec<u32> = PROMPT.iter().map(|&t| t as u32).collect();
    let mut generator = Generator::new(&model, SamplerConfig::greedy()).unwrap();
    assert_eq!(generator.context(), 512);
    let first = generator.prefill(&prompt).unwrap();
    let tokens: Vec<u32> = generator
        .tokens(first, 8)
        .collect::<Result<_, _>>()
        .unwrap();
    // 8 tokens yielded, 7 of them fed back.
    assert_eq!(generator.position(), PROMPT.len() + 7);
    let mut ws = model.workspace();
    let mut next = argmax(&step(&model, &mut ws, &PROMPT, 0).unwrap());
    for (i, &t) in tokens.iter().enumerate() {
        assert_eq!(i64::from(t), next, "token {i}");
        next = argmax(&step(&model, &mut ws, &[next], (PROMPT.len() + i) as i64).unwrap());
    }
    // A prompt longer than one call's bound goes in several calls; past
    // the context it is refused before any call.
    generator.reset();
    let long: Vec<u32> = prompt.iter().copied().cycle().take(150).collect();
    generator.prefill(&long).unwrap();
    assert_eq!(generator.position(), 150);
    assert!(matches!(
        generator.prefill(&vec![818; 400]),
        Err(LlmError::ContextFull { context: 512 })
    ));
    assert!(matches!(generator.prefill(&[]), Err(LlmError::Empty)));
}

#[test]
#[ignore = "needs `cargo xtask llm-reference` (llama.cpp)"]
fn tokenization_equals_llama_cpp() {
    let reference = reference();
    let model = Gemma3::new().unwrap();
    let tokenizer = model.tokenizer().unwrap();
    let cases = reference["tokenizations"]
        .as_array()
        .expect("tokenizations");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let special = case["special"].as_bool().expect("special");
        let want = ids(&case["ids"]);
        let got: Vec<i64> = tokenizer
            .encode(text, true, special)
            .into_iter()
            .map(i64::from)
            .collect();
        if got != want {
            failures.push(format!("{text:?} (special {special}): {got:?} vs {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Against Gemma 3 computed in float64 from the dequantized weights
/// (`xtask/python/llm_f64_reference.py`, written by `cargo xtask
/// fixtures`): the same most likely token, and the reference's 20 largest
/// logits within 0.75. llama.cpp itself lies 0.27–0.49 from these values
/// (its 8-bit activations and f16 attention; measured on the five
/// sequences on a Zen 4 machine), so 0.75 leaves lele half as much again,
/// while a port bug (a wrong norm, RoPE base or window) moves logits by
/// whole units.
#[test]
fn first_logits_are_as_near_exact_arithmetic_as_llama_cpp_is() {
    let p = common::fixtures_dir()
        .join("llm")
        .join("gemma3_270m_f64.json");
    let text = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}\n(run `cargo xtask fixtures`)", p.display()));
    let reference: serde_json::Value = serde_json::from_str(&text).expect("reference JSON");
    let model = Gemma3::new().unwrap();
    let cases = reference["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 5);
    for case in cases {
        let tokens = ids(&case["tokens"]);
        let mut ws = model.workspace();
        let logits = step(&model, &mut ws, &tokens, 0).unwrap();
        let top = ids(&case["top_ids"]);
        assert_eq!(argmax(&logits), top[0], "{tokens:?}");
        let mut worst = 0f64;
        for (&id, want) in top
            .iter()
            .zip(case["top_logits"].as_array().unwrap())
            .take(20)
        {
            let d = (f64::from(logits[id as usize]) - want.as_f64().unwrap()).abs();
            worst = worst.max(d);
        }
        eprintln!(
            "{} tokens: top-20 logits within {worst:.3} of float64",
            tokens.len()
        );
        assert!(worst <= 0.75, "{tokens:?}: {worst}");
    }
}
