//! `hf = { repo, file, revision }`: Hugging Face Hub files through the
//! `hf-hub` crate, in the standard Hub cache layout shared with Python's
//! `huggingface_hub` (`models--owner--name/{blobs,snapshots,refs}`).
//!
//! Honoured: `HF_ENDPOINT`, `HF_HUB_CACHE`, `HF_HOME`, `HF_TOKEN` (else the
//! token file of `huggingface-cli login`). Every file is hashed after it is
//! found or downloaded: a download that does not match its pin never enters
//! the cache, and a cached snapshot entry that does not is unlinked (only
//! inside the cache, never what it points to). Revisions, names and the
//! commit ids read from `refs/` or sent by the server are validated before
//! they become paths; downloads have an idle timeout and a size cap.
use std::path::{Path, PathBuf};

use hf_hub::api::tokio::ApiBuilder;
use hf_hub::{Cache, Repo, RepoType};

use super::http::{self, NetLimits};
use super::{FetchOptions, Fetched, check_pin, file_sha256, lock_file};
use crate::config::{
    ExtraFile, HfSource, check_relative, check_repo_id, check_revision, is_commit,
};
use crate::error::{BuildError, Result};
use crate::fsutil::read_regular_file;
use crate::fsutil::user_cache_dir;

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
    let t = crate::fsutil::read_regular_text(&hf_home().join("token"), 64 << 10).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Longest `refs/<revision>` file read (a commit id and a newline).
const MAX_REF_BYTES: u64 = 256;
/// Most redirects followed for one file.
const MAX_REDIRECTS: usize = 10;

/// `models--owner--name`.
fn repo_folder(repo: &str) -> String {
    Repo::new(repo.to_string(), RepoType::Model).folder_name()
}

/// Whether `path`, with every link resolved, lies inside `root` (itself
/// canonical). Anything that cannot be resolved is outside.
fn resolves_inside(root: &Path, path: &Path) -> bool {
    std::fs::canonicalize(path).is_ok_and(|c| c.starts_with(root))
}

/// The commit a branch or tag points to, from `refs/<revision>` in the
/// cache: a regular file inside the cache of at most 256 bytes holding a
/// 40-digit hex commit, or nothing.
fn cached_ref(hub_canon: &Path, repo_dir: &Path, revision: &str) -> Option<String> {
    check_revision(revision).ok()?;
    let path = repo_dir.join("refs").join(revision);
    if !resolves_inside(hub_canon, &path) {
        return None;
    }
    let bytes = read_regular_file(&path, MAX_REF_BYTES).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.trim();
    is_commit(text).then(|| text.to_ascii_lowercase())
}

/// The snapshot path of `file` if the cache holds it (no network): a path
/// under `<hub>/models--owner--name/snapshots/<commit>/` whose target, links
/// followed, is a regular file inside the Hub cache.
fn cached(hub: &Path, src: &HfSource, file: &str) -> Option<PathBuf> {
    check_relative(file).ok()?;
    check_repo_id(&src.repo).ok()?;
    let hub_canon = std::fs::canonicalize(hub).ok()?;
    let repo_dir = hub.join(repo_folder(&src.repo));
    let commit = if is_commit(&src.revision) {
        src.revision.to_ascii_lowercase()
    } else {
        cached_ref(&hub_canon, &repo_dir, &src.revision)?
    };
    let p = repo_dir.join("snapshots").join(commit).join(file);
    let target = std::fs::canonicalize(&p).ok()?;
    (target.starts_with(&hub_canon) && std::fs::metadata(&target).is_ok_and(|m| m.is_file()))
        .then_some(p)
}

/// Removes the snapshot entry `snapshot` (a link, or a copied file) so it
/// is not found again; only when its folder lies inside the Hub cache. What
/// a link points to is never removed: a blob that does not match its pin is
/// replaced by the next download of it.
fn evict(hub: &Path, snapshot: &Path) {
    let Ok(hub_canon) = std::fs::canonicalize(hub) else {
        return;
    };
    let (Some(parent), Some(name)) = (snapshot.parent(), snapshot.file_name()) else {
        return;
    };
    let Ok(parent) = std::fs::canonicalize(parent) else {
        return;
    };
    if !parent.starts_with(&hub_canon) {
        return;
    }
    let entry = parent.join(name);
    if std::fs::symlink_metadata(&entry).is_ok_and(|m| m.is_symlink() || m.is_file()) {
        let _ = std::fs::remove_file(&entry);
    }
}

pub(super) fn resolve(
    src: &HfSource,
    pinned: Option<&str>,
    files: &[ExtraFile],
    opts: &FetchOptions,
    limits: &NetLimits,
) -> Result<Fetched> {
    // The toml checks these already; a source built in code is checked here.
    check_repo_id(&src.repo).map_err(|e| BuildError::Config(format!("[model] hf.repo: {e}")))?;
    check_revision(&src.revision)
        .map_err(|e| BuildError::Config(format!("[model] hf.revision: {e}")))?;
    for f in std::iter::once(src.file.as_str()).chain(files.iter().map(ExtraFile::name)) {
        check_relative(f).map_err(|e| BuildError::Config(format!("[model] hf file: {e}")))?;
    }
    let hub = hub_cache_dir();
    // One lele process at a time per repository.
    let lock_name = format!("lele-{}.lock", repo_folder(&src.repo));
    let _lock = lock_file(&hub.join(".locks").join(lock_name))?;
    // Under the lock, a partial file is what a killed process left.
    http::sweep_parts(&hub.join(repo_folder(&src.repo)).join("blobs"));
    let model = fetch_one(&hub, src, &src.file, pinned, opts, limits)?;
    let sha256 = file_sha256(&model, &opts.root())?;
    let mut out = Vec::new();
    for f in files {
        out.push(fetch_one(&hub, src, f.name(), f.sha256(), opts, limits)?);
    }
    Ok(Fetched {
        model,
        sha256,
        files: out,
    })
}

fn describe(src: &HfSource, file: &str) -> String {
    format!(
        "hf `{}` file `{}` at revision `{}`",
        src.repo,
        file.escape_debug(),
        src.revision.escape_debug()
    )
}

fn fetch_one(
    hub: &Path,
    src: &HfSource,
    file: &str,
    pinned: Option<&str>,
    opts: &FetchOptions,
    limits: &NetLimits,
) -> Result<PathBuf> {
    let what = describe(src, file);
    if let Some(p) = cached(hub, src, file) {
        if check_pin(&what, pinned, &file_sha256(&p, &opts.root())?).is_ok() {
            return Ok(p);
        }
        evict(hub, &p);
    }
    if opts.offline {
        return Err(BuildError::Offline(format!(
            "{what} is not in the Hub cache ({}) and this build is offline",
            hub.display()
        )));
    }
    download(hub, src, file, pinned, opts, limits)
}

fn fetch_err(what: &str, msg: impl std::fmt::Display) -> BuildError {
    BuildError::Fetch {
        what: what.to_string(),
        msg: msg.to_string(),
    }
}

/// A header's value as text, if it is one.
fn header(resp: &reqwest::blocking::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// An etag usable as a blob name: 40 or 64 hex digits once quotes and a
/// weak marker are removed; anything else is ignored.
fn blob_name(etag: &str) -> Option<String> {
    let e = etag.trim().trim_start_matches("W/").trim_matches('"');
    ((e.len() == 40 || e.len() == 64) && e.bytes().all(|c| c.is_ascii_hexdigit()))
        .then(|| e.to_ascii_lowercase())
}

/// Downloads `file` the way the Hub serves it (`/resolve/` answering with
/// the commit and the file's etag, LFS files redirected elsewhere) into the
/// standard cache layout. The content is verified before anything is put
/// in the cache; the blob is named by the etag (when it looks like one) or
/// by its sha256.
fn download(
    hub: &Path,
    src: &HfSource,
    file: &str,
    pinned: Option<&str>,
    opts: &FetchOptions,
    limits: &NetLimits,
) -> Result<PathBuf> {
    let what = describe(src, file);
    let mut builder = ApiBuilder::from_cache(Cache::new(hub.to_path_buf())).with_progress(false);
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT")
        && !endpoint.trim().is_empty()
    {
        builder = builder.with_endpoint(endpoint.trim().trim_end_matches('/').to_string());
    }
    let api = builder.build().map_err(|e| fetch_err(&what, e))?;
    let url = api
        .repo(Repo::with_revision(
            src.repo.clone(),
            RepoType::Model,
            src.revision.clone(),
        ))
        .url(file);
    let origin = reqwest::Url::parse(&url).map_err(|e| fetch_err(&what, e))?;
    let client = http::client(limits, reqwest::redirect::Policy::none())?;
    let token = token();
    let mut current = origin.clone();
    let (mut commit, mut linked_etag, mut etag) = (None, None, None);
    let mut hops = 0usize;
    let mut resp = loop {
        let mut req = client.get(current.clone());
        // The token goes to the Hub only, never to where it redirects.
        if let Some(t) = &token
            && current.origin() == origin.origin()
        {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .map_err(|e| fetch_err(&what, http::request_error(&e, limits)))?;
        if commit.is_none() {
            commit = header(&resp, "x-repo-commit");
        }
        if linked_etag.is_none() {
            linked_etag = header(&resp, "x-linked-etag");
        }
        if etag.is_none() && current.origin() == origin.origin() {
            etag = header(&resp, "etag");
        }
        if !resp.status().is_redirection() {
            break resp;
        }
        hops += 1;
        let next = header(&resp, "location")
            .and_then(|l| current.join(&l).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"));
        match next {
            Some(n) if hops <= MAX_REDIRECTS => current = n,
            _ => {
                return Err(fetch_err(
                    &what,
                    format!(
                        "HTTP {} without a usable redirect (or more than {MAX_REDIRECTS})",
                        resp.status()
                    ),
                ));
            }
        }
    };
    let status = resp.status();
    if !status.is_success() {
        return Err(fetch_err(&what, status_message(status.as_u16())));
    }
    let commit = match commit.filter(|c| is_commit(c.trim())) {
        Some(c) => c.trim().to_ascii_lowercase(),
        None if is_commit(&src.revision) => src.revision.to_ascii_lowercase(),
        None => {
            return Err(fetch_err(
                &what,
                "the server did not name the commit (no valid `x-repo-commit` header)",
            ));
        }
    };
    let repo_dir = hub.join(repo_folder(&src.repo));
    let blobs = repo_dir.join("blobs");
    let total = resp.content_length();
    let label = file.rsplit('/').next().unwrap_or(file);
    let got = http::receive(
        &mut resp,
        total,
        &blobs,
        &what,
        label,
        limits,
        opts.progress,
    )?;
    // Dropping `got.part` on an error removes the partial file.
    check_pin(&what, pinned, &got.sha256)?;
    let name = linked_etag
        .or(etag)
        .as_deref()
        .and_then(blob_name)
        .unwrap_or_else(|| got.sha256.clone());
    let blob = blobs.join(&name);
    got.part.commit(&blob)?;
    let pointer = repo_dir.join("snapshots").join(&commit).join(file);
    link_snapshot(&blob, &pointer, file)?;
    if !is_commit(&src.revision) {
        let r = repo_dir.join("refs").join(&src.revision);
        if let Some(dir) = r.parent() {
            std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        crate::fsutil::write_atomic(&r, commit.as_bytes())?;
    }
    crate::fsutil::backdate(&pointer)?;
    Ok(pointer)
}

/// Points the snapshot entry `pointer` of `file` at `blob` (a relative
/// link where links exist, a copy elsewhere), replacing an old entry.
fn link_snapshot(blob: &Path, pointer: &Path, file: &str) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Io { path, source }
    };
    if let Some(dir) = pointer.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(pointer) {
        if m.is_dir() {
            return Err(BuildError::Io {
                path: pointer.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a directory is where the file belongs",
                ),
            });
        }
        std::fs::remove_file(pointer).map_err(io(pointer))?;
    }
    #[cfg(unix)]
    {
        // From snapshots/<commit>/<file's folders> back up to the repository.
        let up = file.split('/').count() + 1;
        let name = blob.file_name().unwrap_or_default();
        let target = PathBuf::from("../".repeat(up)).join("blobs").join(name);
        std::os::unix::fs::symlink(target, pointer).map_err(io(pointer))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        std::fs::copy(blob, pointer)
            .map(|_| ())
            .map_err(io(pointer))
    }
}

fn status_message(code: u16) -> String {
    match code {
        401 | 403 => format!(
            "the Hub refused access (HTTP {code}): the repository is private or gated; \
             set HF_TOKEN to a token that can read it"
        ),
        404 => "not found on the Hub (HTTP 404): check the repository id, file and revision"
            .to_string(),
        _ => format!("the Hub answered HTTP {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lele-hf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn src(revision: &str) -> HfSource {
        HfSource {
            repo: "o/n".into(),
            file: "m.onnx".into(),
            revision: revision.into(),
        }
    }

    /// `<root>/hub/models--o--n` with `refs/main` → COMMIT and the
    /// snapshot's `m.onnx` linked to a blob.
    fn cache(root: &Path) -> PathBuf {
        let hub = root.join("hub");
        let repo = hub.join("models--o--n");
        for d in ["blobs", "refs", &format!("snapshots/{COMMIT}")] {
            std::fs::create_dir_all(repo.join(d)).unwrap();
        }
        std::fs::write(repo.join("refs/main"), format!("{COMMIT}\n")).unwrap();
        std::fs::write(repo.join("blobs/b"), b"model").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            "../../blobs/b",
            repo.join("snapshots").join(COMMIT).join("m.onnx"),
        )
        .unwrap();
        hub
    }

    #[cfg(unix)]
    #[test]
    fn the_cache_lookup_follows_refs_and_commits() {
        let root = scratch("lookup");
        let hub = cache(&root);
        let want = hub
            .join("models--o--n/snapshots")
            .join(COMMIT)
            .join("m.onnx");
        assert_eq!(cached(&hub, &src("main"), "m.onnx"), Some(want.clone()));
        assert_eq!(cached(&hub, &src(COMMIT), "m.onnx"), Some(want));
        assert_eq!(cached(&hub, &src("v2"), "m.onnx"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn hostile_revisions_and_refs_never_leave_the_cache() {
        let root = scratch("hostile");
        let hub = cache(&root);
        let refs = hub.join("models--o--n/refs");
        // Absolute or climbing revisions are not looked up at all.
        for rev in [
            "/dev/zero",
            "/etc/passwd",
            "../../x",
            "a//b",
            "main/",
            ".git",
        ] {
            assert_eq!(cached(&hub, &src(rev), "m.onnx"), None, "{rev}");
        }
        // A ref that is a device, a FIFO, a link out of the cache, too long,
        // or not a commit is no ref (and reading it does not hang).
        std::os::unix::fs::symlink("/dev/zero", refs.join("zero")).unwrap();
        assert_eq!(cached(&hub, &src("zero"), "m.onnx"), None);
        let outside = root.join("outside");
        std::fs::write(&outside, format!("{COMMIT}\n")).unwrap();
        std::os::unix::fs::symlink(&outside, refs.join("out")).unwrap();
        assert_eq!(cached(&hub, &src("out"), "m.onnx"), None);
        std::fs::write(refs.join("long"), format!("{COMMIT}{}", " ".repeat(300))).unwrap();
        assert_eq!(cached(&hub, &src("long"), "m.onnx"), None);
        std::fs::write(refs.join("climb"), "../../../../etc").unwrap();
        assert_eq!(cached(&hub, &src("climb"), "m.onnx"), None);
        if std::process::Command::new("mkfifo")
            .arg(refs.join("fifo"))
            .status()
            .is_ok_and(|s| s.success())
        {
            assert_eq!(cached(&hub, &src("fifo"), "m.onnx"), None);
        }
        // A snapshot entry linking out of the cache is not a cache hit.
        let snap = hub.join("models--o--n/snapshots").join(COMMIT);
        std::os::unix::fs::symlink(&outside, snap.join("evil.onnx")).unwrap();
        assert_eq!(cached(&hub, &src("main"), "evil.onnx"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn eviction_unlinks_inside_the_cache_and_never_deletes_targets() {
        let root = scratch("evict");
        let hub = cache(&root);
        let snap = hub.join("models--o--n/snapshots").join(COMMIT);
        // A link to a file outside: the link goes, the file stays.
        let outside = root.join("precious");
        std::fs::write(&outside, b"keep").unwrap();
        std::os::unix::fs::symlink(&outside, snap.join("x.onnx")).unwrap();
        evict(&hub, &snap.join("x.onnx"));
        assert!(std::fs::symlink_metadata(snap.join("x.onnx")).is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        // A path outside the cache is not touched at all.
        evict(&hub, &outside);
        assert!(outside.exists());
        // The blob behind a snapshot link stays; the link goes.
        evict(&hub, &snap.join("m.onnx"));
        assert!(std::fs::symlink_metadata(snap.join("m.onnx")).is_err());
        assert!(hub.join("models--o--n/blobs/b").exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn etags_become_blob_names_only_when_they_are_hashes() {
        let sha = "a".repeat(64);
        assert_eq!(blob_name(&format!("\"{sha}\"")), Some(sha.clone()));
        assert_eq!(
            blob_name(&format!("W/\"{}\"", "B".repeat(40))),
            Some("b".repeat(40))
        );
        for bad in ["\"../../../x\"", "", "\"abc\"", "/etc/passwd"] {
            assert_eq!(blob_name(bad), None, "{bad}");
        }
    }
}
