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
use lele_example_denoise::{denoise, denoise_dfn3};

const USAGE: &str =
    "usage: denoise IN.wav -o OUT.wav [--model gtcrn|dfn3] [--timings] [--calls FILE]";

struct Args {
    input: PathBuf,
    output: PathBuf,
    timings: bool,
    calls: Option<PathBuf>,
    dfn3: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut input, mut output, mut timings, mut calls) = (None, None, false, None);
    let mut dfn3 = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" | "--output" => output = Some(args.next().ok_or("-o needs a file")?.into()),
            "--model" => match args.next().as_deref() {
                Some("gtcrn") => dfn3 = false,
                Some("dfn3") => dfn3 = true,
                Some(other) => {
                    return Err(format!("unknown model `{other}` (available: gtcrn, dfn3)"));
                }
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
        dfn3,
    })
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (noisy, rate) = read_wav(&args.input)?;
    let (clean, t) = if args.dfn3 {
        denoise_dfn3(&noisy, rate)?
    } else {
        denoise(&noisy, rate)?
    };
    write_wav(&args.output, &clean, rate)?;
    let seconds = noisy.len() as f64 / f64::from(rate);
    let call_s = t.samples_per_call as f64 / f64::from(t.model_rate);
    eprintln!(
        "{}: {seconds:.2} s at {rate} Hz, {} calls of {:.0} ms at {} Hz -> {}",
        args.input.display(),
        t.call_ms.len(),
        call_s * 1e3,
        t.model_rate,
        args.output.display()
    );
    if let Some(path) = &args.calls {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        // The ORT side times GTCRN's model call; DeepFilterNet3's blocks
        // run three networks and have no one model call to compare.
        for ms in t.call_ms.iter().filter(|_| !args.dfn3) {
            writeln!(
                f,
                r#"{{"example":"denoise","model":"gtcrn_simple.onnx","what":"one 16 ms hop (lele: with STFT and ISTFT)","shape":[1,257,1,2],"ms":{ms:.4}}}"#
            )?;
        }
    }
    if args.timings {
        let total: f64 = t.call_ms.iter().sum();
        println!(
            "{{\"init_ms\":{:.3},\"first_output_ms\":{:.3},\"calls\":{},\"samples_per_call\":{},\"call_p50_ms\":{:.4},\"call_p99_ms\":{:.4},\"call_p999_ms\":{:.4},\"call_max_ms\":{:.4},\"real_time_factor\":{:.5}}}",
            t.init_ms,
            t.first_output_ms,
            t.call_ms.len(),
            t.samples_per_call,
            t.call_quantile(0.5),
            t.call_quantile(0.99),
            t.call_quantile(0.999),
            t.call_quantile(1.0),
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
