//! `model.toml`: where the model comes from, how to generate code, and the
//! bounds of dynamic input dimensions.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{BuildError, Result};

/// The parsed `model.toml`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelToml {
    /// `[model]`: the source.
    pub model: ModelSection,
    /// `[codegen]`: code generation options.
    #[serde(default)]
    pub codegen: CodegenSection,
    /// `[inputs]`: dims of each input (numbers pin a dim, strings bound it).
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<DimSpec>>,
    /// `[decoder]`: options of a language model read from a GGUF file.
    #[serde(default)]
    pub decoder: DecoderSection,
}

/// `[decoder]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecoderSection {
    /// Positions a workspace's key/value cache holds (prompt and generated
    /// tokens together); default [`DEFAULT_CONTEXT`].
    #[serde(default = "default_context")]
    pub context: usize,
}

/// The default of `[decoder] context`.
pub const DEFAULT_CONTEXT: usize = 1024;

fn default_context() -> usize {
    DEFAULT_CONTEXT
}

impl Default for DecoderSection {
    fn default() -> Self {
        DecoderSection {
            context: DEFAULT_CONTEXT,
        }
    }
}

/// `[model]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Path of the ONNX file, relative to the toml's directory; `${VAR}`
    /// expands environment variables (`${LELE_ZOO}` defaults to the model zoo).
    pub path: Option<String>,
    /// URL of the ONNX file (http or https).
    pub url: Option<String>,
    /// A file of a Hugging Face Hub repository.
    pub hf: Option<HfSource>,
    /// Expected sha256 of the ONNX file (hex). Required for `url` and `hf`
    /// unless `allow_unpinned = true`.
    pub sha256: Option<String>,
    /// Accept an unpinned `url`/`hf` model (development only).
    #[serde(default)]
    pub allow_unpinned: bool,
    /// Extra files fetched next to the model (external data, tokenizers).
    #[serde(default)]
    pub files: Vec<ExtraFile>,
    /// Largest download accepted for one `url`/`hf` file, in bytes
    /// (default 8 GiB; `$LELE_MAX_DOWNLOAD_BYTES` overrides it).
    pub max_download_bytes: Option<u64>,
}

/// `hf = { repo = "owner/name", file = "model.onnx", revision = "main" }`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HfSource {
    /// Repository id, `owner/name`.
    pub repo: String,
    /// Path of the ONNX file inside the repository.
    pub file: String,
    /// Branch, tag or commit (default `main`).
    #[serde(default = "default_revision")]
    pub revision: String,
}

fn default_revision() -> String {
    "main".into()
}

/// An extra file: `"tokenizer.json"` or `{ name = "...", sha256 = "..." }`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ExtraFile {
    /// Unpinned (pinned only by the source's revision).
    Name(String),
    /// Pinned by its own hash.
    Pinned {
        /// Path relative to the model (same directory, repository or URL folder).
        name: String,
        /// Expected sha256 (hex).
        sha256: String,
    },
}

impl ExtraFile {
    /// The relative name.
    pub fn name(&self) -> &str {
        match self {
            ExtraFile::Name(n) | ExtraFile::Pinned { name: n, .. } => n,
        }
    }

    /// The pinned hash, if any.
    pub fn sha256(&self) -> Option<&str> {
        match self {
            ExtraFile::Name(_) => None,
            ExtraFile::Pinned { sha256, .. } => Some(sha256),
        }
    }
}

/// Where the model comes from, resolved from `[model]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A local file (`${VAR}` expanded, relative to the toml's directory).
    Path(PathBuf),
    /// An http(s) URL.
    Url(String),
    /// A Hugging Face Hub file.
    Hf(HfSource),
}

/// `[codegen]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodegenSection {
    /// `"embed"` (default) or `"mmap"`.
    #[serde(default = "default_weights")]
    pub weights: String,
    /// With `weights = "mmap"`: the file `new()` maps at run time (relative
    /// paths are relative to the running executable's directory). Default:
    /// the weights file in the build cache.
    pub weights_file: Option<String>,
    /// `"f32"` (default).
    #[serde(default = "default_precision")]
    pub precision: String,
    /// Evaluate constant subgraphs at build time (default true).
    #[serde(default = "default_true")]
    pub constant_folding: bool,
    /// Zero the subnormal values of the weights of convolutions, products
    /// and recurrent layers (default true; see
    /// [`crate::passes::subnormal`]).
    #[serde(default = "default_true")]
    pub flush_subnormal_weights: bool,
    /// The most bytes the planned arena (a workspace's memory) may take; a
    /// model whose plan needs more, at the `[inputs]` bounds, is a build
    /// error rather than a workspace that aborts the process when created.
    /// Default: [`DEFAULT_MAX_ARENA_BYTES`].
    #[serde(default = "default_max_arena_bytes")]
    pub max_arena_bytes: u64,
}

/// The default of `[codegen] max_arena_bytes`: 8 GiB, far above what the
/// models lele runs need (hundreds of MiB at most) and below what a
/// workstation can give a process.
pub const DEFAULT_MAX_ARENA_BYTES: u64 = 8 << 30;

fn default_max_arena_bytes() -> u64 {
    DEFAULT_MAX_ARENA_BYTES
}

impl Default for CodegenSection {
    fn default() -> Self {
        CodegenSection {
            weights: default_weights(),
            weights_file: None,
            precision: default_precision(),
            constant_folding: true,
            flush_subnormal_weights: true,
            max_arena_bytes: DEFAULT_MAX_ARENA_BYTES,
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_weights() -> String {
    "embed".into()
}

fn default_precision() -> String {
    "f32".into()
}

/// One dim in `[inputs]`: a fixed size or a bound expression.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum DimSpec {
    /// A pinned size.
    Fixed(u64),
    /// `"n <= 576"` or `"32 <= h <= 960"`.
    Bound(String),
}

/// A resolved dim of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Pinned.
    Fixed(usize),
    /// Dynamic within `min..=max`.
    Range {
        /// Smallest size.
        min: usize,
        /// Largest size.
        max: usize,
    },
}

impl Dim {
    /// The largest size.
    pub fn max(&self) -> usize {
        match *self {
            Dim::Fixed(n) => n,
            Dim::Range { max, .. } => max,
        }
    }

    /// The smallest size.
    pub fn min(&self) -> usize {
        match *self {
            Dim::Fixed(n) => n,
            Dim::Range { min, .. } => min,
        }
    }
}

/// Parses `"n <= 576"`, `"32 <= h <= 960"` or `"576"`.
pub fn parse_bound(s: &str) -> std::result::Result<Dim, String> {
    let parts: Vec<&str> = s.split("<=").map(str::trim).collect();
    let num = |p: &str| {
        p.parse::<usize>()
            .map_err(|_| format!("`{p}` is not a size"))
    };
    let is_name = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_');
    match parts.as_slice() {
        [n] => num(n)
            .map(Dim::Fixed)
            .map_err(|_| format!("bound `{s}` has no upper limit; write it like \"{n} <= 512\"")),
        [name, max] if is_name(name) => match num(max)? {
            0 => Err(format!("bound `{s}` is empty (dims start at 1)")),
            max => Ok(Dim::Range { min: 1, max }),
        },
        [min, name, max] if is_name(name) => {
            let (min, max) = (num(min)?, num(max)?);
            if min > max || min == 0 {
                return Err(format!("bound `{s}` is empty or starts at 0"));
            }
            Ok(Dim::Range { min, max })
        }
        _ => Err(format!(
            "cannot parse bound `{s}`; expected \"n <= 576\" or \"32 <= n <= 576\""
        )),
    }
}

impl ModelToml {
    /// Parses toml text; errors carry line numbers.
    pub fn parse(text: &str) -> Result<ModelToml> {
        let t: ModelToml =
            toml::from_str(text).map_err(|e| BuildError::Config(format!("model.toml: {e}")))?;
        let mut problems = t.model.problems();
        if !matches!(t.codegen.weights.as_str(), "embed" | "mmap") {
            problems.push(format!(
                "[codegen] weights = \"{}\" is not one of \"embed\", \"mmap\"",
                t.codegen.weights
            ));
        }
        if t.codegen.weights_file.is_some() && t.codegen.weights != "mmap" {
            problems.push(format!(
                "[codegen] weights_file only applies to weights = \"mmap\", but weights = \"{}\"; \
                 remove one of them",
                t.codegen.weights
            ));
        }
        if t.codegen.precision != "f32" {
            problems.push(format!(
                "[codegen] precision = \"{}\" is not supported yet (only \"f32\")",
                t.codegen.precision
            ));
        }
        for (name, dims) in &t.inputs {
            for d in dims {
                if let DimSpec::Bound(s) = d
                    && let Err(e) = parse_bound(s)
                {
                    problems.push(format!("[inputs] {name}: {e}"));
                }
            }
        }
        if !problems.is_empty() {
            return Err(BuildError::Config(problems.join("\n")));
        }
        Ok(t)
    }

    /// Reads and parses a toml file.
    pub fn load(path: &Path) -> Result<ModelToml> {
        let text = crate::fsutil::read_regular_text(path, crate::fsutil::MAX_TOML_BYTES)?;
        ModelToml::parse(&text)
    }

    /// The model's source; relative paths are relative to `base`.
    pub fn source(&self, base: &Path) -> Result<Source> {
        let m = &self.model;
        if let Some(raw) = &m.path {
            let p = PathBuf::from(expand_vars(raw)?);
            return Ok(Source::Path(if p.is_absolute() { p } else { base.join(p) }));
        }
        if let Some(url) = &m.url {
            return Ok(Source::Url(expand_vars(url)?));
        }
        if let Some(hf) = &m.hf {
            return Ok(Source::Hf(hf.clone()));
        }
        Err(BuildError::Config("[model] has no source".into()))
    }

    /// The resolved ONNX path of a `path` source.
    pub fn model_path(&self, base: &Path) -> Result<PathBuf> {
        match self.source(base)? {
            Source::Path(p) => Ok(p),
            _ => Err(BuildError::Config("[model] is not a local path".into())),
        }
    }

    /// The resolved dims of input `name`, if given.
    pub fn input_dims(&self, name: &str) -> Option<std::result::Result<Vec<Dim>, String>> {
        self.inputs.get(name).map(|dims| {
            dims.iter()
                .map(|d| match d {
                    DimSpec::Fixed(n) => Ok(Dim::Fixed(*n as usize)),
                    DimSpec::Bound(s) => parse_bound(s),
                })
                .collect()
        })
    }
}

impl ModelSection {
    /// Everything wrong with the section (all problems, not just the first).
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let given: Vec<&str> = [
            ("path", self.path.is_some()),
            ("url", self.url.is_some()),
            ("hf", self.hf.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect();
        match given.as_slice() {
            [] => problems.push(
                "[model] needs a source: `path = \"model.onnx\"`, `url = \"https://...\"` or \
                 `hf = { repo = \"owner/name\", file = \"model.onnx\" }`"
                    .to_string(),
            ),
            [_] => {}
            many => problems.push(format!(
                "[model] has {} sources (`{}`); keep exactly one",
                many.len(),
                many.join("` and `")
            )),
        }
        let remote = self.url.is_some() || self.hf.is_some();
        match (&self.sha256, self.allow_unpinned) {
            (Some(_), true) => problems.push(
                "[model] sets both `sha256` and `allow_unpinned = true`; remove one of them".into(),
            ),
            (None, false) if remote => problems.push(
                "[model] a `url` or `hf` model needs `sha256 = \"<64 hex digits>\"` to pin it \
                 (`lele fetch model.toml` prints it); for development only, \
                 `allow_unpinned = true` accepts whatever the server sends"
                    .into(),
            ),
            _ => {}
        }
        if let Some(sha) = &self.sha256
            && !is_sha256(sha)
        {
            problems.push(format!(
                "[model] sha256 = \"{sha}\" is not 64 hexadecimal digits"
            ));
        }
        if let Some(url) = &self.url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            problems.push(format!("[model] url = \"{url}\" is not an http(s) URL"));
        }
        if let Some(hf) = &self.hf {
            if let Err(e) = check_repo_id(&hf.repo) {
                problems.push(format!("[model] hf.repo: {e}"));
            }
            if let Err(e) = check_relative(&hf.file) {
                problems.push(format!("[model] hf.file: {e}"));
            }
            if let Err(e) = check_revision(&hf.revision) {
                problems.push(format!("[model] hf.revision: {e}"));
            }
        }
        if self.max_download_bytes == Some(0) {
            problems.push("[model] max_download_bytes = 0 would refuse every download".into());
        }
        for f in &self.files {
            if let Err(e) = check_relative(f.name()) {
                problems.push(format!("[model] files: {e}"));
            }
            if let Some(sha) = f.sha256()
                && !is_sha256(sha)
            {
                problems.push(format!(
                    "[model] files: sha256 of `{}` is not 64 hexadecimal digits",
                    f.name()
                ));
            }
        }
        problems
    }
}

/// Whether `s` is 64 hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Longest accepted `hf.revision`.
const MAX_REVISION_LEN: usize = 255;
/// Longest accepted file name in `hf.file` and `files`.
const MAX_FILE_NAME_LEN: usize = 1024;

/// Whether `s` is a 40-digit hex commit id.
pub fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// `hf.revision`: a branch or tag name (ASCII letters, digits and `._-/`,
/// slash-separated segments none of which is empty or starts with `.`,
/// nothing that ends in `.lock`) or a 40-digit commit, at most 255 bytes.
/// What passes can be joined under a directory without leaving it.
pub fn check_revision(rev: &str) -> std::result::Result<(), String> {
    let shown = rev.escape_debug();
    if rev.is_empty() || rev.len() > MAX_REVISION_LEN {
        return Err(format!(
            "\"{shown}\" is not a branch, tag or commit (1 to {MAX_REVISION_LEN} characters)"
        ));
    }
    if let Some(c) = rev
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
    {
        return Err(format!(
            "\"{shown}\" is not a branch, tag or commit: `{}` is not allowed \
             (only ASCII letters, digits and `._-/`)",
            c.escape_debug()
        ));
    }
    if rev
        .split('/')
        .any(|seg| seg.is_empty() || seg.starts_with('.') || seg.ends_with(".lock"))
        || rev.contains("..")
    {
        return Err(format!(
            "\"{shown}\" is not a branch, tag or commit: a `/`-separated part is empty, \
             starts with `.` or ends with `.lock`"
        ));
    }
    Ok(())
}

/// `hf.repo`: `owner/name` or `name`, each of ASCII letters, digits and
/// `-_.`, not starting with `.` nor containing `--` or `..`, at most 96 bytes.
pub fn check_repo_id(repo: &str) -> std::result::Result<(), String> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 96
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !s.starts_with('.')
            && !s.contains("--")
            && !s.contains("..")
    };
    let parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 2 || !parts.iter().all(|p| ok(p)) {
        return Err(format!(
            "\"{}\" is not a repository id like \"owner/name\"",
            repo.escape_debug()
        ));
    }
    Ok(())
}

/// A relative path that stays inside its directory: `/`-separated
/// segments, none empty, `.` or `..`; no absolute path, backslash, NUL or
/// other control character, `?` or `#` (the name becomes part of a URL);
/// at most 1024 bytes.
pub fn check_relative(name: &str) -> std::result::Result<(), String> {
    let p = Path::new(name);
    let bad = name.is_empty()
        || name.len() > MAX_FILE_NAME_LEN
        || p.is_absolute()
        || name.starts_with('/')
        || name
            .chars()
            .any(|c| c.is_control() || matches!(c, '\\' | '?' | '#'))
        || name
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        || p.components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)));
    if bad {
        Err(format!(
            "`{}` must be a relative path inside the model's folder (no `..`, no empty, \
             absolute or control-character parts)",
            name.escape_debug()
        ))
    } else {
        Ok(())
    }
}

/// The default model zoo directory (`$LELE_ZOO`, else the user cache dir).
pub fn zoo_dir() -> PathBuf {
    if let Some(z) = std::env::var_os("LELE_ZOO") {
        return PathBuf::from(z);
    }
    crate::fsutil::user_cache_dir().join("lele").join("zoo")
}

/// A piece of a string with `${VAR}` references.
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Splits `s` into text and `${VAR}` references.
fn pieces(s: &str) -> Result<Vec<Piece<'_>>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push(Piece::Text(&rest[..start]));
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| BuildError::Config(format!("unclosed `${{` in `{s}`")))?;
        out.push(Piece::Var(&after[..end]));
        rest = &after[end + 1..];
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// The variables `s` references with `${VAR}` (none if malformed).
pub fn referenced_vars(s: &str) -> Vec<String> {
    pieces(s)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Var(v) => Some(v.to_string()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Expands `${VAR}` references; `${LELE_ZOO}` falls back to [`zoo_dir`].
pub fn expand_vars(s: &str) -> Result<String> {
    let mut out = String::new();
    for p in pieces(s)? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(var) => match std::env::var(var) {
                Ok(v) => out.push_str(&v),
                Err(_) if var == "LELE_ZOO" => out.push_str(&zoo_dir().to_string_lossy()),
                Err(_) => {
                    return Err(BuildError::Config(format!(
                        "environment variable `{var}` is not set (used in `{s}`)"
                    )));
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(
            parse_bound("n <= 576").unwrap(),
            Dim::Range { min: 1, max: 576 }
        );
        assert_eq!(
            parse_bound("32 <= h <= 640").unwrap(),
            Dim::Range { min: 32, max: 640 }
        );
        assert_eq!(parse_bound("7").unwrap(), Dim::Fixed(7));
        assert!(parse_bound("h").is_err());
        assert!(parse_bound("9 <= h <= 3").is_err());
        // Found by the toml_parser fuzz target: an empty bound made the
        // sizing midpoint 1 + (0 - 1) / 2, i.e. 2^63.
        assert!(parse_bound("n <= 0").is_err());
    }

    #[test]
    fn subnormal_weights_are_flushed_unless_turned_off() {
        let on = ModelToml::parse("[model]\npath = \"a.onnx\"\n").unwrap();
        assert!(on.codegen.flush_subnormal_weights);
        let off = ModelToml::parse(
            "[model]\npath = \"a.onnx\"\n[codegen]\nflush_subnormal_weights = false\n",
        )
        .unwrap();
        assert!(!off.codegen.flush_subnormal_weights);
    }

    #[test]
    fn unknown_key_lists_valid_ones() {
        let e = ModelToml::parse("[model]\npath = \"a.onnx\"\nfoo = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("foo") && e.contains("sha256"), "{e}");
    }

    fn problems(text: &str) -> String {
        ModelToml::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn revisions_repos_and_file_names_follow_a_strict_grammar() {
        for ok in ["main", "v1.0", "refs/pr/1", "release-2_x", &"ab".repeat(20)] {
            assert!(check_revision(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(256);
        for bad in [
            "",
            "/dev/zero",
            "/etc/passwd",
            "..",
            "a/../b",
            "a//b",
            "a/",
            "/a",
            ".hidden",
            "a/.b",
            "x.lock",
            "a b",
            "a\\b",
            "a\u{0}b",
            "a\nb",
            "é",
            long.as_str(),
        ] {
            assert!(check_revision(bad).is_err(), "{bad:?}");
        }
        for ok in ["o/n", "name", "Org-1/model.v2_x"] {
            assert!(check_repo_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "a/b/c", "/a", "a/", ".a/b", "a/..", "a--b/c", "a/b c", "a\\b",
        ] {
            assert!(check_repo_id(bad).is_err(), "{bad:?}");
        }
        for ok in ["m.onnx", "onnx/model.onnx", "a b/c.json"] {
            assert!(check_relative(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "./a",
            "a//b",
            "a/",
            "a\\b",
            "a\u{0}b",
            "a\rb",
            "a?b",
            "a#b",
            "a/\u{1b}[2J",
        ] {
            assert!(check_relative(bad).is_err(), "{bad:?}");
        }
        // Through the toml: an absolute revision is refused at parse time.
        let sha = "a".repeat(64);
        let e = problems(&format!(
            "[model]\nhf = {{ repo = \"o/n\", file = \"m.onnx\", revision = \"/dev/zero\" }}\n\
             sha256 = \"{sha}\"\n"
        ));
        assert!(e.contains("hf.revision"), "{e}");
        let e = problems(
            "[model]\nurl = \"https://h/m\"\nallow_unpinned = true\nmax_download_bytes = 0\n",
        );
        assert!(e.contains("max_download_bytes"), "{e}");
    }

    #[test]
    fn sources() {
        let sha = "a".repeat(64);
        let ok = ModelToml::parse(&format!(
            "[model]\nhf = {{ repo = \"o/n\", file = \"onnx/m.onnx\" }}\nsha256 = \"{sha}\"\n"
        ))
        .unwrap();
        let hf = ok.model.hf.clone().unwrap();
        assert_eq!(
            (hf.revision.as_str(), hf.file.as_str()),
            ("main", "onnx/m.onnx")
        );
        assert!(matches!(ok.source(Path::new(".")).unwrap(), Source::Hf(_)));
        let url = ModelToml::parse("[model]\nurl = \"https://h/m.onnx\"\nallow_unpinned = true\n")
            .unwrap();
        assert_eq!(
            url.source(Path::new(".")).unwrap(),
            Source::Url("https://h/m.onnx".into())
        );
        let e = problems("[model]\npath = \"a\"\nurl = \"https://h/m\"\nsha256 = \"x\"\n");
        assert!(
            e.contains("2 sources") && e.contains("64 hexadecimal"),
            "{e}"
        );
        let e = problems("[model]\nurl = \"ftp://h/m\"\n");
        assert!(
            e.contains("needs `sha256") && e.contains("not an http(s) URL"),
            "{e}"
        );
        let e = problems(&format!(
            "[model]\nurl = \"https://h/m\"\nsha256 = \"{sha}\"\nallow_unpinned = true\n"
        ));
        assert!(e.contains("both `sha256` and `allow_unpinned"), "{e}");
        let e = problems(&format!(
            "[model]\nhf = {{ repo = \"a/b/c\", file = \"../x\" }}\nsha256 = \"{sha}\"\n\
             files = [\"/etc/passwd\", {{ name = \"t.json\", sha256 = \"zz\" }}]\n"
        ));
        assert!(
            e.contains("hf.repo")
                && e.contains("hf.file")
                && e.contains("/etc/passwd")
                && e.contains("t.json"),
            "{e}"
        );
    }
}
