//! `chat`: talks with Gemma 3 270M compiled by lele from its GGUF file.
//! The zoo's file is the pretrained model, which continues text (`--raw`)
//! well and follows chat turns poorly (as in llama.cpp); an
//! instruction-tuned Gemma 3 GGUF in `model.toml` chats.
//!
//! ```text
//! chat [--prompt TEXT] [--raw] [--max-tokens N] [--temperature T] [--seed S] [--threads N] [--timings]
//! chat [--threads N] --profile N
//! ```
//! Without `--prompt`, reads one user turn per line from standard input,
//! keeping the conversation in the key/value cache. `--raw` continues the
//! prompt as plain text instead of wrapping it in Gemma's chat turns.
//! Tokens are printed as they come; `--timings` ends with one JSON line:
//! prompt and generated token counts, prefill and decode tokens per second.
//! `--profile N` times N decoding steps node by node and prints the time
//! per operator type.
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use lele::llm::{Decoder, Generator, LlmError, SamplerConfig, TextStream, Tokenizer};

#[lele::model("model.toml")]
struct Gemma3;

struct Options {
    prompt: Option<String>,
    raw: bool,
    max_tokens: usize,
    sampler: SamplerConfig,
    timings: bool,
    profile: Option<usize>,
}

fn usage() -> ! {
    eprintln!(
        "usage: chat [--prompt TEXT] [--raw] [--max-tokens N] [--temperature T] [--seed S] [--threads N] [--timings] [--profile N]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        prompt: None,
        raw: false,
        max_tokens: 128,
        sampler: SamplerConfig::default(),
        timings: false,
        profile: None,
    };
    let mut args = std::env::args().skip(1);
    let value = |args: &mut std::iter::Skip<std::env::Args>| args.next().unwrap_or_else(|| usage());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--prompt" => o.prompt = Some(value(&mut args)),
            "--raw" => o.raw = true,
            "--timings" => o.timings = true,
            "--profile" => o.profile = Some(value(&mut args).parse().unwrap_or_else(|_| usage())),
            "--max-tokens" => o.max_tokens = value(&mut args).parse().unwrap_or_else(|_| usage()),
            "--temperature" => {
                o.sampler.temperature = value(&mut args).parse().unwrap_or_else(|_| usage())
            }
            "--seed" => o.sampler.seed = value(&mut args).parse().unwrap_or_else(|_| usage()),
            "--threads" => {
                let n = value(&mut args).parse().unwrap_or_else(|_| usage());
                lele::kernels::threads::set_num_threads(n);
            }
            _ => usage(),
        }
    }
    o
}

/// Time spent and tokens fed, for `--timings`.
#[derive(Default)]
struct Clock {
    prompt_tokens: usize,
    prefill: Duration,
    /// Tokens fed back while decoding (one model call each).
    generated: usize,
    decode: Duration,
}

fn main() {
    if let Err(e) = run(options()) {
        eprintln!("chat: {e}");
        std::process::exit(1);
    }
}

/// One user turn in Gemma's chat format (the GGUF carries no template);
/// the first turn of a conversation starts with BOS.
fn turn(tokenizer: &Tokenizer, text: &str, first: bool) -> Vec<u32> {
    let wrapped = format!("<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n");
    let mut tokens = tokenizer.encode(&wrapped, first, true);
    if !first {
        // The model's last turn ended at its `<end_of_turn>`: close it.
        tokens.splice(0..0, tokenizer.encode("\n", false, false));
    }
    tokens
}

/// Times `steps` single-token calls after a short prompt, node by node;
/// prints each operator type's share, largest first.
fn profile(model: &Gemma3, steps: usize) -> Result<(), Box<dyn std::error::Error>> {
    let tokens = model
        .tokenizer()?
        .encode("The capital of France is", true, false);
    let mut ws = model.workspace();
    model.logits(
        &mut ws,
        &tokens.iter().map(|&t| i64::from(t)).collect::<Vec<_>>(),
        0,
    )?;
    let mut timer = lele::NodeTimer::new(Gemma3::node_labels().len());
    let token = [i64::from(tokens[tokens.len() - 1])];
    let started = Instant::now();
    for step in 0..steps {
        let position = [(tokens.len() + step) as i64];
        model.forward_profiled(
            &mut ws,
            &mut timer,
            lele::TensorView::new(&token, &[1])?,
            lele::TensorView::new(&position, &[1])?,
        )?;
    }
    let wall = started.elapsed();
    let mut by_op: Vec<(&str, Duration)> = Vec::new();
    for row in timer.report(Gemma3::node_labels()) {
        match by_op.iter_mut().find(|(op, _)| *op == row.op) {
            Some((_, t)) => *t += row.mean,
            None => by_op.push((row.op, row.mean)),
        }
    }
    by_op.sort_by_key(|b| std::cmp::Reverse(b.1));
    let step = wall / steps.max(1) as u32;
    eprintln!("{steps} steps, {:.2} ms each", step.as_secs_f64() * 1e3);
    for (op, t) in by_op {
        eprintln!("{op:>18} {:8.3} ms", t.as_secs_f64() * 1e3);
    }
    Ok(())
}

fn run(o: Options) -> Result<(), Box<dyn std::error::Error>> {
    let model = Gemma3::new()?;
    if let Some(steps) = o.profile {
        return profile(&model, steps);
    }
    let tokenizer = model.tokenizer()?;
    let mut generator = Generator::new(&model, o.sampler.clone())?;
    let mut clock = Clock::default();
    let mut out = std::io::stdout().lock();
    let mut answer =
        |generator: &mut Generator<'_, Gemma3>, prompt: Vec<u32>, clock: &mut Clock| {
            let t0 = Instant::now();
            let first = generator.prefill(&prompt)?;
            clock.prefill += t0.elapsed();
            clock.prompt_tokens += prompt.len();
            let room = generator.context() - generator.position();
            let mut text = TextStream::new();
            let fed = generator.position();
            let t0 = Instant::now();
            for token in generator.tokens(first, o.max_tokens.min(room)) {
                let token = token?;
                if tokenizer.is_end(token) {
                    break;
                }
                let _ = write!(out, "{}", text.push(&tokenizer, token));
                let _ = out.flush();
            }
            clock.decode += t0.elapsed();
            clock.generated += generator.position() - fed;
            let _ = writeln!(out);
            Ok::<(), LlmError>(())
        };
    match &o.prompt {
        Some(p) if o.raw => {
            let prompt = tokenizer.encode(p, true, false);
            print!("{p}");
            answer(&mut generator, prompt, &mut clock)?;
        }
        Some(p) => answer(&mut generator, turn(&tokenizer, p, true), &mut clock)?,
        None => {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                let first = generator.position() == 0;
                let prompt = if o.raw {
                    tokenizer.encode(&line, first, false)
                } else {
                    turn(&tokenizer, &line, first)
                };
                if let Err(e) = answer(&mut generator, prompt, &mut clock) {
                    eprintln!("chat: {e} (starting over)");
                    generator.reset();
                }
            }
        }
    }
    if o.timings {
        let per_s = |n: usize, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
        println!(
            "{{\"prompt_tokens\":{},\"prefill_tokens_per_s\":{:.2},\"decoded_tokens\":{},\"decode_tokens_per_s\":{:.2},\"threads\":{}}}",
            clock.prompt_tokens,
            per_s(clock.prompt_tokens, clock.prefill),
            clock.generated,
            per_s(clock.generated, clock.decode),
            lele::kernels::threads::num_threads()
        );
    }
    Ok(())
}
