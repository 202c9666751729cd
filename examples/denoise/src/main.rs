//! `denoise IN.wav -o OUT.wav [--model gtcrn] [--timings] [--calls FILE]`:
//! speech enhancement of a WAV file (any rate; mixed down to mono),
//! streaming through GTCRN one 16 ms hop at a time. `--timings` prints one
//! JSON line: init time, time to the first output, per-hop quantiles and
//! the real-time factor; `--calls FILE` appends one JSON line per hop
//! (what `cargo xtask demo` compares with ONNX Runtime).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use lele::audio::{read_wav, write_wav};
use lele_example_denoise::denoise;

const USAGE: &str = "usage: denoise IN.wav -o OUT.wav [--model gtcrn] [--timings] [--calls FILE]";

struct Args {
    input: PathBuf,
    output: PathBuf,
    timings: bool,
    calls: Option<PathBuf>,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut input, mut output, mut timings, mut calls) = (None, None, false, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" | "--output" => output = Some(args.next().ok_or("-o needs a file")?.into()),
            "--model" => match args.next().as_deref() {
                Some("gtcrn") => {}
                Some(other) => return Err(format!("unknown model `{other}` (available: gtcrn)")),
                None => return Err("--model needs a name".into()),
            },
            "--timings" => timings = true,
            "--calls" => calls = Some(args.next().ok_or("--calls needs a file")?.into()),
            "-h" | "--help" => return Err(USAGE.into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            _ if input.is_none() => input = Some(a.into()),
            _ => return Err(format!("one input file only\n{USAGE}")),
        }
    }
    Ok(Args {
        input: input.ok_or(USAGE)?,
        output: output.ok_or(USAGE)?,
        timings,
        calls,
    })
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (noisy, rate) = read_wav(&args.input)?;
    let (clean, t) = denoise(&noisy, rate)?;
    write_wav(&args.output, &clean, rate)?;
    let seconds = noisy.len() as f64 / f64::from(rate);
    eprintln!(
        "{}: {seconds:.2} s at {rate} Hz, {} hops of 16 ms -> {}",
        args.input.display(),
        t.hop_ms.len(),
        args.output.display()
    );
    if let Some(path) = &args.calls {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        for ms in &t.hop_ms {
            writeln!(
                f,
                r#"{{"example":"denoise","model":"gtcrn_simple.onnx","what":"one 16 ms hop (lele: with STFT and ISTFT)","shape":[1,257,1,2],"ms":{ms:.4}}}"#
            )?;
        }
    }
    if args.timings {
        let total: f64 = t.hop_ms.iter().sum();
        println!(
            "{{\"init_ms\":{:.3},\"first_output_ms\":{:.3},\"hops\":{},\"hop_p50_ms\":{:.4},\"hop_p99_ms\":{:.4},\"hop_p999_ms\":{:.4},\"hop_max_ms\":{:.4},\"real_time_factor\":{:.5}}}",
            t.init_ms,
            t.first_output_ms,
            t.hop_ms.len(),
            t.hop_quantile(0.5),
            t.hop_quantile(0.99),
            t.hop_quantile(0.999),
            t.hop_quantile(1.0),
            total / 1e3 / seconds,
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("denoise: {e}");
            ExitCode::FAILURE
        }
    }
}
