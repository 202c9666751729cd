//! The `lele` command line: inspect, gen and run ONNX models.
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = lele_build::cli::Cli::parse();
    match lele_build::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `lele bench … | head`: the reader has what it wanted.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            // Model, toml and file strings in the message are shown escaped:
            // nothing from a model reaches the terminal as a control sequence.
            eprintln!("lele: {}", lele_build::error::escape_lines(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
