//! The front door used by the macro, `build.rs` and the CLI: resolve the
//! model's source, find or make the compiled artifact, wrap it in the
//! user's struct. Offline builds (`LELE_SKIP_MODEL_GEN=1`) never download
//! or compile: they use the artifact cache, a vendored artifact, or — from
//! the lock file's signature — a stub with the same API.
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;

use crate::artifact::{self, Artifact, Lock};
use crate::config::{ModelToml, Source};
use crate::emit::{ShellBody, shell};
use crate::error::{BuildError, Result};
use crate::extend::Extensions;
use crate::fetch::{self, FetchOptions};
use crate::signature::Signature;

/// Environment variables that change what the macro generates; the macro
/// makes cargo track them.
pub const TRACKED_ENV: &[&str] = &[
    "LELE_ZOO",
    "LELE_CACHE_DIR",
    "LELE_SKIP_MODEL_GEN",
    "CARGO_NET_OFFLINE",
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_HUB_CACHE",
];

/// Options of one compilation.
pub struct CompileOptions<'a> {
    /// Name of the generated struct.
    pub name: &'a str,
    /// Visibility tokens (`pub`, `pub(crate)`, nothing).
    pub vis: TokenStream,
    /// Attributes (doc comments…) of the user's struct.
    pub attrs: TokenStream,
    /// Offline: no network, no compilation (default: from the environment).
    pub offline: bool,
    /// Show download progress.
    pub progress: bool,
    /// Overrides and patterns (build.rs users).
    pub extensions: Option<&'a Extensions>,
    /// Overrides `[codegen] constant_folding`.
    pub constant_folding: Option<bool>,
    /// lele's cache root (default `$LELE_CACHE_DIR` or `<user cache>/lele`).
    pub cache_root: Option<PathBuf>,
    /// Store the artifact here (under the struct's snake_case name) instead
    /// of the shared cache. Required with extensions: their closures cannot
    /// be hashed, so their artifacts are never shared or reused.
    pub artifact_dir: Option<PathBuf>,
    /// Put the generated model module into the output instead of an
    /// `include!` of the cached file (the builder writes a self-contained
    /// file; the macro includes, which is faster).
    pub inline_core: bool,
}

impl CompileOptions<'_> {
    fn root(&self) -> PathBuf {
        self.cache_root.clone().unwrap_or_else(fetch::cache_root)
    }
}

impl<'a> CompileOptions<'a> {
    /// Options for struct `name` with `pub` visibility, offline mode from
    /// the environment.
    pub fn new(name: &'a str) -> Self {
        CompileOptions {
            name,
            vis: quote::quote!(pub),
            attrs: TokenStream::new(),
            offline: fetch::offline_from_env(),
            progress: false,
            extensions: None,
            constant_folding: None,
            cache_root: None,
            artifact_dir: None,
            inline_core: false,
        }
    }
}

/// The result of compiling a `model.toml`.
pub struct Compiled {
    /// The items replacing the annotated struct.
    pub tokens: TokenStream,
    /// The model's API.
    pub signature: Signature,
    /// Content key of the artifact (or of the lock, for a stub).
    pub key: String,
    /// The weights file (`None` for a stub).
    pub weights_path: Option<PathBuf>,
    /// The ONNX file (`None` when it was not needed).
    pub model_path: Option<PathBuf>,
    /// Files the output depends on (for cargo to track).
    pub tracked: Vec<PathBuf>,
    /// Files the generated code includes (weights, the model module).
    pub generated: Vec<PathBuf>,
    /// Environment variables the toml read through `${VAR}`.
    pub env_vars: Vec<String>,
    /// Whether the artifact came from the cache or a vendored copy.
    pub from_cache: bool,
    /// Why the output is a stub, if it is one.
    pub stub: Option<String>,
}

/// Parsed toml with its text and location.
struct Toml {
    path: PathBuf,
    text: String,
    parsed: ModelToml,
}

impl Toml {
    fn load(path: &Path) -> Result<Toml> {
        let text = crate::fsutil::read_regular_text(path, crate::fsutil::MAX_TOML_BYTES)?;
        let parsed = ModelToml::parse(&text)?;
        Ok(Toml {
            path: path.to_path_buf(),
            text,
            parsed,
        })
    }

    fn base(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    fn source_text(&self) -> String {
        match self.parsed.source(self.base()) {
            Ok(Source::Path(_)) => format!(
                "path {}",
                self.parsed.model.path.clone().unwrap_or_default()
            ),
            Ok(Source::Url(u)) => format!("url {u}"),
            Ok(Source::Hf(h)) => format!("hf {}@{}/{}", h.repo, h.revision, h.file),
            Err(_) => String::new(),
        }
    }

    fn env_vars(&self) -> Vec<String> {
        let m = &self.parsed.model;
        [&m.path, &m.url]
            .into_iter()
            .flatten()
            .flat_map(|s| crate::config::referenced_vars(s))
            .collect()
    }
}

/// Compiles the model of a `model.toml` into the items of struct
/// `opts.name`.
pub fn compile_toml(toml_path: &Path, opts: &CompileOptions<'_>) -> Result<Compiled> {
    let mut toml = Toml::load(toml_path)?;
    if let Some(fold) = opts.constant_folding
        && fold != toml.parsed.codegen.constant_folding
    {
        // Part of the artifact key through the text.
        toml.parsed.codegen.constant_folding = fold;
        toml.text
            .push_str(&format!("\n# builder: constant_folding = {fold}\n"));
    }
    let has_extensions = opts.extensions.is_some_and(|e| !e.is_empty());
    if has_extensions && opts.artifact_dir.is_none() {
        return Err(BuildError::Other(
            "compiling with overrides or patterns needs an artifact_dir".into(),
        ));
    }
    if opts.offline {
        if has_extensions {
            return Err(BuildError::Offline(
                "offline build (LELE_SKIP_MODEL_GEN or CARGO_NET_OFFLINE is set): a model with \
                 overrides or patterns is compiled by build.rs and cannot be reused offline; \
                 build once with network access"
                    .into(),
            ));
        }
        return offline(&toml, opts);
    }
    let fetched = fetch::resolve(
        &toml.parsed,
        toml.base(),
        &FetchOptions {
            offline: false,
            progress: opts.progress,
            cache_root: opts.cache_root.clone(),
        },
    )?;
    let key = artifact::key(&toml.text, &fetched.sha256);
    let (cache, stem) = match &opts.artifact_dir {
        Some(dir) => (dir.clone(), crate::emit::names::snake_ident(opts.name)),
        None => (artifact::cache_dir(&opts.root()), key.clone()),
    };
    let vendor = artifact::vendor_dir(&toml.path);
    let mut tracked = vec![toml.path.clone(), fetched.model.clone()];
    tracked.extend(fetched.files.iter().cloned());
    let (art, from_cache) = if has_extensions {
        (
            compile_into(&fetched.model, &toml, &key, &cache, &stem, opts)?,
            false,
        )
    } else if let Some(a) = artifact::load(&cache, &stem, &key) {
        (a, true)
    } else if let Some(a) = artifact::load(&vendor, "artifact", &key) {
        tracked.push(vendor.join("artifact.meta.toml"));
        (a, true)
    } else {
        (
            compile_into(&fetched.model, &toml, &key, &cache, &stem, opts)?,
            false,
        )
    };
    let tokens = wrap(&art, opts)?;
    Ok(Compiled {
        tokens,
        signature: art.signature.clone(),
        key,
        weights_path: Some(art.weights_path.clone()),
        model_path: Some(fetched.model),
        tracked,
        generated: generated_files(&art),
        env_vars: toml.env_vars(),
        from_cache,
        stub: None,
    })
}

/// Compiles and stores the artifact `dir/stem.*`.
fn compile_into(
    model: &Path,
    toml: &Toml,
    key: &str,
    dir: &Path,
    stem: &str,
    opts: &CompileOptions<'_>,
) -> Result<Artifact> {
    let empty = Extensions::default();
    let mut a = crate::compile::compile_artifact(
        model,
        &toml.parsed,
        key,
        &artifact::weights_file(dir, stem),
        opts.extensions.unwrap_or(&empty),
    )
    .map_err(|e| name_model(e, model, &toml.parsed))?;
    artifact::store(dir, stem, &mut a)?;
    Ok(a)
}

/// Replaces the model's absolute path in messages by what the toml says.
fn name_model(e: BuildError, model: &Path, toml: &ModelToml) -> BuildError {
    match (e, &toml.model.path) {
        (BuildError::Config(m), Some(written)) => {
            BuildError::Config(m.replace(&model.display().to_string(), &format!("`{written}`")))
        }
        (e, _) => e,
    }
}

fn generated_files(a: &Artifact) -> Vec<PathBuf> {
    let mut out = vec![a.weights_path.clone()];
    if let crate::artifact::Core::File(p) = &a.core {
        out.push(p.clone());
    }
    out
}

fn wrap(a: &Artifact, opts: &CompileOptions<'_>) -> Result<TokenStream> {
    let weights = a.weights();
    let inlined;
    let core = match &a.core {
        crate::artifact::Core::File(p) if opts.inline_core => {
            let text = std::fs::read_to_string(p).map_err(|source| BuildError::Io {
                path: p.clone(),
                source,
            })?;
            inlined = crate::artifact::Core::Tokens(
                text.parse()
                    .map_err(|e| BuildError::Other(format!("{}: {e}", p.display())))?,
            );
            &inlined
        }
        core => core,
    };
    shell(
        &a.signature,
        opts.name,
        &opts.vis,
        &opts.attrs,
        ShellBody::Compiled {
            core,
            layout: &a.layout,
            weights: &weights,
        },
    )
}

/// Offline: artifact cache, vendored artifact, or a stub from the lock.
fn offline(toml: &Toml, opts: &CompileOptions<'_>) -> Result<Compiled> {
    let lock_path = artifact::lock_path(&toml.path);
    let lock = Lock::read(&lock_path)?;
    let base = toml.base();
    // The model's hash without the network: pinned, a local file, or the lock.
    let local = match toml.parsed.source(base)? {
        Source::Path(p) if p.is_file() => Some(p),
        _ => None,
    };
    let sha = match (&toml.parsed.model.sha256, &local, &lock) {
        (Some(s), _, _) => Some(s.trim().to_ascii_lowercase()),
        (None, Some(p), _) => Some(fetch::file_sha256(p, &opts.root())?),
        (None, None, Some(l)) => Some(l.model_sha256.clone()),
        _ => None,
    };
    let mut tracked = vec![toml.path.clone()];
    if lock.is_some() {
        tracked.push(lock_path.clone());
    }
    if let Some(sha) = &sha {
        let key = artifact::key(&toml.text, sha);
        let vendor = artifact::vendor_dir(&toml.path);
        let hit = artifact::load(&artifact::cache_dir(&opts.root()), &key, &key).or_else(|| {
            let a = artifact::load(&vendor, "artifact", &key)?;
            tracked.push(vendor.join("artifact.meta.toml"));
            Some(a)
        });
        if let Some(a) = hit {
            if let Some(p) = &local {
                tracked.push(p.clone());
            }
            return Ok(Compiled {
                tokens: wrap(&a, opts)?,
                signature: a.signature.clone(),
                key,
                weights_path: Some(a.weights_path.clone()),
                model_path: local,
                tracked,
                generated: generated_files(&a),
                env_vars: toml.env_vars(),
                from_cache: true,
                stub: None,
            });
        }
    }
    let toml_name = toml
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.toml".into());
    let Some(lock) = lock else {
        return Err(BuildError::Offline(format!(
            "offline build (LELE_SKIP_MODEL_GEN or CARGO_NET_OFFLINE is set): `{toml_name}` has no \
             cached or vendored compiled model and no lock file to take its API from; run \
             `lele prepare {toml_name}` once with network access and commit `{}`",
            lock_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        )));
    };
    let reason = format!(
        "{} was built offline (LELE_SKIP_MODEL_GEN or CARGO_NET_OFFLINE) without a compiled model \
         for {toml_name}; build once with network access, or run `lele prepare --vendor {toml_name}`",
        opts.name
    );
    // The stub's message must be a `&'static str` literal in generated code.
    let tokens = shell(
        &lock.signature,
        opts.name,
        &opts.vis,
        &opts.attrs,
        ShellBody::Stub { reason: &reason },
    )?;
    Ok(Compiled {
        tokens,
        signature: lock.signature,
        key: lock.key,
        weights_path: None,
        model_path: None,
        tracked,
        generated: Vec::new(),
        env_vars: toml.env_vars(),
        from_cache: false,
        stub: Some(reason),
    })
}

/// `lele prepare`: fetches, compiles and writes `<stem>.lock` (and, with
/// `vendor`, the artifact into `<stem>.lele/`). Returns the lock.
pub fn prepare(
    toml_path: &Path,
    vendor: bool,
    progress: bool,
    cache_root: Option<PathBuf>,
) -> Result<(Lock, Compiled)> {
    let mut opts = CompileOptions::new("Model");
    opts.offline = false;
    opts.progress = progress;
    opts.cache_root = cache_root;
    let compiled = compile_toml(toml_path, &opts)?;
    let toml = Toml::load(toml_path)?;
    let sha = match &compiled.model_path {
        Some(p) => fetch::file_sha256(p, &opts.root())?,
        None => return Err(BuildError::Other("no model file was resolved".into())),
    };
    let lock = Lock {
        compiler: crate::version::COMPILER_VERSION.to_string(),
        key: compiled.key.clone(),
        model_sha256: sha,
        source: toml.source_text(),
        signature: compiled.signature.clone(),
    };
    if vendor {
        let a = artifact::load(
            &artifact::cache_dir(&opts.root()),
            &compiled.key,
            &compiled.key,
        )
        .or_else(|| artifact::load(&artifact::vendor_dir(toml_path), "artifact", &compiled.key))
        .ok_or_else(|| BuildError::Other("the compiled artifact vanished from the cache".into()))?;
        let dir = artifact::vendor_dir(toml_path);
        if a.weights_path.parent() != Some(dir.as_path()) {
            artifact::copy_to(&a, &dir, "artifact")?;
        }
    }
    lock.write(&artifact::lock_path(toml_path))?;
    Ok((lock, compiled))
}

/// Compiles an ONNX file with a parsed toml into `out_dir` for `lele gen`
/// and `lele run`: the weights file is `<snake name>.weights` next to the
/// generated source and referenced relative to it.
pub fn compile_model(
    model_path: &Path,
    toml: &ModelToml,
    toml_text: &str,
    out_dir: &Path,
    opts: &CompileOptions<'_>,
) -> Result<Compiled> {
    let sha = fetch::sha256_file(model_path)?;
    fetch::check_pin(
        &model_path.display().to_string(),
        toml.model.sha256.as_deref(),
        &sha,
    )?;
    let key = artifact::key(toml_text, &sha);
    let file = format!("{}.weights", crate::emit::names::snake_ident(opts.name));
    let weights_path = out_dir.join(&file);
    let empty = Extensions::default();
    let mut a = crate::compile::compile_artifact(
        model_path,
        toml,
        &key,
        &weights_path,
        opts.extensions.unwrap_or(&empty),
    )?;
    a.weights_path = PathBuf::from(&file);
    let tokens = wrap(&a, opts)?;
    Ok(Compiled {
        tokens,
        signature: a.signature,
        key,
        weights_path: Some(weights_path.clone()),
        model_path: Some(model_path.to_path_buf()),
        tracked: vec![model_path.to_path_buf()],
        generated: vec![weights_path.clone()],
        env_vars: Vec::new(),
        from_cache: false,
        stub: None,
    })
}
