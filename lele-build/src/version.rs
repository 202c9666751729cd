//! The compiler's identity, part of every cache key.

/// Version of the compiler.
pub const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Fingerprint of the compiler's sources (written by the build script).
pub const COMPILER_FINGERPRINT: &str = env!("LELE_BUILD_FINGERPRINT");
