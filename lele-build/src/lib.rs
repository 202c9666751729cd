//! The lele compiler.
