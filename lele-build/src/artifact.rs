//! Compiled artifacts on disk: the generated model module, its signature
//! and layout, and the weights, stored under a content key (model sha256,
//! `model.toml` text, compiler version and source fingerprint). The same
//! three files make up the artifact cache (`<cache>/build/<key>.*`) and a
//! vendored copy next to a `model.toml` (`<stem>.lele/artifact.*`, written
//! by `lele prepare --vendor`). `<stem>.lock` records the signature so an
//! offline build without artifacts can still emit the model's API.
use std::path::{Path, PathBuf};

/// How weights reach the generated code.
#[derive(Debug, Clone, PartialEq)]
pub enum WeightsMode {
    /// `include_bytes!` of this file, 64-byte aligned.
    Embed(String),
    /// Memory-mapped at run time.
    Mmap {
        /// The file this build wrote.
        built: String,
        /// `[codegen] weights_file`: where `new()` looks instead, relative
        /// to the running executable's directory.
        runtime: Option<String>,
    },
}

use proc_macro2::TokenStream;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, Result};
use crate::fsutil::hex;
use crate::fsutil::write_atomic;
use crate::signature::{Layout, Signature};
use crate::version::{COMPILER_FINGERPRINT, COMPILER_VERSION};

/// The generated items of the model module.
#[derive(Debug, Clone)]
pub enum Core {
    /// In memory (`lele gen` writes them out).
    Tokens(TokenStream),
    /// In a file the wrapper `include!`s: rustc parses it, not the macro,
    /// which keeps warm expansions fast.
    File(PathBuf),
}

/// A compiled model, independent of the name of the struct it is wrapped in.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// Content key.
    pub key: String,
    /// Public interface.
    pub signature: Signature,
    /// Workspace layout.
    pub layout: Layout,
    /// Items of the model module.
    pub core: Core,
    /// The weights file.
    pub weights_path: PathBuf,
    /// `[codegen] weights`.
    pub weights_mode: String,
    /// `[codegen] weights_file`.
    pub weights_file: Option<String>,
}

impl Artifact {
    /// How the generated code reaches the weights.
    pub fn weights(&self) -> WeightsMode {
        let built = self.weights_path.to_string_lossy().into_owned();
        if self.weights_mode == "mmap" {
            WeightsMode::Mmap {
                built,
                runtime: self.weights_file.clone(),
            }
        } else {
            WeightsMode::Embed(built)
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Meta {
    key: String,
    compiler: String,
    fingerprint: String,
    weights_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weights_file: Option<String>,
    weights_len: u64,
    signature: Signature,
    layout: Layout,
}

/// The content key of a model compiled with a toml.
pub fn key(toml_text: &str, model_sha256: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        COMPILER_VERSION,
        COMPILER_FINGERPRINT,
        toml_text,
        &model_sha256.to_ascii_lowercase(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex(&h.finalize()[..16])
}

/// The artifact cache directory (`<cache root>/build`).
pub fn cache_dir(root: &Path) -> PathBuf {
    root.join("build")
}

/// The vendored artifact directory of a toml (`model.toml` → `model.lele/`).
pub fn vendor_dir(toml_path: &Path) -> PathBuf {
    toml_path.with_extension("lele")
}

/// The lock file of a toml (`model.toml` → `model.lock`).
pub fn lock_path(toml_path: &Path) -> PathBuf {
    toml_path.with_extension("lock")
}

fn files(dir: &Path, stem: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}.meta.toml")),
        dir.join(format!("{stem}.core.rs")),
        dir.join(format!("{stem}.weights")),
    )
}

/// Writes the weights file of an artifact about to be stored.
pub fn weights_file(dir: &Path, stem: &str) -> PathBuf {
    files(dir, stem).2
}

/// Stores an artifact whose weights are already at [`weights_file`]; the
/// metadata goes last, so a partly written artifact is never a hit.
/// Afterwards the artifact refers to the stored code file.
pub fn store(dir: &Path, stem: &str, a: &mut Artifact) -> Result<()> {
    let (meta_path, core_path, weights_path) = files(dir, stem);
    let weights_len = std::fs::metadata(&weights_path)
        .map_err(|source| BuildError::Io {
            path: weights_path.clone(),
            source,
        })?
        .len();
    match &a.core {
        Core::Tokens(t) => write_atomic(&core_path, t.to_string().as_bytes())?,
        Core::File(src) if *src != core_path => {
            let bytes = std::fs::read(src).map_err(|source| BuildError::Io {
                path: src.clone(),
                source,
            })?;
            write_atomic(&core_path, &bytes)?;
        }
        Core::File(_) => {}
    }
    // Included by generated code, and possibly written during a build.
    crate::fsutil::backdate(&core_path)?;
    let meta = Meta {
        key: a.key.clone(),
        compiler: COMPILER_VERSION.into(),
        fingerprint: COMPILER_FINGERPRINT.into(),
        weights_mode: a.weights_mode.clone(),
        weights_file: a.weights_file.clone(),
        weights_len,
        signature: a.signature.clone(),
        layout: a.layout.clone(),
    };
    let text = toml::to_string(&meta).map_err(|e| BuildError::Other(e.to_string()))?;
    write_atomic(&meta_path, text.as_bytes())?;
    a.core = Core::File(std::fs::canonicalize(&core_path).unwrap_or(core_path));
    Ok(())
}

/// Loads the artifact `stem` from `dir` if it exists, was made by this
/// compiler for `key` and its weights file has the recorded length.
pub fn load(dir: &Path, stem: &str, key: &str) -> Option<Artifact> {
    let (meta_path, core_path, weights_path) = files(dir, stem);
    let meta: Meta = toml::from_str(&std::fs::read_to_string(meta_path).ok()?).ok()?;
    if meta.key != key
        || meta.compiler != COMPILER_VERSION
        || meta.fingerprint != COMPILER_FINGERPRINT
    {
        return None;
    }
    if std::fs::metadata(&weights_path).ok()?.len() != meta.weights_len {
        return None;
    }
    if !core_path.is_file() {
        return None;
    }
    Some(Artifact {
        key: meta.key,
        signature: meta.signature,
        layout: meta.layout,
        core: Core::File(std::fs::canonicalize(&core_path).unwrap_or(core_path)),
        weights_path: std::fs::canonicalize(&weights_path).unwrap_or(weights_path),
        weights_mode: meta.weights_mode,
        weights_file: meta.weights_file,
    })
}

/// Copies an artifact into `dir` under `stem`.
pub fn copy_to(a: &Artifact, dir: &Path, stem: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let dest = weights_file(dir, stem);
    let bytes = std::fs::read(&a.weights_path).map_err(|source| BuildError::Io {
        path: a.weights_path.clone(),
        source,
    })?;
    write_atomic(&dest, &bytes)?;
    store(dir, stem, &mut a.clone())
}

/// `<stem>.lock`: what an offline build needs to emit the model's API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    /// Compiler version that wrote it.
    pub compiler: String,
    /// Artifact key at the time.
    pub key: String,
    /// sha256 of the model file.
    pub model_sha256: String,
    /// Where the model came from (informational).
    pub source: String,
    /// The model's API.
    pub signature: Signature,
}

impl Lock {
    /// Reads a lock file; `None` when absent, an error when unreadable.
    pub fn read(path: &Path) -> Result<Option<Lock>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(BuildError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        toml::from_str(&text)
            .map(Some)
            .map_err(|e| BuildError::Config(format!("{}: {e}", path.display())))
    }

    /// Writes the lock file, always (even with the same content): a new
    /// modification time makes cargo re-expand models built as stubs, so
    /// they pick up what `lele prepare` just cached or vendored.
    pub fn write(&self, path: &Path) -> Result<()> {
        let body = toml::to_string(self).map_err(|e| BuildError::Other(e.to_string()))?;
        let text = format!(
            "# Written by `lele prepare`; commit it. Offline builds (LELE_SKIP_MODEL_GEN=1)\n\
             # read the model's API from here when no compiled artifact is available.\n{body}"
        );
        crate::fsutil::replace_file(path, text.as_bytes())
    }
}
