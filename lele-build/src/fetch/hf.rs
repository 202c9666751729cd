//! `hf = { repo, file, revision }`: Hugging Face Hub files through the
//! `hf-hub` crate, in the standard Hub cache layout shared with Python's
//! `huggingface_hub` (`models--owner--name/{blobs,snapshots,refs}`).
//!
//! Honoured: `HF_ENDPOINT`, `HF_HUB_CACHE`, `HF_HOME`, `HF_TOKEN` (else the
//! token file of `huggingface-cli login`). Every file is hashed after it is
//! found or downloaded; content that does not match its pin is removed from
//! the cache (blob and snapshot link), so a bad download is never reused.
use std::path::{Path, PathBuf};

use hf_hub::api::Progress;
use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};

use super::{
    FetchOptions, Fetched, check_pin, file_sha256, lock_file, progress_bar, sha256_file,
    user_cache_dir,
};
use crate::config::{ExtraFile, HfSource};
use crate::error::{BuildError, Result};

/// `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `<user cache>/huggingface/hub`.
pub fn hub_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HF_HUB_CACHE") {
        return PathBuf::from(d);
    }
    hf_home().join("hub")
}

fn hf_home() -> PathBuf {
    std::env::var_os("HF_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| user_cache_dir().join("huggingface"))
}

fn token() -> Option<String> {
    if let Ok(t) = std::env::var("HF_TOKEN")
        && !t.trim().is_empty()
    {
        return Some(t.trim().to_string());
    }
    let t = std::fs::read_to_string(hf_home().join("token")).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The snapshot path of `file` if the cache holds it (no network).
fn cached(hub: &Path, src: &HfSource, file: &str) -> Option<PathBuf> {
    let repo_dir = hub.join(Repo::new(src.repo.clone(), RepoType::Model).folder_name());
    let is_commit = src.revision.len() == 40 && src.revision.chars().all(|c| c.is_ascii_hexdigit());
    let commit = if is_commit {
        src.revision.clone()
    } else {
        std::fs::read_to_string(repo_dir.join("refs").join(&src.revision))
            .ok()?
            .trim()
            .to_string()
    };
    let p = repo_dir.join("snapshots").join(commit).join(file);
    p.is_file().then_some(p)
}

/// Removes a snapshot link and the blob behind it.
fn evict(snapshot: &Path) {
    if let Ok(blob) = std::fs::canonicalize(snapshot)
        && blob != snapshot
    {
        let _ = std::fs::remove_file(blob);
    }
    let _ = std::fs::remove_file(snapshot);
}

struct Bar(indicatif::ProgressBar, bool);

impl Progress for Bar {
    fn init(&mut self, size: usize, filename: &str) {
        self.0 = progress_bar(self.1, filename, Some(size as u64));
    }
    fn update(&mut self, size: usize) {
        self.0.inc(size as u64);
    }
    fn finish(&mut self) {
        self.0.finish_and_clear();
    }
}

pub(super) fn resolve(
    src: &HfSource,
    pinned: Option<&str>,
    files: &[ExtraFile],
    opts: &FetchOptions,
) -> Result<Fetched> {
    let hub = hub_cache_dir();
    // One lele process at a time per repository; hf-hub's own blob lock
    // gives up after a few seconds, ours waits.
    let lock_name = format!(
        "lele-{}.lock",
        Repo::new(src.repo.clone(), RepoType::Model).folder_name()
    );
    let _lock = lock_file(&hub.join(".locks").join(lock_name))?;
    let model = fetch_one(&hub, src, &src.file, pinned, opts)?;
    let sha256 = file_sha256(&model, &opts.root())?;
    let mut out = Vec::new();
    for f in files {
        out.push(fetch_one(&hub, src, f.name(), f.sha256(), opts)?);
    }
    Ok(Fetched {
        model,
        sha256,
        files: out,
    })
}

fn describe(src: &HfSource, file: &str) -> String {
    format!(
        "hf `{}` file `{file}` at revision `{}`",
        src.repo, src.revision
    )
}

fn fetch_one(
    hub: &Path,
    src: &HfSource,
    file: &str,
    pinned: Option<&str>,
    opts: &FetchOptions,
) -> Result<PathBuf> {
    let what = describe(src, file);
    if let Some(p) = cached(hub, src, file) {
        if check_pin(&what, pinned, &file_sha256(&p, &opts.root())?).is_ok() {
            return Ok(p);
        }
        evict(&p);
    }
    if opts.offline {
        return Err(BuildError::Offline(format!(
            "{what} is not in the Hub cache ({}) and this build is offline",
            hub.display()
        )));
    }
    let mut builder = ApiBuilder::from_cache(Cache::new(hub.to_path_buf()))
        .with_progress(false)
        .with_token(token());
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT")
        && !endpoint.trim().is_empty()
    {
        builder = builder.with_endpoint(endpoint.trim().trim_end_matches('/').to_string());
    }
    let api = builder.build().map_err(|e| hub_error(&what, e))?;
    let repo = api.repo(Repo::with_revision(
        src.repo.clone(),
        RepoType::Model,
        src.revision.clone(),
    ));
    let bar = Bar(indicatif::ProgressBar::hidden(), opts.progress);
    let path = repo
        .download_with_progress(file, bar)
        .map_err(|e| hub_error(&what, e))?;
    let actual = sha256_file(&path)?;
    if let Err(e) = check_pin(&what, pinned, &actual) {
        evict(&path);
        return Err(e);
    }
    super::backdate(&path)?;
    Ok(path)
}

fn hub_error(what: &str, e: ApiError) -> BuildError {
    let msg = match &e {
        ApiError::RequestError(inner) => match inner.as_ref() {
            ureq::Error::Status(401, _) | ureq::Error::Status(403, _) => {
                "the Hub refused access (HTTP 401/403): the repository is private or gated; \
                 set HF_TOKEN to a token that can read it"
                    .to_string()
            }
            ureq::Error::Status(404, _) => {
                "not found on the Hub (HTTP 404): check the repository id, file and revision"
                    .to_string()
            }
            ureq::Error::Status(code, _) => format!("the Hub answered HTTP {code}"),
            ureq::Error::Transport(t) => format!("cannot reach the Hub: {t}"),
        },
        ApiError::IoError(io) => format!("download interrupted: {io}"),
        other => other.to_string(),
    };
    BuildError::Fetch {
        what: what.to_string(),
        msg,
    }
}
