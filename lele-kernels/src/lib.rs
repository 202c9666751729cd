//! Runtime of models compiled by lele: tensor views, the workspace arena and
//! the kernels that generated code calls.
//!
//! Every operator is a plain parameter struct implementing [`Kernel`]: the
//! compiler evaluates constants with the very same `infer`/`run` calls that
//! the generated `forward` makes at run time.
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]

extern crate alloc;

#[macro_use]
mod macros;
pub mod arena;
#[cfg(feature = "codegen")]
pub mod codegen;
pub mod dtype;
pub mod error;
pub mod kernel;
#[cfg(feature = "npy")]
pub mod npy;
pub mod rt;
pub mod shape;
pub mod simd;
pub mod tensor;
#[cfg(feature = "std")]
pub mod threads;
/// Without `std` there is no pool: the splitting helpers run the whole
/// range on the caller's thread.
#[cfg(not(feature = "std"))]
mod threads {
    /// All of `y` as one chunk (see the `std` version).
    pub(crate) fn for_chunks<T>(y: &mut [T], f: &dyn Fn(usize, &mut [T])) {
        f(0, y)
    }

    /// All rows of `y` as one part (see the `std` version).
    pub(crate) fn for_rows<T>(y: &mut [T], _row_len: usize, f: &dyn Fn(usize, &mut [T])) {
        f(0, y)
    }

    /// All of `y` as one part (see the `std` version).
    pub(crate) fn for_parts<T>(
        y: &mut [T],
        _unit: usize,
        _min_units: usize,
        f: &dyn Fn(usize, &mut [T]),
    ) {
        f(0, y)
    }
}

pub mod ops;

pub use half;

pub use arena::{Arena, carve_slices};
pub use dtype::{DType, Elem};
pub use error::KernelError;
pub use kernel::Kernel;
pub use shape::{IntList, MAX_RANK, Shape};
pub use tensor::{TensorMut, TensorRef, TensorView};
