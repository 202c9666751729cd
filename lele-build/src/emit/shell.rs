//! The public API around a compiled model: the user's struct, its workspace
//! and outputs types, `new`, `workspace` and `forward`. Built from a
//! [`Signature`] alone, so the same API can wrap generated code or, in an
//! offline build without artifacts, a stub whose constructor fails.
use lele_kernels::DType;
use lele_kernels::codegen::ToRust;
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

use super::{WeightsMode, elem_type, names};
use crate::artifact::Core;
use crate::config::Dim;
use crate::error::{Result, escape_controls};
use crate::signature::{Layout, Signature, dim_text};

/// What the API wraps.
pub enum ShellBody<'a> {
    /// Generated code: `run` and its helper functions, the layout of the
    /// workspace and where the weights are.
    Compiled {
        /// Items of the model module (from [`super::emit_core`]).
        core: &'a Core,
        /// Workspace layout.
        layout: &'a Layout,
        /// Weights source.
        weights: &'a WeightsMode,
    },
    /// No generated code: `new` and `forward` return this message as an error.
    Stub {
        /// Why the model is missing and how to get it.
        reason: &'a str,
    },
}

/// Generates the items replacing `#[lele::model] struct Name;`.
pub fn shell(
    sig: &Signature,
    name: &str,
    vis: &TokenStream,
    attrs: &TokenStream,
    body: ShellBody<'_>,
) -> Result<TokenStream> {
    let ident = Ident::new(name, Span::call_site());
    let ws_name = format_ident!("{}Workspace", name);
    let out_name = format_ident!("{}Outputs", name);
    let mod_name = format_ident!("__lele_{}", names::snake_ident(name));

    let in_names: Vec<String> = sig.inputs.iter().map(|p| p.name.clone()).collect();
    let out_names: Vec<String> = sig.outputs.iter().map(|p| p.name.clone()).collect();
    let to_idents = |v: &[String]| -> Vec<Ident> {
        names::unique_idents(v)
            .iter()
            .map(|s| Ident::new(s, Span::call_site()))
            .collect()
    };
    let in_idents = to_idents(&in_names);
    let out_idents = to_idents(&out_names);
    let mut in_dtypes = Vec::new();
    let mut in_dims = Vec::new();
    for p in &sig.inputs {
        in_dtypes.push(p.dtype()?);
        in_dims.push(p.dims()?);
    }
    let out_dtypes: Vec<DType> = sig
        .outputs
        .iter()
        .map(|p| p.dtype())
        .collect::<Result<_>>()?;

    let params: Vec<TokenStream> = in_idents
        .iter()
        .zip(&in_dtypes)
        .map(|(id, &dt)| {
            let ty = elem_type(dt);
            quote!(#id: ::lele::kernels::TensorView<'_, #ty>)
        })
        .collect();
    let params2 = &params;
    let out_fields = out_idents
        .iter()
        .zip(&out_dtypes)
        .zip(&out_names)
        .map(|((id, &dt), onnx)| {
            let ty = elem_type(dt);
            // Model names reach doc comments escaped: a CR or a bidi
            // control there is a rustc error (prettyplease writes `///`).
            let doc = format!("Output `{}` ({}).", escape_controls(onnx), dt.name());
            quote!(#[doc = #doc] pub #id: ::lele::kernels::TensorView<'w, #ty>)
        });
    let arena_bytes = sig.arena_bytes as usize;
    let weights_len = sig.weights_bytes as usize;
    let hash = Literal::string(&sig.model_hash);
    let in_name_lits = in_names.iter().map(|s| Literal::string(s));
    let out_name_lits = out_names.iter().map(|s| Literal::string(s));
    let signature_text = |dt: DType, dims: &[Dim]| {
        let parts: Vec<String> = dims.iter().map(dim_text).collect();
        format!("{} [{}]", dt.name(), parts.join(", "))
    };
    let ws_doc = format!("Scratch memory of [`{name}`]: one arena of {arena_bytes} bytes.");
    let out_doc = format!("Outputs of [`{name}`], borrowed from its workspace.");
    let fwd_doc = format!(
        "Runs the model. Inputs: {}.",
        in_names
            .iter()
            .zip(in_dtypes.iter().zip(&in_dims))
            .map(|(n, (&dt, d))| format!("`{}`: {}", escape_controls(n), signature_text(dt, d)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let api_consts = quote! {
        /// ONNX names of the inputs, in `forward` argument order.
        pub const INPUT_NAMES: &'static [&'static str] = &[#(#in_name_lits),*];
        /// ONNX names of the outputs.
        pub const OUTPUT_NAMES: &'static [&'static str] = &[#(#out_name_lits),*];
        /// Bytes of the workspace arena.
        pub const ARENA_BYTES: usize = #arena_bytes;
        /// Bytes of the weights.
        pub const WEIGHTS_BYTES: usize = #weights_len;
        /// Content hash of the compiled model.
        pub const MODEL_HASH: &'static str = #hash;
    };
    let types = quote! {
        #attrs
        #vis struct #ident {
            weights: ::lele::Weights,
        }

        #[doc = #ws_doc]
        #vis struct #ws_name {
            arena: ::lele::kernels::Arena,
            shapes: ::std::vec::Vec<::lele::kernels::Shape>,
        }

        #[doc = #out_doc]
        #vis struct #out_name<'w> {
            #(#out_fields,)*
        }
    };

    let decoder = decoder_impl(sig, &ident, &ws_name)?;
    let (core, layout, weights) = match body {
        ShellBody::Stub { reason } => {
            let reason = Literal::string(reason);
            let unused = in_idents.iter();
            return Ok(quote! {
                #types

                impl #ident {
                    #api_consts

                    /// Always fails: this build has no generated code for the
                    /// model (see the error message).
                    pub fn new() -> ::core::result::Result<Self, ::lele::Error> {
                        Err(::lele::Error::NotGenerated(#reason))
                    }

                    /// Allocates a workspace (do this once per thread and reuse it).
                    pub fn workspace(&self) -> #ws_name {
                        #ws_name {
                            arena: ::lele::kernels::Arena::new(0),
                            shapes: ::std::vec::Vec::new(),
                        }
                    }

                    #[doc = #fwd_doc]
                    #[allow(clippy::too_many_arguments, unused_variables)]
                    pub fn forward<'w>(
                        &self,
                        ws: &'w mut #ws_name,
                        #(#params),*
                    ) -> ::core::result::Result<#out_name<'w>, ::lele::Error> {
                        let _ = (&self.weights, &ws.arena, &ws.shapes #(, &#unused)*);
                        Err(::lele::Error::NotGenerated(#reason))
                    }

                    /// `(op type, node name)` of each node a profiler hears
                    /// about (none: no generated code).
                    pub fn node_labels() -> &'static [(&'static str, &'static str)] {
                        &[]
                    }

                    /// The model's `metadata_props` (none: no generated code).
                    pub fn metadata() -> &'static [(&'static str, &'static str)] {
                        &[]
                    }

                    /// The value of one `metadata_props` key (none: no generated code).
                    pub fn metadata_value(key: &str) -> ::core::option::Option<&'static str> {
                        let _ = key;
                        None
                    }

                    /// Like `forward`; always fails in this build.
                    #[allow(clippy::too_many_arguments, unused_variables)]
                    pub fn forward_profiled<'w>(
                        &self,
                        ws: &'w mut #ws_name,
                        profiler: &mut dyn ::lele::kernels::rt::Profiler,
                        #(#params2),*
                    ) -> ::core::result::Result<#out_name<'w>, ::lele::Error> {
                        Err(::lele::Error::NotGenerated(#reason))
                    }
                }

                #decoder
            });
        }
        ShellBody::Compiled {
            core,
            layout,
            weights,
        } => (core, layout, weights),
    };

    let mut untyped = Vec::new();
    let mut checks = Vec::new();
    let mut set_shapes = Vec::new();
    for (k, ((ident, &dt), dims)) in in_idents.iter().zip(&in_dtypes).zip(&in_dims).enumerate() {
        untyped.push(if dt == DType::Bool {
            quote!(#ident.as_untyped_bool())
        } else {
            quote!(#ident.as_untyped())
        });
        let fixed = dims.iter().map(|d| match d {
            Dim::Fixed(n) => quote!(Some(#n)),
            Dim::Range { .. } => quote!(None),
        });
        let maxs = dims.iter().map(|d| d.max());
        let onnx_name = Literal::string(&in_names[k]);
        let expected = Literal::string(&signature_text(dt, dims));
        let dtype = dt.to_rust();
        checks.push(quote! {
            ::lele::kernels::rt::check_input(&inputs[#k], #onnx_name, #expected, #dtype, &[#(#fixed),*], &[#(#maxs),*])?;
        });
        for (i, d) in dims.iter().enumerate() {
            if let Dim::Range { min, .. } = d
                && *min > 1
            {
                checks.push(quote! {
                    if inputs[#k].shape.dim(#i) < #min {
                        return Err(::lele::kernels::KernelError::InputShape { input: #onnx_name, expected: #expected }.into());
                    }
                });
            }
        }
        if let Some(&slot) = layout.input_slots.get(k)
            && slot >= 0
        {
            let slot = slot as usize;
            set_shapes.push(quote!(ws.shapes[#slot] = inputs[#k].shape;));
        }
    }
    let out_values = out_idents
        .iter()
        .zip(&out_dtypes)
        .enumerate()
        .map(|(i, (ident, &dt))| {
            let slot = layout.output_slots.get(i).copied().unwrap_or(0) as usize;
            let off = layout.output_offsets.get(i).copied().unwrap_or(0) as usize;
            let dtype = dt.to_rust();
            quote! {
                #ident: {
                    let shape = ws.shapes[#slot];
                    let len = shape.numel() * #dtype.size();
                    // No `#off + len`: with the output at offset 0 that would
                    // trip clippy's identity_op in the user's crate.
                    let data = arena.get(#off..).and_then(|rest| rest.get(..len)).ok_or(::lele::kernels::KernelError::Buffer { op: "output" })?;
                    ::lele::kernels::TensorView::from_untyped(::lele::kernels::TensorRef { dtype: #dtype, shape, data })?
                }
            }
        });
    let n_slots = (layout.slots as usize).max(1);
    let (weights_static, weights_new, extra_ctor) = match weights {
        WeightsMode::Embed(path) => {
            let path = Literal::string(path);
            (
                quote! {
                    pub(super) static WEIGHTS: &::lele::kernels::rt::Aligned<[u8; #weights_len]> =
                        &::lele::kernels::rt::Aligned(*include_bytes!(#path));
                },
                quote!(::lele::Weights::embedded(&#mod_name::WEIGHTS.0)),
                quote!(),
            )
        }
        WeightsMode::Mmap { built, runtime } => {
            let built = Literal::string(built);
            let locate = match runtime {
                Some(rel) => {
                    let rel = Literal::string(rel);
                    quote!(::lele::Weights::beside_executable(#rel)?)
                }
                None => quote!(::std::path::PathBuf::from(#mod_name::WEIGHTS_PATH)),
            };
            (
                quote!(pub(super) const WEIGHTS_PATH: &str = #built;),
                quote!(::lele::Weights::map(&#locate, #weights_len)?),
                quote! {
                    /// Maps the weights from `path` (a copy of the file this
                    /// build wrote; its length is checked).
                    pub fn from_weights_file(path: impl AsRef<::std::path::Path>) -> ::core::result::Result<Self, ::lele::Error> {
                        Ok(Self { weights: ::lele::Weights::map(path.as_ref(), #weights_len)? })
                    }
                },
            )
        }
    };

    let core = match core {
        Core::Tokens(t) => t.clone(),
        Core::File(p) => {
            let p = Literal::string(&p.to_string_lossy());
            quote!(include!(#p);)
        }
    };
    Ok(quote! {
        #types

        impl #ident {
            #api_consts

            /// Loads the weights.
            pub fn new() -> ::core::result::Result<Self, ::lele::Error> {
                Ok(Self { weights: #weights_new })
            }

            #extra_ctor

            /// Allocates a workspace (do this once per thread and reuse it).
            pub fn workspace(&self) -> #ws_name {
                #ws_name {
                    arena: ::lele::kernels::Arena::new(#arena_bytes),
                    shapes: ::std::vec![::lele::kernels::Shape::SCALAR; #n_slots],
                }
            }

            #[doc = #fwd_doc]
            #[allow(clippy::too_many_arguments)]
            pub fn forward<'w>(
                &self,
                ws: &'w mut #ws_name,
                #(#params),*
            ) -> ::core::result::Result<#out_name<'w>, ::lele::Error> {
                self.forward_impl(ws, None, #(#in_idents),*)
            }

            /// `(op type, node name)` of each node a profiler hears about
            /// (fused nodes appear once), indexed by the number passed to
            /// [`::lele::kernels::rt::Profiler::node_done`].
            pub fn node_labels() -> &'static [(&'static str, &'static str)] {
                #mod_name::NODE_LABELS
            }

            /// The model's `metadata_props` as `(key, value)` pairs in file
            /// order (e.g. the character list of an OCR recognizer or the
            /// class names of a detector), embedded at compile time.
            pub fn metadata() -> &'static [(&'static str, &'static str)] {
                #mod_name::METADATA
            }

            /// The value of the first `metadata_props` entry named `key`.
            pub fn metadata_value(key: &str) -> ::core::option::Option<&'static str> {
                #mod_name::METADATA
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v)
            }

            /// `forward`, telling `profiler` after every node (see
            /// [`Self::node_labels`] and [`::lele::NodeTimer`]).
            #[allow(clippy::too_many_arguments)]
            pub fn forward_profiled<'w>(
                &self,
                ws: &'w mut #ws_name,
                profiler: &mut dyn ::lele::kernels::rt::Profiler,
                #(#params2),*
            ) -> ::core::result::Result<#out_name<'w>, ::lele::Error> {
                self.forward_impl(ws, Some(profiler), #(#in_idents),*)
            }

            #[allow(clippy::too_many_arguments)]
            fn forward_impl<'w>(
                &self,
                ws: &'w mut #ws_name,
                profiler: ::core::option::Option<&mut dyn ::lele::kernels::rt::Profiler>,
                #(#params2),*
            ) -> ::core::result::Result<#out_name<'w>, ::lele::Error> {
                let inputs = [#(#untyped),*];
                #(#checks)*
                #(#set_shapes)*
                {
                    let ctx = &mut ::lele::kernels::rt::Ctx {
                        weights: self.weights.bytes(),
                        arena: ws.arena.bytes_mut(),
                        shapes: &mut ws.shapes,
                        inputs: &inputs,
                        // Re-wrapped so the trait object's lifetime can shrink to the context's.
                        profiler: match profiler {
                            ::core::option::Option::Some(p) => ::core::option::Option::Some(p),
                            ::core::option::Option::None => ::core::option::Option::None,
                        },
                    };
                    #mod_name::run(ctx)?;
                }
                let arena = ws.arena.bytes();
                Ok(#out_name {
                    #(#out_values,)*
                })
            }
        }

        #decoder

        #[doc(hidden)]
        #[allow(non_snake_case)]
        mod #mod_name {
            #weights_static
            #core
        }
    })
}

/// `impl lele::llm::Decoder` for a model whose signature is a decoder's
/// (what the GGUF front end builds): `tokens` (i64, one bounded dim) and
/// `position` (i64 `[1]`) in, `logits` (f32) out; nothing otherwise.
fn decoder_impl(sig: &Signature, ident: &Ident, ws_name: &Ident) -> Result<TokenStream> {
    let [tokens, position] = &sig.inputs[..] else {
        return Ok(quote!());
    };
    let [logits] = &sig.outputs[..] else {
        return Ok(quote!());
    };
    let is_decoder = tokens.name == crate::gguf::TOKENS
        && position.name == crate::gguf::POSITION
        && logits.name == crate::gguf::LOGITS
        && tokens.dtype()? == DType::I64
        && position.dtype()? == DType::I64
        && logits.dtype()? == DType::F32;
    let (true, [max_tokens], [Dim::Fixed(1)]) =
        (is_decoder, &tokens.dims()?[..], &position.dims()?[..])
    else {
        return Ok(quote!());
    };
    let max_tokens = max_tokens.max();
    Ok(quote! {
        impl ::lele::llm::Decoder for #ident {
            type Workspace = #ws_name;
            const MAX_TOKENS: usize = #max_tokens;

            fn workspace(&self) -> #ws_name {
                #ident::workspace(self)
            }

            fn logits<'w>(
                &self,
                ws: &'w mut #ws_name,
                tokens: &[i64],
                position: i64,
            ) -> ::core::result::Result<&'w [f32], ::lele::Error> {
                let tokens = ::lele::kernels::TensorView::new(tokens, &[tokens.len()])?;
                let position = [position];
                let position = ::lele::kernels::TensorView::new(&position, &[1])?;
                Ok(self.forward(ws, tokens, position)?.logits.data())
            }

            fn metadata_value(&self, key: &str) -> ::core::option::Option<&'static str> {
                #ident::metadata_value(key)
            }

            fn weights_bytes(&self) -> &[u8] {
                self.weights.bytes()
            }
        }
    })
}
