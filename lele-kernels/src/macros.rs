//! Macros that let kernel parameter structs print themselves as Rust
//! (the impls only exist with the `codegen` feature).

/// Implements `codegen::ToRust` for a struct by listing all of its fields:
/// `to_rust_struct!(ops::conv::Conv { group, strides });`
#[macro_export]
macro_rules! to_rust_struct {
    ($($seg:ident)::+ { $($field:ident),* $(,)? }) => {
        #[cfg(feature = "codegen")]
        impl $crate::codegen::ToRust for $crate::$($seg)::+ {
            fn to_rust(&self) -> ::proc_macro2::TokenStream {
                let $crate::$($seg)::+ { $($field),* } = self;
                $(let $field = $crate::codegen::ToRust::to_rust($field);)*
                ::quote::quote!(::lele::kernels::$($seg)::+ { $($field: #$field),* })
            }
        }
    };
}

/// Implements `codegen::ToRust` for a fieldless enum: `to_rust_enum!(ops::x::Mode { A, B });`
#[macro_export]
macro_rules! to_rust_enum {
    ($($seg:ident)::+ { $($variant:ident),* $(,)? }) => {
        #[cfg(feature = "codegen")]
        impl $crate::codegen::ToRust for $crate::$($seg)::+ {
            fn to_rust(&self) -> ::proc_macro2::TokenStream {
                use $crate::$($seg)::+ as This;
                let path = ::quote::quote!(::lele::kernels::$($seg)::+);
                let variant = match self {
                    $(This::$variant => ::quote::format_ident!(stringify!($variant)),)*
                };
                ::quote::quote!(#path::#variant)
            }
        }
    };
}
