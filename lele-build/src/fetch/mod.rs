//! Getting the model files named by `[model]`: a local path, a URL or a
//! Hugging Face Hub file, each pinned by sha256 and checked on every
//! resolution. Downloads land in a temporary file that is hashed while it
//! streams and renamed into place only when complete and correct, under a
//! file lock, so concurrent builds share one download and an interrupted
//! one never becomes a cache hit.
#[cfg(feature = "hf")]
mod hf;
#[cfg(feature = "url")]
pub mod http;
#[cfg(feature = "url")]
mod url;

#[cfg(feature = "url")]
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::{ExtraFile, ModelToml, Source};
use crate::error::{BuildError, Result};
use crate::fsutil::hex;

#[cfg(feature = "hf")]
pub use hf::hub_cache_dir;

/// The files of a resolved model.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The ONNX file.
    pub model: PathBuf,
    /// Its sha256 (lower-case hex), as computed from the file.
    pub sha256: String,
    /// The extra files, in `files` order.
    pub files: Vec<PathBuf>,
}

/// How to resolve.
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// Never touch the network: only local files and caches.
    pub offline: bool,
    /// Show a progress bar for downloads (the CLI).
    pub progress: bool,
    /// lele's cache root (default [`cache_root`]).
    pub cache_root: Option<PathBuf>,
}

impl FetchOptions {
    /// The cache root to use.
    pub fn root(&self) -> PathBuf {
        self.cache_root.clone().unwrap_or_else(cache_root)
    }
}

/// Whether the environment asks for offline builds: `LELE_SKIP_MODEL_GEN`
/// or `CARGO_NET_OFFLINE` set to `1`/`true`/`yes`.
pub fn offline_from_env() -> bool {
    ["LELE_SKIP_MODEL_GEN", "CARGO_NET_OFFLINE"]
        .iter()
        .any(|v| {
            std::env::var(v)
                .map(|s| matches!(s.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
                .unwrap_or(false)
        })
}

/// Root of lele's caches (`$LELE_CACHE_DIR`, else `<user cache>/lele`).
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("LELE_CACHE_DIR") {
        return PathBuf::from(d);
    }
    crate::fsutil::user_cache_dir().join("lele")
}

/// Resolves the model and its extra files, downloading what is missing.
pub fn resolve(toml: &ModelToml, base: &Path, opts: &FetchOptions) -> Result<Fetched> {
    let pinned = toml.model.sha256.as_deref();
    let files = &toml.model.files;
    match toml.source(base)? {
        Source::Path(p) => resolve_local(
            &p,
            toml.model.path.as_deref().unwrap_or(""),
            pinned,
            files,
            &opts.root(),
        ),
        #[cfg(feature = "url")]
        Source::Url(u) => url::resolve(
            &u,
            pinned,
            files,
            opts,
            &http::NetLimits::new(toml.model.max_download_bytes)?,
        ),
        #[cfg(feature = "hf")]
        Source::Hf(h) => hf::resolve(
            &h,
            pinned,
            files,
            opts,
            &http::NetLimits::new(toml.model.max_download_bytes)?,
        ),
        #[cfg(not(feature = "url"))]
        Source::Url(u) => Err(without_feature("url", &format!("url {u}"))),
        #[cfg(not(feature = "hf"))]
        Source::Hf(h) => Err(without_feature("hf", &format!("hf {}", h.repo))),
    }
}

/// The error of a source whose cargo feature this build left out.
#[cfg(not(all(feature = "url", feature = "hf")))]
fn without_feature(feature: &str, what: &str) -> BuildError {
    BuildError::Config(format!(
        "the model is fetched from {what}, but this build of lele has no `{feature}` feature \
         (enable lele's `{feature}` feature, or give a local `path`)"
    ))
}

fn resolve_local(
    model: &Path,
    written: &str,
    pinned: Option<&str>,
    files: &[ExtraFile],
    root: &Path,
) -> Result<Fetched> {
    if model.exists() && !model.is_file() {
        // A FIFO, a device or a folder: say so (and never open it).
        crate::fsutil::open_regular_file(model)?;
    }
    if !model.is_file() {
        return Err(BuildError::Config(format!(
            "model file `{written}` does not exist (relative paths are relative to the model.toml){}",
            if written.contains("${LELE_ZOO}") {
                "; run `cargo xtask models` to fetch the model zoo"
            } else {
                ""
            }
        )));
    }
    let sha256 = file_sha256(model, root)?;
    check_pin(&format!("`{written}`"), pinned, &sha256)?;
    let dir = model.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for f in files {
        let p = dir.join(f.name());
        if p.exists() && !p.is_file() {
            crate::fsutil::open_regular_file(&p)?;
        }
        if !p.is_file() {
            return Err(BuildError::Config(format!(
                "[model] files: `{}` does not exist next to the model",
                f.name()
            )));
        }
        if let Some(pin) = f.sha256() {
            check_pin(
                &format!("`{}`", f.name()),
                Some(pin),
                &file_sha256(&p, root)?,
            )?;
        }
        out.push(p);
    }
    Ok(Fetched {
        model: model.to_path_buf(),
        sha256,
        files: out,
    })
}

/// Errors unless `actual` matches the pin (when there is one).
pub(crate) fn check_pin(what: &str, pinned: Option<&str>, actual: &str) -> Result<()> {
    match pinned {
        Some(p) if !p.trim().eq_ignore_ascii_case(actual) => Err(BuildError::Config(format!(
            "sha256 mismatch for {what}: model.toml expects {}, the file has {actual}",
            p.trim().to_ascii_lowercase()
        ))),
        _ => Ok(()),
    }
}

/// sha256 of a file, remembered across builds: `<cache root>/verified/`
/// keeps, per file, its hash with the identity it had when hashed (size,
/// modification and change times, inode); a file whose identity still
/// matches is not read again. Any write to the file (truncation, a new
/// download, an edit) changes that identity and forces a new hash. This is
/// what keeps a warm macro expansion fast in unoptimized builds, where
/// hashing a 10 MB model takes ~0.4 s.
pub fn file_sha256(path: &Path, root: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let identity = file_identity(&meta);
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let memo = root
        .join("verified")
        .join(&hex(&Sha256::digest(canon.to_string_lossy().as_bytes()))[..32]);
    if let Ok(text) = crate::fsutil::read_regular_text(&memo, 4096)
        && let Some((id, sha)) = text.trim().rsplit_once(' ')
        && id == identity
        && crate::config::is_sha256(sha)
    {
        return Ok(sha.to_string());
    }
    let sha = sha256_file(path)?;
    if let Some(dir) = memo.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        // A failed memo only costs a hash next time.
        let _ = crate::fsutil::write_atomic(&memo, format!("{identity} {sha}\n").as_bytes());
    }
    Ok(sha)
}

#[cfg(unix)]
fn file_identity(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ) + &format!(":{}", m.len())
}

#[cfg(not(unix))]
fn file_identity(m: &std::fs::Metadata) -> String {
    let t = |r: std::io::Result<std::time::SystemTime>| {
        r.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    };
    format!("{}:{}:{}", t(m.modified()), t(m.created()), m.len())
}

/// sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
    let io = |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = crate::fsutil::open_regular_file(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// An exclusive lock on `path` (created if needed), held until dropped.
#[cfg(feature = "url")]
pub(crate) fn lock_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| BuildError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    f.lock().map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(f)
}

/// A progress bar, hidden unless asked for (a bar needs the `cli`
/// feature; without it downloads show none).
#[cfg(all(feature = "url", not(feature = "cli")))]
pub(crate) fn progress_bar(_show: bool, _name: &str, _total: Option<u64>) -> NoProgress {
    NoProgress
}

/// What a download reports its progress to without the `cli` feature.
#[cfg(all(feature = "url", not(feature = "cli")))]
pub(crate) struct NoProgress;

#[cfg(all(feature = "url", not(feature = "cli")))]
impl NoProgress {
    pub(crate) fn inc(&self, _: u64) {}
    pub(crate) fn finish_and_clear(&self) {}
}

/// A progress bar, hidden unless asked for.
#[cfg(all(feature = "url", feature = "cli"))]
pub(crate) fn progress_bar(show: bool, name: &str, total: Option<u64>) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let pb = match total {
        Some(t) => indicatif::ProgressBar::new(t),
        None => indicatif::ProgressBar::new_spinner(),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:30!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(name.to_string());
    pb
}
