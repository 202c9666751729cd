//! Printing kernel parameters as Rust expressions (feature `codegen`, used by
//! the compiler only). Each parameter struct lists its fields next to its
//! definition with [`crate::to_rust_struct!`]; the generated impl destructures
//! the struct exhaustively, so a forgotten field is a compile error.
use proc_macro2::TokenStream;
use quote::quote;

use crate::dtype::DType;
use crate::shape::Shape;

/// A value that can print itself as a Rust expression evaluating to itself.
pub trait ToRust {
    /// The expression, using `::lele::kernels` paths.
    fn to_rust(&self) -> TokenStream;
}

macro_rules! prim {
    ($($t:ty),*) => {$(
        impl ToRust for $t {
            fn to_rust(&self) -> TokenStream {
                let v = *self;
                quote!(#v)
            }
        }
    )*};
}
prim!(i64, i32, usize, u8, u32, u64, i8, bool);

impl ToRust for f32 {
    fn to_rust(&self) -> TokenStream {
        let bits = self.to_bits();
        quote!(f32::from_bits(#bits))
    }
}

impl ToRust for f64 {
    fn to_rust(&self) -> TokenStream {
        let bits = self.to_bits();
        quote!(f64::from_bits(#bits))
    }
}

impl<T: ToRust, const N: usize> ToRust for [T; N] {
    fn to_rust(&self) -> TokenStream {
        let items = self.iter().map(|v| v.to_rust());
        quote!([#(#items),*])
    }
}

impl<T: ToRust> ToRust for Option<T> {
    fn to_rust(&self) -> TokenStream {
        match self {
            Some(v) => {
                let v = v.to_rust();
                quote!(::core::option::Option::Some(#v))
            }
            None => quote!(::core::option::Option::None),
        }
    }
}

impl ToRust for DType {
    fn to_rust(&self) -> TokenStream {
        let name = quote::format_ident!("{}", format!("{self:?}"));
        quote!(::lele::kernels::DType::#name)
    }
}

impl ToRust for Shape {
    fn to_rust(&self) -> TokenStream {
        let dims = self.dims().iter();
        quote!(::lele::kernels::Shape::from_const([#(#dims),*]))
    }
}
