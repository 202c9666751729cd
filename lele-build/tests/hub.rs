//! Model sources against a local stand-in of the Hugging Face Hub (and of a
//! plain web server): first use downloads, later uses are served from the
//! cache with the server gone, and every failure is a clear error that
//! leaves nothing in the cache a later build could mistake for the model.
#[path = "support/mock_hub.rs"]
mod mock_hub;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mock_hub::{Hostile, MockHub, MockRepo, sha256_hex};

fn zoo_model() -> Vec<u8> {
    let p = lele_build::config::zoo_dir().join("silero_vad.onnx");
    std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask models` first", p.display()))
}

/// A scratch directory with its own Hub cache and lele cache.
struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("lele-hub-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Sandbox { dir }
    }

    fn hub_cache(&self) -> PathBuf {
        self.dir.join("hf").join("hub")
    }

    fn toml(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Runs the `lele` CLI with the caches and endpoint of this sandbox.
    fn lele(&self, endpoint: &str, token: Option<&str>, args: &[&Path]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lele"));
        cmd.args(args)
            .env("HF_ENDPOINT", endpoint)
            .env("HF_HOME", self.dir.join("hf"))
            .env("HF_HUB_CACHE", self.hub_cache())
            .env("LELE_CACHE_DIR", self.dir.join("lele"))
            .env_remove("HF_TOKEN")
            .env_remove("LELE_SKIP_MODEL_GEN")
            .env_remove("CARGO_NET_OFFLINE");
        if let Some(t) = token {
            cmd.env("HF_TOKEN", t);
        }
        cmd.output().expect("run lele")
    }

    /// Runs `lele fetch toml` with extra environment variables; returns
    /// the output and how long it took.
    fn fetch_with(
        &self,
        endpoint: &str,
        toml: &Path,
        env: &[(&str, &str)],
    ) -> (Output, std::time::Duration) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lele"));
        cmd.args([Path::new("fetch"), toml])
            .env("HF_ENDPOINT", endpoint)
            .env("HF_HOME", self.dir.join("hf"))
            .env("HF_HUB_CACHE", self.hub_cache())
            .env("LELE_CACHE_DIR", self.dir.join("lele"))
            .env_remove("HF_TOKEN")
            .env_remove("LELE_SKIP_MODEL_GEN")
            .env_remove("CARGO_NET_OFFLINE")
            .env_remove("LELE_DOWNLOAD_TIMEOUT")
            .env_remove("LELE_MAX_DOWNLOAD_BYTES");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let start = std::time::Instant::now();
        let out = cmd.output().expect("run lele");
        (out, start.elapsed())
    }

    /// Every file under the sandbox's caches except lock files.
    fn all_cached(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(&self.dir.join("lele").join("downloads"), &mut out);
        walk(&self.hub_cache(), &mut out);
        out.retain(|p| !p.to_string_lossy().ends_with(".lock"));
        out
    }

    /// Files under the Hub cache's blobs and snapshots of `repo` (not
    /// counting lock files and resumable `.part` files).
    fn cached_files(&self, repo: &str) -> Vec<PathBuf> {
        let root = self
            .hub_cache()
            .join(format!("models--{}", repo.replace('/', "--")));
        let mut out = Vec::new();
        for sub in ["blobs", "snapshots"] {
            walk(&root.join(sub), &mut out);
        }
        out.retain(|p| {
            let n = p.to_string_lossy();
            !n.ends_with(".lock") && !n.ends_with(".part")
        });
        out
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn hf_toml(repo: &str, sha: &str) -> String {
    format!(
        "[model]\nhf = {{ repo = \"{repo}\", file = \"onnx/model.onnx\", revision = \"main\" }}\n\
         sha256 = \"{sha}\"\n\n[inputs]\ninput = [1, \"n <= 576\"]\nstate = [2, 1, 128]\nsr = []\n"
    )
}

fn hub_with_model() -> (MockHub, Vec<u8>) {
    let hub = MockHub::start();
    let model = zoo_model();
    let mut repo = MockRepo::default();
    repo.files.insert("onnx/model.onnx".into(), model.clone());
    hub.add_repo("snakers4/silero-vad", repo);
    (hub, model)
}

#[test]
fn first_build_downloads_and_a_clean_rebuild_needs_no_server() {
    let (mut hub, model) = hub_with_model();
    let sb = Sandbox::new("first");
    let toml = sb.toml(
        "vad.toml",
        &hf_toml("snakers4/silero-vad", &sha256_hex(&model)),
    );
    let out = sb.lele(&hub.endpoint, None, &[Path::new("prepare"), &toml]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("compiled"), "{}", text(&out));
    assert!(
        hub.requests()
            .iter()
            .any(|r| r.contains("/resolve/main/onnx/model.onnx")),
        "{:?}",
        hub.requests()
    );
    let lock = std::fs::read_to_string(toml.with_extension("lock")).unwrap();
    assert!(
        lock.contains(&sha256_hex(&model)) && lock.contains("name = \"input\""),
        "{lock}"
    );
    // The Hub cache has the standard layout.
    let snap = sb
        .hub_cache()
        .join("models--snakers4--silero-vad/snapshots")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("onnx/model.onnx");
    assert_eq!(std::fs::read(&snap).unwrap(), model);

    // Server gone, compiled artifacts gone: a clean rebuild still works.
    hub.stop();
    std::fs::remove_dir_all(sb.dir.join("lele")).unwrap();
    let n = hub.requests().len();
    let again = sb.lele(&hub.endpoint, None, &[Path::new("prepare"), &toml]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("compiled"), "{}", text(&again));
    assert_eq!(hub.requests().len(), n);
}

#[test]
fn sha_mismatch_is_an_error_and_is_not_cached() {
    let (hub, model) = hub_with_model();
    let sb = Sandbox::new("sha");
    let wrong = "ab".repeat(32);
    let toml = sb.toml("vad.toml", &hf_toml("snakers4/silero-vad", &wrong));
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(
        msg.contains("sha256 mismatch")
            && msg.contains(&wrong)
            && msg.contains(&sha256_hex(&model)),
        "{msg}"
    );
    assert_eq!(
        sb.cached_files("snakers4/silero-vad"),
        Vec::<PathBuf>::new()
    );
    // The right pin downloads again and succeeds.
    let toml = sb.toml(
        "vad.toml",
        &hf_toml("snakers4/silero-vad", &sha256_hex(&model)),
    );
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn missing_repository_is_a_404_error() {
    let (hub, model) = hub_with_model();
    let sb = Sandbox::new("404");
    let toml = sb.toml("vad.toml", &hf_toml("nobody/nothing", &sha256_hex(&model)));
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(
        msg.contains("404") && msg.contains("nobody/nothing"),
        "{msg}"
    );
    assert_eq!(sb.cached_files("nobody/nothing"), Vec::<PathBuf>::new());
}

#[test]
fn private_repository_needs_a_token() {
    let (hub, model) = hub_with_model();
    let mut repo = MockRepo::default();
    repo.files.insert("onnx/model.onnx".into(), model.clone());
    repo.token = Some("hf_secret".into());
    hub.add_repo("acme/private-vad", repo);
    let sb = Sandbox::new("401");
    let toml = sb.toml(
        "vad.toml",
        &hf_toml("acme/private-vad", &sha256_hex(&model)),
    );
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("401") && msg.contains("HF_TOKEN"), "{msg}");
    assert_eq!(sb.cached_files("acme/private-vad"), Vec::<PathBuf>::new());
    let out = sb.lele(
        &hub.endpoint,
        Some("hf_secret"),
        &[Path::new("fetch"), &toml],
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn connection_cut_mid_file_is_an_error_and_a_retry_completes() {
    let (hub, model) = hub_with_model();
    let sb = Sandbox::new("cut");
    let toml = sb.toml(
        "vad.toml",
        &hf_toml("snakers4/silero-vad", &sha256_hex(&model)),
    );
    hub.set_cut(true);
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("interrupted"), "{msg}");
    assert_eq!(
        sb.cached_files("snakers4/silero-vad"),
        Vec::<PathBuf>::new()
    );
    hub.set_cut(false);
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    assert!(out.status.success(), "{}", text(&out));
    let files = sb.cached_files("snakers4/silero-vad");
    let blob = files
        .iter()
        .find(|p| p.parent().is_some_and(|d| d.ends_with("blobs")))
        .unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(blob).unwrap()),
        sha256_hex(&model)
    );
}

fn url_toml(endpoint: &str, sha: &str) -> String {
    format!(
        "[model]\nurl = \"{endpoint}/files/vad.onnx\"\nsha256 = \"{sha}\"\n\n[inputs]\ninput = [1, \"n <= 576\"]\nstate = [2, 1, 128]\nsr = []\n"
    )
}

fn downloads(sb: &Sandbox) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(&sb.dir.join("lele").join("downloads"), &mut out);
    out.retain(|p| !p.ends_with(".lock"));
    out
}

#[test]
fn url_source_downloads_verifies_and_rejects_bad_content() {
    let hub = MockHub::start();
    let model = zoo_model();
    hub.add_plain("vad.onnx", model.clone());
    let sb = Sandbox::new("url");
    let sha = sha256_hex(&model);

    // Cut mid-file: error, nothing kept.
    hub.set_cut(true);
    let toml = sb.toml("vad.toml", &url_toml(&hub.endpoint, &sha));
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    assert!(
        !out.status.success() && text(&out).contains("interrupted"),
        "{}",
        text(&out)
    );
    assert_eq!(downloads(&sb), Vec::<PathBuf>::new());
    hub.set_cut(false);

    // Wrong pin: error naming both hashes, nothing kept.
    let wrong = "cd".repeat(32);
    let bad = sb.toml("bad.toml", &url_toml(&hub.endpoint, &wrong));
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &bad]);
    let msg = text(&out);
    assert!(
        !out.status.success() && msg.contains(&wrong) && msg.contains(&sha),
        "{msg}"
    );
    assert_eq!(downloads(&sb), Vec::<PathBuf>::new());

    // 404.
    let missing = sb.toml(
        "missing.toml",
        &url_toml(&hub.endpoint, &sha).replace("vad.onnx", "nothing.onnx"),
    );
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &missing]);
    assert!(
        !out.status.success() && text(&out).contains("404"),
        "{}",
        text(&out)
    );

    // Good: downloaded once, then served from the cache.
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    assert!(out.status.success(), "{}", text(&out));
    let n = hub.requests().len();
    let out = sb.lele(&hub.endpoint, None, &[Path::new("fetch"), &toml]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(hub.requests().len(), n);
}

#[test]
fn concurrent_fetches_share_one_download() {
    let (hub, model) = hub_with_model();
    hub.add_plain("vad.onnx", model.clone());
    let sb = Sandbox::new("concurrent");
    let sha = sha256_hex(&model);
    let url = sb.toml("url.toml", &url_toml(&hub.endpoint, &sha));
    let hf = sb.toml("hf.toml", &hf_toml("snakers4/silero-vad", &sha));
    let spawn = |toml: &Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lele"));
        cmd.args([Path::new("fetch"), toml])
            .env("HF_ENDPOINT", &hub.endpoint)
            .env("HF_HOME", sb.dir.join("hf"))
            .env("HF_HUB_CACHE", sb.hub_cache())
            .env("LELE_CACHE_DIR", sb.dir.join("lele"))
            .env_remove("HF_TOKEN")
            .env_remove("LELE_SKIP_MODEL_GEN")
            .env_remove("CARGO_NET_OFFLINE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().expect("spawn lele")
    };
    let children: Vec<_> = (0..4)
        .map(|i| spawn(if i % 2 == 0 { &url } else { &hf }))
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    // Each source was downloaded once: the second process of each kind
    // waited for the lock and found the file.
    let full_gets = |pat: &str| {
        hub.requests()
            .iter()
            .filter(|r| r.starts_with("GET") && r.contains(pat))
            .count()
    };
    assert_eq!(full_gets("/files/vad.onnx"), 1, "{:?}", hub.requests());
    // One request: its headers name the commit and etag, its body is the file.
    assert_eq!(
        full_gets("/resolve/main/onnx/model.onnx"),
        1,
        "{:?}",
        hub.requests()
    );
    assert_eq!(downloads(&sb).len(), 1);
}

// ---- Hostile servers and model.toml files (issue 50, classes 2 and 3) ----

fn small_model() -> Vec<u8> {
    b"not really an onnx model, fetch does not parse it\n".repeat(100)
}

fn plain_toml(endpoint: &str, name: &str, sha: &str) -> String {
    format!("[model]\nurl = \"{endpoint}/files/{name}\"\nsha256 = \"{sha}\"\n")
}

/// A quick idle timeout and a small cap, as a user could set them.
const QUICK: &[(&str, &str)] = &[
    ("LELE_DOWNLOAD_TIMEOUT", "1"),
    ("LELE_MAX_DOWNLOAD_BYTES", "1000000"),
];

fn assert_fails_fast(out: &Output, took: std::time::Duration, needle: &str) {
    let msg = text(out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains(needle), "expected `{needle}` in: {msg}");
    assert!(
        took < std::time::Duration::from_secs(20),
        "took {took:?}: {msg}"
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let hub = MockHub::start();
    hub.add_hostile("silent.onnx", Hostile::Silent);
    let sb = Sandbox::new("silent");
    let toml = sb.toml(
        "m.toml",
        &plain_toml(&hub.endpoint, "silent.onnx", &"ab".repeat(32)),
    );
    let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert_fails_fast(&out, took, "idle timeout");
    assert_eq!(sb.all_cached(), Vec::<PathBuf>::new());
}

#[test]
fn a_server_that_stalls_mid_file_times_out_and_leaves_nothing() {
    let hub = MockHub::start();
    hub.add_hostile("stall.onnx", Hostile::Stall(small_model()));
    let sb = Sandbox::new("stall");
    let toml = sb.toml(
        "m.toml",
        &plain_toml(&hub.endpoint, "stall.onnx", &sha256_hex(&small_model())),
    );
    let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert_fails_fast(&out, took, "idle timeout");
    assert_eq!(sb.all_cached(), Vec::<PathBuf>::new());
}

#[test]
fn an_endless_body_stops_at_the_cap_and_leaves_nothing() {
    let hub = MockHub::start();
    hub.add_hostile("endless.onnx", Hostile::Endless);
    let sb = Sandbox::new("endless");
    let toml = sb.toml(
        "m.toml",
        &plain_toml(&hub.endpoint, "endless.onnx", &"ab".repeat(32)),
    );
    let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert_fails_fast(&out, took, "exceeds the limit of 1000000 bytes");
    assert_eq!(sb.all_cached(), Vec::<PathBuf>::new());
    // The cap can come from the toml too.
    let toml = sb.toml(
        "m.toml",
        &format!(
            "{}max_download_bytes = 4096\n",
            plain_toml(&hub.endpoint, "endless.onnx", &"ab".repeat(32))
        ),
    );
    let (out, took) = sb.fetch_with(&hub.endpoint, &toml, &[("LELE_DOWNLOAD_TIMEOUT", "5")]);
    assert_fails_fast(&out, took, "exceeds the limit of 4096 bytes");
    assert_eq!(sb.all_cached(), Vec::<PathBuf>::new());
}

#[test]
fn a_lying_content_length_is_refused() {
    let hub = MockHub::start();
    let body = small_model();
    // Announced far above the cap: refused before the body.
    hub.add_hostile(
        "huge.onnx",
        Hostile::Announce {
            len: 1 << 40,
            body: body.clone(),
        },
    );
    // Announced more than sent.
    hub.add_hostile(
        "short.onnx",
        Hostile::Announce {
            len: body.len() as u64 * 2,
            body: body.clone(),
        },
    );
    let sb = Sandbox::new("lie");
    let sha = sha256_hex(&body);
    for (name, needle) in [
        ("huge.onnx", "announces 1099511627776 bytes"),
        ("short.onnx", "interrupted"),
    ] {
        let toml = sb.toml("m.toml", &plain_toml(&hub.endpoint, name, &sha));
        let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
        assert_fails_fast(&out, took, needle);
        assert_eq!(sb.all_cached(), Vec::<PathBuf>::new(), "{name}");
    }
}

#[test]
fn a_killed_download_leaves_nothing_for_the_next_one() {
    let hub = MockHub::start();
    let body = small_model();
    hub.add_plain("m.onnx", body.clone());
    let sb = Sandbox::new("killed");
    let sha = sha256_hex(&body);
    let toml = sb.toml("m.toml", &plain_toml(&hub.endpoint, "m.onnx", &sha));
    // What a killed process leaves: a partial file in the download folder.
    let dir = sb.dir.join("lele/downloads").join(format!("sha256-{sha}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".lele-download-4242.part"), b"half").unwrap();
    let (out, _) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(sb.all_cached(), vec![dir.join("m.onnx")]);
}

fn hf_plain_toml(repo: &str, revision: &str, sha: &str) -> String {
    format!(
        "[model]\nhf = {{ repo = \"{repo}\", file = \"m.onnx\", revision = \"{revision}\" }}\n\
         sha256 = \"{sha}\"\n"
    )
}

#[test]
fn hub_downloads_have_the_same_limits() {
    let hub = MockHub::start();
    for (id, how) in [
        ("o/silent", Hostile::Silent),
        ("o/endless", Hostile::Endless),
        ("o/stall", Hostile::Stall(small_model())),
    ] {
        let mut repo = MockRepo::default();
        repo.files.insert("m.onnx".into(), small_model());
        repo.hostile = Some(how);
        hub.add_repo(id, repo);
    }
    let sb = Sandbox::new("hf-limits");
    for (id, needle) in [
        ("o/silent", "idle timeout"),
        ("o/endless", "exceeds the limit"),
        ("o/stall", "idle timeout"),
    ] {
        let toml = sb.toml("m.toml", &hf_plain_toml(id, "main", &"ab".repeat(32)));
        let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
        assert_fails_fast(&out, took, needle);
        assert_eq!(sb.all_cached(), Vec::<PathBuf>::new(), "{id}");
    }
}

#[test]
fn hostile_commit_and_etag_headers_do_not_become_paths() {
    let hub = MockHub::start();
    let body = small_model();
    let sha = sha256_hex(&body);
    let mut repo = MockRepo::default();
    repo.files.insert("m.onnx".into(), body.clone());
    repo.commit = Some("../../../../escaped".into());
    hub.add_repo("o/badcommit", repo);
    let mut repo = MockRepo::default();
    repo.files.insert("m.onnx".into(), body.clone());
    repo.etag = Some("../../../../escaped".into());
    hub.add_repo("o/badetag", repo);
    let sb = Sandbox::new("hf-headers");
    let toml = sb.toml("m.toml", &hf_plain_toml("o/badcommit", "main", &sha));
    let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert_fails_fast(&out, took, "x-repo-commit");
    // A bad etag is not used as a name: the blob is named by its sha256.
    let toml = sb.toml("m.toml", &hf_plain_toml("o/badetag", "main", &sha));
    let (out, _) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
    assert!(out.status.success(), "{}", text(&out));
    let blob = sb.hub_cache().join("models--o--badetag/blobs").join(&sha);
    assert_eq!(std::fs::read(blob).unwrap(), body);
    // The cache is complete: an offline build finds it through refs/main.
    let (out, _) = sb.fetch_with(&hub.endpoint, &toml, &[("CARGO_NET_OFFLINE", "1")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("snapshots"), "{}", text(&out));
    // Nothing landed anywhere but the caches.
    let mut all = Vec::new();
    walk(&sb.dir, &mut all);
    assert!(
        all.iter().all(|p| !p.to_string_lossy().contains("escaped")),
        "{all:?}"
    );
}

#[test]
fn a_hostile_revision_is_refused_and_nothing_outside_the_cache_is_touched() {
    let hub = MockHub::start();
    let sb = Sandbox::new("hf-revision");
    let sha = "ab".repeat(32);
    for rev in ["/dev/zero", "/etc/passwd", "../../../x", "a//b", "main x"] {
        let toml = sb.toml("m.toml", &hf_plain_toml("o/n", rev, &sha));
        let (out, took) = sb.fetch_with(&hub.endpoint, &toml, QUICK);
        assert_fails_fast(&out, took, "hf.revision");
    }
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());

    // A cache entry (placed by someone else) linking to a file outside the
    // cache, with a pin it does not match: unlinked, never deleted.
    let precious = sb.dir.join("precious.txt");
    std::fs::write(&precious, b"keep me").unwrap();
    let repo = sb.hub_cache().join("models--o--n");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let snap = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snap).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&precious, snap.join("m.onnx")).unwrap();
    let toml = sb.toml("m.toml", &hf_plain_toml("o/n", "main", &sha));
    let (out, _) = sb.fetch_with(
        &hub.endpoint,
        &toml,
        &[("LELE_DOWNLOAD_TIMEOUT", "1"), ("CARGO_NET_OFFLINE", "1")],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
}

/// Issue 50 class 8: a model, a model.toml or external data that is a FIFO
/// (or a device) is an error, not a hang, in every command that reads one.
#[cfg(unix)]
#[test]
fn fifos_and_devices_are_refused_by_the_cli() {
    let sb = Sandbox::new("fifo");
    let fifo = sb.dir.join("pipe.onnx");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        return;
    }
    let out_dir = sb.dir.join("out");
    let toml_fifo = sb.dir.join("pipe.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&toml_fifo)
            .status()
            .unwrap()
            .success()
    );
    let real_toml = sb.toml("m.toml", "[model]\npath = \"pipe.onnx\"\n");
    let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["inspect".as_ref(), fifo.as_os_str()],
        vec!["inspect".as_ref(), "/dev/zero".as_ref()],
        vec![
            "gen".as_ref(),
            fifo.as_os_str(),
            "--out".as_ref(),
            out_dir.as_os_str(),
        ],
        vec![
            "gen".as_ref(),
            "/dev/null".as_ref(),
            "--out".as_ref(),
            out_dir.as_os_str(),
            "--toml".as_ref(),
            toml_fifo.as_os_str(),
        ],
        vec!["fetch".as_ref(), toml_fifo.as_os_str()],
        vec!["prepare".as_ref(), toml_fifo.as_os_str()],
        vec!["prepare".as_ref(), real_toml.as_os_str()],
    ];
    for args in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lele"))
            .args(&args)
            .env("LELE_CACHE_DIR", sb.dir.join("lele"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if start.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        let status = status.unwrap_or_else(|| panic!("`lele {args:?}` hung"));
        assert!(!status.success(), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("not a regular file"),
            "{args:?}: {}",
            text(&out)
        );
    }
}

/// The Hub's LFS answer: a 302 carrying the commit and `x-linked-etag`, the
/// body elsewhere. The blob is named by the linked etag, the snapshot and
/// `refs/main` are written, and the token never leaves the Hub's origin.
#[test]
fn a_redirected_hub_file_lands_in_the_cache_and_keeps_the_token_home() {
    let hub = MockHub::start();
    let storage = MockHub::start();
    let body = small_model();
    let sha = sha256_hex(&body);
    storage.add_plain("m.onnx", body.clone());
    let mut repo = MockRepo::default();
    repo.files.insert("m.onnx".into(), body.clone());
    repo.token = Some("hf_secret".into());
    repo.redirect = Some(storage.endpoint.clone());
    hub.add_repo("o/lfs", repo);
    let sb = Sandbox::new("redirect");
    let toml = sb.toml("m.toml", &hf_plain_toml("o/lfs", "main", &sha));
    let (out, _) = sb.fetch_with(
        &hub.endpoint,
        &toml,
        &[("HF_TOKEN", "hf_secret"), ("LELE_DOWNLOAD_TIMEOUT", "5")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let repo_dir = sb.hub_cache().join("models--o--lfs");
    assert_eq!(
        std::fs::read(repo_dir.join("blobs").join(&sha)).unwrap(),
        body
    );
    let commit = std::fs::read_to_string(repo_dir.join("refs/main")).unwrap();
    assert_eq!(
        std::fs::read(
            repo_dir
                .join("snapshots")
                .join(commit.trim())
                .join("m.onnx")
        )
        .unwrap(),
        body
    );
    assert!(hub.requests().iter().any(|r| r.starts_with("AUTH")));
    assert!(
        storage.requests().iter().all(|r| !r.starts_with("AUTH")),
        "{:?}",
        storage.requests()
    );
}
