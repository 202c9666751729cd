//! tract runner for `cargo xtask bench`.
//!
//! ```text
//! tract-bench --model M.onnx --input NAME=FILE.npy [--input ...] \
//!             --threads T --warmup W --runs R
//! ```
//!
//! Loads the model, pins every input to the dtype and shape of its `.npy`,
//! optimizes, and runs it: once (timed from process start to the end of that
//! run: `first_output_ms`), then W untimed warm-up runs, then R individually
//! timed runs. Prints exactly one JSON line on stdout:
//!
//! ```text
//! {"engine":"tract","threads":1,"first_output_ms":..,"times_ms":[..],"peak_rss_kb":..}
//! ```
//!
//! tract runs a plan on one thread, so `threads` is always reported as 1,
//! whatever `--threads` asked for. Errors go to stderr with a non-zero exit.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tract_onnx::prelude::tract_data::internal::{TractErrorContext, bail, format_err};
use tract_onnx::prelude::*;

fn main() {
    let t0 = Instant::now();
    if let Err(e) = run(t0) {
        // The cause chain, one per line (no backtrace even if RUST_BACKTRACE is set).
        eprintln!("tract-bench: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}

struct Args {
    model: PathBuf,
    inputs: Vec<(String, PathBuf)>,
    threads: usize,
    warmup: usize,
    runs: usize,
}

fn parse_args() -> TractResult<Args> {
    let mut model = None;
    let mut inputs = Vec::new();
    let (mut threads, mut warmup, mut runs) = (1usize, 0usize, 1usize);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format_err!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value()?)),
            "--input" => {
                let v = value()?;
                let (name, file) = v
                    .split_once('=')
                    .ok_or_else(|| format_err!("--input wants NAME=FILE.npy, got {v:?}"))?;
                inputs.push((name.to_string(), PathBuf::from(file)));
            }
            "--threads" => threads = value()?.parse()?,
            "--warmup" => warmup = value()?.parse()?,
            "--runs" => runs = value()?.parse()?,
            _ => bail!("unknown argument {flag:?}"),
        }
    }
    let model = model.ok_or_else(|| format_err!("--model is required"))?;
    Ok(Args {
        model,
        inputs,
        threads,
        warmup,
        runs,
    })
}

fn run(t0: Instant) -> TractResult<()> {
    let args = parse_args()?;
    if args.threads != 1 {
        eprintln!(
            "tract-bench: tract runs single-threaded; --threads {} ignored",
            args.threads
        );
    }

    // value_info entries are optional shape hints. Exporters often leave
    // symbolic dims there (`batch`, `height`, ...) which tract refuses to unify
    // with the concrete input facts pinned below ("Impossible to unify
    // Sym(batch) with Val(1)"); with concrete inputs tract infers every shape
    // itself, so the hints are skipped, as ONNX Runtime tolerates them.
    let mut model = tract_onnx::onnx()
        .with_ignore_value_info(true)
        .model_for_path(&args.model)
        .with_context(|| format!("loading {}", args.model.display()))?;

    // Model inputs in declaration order, matched to the --input files by name.
    let names: Vec<String> = model
        .input_outlets()?
        .iter()
        .map(|o| model.node(o.node).name.clone())
        .collect();
    for (name, _) in &args.inputs {
        if !names.contains(name) {
            bail!("model has no input {name:?} (inputs: {names:?})");
        }
    }
    // Pin each input to the exact dtype and shape of its .npy, so tract
    // optimizes for concrete shapes (as ORT sees them at run time).
    let mut values: TVec<TValue> = tvec![];
    for (i, name) in names.iter().enumerate() {
        let (_, file) = args
            .inputs
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| format_err!("no --input given for model input {name:?}"))?;
        let tensor = read_npy(file).with_context(|| format!("reading {}", file.display()))?;
        model = model.with_input_fact(
            i,
            InferenceFact::dt_shape(tensor.datum_type(), tensor.shape()),
        )?;
        values.push(tensor.into_tvalue());
    }

    let plan = model.into_optimized()?.into_runnable()?;

    // Cloning a TValue only bumps a reference count; the data is not copied.
    plan.run(values.clone())?;
    let first_output_ms = ms(t0.elapsed());

    for _ in 0..args.warmup {
        plan.run(values.clone())?;
    }
    let mut times = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        let inputs = values.clone();
        let t = Instant::now();
        let out = plan.run(inputs)?;
        times.push(ms(t.elapsed()));
        drop(out);
    }

    let times_ms: Vec<String> = times.iter().map(|t| format!("{t:.4}")).collect();
    println!(
        r#"{{"engine":"tract","threads":1,"first_output_ms":{first_output_ms:.4},"times_ms":[{}],"peak_rss_kb":{}}}"#,
        times_ms.join(","),
        peak_rss_kb()?
    );
    Ok(())
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `VmHWM` (peak resident set size) of this process, in kB.
fn peak_rss_kb() -> TractResult<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format_err!("no VmHWM in /proc/self/status"))
}

/// Minimal `.npy` reader: format versions 1-3, C order, little-endian (or
/// byte-order-free) float32/float64/int64/int32/int8/uint8/bool.
fn read_npy(path: &Path) -> TractResult<Tensor> {
    let bytes = std::fs::read(path)?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("not an .npy file");
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => bail!("unsupported .npy version {v}"),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or_else(|| format_err!("truncated header"))?;
    let header = std::str::from_utf8(header)?;
    let data = &bytes[start + header_len..];

    // The header is a Python dict literal, e.g.
    // {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 48, 192), }
    let field = |key: &str| -> TractResult<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| format_err!("header lacks {key}: {header}"))?;
        let rest = header[at + key.len() + 2..].trim_start();
        Ok(rest.strip_prefix(':').unwrap_or(rest).trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| format_err!("bad descr in {header}"))?;
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-order arrays are not supported");
    }
    let shape_src = field("shape")?;
    let shape_src = shape_src
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| format_err!("bad shape in {header}"))?;
    let shape = shape_src
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()?;
    let count: usize = shape.iter().product();

    fn build<T: Datum, const N: usize>(
        shape: &[usize],
        data: &[u8],
        count: usize,
        conv: fn([u8; N]) -> T,
    ) -> TractResult<Tensor> {
        if data.len() < count * N {
            bail!("data too short: {} bytes for {count} elements", data.len());
        }
        let v: Vec<T> = data[..count * N]
            .chunks_exact(N)
            .map(|c| conv(c.try_into().unwrap()))
            .collect();
        Ok(tract_ndarray::ArrayD::from_shape_vec(shape, v)?.into_tensor())
    }
    match descr {
        "<f4" => build(&shape, data, count, f32::from_le_bytes),
        "<f8" => build(&shape, data, count, f64::from_le_bytes),
        "<i8" => build(&shape, data, count, i64::from_le_bytes),
        "<i4" => build(&shape, data, count, i32::from_le_bytes),
        "|i1" => build(&shape, data, count, i8::from_le_bytes),
        "|u1" => build(&shape, data, count, u8::from_le_bytes),
        "|b1" => build(&shape, data, count, |[b]: [u8; 1]| b != 0),
        d => bail!("unsupported .npy dtype {d:?}"),
    }
}
