//! Errors of the compiler.
use std::borrow::Cow;
use std::path::PathBuf;

/// Whether `c` must not reach a terminal or a Rust source file raw: C0
/// controls, DEL, C1 controls, and the bidirectional marks, embeddings,
/// overrides and isolates (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069),
/// plus the line and paragraph separators (U+2028/9).
pub fn is_unsafe_char(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `s` with every [unsafe character](is_unsafe_char) written as `\u{..}`,
/// for showing a string from a model, a toml or a file on a terminal or in a
/// doc comment. Other text (non-ASCII letters included) is kept as is.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`] of each line of a multi-line message: the line
/// breaks the message itself is made of stay.
pub fn escape_lines(s: &str) -> String {
    s.split('\n')
        .map(escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

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

/// Everything that can go wrong while compiling a model. Every message
/// shows the model, toml and file strings it quotes through
/// [`escape_controls`]: printing an error never sends a control sequence
/// or a bidi override to a terminal (line breaks of multi-line messages
/// stay).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Reading a file failed.
    #[error("cannot read {}: {source}", escape_controls(&.path.display().to_string()))]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid ONNX model.
    #[error("invalid ONNX model: {}", escape_lines(.0))]
    Decode(String),
    /// A GGUF file that cannot be read (malformed, truncated, or beyond a
    /// limit).
    #[error("invalid GGUF file: {}", escape_lines(.0))]
    Gguf(String),
    /// A limit that protects against hostile files was exceeded.
    #[error("model exceeds a safety limit: {}", escape_lines(.0))]
    Limit(String),
    /// An external data reference is not allowed.
    #[error("external data `{}` is not allowed: {}", escape_controls(.location), escape_lines(.reason))]
    ExternalData {
        /// The location in the file.
        location: String,
        /// Why.
        reason: String,
    },
    /// The model uses operators lele cannot compile (all are listed).
    #[error("unsupported operators:\n{}", .0.iter().map(|u| format!("  - {} (node `{}`): {}", escape_controls(&u.op), escape_controls(&u.node), escape_controls(&u.reason))).collect::<Vec<_>>().join("\n"))]
    Unsupported(Vec<Unsupported>),
    /// Invalid `model.toml`.
    #[error("{}", escape_lines(.0))]
    Config(String),
    /// Shape inference or constant evaluation failed.
    #[error("node `{}` ({}): {}", escape_controls(.node), escape_controls(.op), escape_lines(.msg))]
    Node {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What happened.
        msg: String,
    },
    /// Downloading a model file failed.
    #[error("cannot fetch {}: {}", escape_controls(.what), escape_lines(.msg))]
    Fetch {
        /// The URL or Hub file.
        what: String,
        /// What went wrong.
        msg: String,
    },
    /// An offline build needed something that is not available locally.
    #[error("{}", escape_lines(.0))]
    Offline(String),
    /// Anything else, with a message.
    #[error("{}", escape_lines(.0))]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_but_keeps_text() {
        assert_eq!(escape_controls("input_ids"), "input_ids");
        assert_eq!(escape_controls("héllo 图像 ∑"), "héllo 图像 ∑");
        assert_eq!(
            escape_controls("a\u{1b}[2Jb\r\u{7f}\u{9b}"),
            "a\\u{1b}[2Jb\\u{d}\\u{7f}\\u{9b}"
        );
        assert_eq!(
            escape_controls("x\u{202e}y\u{2066}z\u{2069}"),
            "x\\u{202e}y\\u{2066}z\\u{2069}"
        );
        assert_eq!(
            escape_lines("one\u{1b}\ntwo\u{202a}"),
            "one\\u{1b}\ntwo\\u{202a}"
        );
    }

    #[test]
    fn node_and_unsupported_errors_show_model_strings_escaped() {
        let e = BuildError::Node {
            node: "n\u{1b}]0;pwned\u{7}".into(),
            op: "Add\u{202e}".into(),
            msg: "bad\u{9b}".into(),
        };
        let s = e.to_string();
        assert!(!s.chars().any(is_unsafe_char), "{s:?}");
        assert!(s.contains("n\\u{1b}]0;pwned\\u{7}"), "{s}");
        let e = BuildError::Unsupported(vec![Unsupported {
            op: "Evil\u{1b}[31m".into(),
            node: "x\ry".into(),
            reason: "unknown\u{85}".into(),
        }]);
        let s = e.to_string();
        assert!(s.starts_with("unsupported operators:\n"));
        assert!(!s.chars().any(|c| c != '\n' && is_unsafe_char(c)), "{s:?}");
        assert!(s.contains("Evil\\u{1b}[31m"), "{s}");
    }

    #[test]
    fn every_error_message_is_terminal_safe() {
        let evil = "a\u{1b}[2J\u{202e}b\u{9b}";
        let all = [
            BuildError::Io {
                path: PathBuf::from(evil),
                source: std::io::Error::other("gone"),
            },
            BuildError::Decode(evil.into()),
            BuildError::Limit(evil.into()),
            BuildError::ExternalData {
                location: evil.into(),
                reason: evil.into(),
            },
            BuildError::Config(format!("one {evil}\ntwo {evil}")),
            BuildError::Fetch {
                what: evil.into(),
                msg: evil.into(),
            },
            BuildError::Offline(evil.into()),
            BuildError::Other(evil.into()),
        ];
        for e in all {
            let s = e.to_string();
            assert!(!s.chars().any(|c| c != '\n' && is_unsafe_char(c)), "{s:?}");
            assert!(s.contains("a\\u{1b}[2J\\u{202e}b\\u{9b}"), "{s}");
        }
        assert_eq!(
            BuildError::Config("first\nsecond".into()).to_string(),
            "first\nsecond"
        );
    }
}
