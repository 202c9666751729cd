//! Errors of the compiler.
use std::path::PathBuf;

/// One unsupported construct of a model (op, node name, reason).
#[derive(Debug, Clone, PartialEq)]
pub struct Unsupported {
    /// Domain-qualified op type (`Conv`, `com.microsoft.FusedMatMul`).
    pub op: String,
    /// Node name.
    pub node: String,
    /// Why it is not supported.
    pub reason: String,
}

/// Everything that can go wrong while compiling a model.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Reading a file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid ONNX model.
    #[error("invalid ONNX model: {0}")]
    Decode(String),
    /// A limit that protects against hostile files was exceeded.
    #[error("model exceeds a safety limit: {0}")]
    Limit(String),
    /// An external data reference is not allowed.
    #[error("external data `{location}` is not allowed: {reason}")]
    ExternalData {
        /// The location in the file.
        location: String,
        /// Why.
        reason: String,
    },
    /// The model uses operators lele cannot compile (all are listed).
    #[error("unsupported operators:\n{}", .0.iter().map(|u| format!("  - {} (node `{}`): {}", u.op, u.node, u.reason)).collect::<Vec<_>>().join("\n"))]
    Unsupported(Vec<Unsupported>),
    /// Invalid `model.toml`.
    #[error("{0}")]
    Config(String),
    /// Shape inference or constant evaluation failed.
    #[error("node `{node}` ({op}): {msg}")]
    Node {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What happened.
        msg: String,
    },
    /// Downloading a model file failed.
    #[error("cannot fetch {what}: {msg}")]
    Fetch {
        /// The URL or Hub file.
        what: String,
        /// What went wrong.
        msg: String,
    },
    /// An offline build needed something that is not available locally.
    #[error("{0}")]
    Offline(String),
    /// Anything else, with a message.
    #[error("{0}")]
    Other(String),
}

impl BuildError {
    /// Whether this is a write to stdout after its reader went away (as
    /// `head` does): not worth reporting. Other files keep their errors.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, BuildError::Io { path, source }
            if path.as_os_str() == STDOUT && source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// The `path` of a [`BuildError::Io`] from writing the CLI's output.
pub(crate) const STDOUT: &str = "<stdout>";

/// Result alias of the compiler.
pub type Result<T, E = BuildError> = std::result::Result<T, E>;
