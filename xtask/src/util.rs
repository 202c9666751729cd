//! Small file helpers shared by the commands: hashing and running processes.
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// Lower-case hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of a file's content, as lower-case hex.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// A writer that hashes and counts everything written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Flushes and returns the inner writer and the sha256 (hex) of the bytes written.
    pub fn finish(mut self) -> io::Result<(W, String)> {
        self.inner.flush()?;
        Ok((self.inner, hex(&self.hasher.finalize())))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// One-line description of a command, for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs a command with captured output; on failure the error carries its output.
pub fn run_captured(cmd: &mut Command) -> anyhow::Result<String> {
    let what = describe(cmd);
    let out = cmd.output().with_context(|| format!("starting `{what}`"))?;
    if !out.status.success() {
        bail!(
            "`{what}` failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with inherited output; fails with a clear message if it fails.
pub fn run_inherited(cmd: &mut Command) -> anyhow::Result<()> {
    let what = describe(cmd);
    let status = cmd.status().with_context(|| format!("starting `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}

/// Runs a named step, printing its name and duration to stderr.
pub fn step<T>(name: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    eprintln!("\n==> {name}");
    let started = std::time::Instant::now();
    let r = f()?;
    eprintln!("==> {name}: ok ({:.1}s)", started.elapsed().as_secs_f64());
    Ok(r)
}
