//! `#[lele::model]` in a real crate built by cargo: a Hub model is
//! downloaded on the first build, cargo rebuilds exactly when the toml or a
//! `LELE_*` variable changes, a clean rebuild works with the Hub gone, and
//! offline builds use vendored artifacts or emit a stub from the lock file.
//!
//! Builds a scratch crate with its own target directory under `target/`
//! (dependencies are compiled once and reused by later runs).
#[path = "support/mock_hub.rs"]
mod mock_hub;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mock_hub::{MockHub, MockRepo, sha256_hex};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Scratch {
    krate: PathBuf,
    target: PathBuf,
    caches: PathBuf,
    endpoint: String,
}

impl Scratch {
    fn new(endpoint: &str, sha: &str) -> Scratch {
        let root = workspace().join("target").join("e2e");
        let krate = root.join("crate");
        let caches = root.join("caches");
        let _ = std::fs::remove_dir_all(&krate);
        let _ = std::fs::remove_dir_all(&caches);
        std::fs::create_dir_all(krate.join("src")).unwrap();
        std::fs::write(
            krate.join("Cargo.toml"),
            format!(
                "[package]\nname = \"lele-e2e\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [dependencies]\nlele = {{ path = {:?} }}\n\n[workspace]\n",
                workspace().display().to_string()
            ),
        )
        .unwrap();
        // Same dependency versions as the workspace.
        std::fs::copy(workspace().join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
        std::fs::write(
            krate.join("vad.toml"),
            format!(
                "[model]\nhf = {{ repo = \"snakers4/silero-vad\", file = \"onnx/model.onnx\" }}\n\
                 sha256 = \"{sha}\"\n\n[inputs]\ninput = [1, \"n <= 576\"]\nstate = [2, 1, 128]\nsr = []\n"
            ),
        )
        .unwrap();
        std::fs::write(
            krate.join("src/main.rs"),
            r#"#[lele::model("vad.toml")]
pub struct Vad;

fn main() {
    let model = match Vad::new() {
        Ok(m) => m,
        Err(e) => {
            println!("error: {e}");
            return;
        }
    };
    let mut ws = model.workspace();
    let input = vec![0.0f32; 512];
    let state = vec![0.0f32; 256];
    let out = model
        .forward(
            &mut ws,
            lele::TensorView::new(&input, &[1, 512]).unwrap(),
            lele::TensorView::new(&state, &[2, 1, 128]).unwrap(),
            lele::TensorView::new(&[16000i64], &[]).unwrap(),
        )
        .unwrap();
    println!("ok {:.4}", out.output.data()[0]);
}
"#,
        )
        .unwrap();
        Scratch {
            krate,
            target: root.join("target"),
            caches,
            endpoint: endpoint.to_string(),
        }
    }

    fn command(&self, program: &Path, env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.krate)
            .env("CARGO_TARGET_DIR", &self.target)
            .env("HF_ENDPOINT", &self.endpoint)
            .env("HF_HOME", self.caches.join("hf"))
            .env("HF_HUB_CACHE", self.caches.join("hf/hub"))
            .env("LELE_CACHE_DIR", self.caches.join("lele"))
            .env_remove("HF_TOKEN")
            .env_remove("LELE_SKIP_MODEL_GEN")
            .env_remove("CARGO_NET_OFFLINE")
            .env_remove("LELE_ZOO");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// `cargo build`; returns (success, whether the crate was recompiled, output).
    fn build(&self, env: &[(&str, &str)]) -> (bool, bool, String) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = self
            .command(Path::new(&cargo), env)
            .args(["build", "--offline"])
            .output()
            .expect("run cargo");
        let text = text(&out);
        (
            out.status.success(),
            text.contains("Compiling lele-e2e"),
            without_progress(&text),
        )
    }

    fn run(&self) -> String {
        let out = Command::new(self.target.join("debug/lele-e2e"))
            .output()
            .expect("run the built crate");
        text(&out)
    }

    fn lele(&self, args: &[&str]) -> Output {
        self.command(Path::new(env!("CARGO_BIN_EXE_lele")), &[])
            .args(args)
            .output()
            .expect("run lele")
    }
}

/// Cargo's output without the per-crate progress lines (`Compiling x`,
/// `Downloaded y`, ...), so a failed build's message shows its error and
/// not a page of dependency names.
fn without_progress(log: &str) -> String {
    const PROGRESS: [&str; 6] = [
        "Compiling ",
        "Checking ",
        "Downloaded ",
        "Downloading ",
        "Locking ",
        "Adding ",
    ];
    let kept: Vec<&str> = log
        .lines()
        .filter(|l| !PROGRESS.iter().any(|p| l.trim_start().starts_with(p)))
        .collect();
    let dropped = log.lines().count() - kept.len();
    format!("({dropped} progress lines dropped)\n{}", kept.join("\n"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn hub_model_through_cargo_rebuilds_and_offline_modes() {
    let model = std::fs::read(lele_build::config::zoo_dir().join("silero_vad.onnx"))
        .expect("run `cargo xtask models` first");
    let sha = sha256_hex(&model);
    let mut hub = MockHub::start();
    let mut repo = MockRepo::default();
    repo.files.insert("onnx/model.onnx".into(), model);
    hub.add_repo("snakers4/silero-vad", repo);
    let s = Scratch::new(&hub.endpoint, &sha);

    // 1. First build downloads the model.
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && compiled, "{log}");
    assert!(
        hub.requests()
            .iter()
            .any(|r| r.contains("/resolve/main/onnx/model.onnx"))
    );
    let first_run = s.run();
    assert!(first_run.starts_with("ok "), "{first_run}");

    // 2. Nothing changed: nothing rebuilt.
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && !compiled, "{log}");

    // 3. The toml changed: rebuilt; then fresh again.
    let toml = s.krate.join("vad.toml");
    let text0 = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, format!("# edited\n{text0}")).unwrap();
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && compiled, "{log}");
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && !compiled, "{log}");

    // 4. A LELE_* variable changed: rebuilt; then fresh again.
    let zoo = s.caches.join("zoo").to_string_lossy().into_owned();
    let (ok, compiled, log) = s.build(&[("LELE_ZOO", &zoo)]);
    assert!(ok && compiled, "{log}");
    let (ok, compiled, log) = s.build(&[("LELE_ZOO", &zoo)]);
    assert!(ok && !compiled, "{log}");

    // 5. A local model file: rebuilt when it changes, not otherwise.
    let hf_toml = std::fs::read_to_string(&toml).unwrap();
    let model_path = s.krate.join("vad.onnx");
    std::fs::copy(
        lele_build::config::zoo_dir().join("silero_vad.onnx"),
        &model_path,
    )
    .unwrap();
    let local = hf_toml.replace(
        "hf = { repo = \"snakers4/silero-vad\", file = \"onnx/model.onnx\" }",
        "path = \"vad.onnx\"",
    );
    assert_ne!(local, hf_toml);
    std::fs::write(&toml, local).unwrap();
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && compiled, "{log}");
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && !compiled, "{log}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&model_path, std::fs::read(&model_path).unwrap()).unwrap();
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && compiled, "{log}");
    assert_eq!(s.run(), first_run);
    std::fs::write(&toml, &hf_toml).unwrap();
    std::fs::remove_file(&model_path).unwrap();

    // 6. Hub gone, compiled artifacts gone, crate cleaned: rebuilt from the
    //    Hub cache without the network.
    hub.stop();
    let requests = hub.requests().len();
    std::fs::remove_dir_all(s.caches.join("lele")).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let clean = s
        .command(Path::new(&cargo), &[])
        .args(["clean", "--offline", "-p", "lele-e2e"])
        .output()
        .unwrap();
    assert!(clean.status.success(), "{}", text(&clean));
    let (ok, compiled, log) = s.build(&[]);
    assert!(ok && compiled, "{log}");
    assert_eq!(s.run(), first_run);
    assert_eq!(hub.requests().len(), requests);

    // 7. Offline without artifacts or lock: a clear compile error.
    let skip = [("LELE_SKIP_MODEL_GEN", "1")];
    std::fs::remove_dir_all(s.caches.join("lele")).unwrap();
    let (ok, _, log) = s.build(&skip);
    assert!(!ok && log.contains("lele prepare vad.toml"), "{log}");

    // 8. `lele prepare` writes the lock; offline, the crate builds as a
    //    stub whose constructor explains itself.
    let out = s.lele(&["prepare", "vad.toml"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(s.krate.join("vad.lock").is_file());
    std::fs::remove_dir_all(s.caches.join("lele")).unwrap();
    let (ok, compiled, log) = s.build(&skip);
    assert!(ok && compiled, "{log}");
    let stub_run = s.run();
    assert!(
        stub_run.contains("model not generated")
            && stub_run.contains("lele prepare --vendor vad.toml"),
        "{stub_run}"
    );

    // 9. Vendored: offline, with every cache gone, the real model builds.
    let out = s.lele(&["prepare", "--vendor", "vad.toml"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::remove_dir_all(&s.caches).unwrap();
    let (ok, compiled, log) = s.build(&skip);
    assert!(ok && compiled, "{log}");
    assert_eq!(s.run(), first_run);
}
