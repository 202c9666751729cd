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
}

/// `[model]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Path of the ONNX file, relative to the toml's directory; `${VAR}`
    /// expands environment variables (`${LELE_ZOO}` defaults to the model zoo).
    pub path: Option<String>,
    /// Expected sha256 of the ONNX file (hex).
    pub sha256: Option<String>,
}

/// `[codegen]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodegenSection {
    /// `"embed"` (default) or `"mmap"`.
    #[serde(default = "default_weights")]
    pub weights: String,
    /// `"f32"` (default).
    #[serde(default = "default_precision")]
    pub precision: String,
}

impl Default for CodegenSection {
    fn default() -> Self {
        CodegenSection {
            weights: default_weights(),
            precision: default_precision(),
        }
    }
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
        [name, max] if is_name(name) => Ok(Dim::Range {
            min: 1,
            max: num(max)?,
        }),
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
        let mut problems = Vec::new();
        if t.model.path.is_none() {
            problems.push("[model] needs a source: `path = \"...\"`".to_string());
        }
        if !matches!(t.codegen.weights.as_str(), "embed" | "mmap") {
            problems.push(format!(
                "[codegen] weights = \"{}\" is not one of \"embed\", \"mmap\"",
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
        let text = std::fs::read_to_string(path).map_err(|source| BuildError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ModelToml::parse(&text)
    }

    /// The resolved ONNX path (relative paths are relative to `base`).
    pub fn model_path(&self, base: &Path) -> Result<PathBuf> {
        let raw = self
            .model
            .path
            .as_deref()
            .ok_or_else(|| BuildError::Config("[model] has no path".into()))?;
        let expanded = expand_vars(raw)?;
        let p = PathBuf::from(expanded);
        Ok(if p.is_absolute() { p } else { base.join(p) })
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

/// The default model zoo directory (`$LELE_ZOO`, else the user cache dir).
pub fn zoo_dir() -> PathBuf {
    if let Some(z) = std::env::var_os("LELE_ZOO") {
        return PathBuf::from(z);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("lele").join("zoo")
}

/// Expands `${VAR}` references; `${LELE_ZOO}` falls back to [`zoo_dir`].
pub fn expand_vars(s: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| BuildError::Config(format!("unclosed `${{` in `{s}`")))?;
        let var = &after[..end];
        let val = match std::env::var(var) {
            Ok(v) => v,
            Err(_) if var == "LELE_ZOO" => zoo_dir().to_string_lossy().into_owned(),
            Err(_) => {
                return Err(BuildError::Config(format!(
                    "environment variable `{var}` is not set (used in `{s}`)"
                )));
            }
        };
        out.push_str(&val);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
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
    }

    #[test]
    fn unknown_key_lists_valid_ones() {
        let e = ModelToml::parse("[model]\npath = \"a.onnx\"\nfoo = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("foo") && e.contains("sha256"), "{e}");
    }
}
