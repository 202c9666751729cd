//! `embed`: ranks sentences by similarity to a query with MiniLM compiled by lele.
//!
//! ```text
//! embed [--tokenizer FILE] [--timings FILE] --sentences FILE
//! embed [--tokenizer FILE] QUERY CANDIDATE...
//! ```
//! With `--sentences`, the file's first non-empty line is the query and the
//! others are the candidates. `--timings` appends one JSON line per encoder
//! call (model, input shape, milliseconds).
use std::io::Write;
use std::path::PathBuf;

use lele_example_embed::{Embedder, rank};

fn usage() -> ! {
    eprintln!(
        "usage: embed [--tokenizer FILE] [--timings FILE] (--sentences FILE | QUERY CANDIDATE...)"
    );
    std::process::exit(2)
}

/// `$LELE_ZOO/minilm_tokenizer.json`, else under the user's cache directory
/// (where `cargo xtask models` puts it).
fn default_tokenizer() -> PathBuf {
    let zoo = std::env::var_os("LELE_ZOO")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("lele/zoo")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/lele/zoo")))
        .unwrap_or_else(|| PathBuf::from("."));
    zoo.join("minilm_tokenizer.json")
}

fn main() {
    if let Err(e) = run() {
        eprintln!("embed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut tokenizer = default_tokenizer();
    let mut timings = None;
    let mut sentences: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tokenizer" => tokenizer = args.next().unwrap_or_else(|| usage()).into(),
            "--timings" => timings = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--sentences" => {
                let file = args.next().unwrap_or_else(|| usage());
                let text =
                    std::fs::read_to_string(&file).map_err(|e| format!("reading {file}: {e}"))?;
                sentences.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(String::from),
                );
            }
            "-h" | "--help" => usage(),
            _ => sentences.push(arg),
        }
    }
    if sentences.len() < 2 {
        usage();
    }
    let mut embedder = Embedder::new(&tokenizer)?;
    let query = embedder.embed(&sentences[0])?;
    let candidates = sentences[1..]
        .iter()
        .map(|s| embedder.embed(s))
        .collect::<Result<Vec<_>, _>>()?;
    println!("query: {}", sentences[0]);
    for (rank_no, (i, score)) in rank(&query, &candidates).into_iter().enumerate() {
        println!("{:>2}. {score:+.4}  {}", rank_no + 1, sentences[i + 1]);
    }
    let lengths: Vec<usize> = sentences
        .iter()
        .map(|s| embedder.tokenize(s).map(|t| t.len()))
        .collect::<Result<_, _>>()?;
    println!(
        "encoder: {:.2} ms per sentence (median of {} calls, {} to {} tokens)",
        embedder.times.median_ms(),
        embedder.times.ms.len(),
        lengths.iter().min().unwrap_or(&0),
        lengths.iter().max().unwrap_or(&0),
    );
    if let Some(path) = timings {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        // One call per sentence, in order.
        for (ms, n) in embedder.times.ms.iter().zip(&lengths) {
            writeln!(
                f,
                r#"{{"example":"embed","model":"minilm_l3.onnx","what":"encoder, one sentence","shape":[1, {n}],"ms":{ms:.4}}}"#
            )?;
        }
    }
    Ok(())
}
