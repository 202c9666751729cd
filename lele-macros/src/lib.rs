//! The `#[lele::model]` attribute.
