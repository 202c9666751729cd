//! Downloading with limits, shared by `url` and `hf` sources: an idle
//! timeout (no byte for that long ends the download, waiting for the
//! response included), a size cap (a `Content-Length` above it is refused
//! before the body is read, a body that runs past it is cut), and a
//! partial file in the destination folder that is removed on every error
//! and renamed into place only when complete.
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::progress_bar;
use crate::error::{BuildError, Result};
use crate::fsutil::hex;

/// Default idle timeout: no byte for this long ends a download.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Default size cap of one downloaded file: 8 GiB.
pub const DEFAULT_MAX_DOWNLOAD_BYTES: u64 = 8 << 30;
/// Environment variable overriding the idle timeout (seconds, may be fractional).
pub const TIMEOUT_ENV: &str = "LELE_DOWNLOAD_TIMEOUT";
/// Environment variable overriding the size cap (bytes).
pub const MAX_BYTES_ENV: &str = "LELE_MAX_DOWNLOAD_BYTES";
/// Connect timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Prefix of the partial files of a download (followed by the process id).
const PART_PREFIX: &str = ".lele-download-";

/// The limits of a download.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetLimits {
    /// No byte for this long (or no response) ends the download.
    pub read_timeout: Duration,
    /// The most bytes one file may have.
    pub max_bytes: u64,
}

impl NetLimits {
    /// The limits for a model whose toml sets `max_download_bytes` (if it
    /// does); the environment ([`TIMEOUT_ENV`], [`MAX_BYTES_ENV`]) has the
    /// last word, since it belongs to whoever runs the build.
    pub fn new(toml_max: Option<u64>) -> Result<NetLimits> {
        let env = |name: &str| std::env::var(name).ok().filter(|s| !s.trim().is_empty());
        let read_timeout = match env(TIMEOUT_ENV) {
            None => DEFAULT_READ_TIMEOUT,
            Some(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0 && *v <= 86_400.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    BuildError::Config(format!(
                        "{TIMEOUT_ENV} = `{}` is not a number of seconds between 0 and 86400",
                        s.escape_debug()
                    ))
                })?,
        };
        let max_bytes = match env(MAX_BYTES_ENV) {
            Some(s) => s
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| {
                    BuildError::Config(format!(
                        "{MAX_BYTES_ENV} = `{}` is not a positive number of bytes",
                        s.escape_debug()
                    ))
                })?,
            None => toml_max.unwrap_or(DEFAULT_MAX_DOWNLOAD_BYTES),
        };
        Ok(NetLimits {
            read_timeout,
            max_bytes,
        })
    }
}

/// A blocking client with the limits' idle timeout. reqwest's blocking
/// `timeout` bounds the wait for the response and then each read of the
/// body separately, which is an idle timeout.
pub fn client(
    limits: &NetLimits,
    redirects: reqwest::redirect::Policy,
) -> Result<reqwest::blocking::Client> {
    reqwest::blocking::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT.min(limits.read_timeout))
        .timeout(limits.read_timeout)
        .redirect(redirects)
        .build()
        .map_err(|e| BuildError::Fetch {
            what: "the HTTP client".into(),
            msg: e.to_string(),
        })
}

/// The message of a failed request, naming a timeout as such.
pub fn request_error(e: &reqwest::Error, limits: &NetLimits) -> String {
    if e.is_timeout() {
        format!(
            "no answer for {:?} (the idle timeout; {TIMEOUT_ENV} changes it)",
            limits.read_timeout
        )
    } else {
        // The source chain says what actually failed.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        msg
    }
}

/// A partial download: removed when dropped unless [`Part::commit`]ted.
pub struct Part {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Part {
    /// Creates the partial file for this process in `dir`.
    fn create(dir: &Path) -> Result<Part> {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(format!("{PART_PREFIX}{}.part", std::process::id()));
        let file = std::fs::File::create(&path).map_err(|source| BuildError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Part {
            path,
            file: Some(file),
        })
    }

    /// The partial file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the finished file to `dest` (same folder, so atomic).
    pub fn commit(mut self, dest: &Path) -> Result<()> {
        if let Some(f) = self.file.take() {
            f.sync_all().map_err(|source| BuildError::Io {
                path: self.path.clone(),
                source,
            })?;
        }
        std::fs::rename(&self.path, dest).map_err(|source| BuildError::Io {
            path: dest.to_path_buf(),
            source,
        })?;
        // Renamed: nothing left to remove.
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        self.file = None;
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Removes the partial files a killed download left in `dir`. Callers hold
/// the folder's lock, so no other process is writing one.
pub fn sweep_parts(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(PART_PREFIX)
            && name.ends_with(".part")
            && e.file_type().is_ok_and(|t| t.is_file())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A received body: its partial file, sha256 and length.
pub struct Received {
    /// The complete content, not yet in place.
    pub part: Part,
    /// Its sha256, lower-case hex.
    pub sha256: String,
    /// Its length.
    pub len: u64,
}

fn fetch_err(what: &str, msg: impl std::fmt::Display) -> BuildError {
    BuildError::Fetch {
        what: what.to_string(),
        msg: msg.to_string(),
    }
}

/// Streams the body of `resp` into a partial file in `dir`, hashing it,
/// within `limits`. `label` names the file on the progress bar.
pub fn receive(
    resp: &mut impl Read,
    content_length: Option<u64>,
    dir: &Path,
    what: &str,
    label: &str,
    limits: &NetLimits,
    progress: bool,
) -> Result<Received> {
    if let Some(t) = content_length
        && t > limits.max_bytes
    {
        return Err(fetch_err(
            what,
            format!(
                "the server announces {t} bytes, more than the limit of {} \
                 ([model] max_download_bytes or {MAX_BYTES_ENV} raises it)",
                limits.max_bytes
            ),
        ));
    }
    let mut part = Part::create(dir)?;
    let io = |source| BuildError::Io {
        path: part.path.clone(),
        source,
    };
    let pb = progress_bar(progress, label, content_length);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut written: u64 = 0;
    // Never more than the announced length (or the cap when none is).
    let allowed = content_length.unwrap_or(limits.max_bytes);
    loop {
        let n = resp.read(&mut buf).map_err(|e| {
            let of = content_length
                .map(|t| format!(" of {t}"))
                .unwrap_or_default();
            let why = if is_timeout(&e) {
                format!(
                    "no data for {:?} (the idle timeout; {TIMEOUT_ENV} changes it)",
                    limits.read_timeout
                )
            } else {
                e.to_string()
            };
            fetch_err(
                what,
                format!("download interrupted after {written}{of} bytes: {why}"),
            )
        })?;
        if n == 0 {
            break;
        }
        let total = written
            .checked_add(n as u64)
            .filter(|t| *t <= allowed)
            .ok_or_else(|| {
                fetch_err(
                    what,
                    match content_length {
                        Some(t) => format!("the server sent more than the {t} bytes it announced"),
                        None => format!(
                            "the download exceeds the limit of {} bytes \
                             ([model] max_download_bytes or {MAX_BYTES_ENV} raises it)",
                            limits.max_bytes
                        ),
                    },
                )
            })?;
        hasher.update(&buf[..n]);
        match part.file.as_mut() {
            Some(f) => f.write_all(&buf[..n]).map_err(io)?,
            None => return Err(fetch_err(what, "the partial file was closed")),
        }
        written = total;
        pb.inc(n as u64);
    }
    pb.finish_and_clear();
    if let Some(t) = content_length
        && written != t
    {
        return Err(fetch_err(
            what,
            format!("download interrupted: got {written} of {t} bytes"),
        ));
    }
    Ok(Received {
        part,
        sha256: hex(&hasher.finalize()),
        len: written,
    })
}

/// Whether an I/O error from a response body is reqwest's timeout.
fn is_timeout(e: &std::io::Error) -> bool {
    if e.kind() == std::io::ErrorKind::TimedOut {
        return true;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|r| r as _);
    while let Some(s) = src {
        if let Some(re) = s.downcast_ref::<reqwest::Error>()
            && re.is_timeout()
        {
            return true;
        }
        src = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lele-http-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn limits(max: u64) -> NetLimits {
        NetLimits {
            read_timeout: Duration::from_secs(5),
            max_bytes: max,
        }
    }

    fn files(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn body_within_limits_is_committed() {
        let d = scratch("ok");
        let r = receive(&mut &b"hello"[..], Some(5), &d, "x", "x", &limits(5), false).unwrap();
        assert_eq!(r.len, 5);
        assert_eq!(r.sha256, hex(&Sha256::digest(b"hello")));
        r.part.commit(&d.join("out")).unwrap();
        assert_eq!(files(&d), ["out"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn oversized_bodies_are_refused_and_leave_nothing() {
        let d = scratch("big");
        // Announced above the cap: refused before reading.
        let e = receive(&mut &b"hello"[..], Some(5), &d, "x", "x", &limits(4), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("announces 5 bytes"), "{e}");
        // No length and an endless body: cut at the cap.
        let mut endless = std::io::repeat(7);
        let e = receive(&mut endless, None, &d, "x", "x", &limits(1 << 20), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("exceeds the limit"), "{e}");
        // More than announced.
        let e = receive(
            &mut &b"hello!"[..],
            Some(5),
            &d,
            "x",
            "x",
            &limits(99),
            false,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("more than the 5 bytes"), "{e}");
        // Fewer than announced.
        let e = receive(&mut &b"hel"[..], Some(5), &d, "x", "x", &limits(99), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("interrupted"), "{e}");
        assert_eq!(files(&d), Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn stale_parts_are_swept_and_others_kept() {
        let d = scratch("sweep");
        std::fs::write(d.join(format!("{PART_PREFIX}123.part")), b"x").unwrap();
        std::fs::write(d.join("model.onnx"), b"x").unwrap();
        sweep_parts(&d);
        assert_eq!(files(&d), ["model.onnx"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn limits_come_from_toml_unless_the_environment_says() {
        // The variables are not set in the test environment.
        if std::env::var_os(MAX_BYTES_ENV).is_none() && std::env::var_os(TIMEOUT_ENV).is_none() {
            let l = NetLimits::new(Some(1234)).unwrap();
            assert_eq!(l.max_bytes, 1234);
            assert_eq!(l.read_timeout, DEFAULT_READ_TIMEOUT);
            assert_eq!(
                NetLimits::new(None).unwrap().max_bytes,
                DEFAULT_MAX_DOWNLOAD_BYTES
            );
        }
    }
}
