//! Code generation: prints the plan as Rust with `quote!`.
//!
//! The generated `forward` is a sequence of calls into
//! `::lele::kernels::rt`, split into functions of at most
//! [`MAX_STMTS_PER_FN`] statements so rustc stays fast on large models.
pub mod names;

use lele_kernels::DType;
use lele_kernels::codegen::ToRust;
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

use crate::config::Dim;
use crate::ir::{Block, Graph, Node, Op, ValueId};
use crate::plan::{Plan, Storage};

/// Most statements in one generated function.
pub const MAX_STMTS_PER_FN: usize = 120;

/// How weights reach the generated code.
#[derive(Debug, Clone, PartialEq)]
pub enum WeightsMode {
    /// `include_bytes!` of this file, 64-byte aligned.
    Embed(String),
    /// Memory-mapped from this file at run time.
    Mmap(String),
}

/// Everything the emitter needs.
pub struct EmitInput<'a> {
    /// Struct name.
    pub name: &'a str,
    /// The graph after passes.
    pub graph: &'a Graph,
    /// The memory plan.
    pub plan: &'a Plan,
    /// Resolved dims of each model input.
    pub input_dims: &'a [Vec<Dim>],
    /// Weights source.
    pub weights: WeightsMode,
    /// Content hash of the compiled artifact (for weight file checks).
    pub hash: &'a str,
}

fn elem_type(d: DType) -> TokenStream {
    match d {
        DType::F32 => quote!(f32),
        DType::F64 => quote!(f64),
        DType::F16 => quote!(::lele::kernels::half::f16),
        DType::BF16 => quote!(::lele::kernels::half::bf16),
        DType::I8 => quote!(i8),
        DType::U8 | DType::Bool => quote!(u8),
        DType::I16 => quote!(i16),
        DType::U16 => quote!(u16),
        DType::I32 => quote!(i32),
        DType::U32 => quote!(u32),
        DType::I64 => quote!(i64),
        DType::U64 => quote!(u64),
    }
}

struct Emitter<'a> {
    inp: &'a EmitInput<'a>,
    fns: Vec<TokenStream>,
}

impl Emitter<'_> {
    fn g(&self) -> &Graph {
        self.inp.graph
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.g().values[v].dtype.unwrap_or(DType::F32)
    }

    fn slot(&self, v: ValueId) -> usize {
        self.inp.plan.slots.get(&v).copied().unwrap_or(usize::MAX)
    }

    fn src(&self, v: Option<ValueId>) -> TokenStream {
        let Some(v) = v else {
            return quote!(::lele::kernels::rt::Src::Absent);
        };
        let slot = self.slot(v);
        match self.inp.plan.storage.get(&v) {
            Some(Storage::Input(k)) => {
                quote!(::lele::kernels::rt::Src::Input { index: #k, slot: #slot })
            }
            Some(Storage::Weight(off)) => {
                let dtype = self.dtype(v).to_rust();
                // The constant itself has a static shape; a view of it has a runtime one.
                let (shape, slot) = match &self.g().values[v].constant {
                    Some(t) => (
                        t.shape().unwrap_or(lele_kernels::Shape::SCALAR).to_rust(),
                        quote!(usize::MAX),
                    ),
                    // A view of a constant: the shape comes from its runtime slot
                    // (`rt` ignores this placeholder).
                    None => (lele_kernels::Shape::SCALAR.to_rust(), quote!(#slot)),
                };
                quote!(::lele::kernels::rt::Src::Weight { off: #off, dtype: #dtype, shape: #shape, slot: #slot })
            }
            Some(Storage::Arena(root)) => {
                let off = self.inp.plan.regions.get(root).map(|r| r.0).unwrap_or(0);
                let dtype = self.dtype(v).to_rust();
                quote!(::lele::kernels::rt::Src::Arena { off: #off, slot: #slot, dtype: #dtype })
            }
            None => quote!(::lele::kernels::rt::Src::Absent),
        }
    }

    fn dst(&self, v: ValueId) -> TokenStream {
        let root = match self.inp.plan.storage.get(&v) {
            Some(Storage::Arena(r)) => *r,
            _ => v,
        };
        let (off, cap) = self.inp.plan.regions.get(&root).copied().unwrap_or((0, 0));
        let slot = self.slot(v);
        let dtype = self.dtype(v).to_rust();
        let name = Literal::string(&self.g().values[v].name);
        quote!(::lele::kernels::rt::Dst { off: #off, cap: #cap, slot: #slot, dtype: #dtype, name: #name })
    }

    fn node_stmt(&mut self, n: &Node) -> TokenStream {
        match &n.op {
            Op::Kernel(k)
                if n.outputs.len() == 1 && self.inp.plan.in_place.contains(&n.outputs[0]) =>
            {
                let k = k.to_rust();
                let srcs = n.inputs.iter().map(|i| self.src(*i)).collect::<Vec<_>>();
                let dst = self.dst(n.outputs[0]);
                quote!(::lele::kernels::rt::exec_in_place(ctx, &#k, &[#(#srcs),*], #dst)?;)
            }
            Op::Kernel(k) => {
                let k = k.to_rust();
                let srcs = n.inputs.iter().map(|i| self.src(*i)).collect::<Vec<_>>();
                let dsts = n.outputs.iter().map(|o| self.dst(*o)).collect::<Vec<_>>();
                let (soff, scap) = n
                    .outputs
                    .first()
                    .and_then(|o| self.inp.plan.scratch.get(o))
                    .copied()
                    .unwrap_or((0, 0));
                quote!(::lele::kernels::rt::exec(ctx, &#k, &[#(#srcs),*], &[#(#dsts),*], (#soff, #scap))?;)
            }
            Op::View(k) => {
                let k = k.to_rust();
                let srcs = n.inputs.iter().map(|i| self.src(*i)).collect::<Vec<_>>();
                let slot = n
                    .outputs
                    .first()
                    .map(|o| self.slot(*o))
                    .unwrap_or(usize::MAX);
                quote!(::lele::kernels::rt::view(ctx, &#k, &[#(#srcs),*], #slot)?;)
            }
            Op::If {
                then_branch,
                else_branch,
            } => {
                let cond = self.src(n.inputs.first().copied().flatten());
                let then_calls = self.block_fns(then_branch, &n.outputs);
                let else_calls = self.block_fns(else_branch, &n.outputs);
                quote! {
                    if ::lele::kernels::rt::condition(ctx, #cond)? {
                        #then_calls
                    } else {
                        #else_calls
                    }
                }
            }
            Op::Unsupported { reason } => {
                let msg = Literal::string(reason);
                quote!(compile_error!(#msg);)
            }
        }
    }

    /// Emits a block as functions and returns the statements calling them
    /// (plus copies of the block outputs into `outs`).
    fn block_fns(&mut self, b: &Block, outs: &[ValueId]) -> TokenStream {
        let mut calls = Vec::new();
        let mut stmts = Vec::new();
        for n in &b.nodes {
            stmts.push(self.node_stmt(n));
        }
        for chunk in stmts.chunks(MAX_STMTS_PER_FN) {
            let name = format_ident!("block_{}", self.fns.len());
            self.fns.push(quote! {
                #[allow(clippy::all, unused_variables)]
                pub(super) fn #name(ctx: &mut ::lele::kernels::rt::Ctx<'_, '_>) -> ::core::result::Result<(), ::lele::kernels::KernelError> {
                    #(#chunk)*
                    Ok(())
                }
            });
            calls.push(quote!(#name(ctx)?;));
        }
        for (&src, &dst) in b.outputs.iter().zip(outs) {
            let s = self.src(Some(src));
            let d = self.dst(dst);
            calls.push(quote!(::lele::kernels::rt::copy(ctx, #s, #d)?;));
        }
        quote!(#(#calls)*)
    }
}

fn dims_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Range { min, max } => format!("{min}..={max}"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Generates the items replacing `#[lele::model] struct Name;`.
pub fn emit(inp: &EmitInput<'_>, vis: &TokenStream, attrs: &TokenStream) -> TokenStream {
    let g = inp.graph;
    let name = Ident::new(inp.name, Span::call_site());
    let ws_name = format_ident!("{}Workspace", inp.name);
    let out_name = format_ident!("{}Outputs", inp.name);
    let mod_name = format_ident!("__lele_{}", names::snake_ident(inp.name));
    let mut em = Emitter {
        inp,
        fns: Vec::new(),
    };
    let body = em.block_fns(&g.main, &[]);
    let fns = &em.fns;

    let in_names: Vec<String> = g.inputs.iter().map(|&v| g.values[v].name.clone()).collect();
    let out_names: Vec<String> = g
        .outputs
        .iter()
        .map(|&v| g.values[v].name.clone())
        .collect();
    let in_idents: Vec<Ident> = names::unique_idents(&in_names)
        .iter()
        .map(|s| Ident::new(s, Span::call_site()))
        .collect();
    let out_idents: Vec<Ident> = names::unique_idents(&out_names)
        .iter()
        .map(|s| Ident::new(s, Span::call_site()))
        .collect();

    let mut params = Vec::new();
    let mut untyped = Vec::new();
    let mut checks = Vec::new();
    let mut set_shapes = Vec::new();
    for (k, (&v, ident)) in g.inputs.iter().zip(&in_idents).enumerate() {
        let dt = em.dtype(v);
        let ty = elem_type(dt);
        params.push(quote!(#ident: ::lele::kernels::TensorView<'_, #ty>));
        untyped.push(if dt == DType::Bool {
            quote!(#ident.as_untyped_bool())
        } else {
            quote!(#ident.as_untyped())
        });
        let dims = &inp.input_dims[k];
        let fixed = dims.iter().map(|d| match d {
            Dim::Fixed(n) => quote!(Some(#n)),
            Dim::Range { .. } => quote!(None),
        });
        let maxs = dims.iter().map(|d| d.max());
        let onnx_name = Literal::string(&in_names[k]);
        let expected = Literal::string(&format!("{} {}", dt.name(), dims_text(dims)));
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
        let slot = em.slot(v);
        if slot != usize::MAX {
            set_shapes.push(quote!(ws.shapes[#slot] = inputs[#k].shape;));
        }
    }

    let mut out_fields = Vec::new();
    let mut out_values = Vec::new();
    for (&v, ident) in g.outputs.iter().zip(&out_idents) {
        let dt = em.dtype(v);
        let ty = elem_type(dt);
        let doc = format!("Output `{}` ({}).", g.values[v].name, dt.name());
        out_fields.push(quote!(#[doc = #doc] pub #ident: ::lele::kernels::TensorView<'w, #ty>));
        let slot = em.slot(v);
        let off = match inp.plan.storage.get(&v) {
            Some(Storage::Arena(root)) => inp.plan.regions.get(root).map(|r| r.0).unwrap_or(0),
            _ => 0,
        };
        let dtype = dt.to_rust();
        out_values.push(quote! {
            #ident: {
                let shape = ws.shapes[#slot];
                let len = shape.numel() * #dtype.size();
                let data = arena.get(#off..#off + len).ok_or(::lele::kernels::KernelError::Buffer { op: "output" })?;
                ::lele::kernels::TensorView::from_untyped(::lele::kernels::TensorRef { dtype: #dtype, shape, data })?
            }
        });
    }

    let arena_bytes = inp.plan.arena_bytes;
    let n_slots = inp.plan.n_slots().max(1);
    let weights_len = inp.plan.weights.len();
    let hash = Literal::string(inp.hash);
    let (weights_static, weights_new) = match &inp.weights {
        WeightsMode::Embed(path) => {
            let path = Literal::string(path);
            (
                quote! {
                    pub(super) static WEIGHTS: &::lele::kernels::rt::Aligned<[u8; #weights_len]> =
                        &::lele::kernels::rt::Aligned(*include_bytes!(#path));
                },
                quote!(::lele::Weights::embedded(&#mod_name::WEIGHTS.0)),
            )
        }
        WeightsMode::Mmap(path) => {
            let path = Literal::string(path);
            (
                quote!(pub(super) const WEIGHTS_PATH: &str = #path;),
                quote!(::lele::Weights::map(::std::path::Path::new(#mod_name::WEIGHTS_PATH), #weights_len)?),
            )
        }
    };
    let in_name_lits = in_names.iter().map(|s| Literal::string(s));
    let out_name_lits = out_names.iter().map(|s| Literal::string(s));
    let ws_doc = format!(
        "Scratch memory of [`{}`]: one arena of {arena_bytes} bytes.",
        inp.name
    );
    let out_doc = format!("Outputs of [`{}`], borrowed from its workspace.", inp.name);
    let fwd_doc = format!(
        "Runs the model. Inputs: {}.",
        g.inputs
            .iter()
            .zip(inp.input_dims.iter())
            .map(|(&v, d)| format!(
                "`{}`: {} {}",
                g.values[v].name,
                em.dtype(v).name(),
                dims_text(d)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );

    quote! {
        #attrs
        #vis struct #name {
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

        impl #name {
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

            /// Loads the weights.
            pub fn new() -> ::core::result::Result<Self, ::lele::Error> {
                Ok(Self { weights: #weights_new })
            }

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
                let inputs = [#(#untyped),*];
                #(#checks)*
                #(#set_shapes)*
                {
                    let ctx = &mut ::lele::kernels::rt::Ctx {
                        weights: self.weights.bytes(),
                        arena: ws.arena.bytes_mut(),
                        shapes: &mut ws.shapes,
                        inputs: &inputs,
                    };
                    #mod_name::run(ctx)?;
                }
                let arena = ws.arena.bytes();
                Ok(#out_name {
                    #(#out_values,)*
                })
            }
        }

        #[doc(hidden)]
        #[allow(non_snake_case)]
        mod #mod_name {
            #weights_static

            pub(super) fn run(ctx: &mut ::lele::kernels::rt::Ctx<'_, '_>) -> ::core::result::Result<(), ::lele::kernels::KernelError> {
                #body
                Ok(())
            }

            #(#fns)*
        }
    }
}
