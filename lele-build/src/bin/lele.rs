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
            eprintln!("lele: {e}");
            ExitCode::FAILURE
        }
    }
}
