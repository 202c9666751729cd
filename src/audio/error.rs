//! Errors of the audio functions.

/// What can go wrong in [`crate::audio`].
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// A parameter out of its range (a zero length, a hop longer than the
    /// frame, a rate of zero, ...).
    #[error("invalid audio parameter: {0}")]
    Invalid(String),
    /// A buffer of the wrong length was passed.
    #[error("{what}: expected {expected} values, got {got}")]
    Length {
        /// Which buffer.
        what: &'static str,
        /// The length it must have (or at least have, for outputs).
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// A size that does not fit in memory.
    #[error("{0}: size overflows")]
    TooLarge(&'static str),
    /// A WAV file could not be read or written.
    #[cfg(feature = "wav")]
    #[error("WAV file {path}: {source}")]
    Wav {
        /// The file.
        path: String,
        /// What the decoder or encoder reported.
        source: hound::Error,
    },
}

/// `Ok` when `got == expected`.
pub(crate) fn exact(what: &'static str, expected: usize, got: usize) -> Result<(), AudioError> {
    length_check(got == expected, what, expected, got)
}

/// `Ok` when `got >= expected`.
pub(crate) fn at_least(what: &'static str, expected: usize, got: usize) -> Result<(), AudioError> {
    length_check(got >= expected, what, expected, got)
}

fn length_check(
    ok: bool,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), AudioError> {
    if ok {
        Ok(())
    } else {
        Err(AudioError::Length {
            what,
            expected,
            got,
        })
    }
}
