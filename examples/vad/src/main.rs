//! `vad`: speech segments of a WAV file with Silero VAD compiled by lele.
//!
//! ```text
//! vad [--stream] [--threshold P] [--timings FILE] FILE.wav
//! ```
//! The WAV must be 8 or 16 kHz (any channel count; channels are averaged).
//! `--stream` prints segment starts and ends as the chunks arrive, the way a
//! live microphone loop would; otherwise the padded segments are printed at
//! the end. `--timings` appends one JSON line per model call (model, input
//! shape, milliseconds).
use std::io::Write;
use std::path::PathBuf;

use lele_example_vad::{Segmenter, VadParams, VadStream, read_wav};

fn usage() -> ! {
    eprintln!("usage: vad [--stream] [--threshold P] [--timings FILE] FILE.wav");
    std::process::exit(2)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("vad: {e}");
        std::process::exit(1);
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut params = VadParams::default();
    let (mut stream_mode, mut timings, mut file) = (false, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stream" => stream_mode = true,
            "--threshold" => {
                params.threshold = args.next().unwrap_or_else(|| usage()).parse()?;
            }
            "--timings" => timings = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "-h" | "--help" => usage(),
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => usage(),
        }
    }
    let file = file.unwrap_or_else(|| usage());
    let (samples, rate) = read_wav(&file)?;
    let mut vad = VadStream::new(rate)?;
    let mut seg = Segmenter::new(&params, rate, vad.window());
    println!(
        "{}: {:.2} s at {rate} Hz, {} chunks of {} samples",
        file.display(),
        samples.len() as f64 / f64::from(rate),
        samples.len().div_ceil(vad.window()),
        vad.window()
    );
    for (i, chunk) in samples.chunks(vad.window()).enumerate() {
        let was = seg.in_speech();
        seg.push(vad.process(chunk)?);
        if stream_mode && seg.in_speech() != was {
            let t = (i * vad.window()) as f64 / f64::from(rate);
            println!(
                "  {t:7.3} s  {}",
                if seg.in_speech() {
                    "speech starts"
                } else {
                    "speech ends (unpadded, after the silence)"
                }
            );
        }
    }
    for s in seg.finish(samples.len()) {
        println!("speech {:7.3} s – {:7.3} s", s.start_s(rate), s.end_s(rate));
    }
    let med = median(&vad.call_ms);
    println!(
        "model: {med:.3} ms per chunk (median of {} chunks)",
        vad.call_ms.len()
    );
    if let Some(path) = timings {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let shape = [1, vad.input_len()];
        for ms in &vad.call_ms {
            writeln!(
                f,
                r#"{{"example":"vad","model":"silero_vad.onnx","what":"one {rate} Hz chunk","shape":{shape:?},"ms":{ms:.4}}}"#
            )?;
        }
    }
    Ok(())
}
