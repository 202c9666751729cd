//! Compile-fail tests of `#[lele::model]` live in `tests/ui`.
