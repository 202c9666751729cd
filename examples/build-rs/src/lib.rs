//! A model compiled from `build.rs` (see `build.rs`): the PP-OCR text
//! direction classifier, with `HardSigmoid` running this crate's kernel and
//! hard-swish fused into one.
pub mod kernels;

include!(concat!(env!("OUT_DIR"), "/text_direction.rs"));

/// The same classifier compiled without constant folding or extensions.
pub mod unfolded {
    include!(concat!(env!("OUT_DIR"), "/text_direction_unfolded.rs"));
}
