//! Code generation: prints the plan as Rust with `quote!`.
//!
//! The generated `forward` is a sequence of calls into
//! `::lele::kernels::rt`, split into functions of at most
//! [`MAX_STMTS_PER_FN`] statements so rustc stays fast on large models.
pub mod names;
mod shell;

pub use shell::{ShellBody, shell};

pub use crate::artifact::WeightsMode;

use lele_kernels::DType;
use lele_kernels::codegen::ToRust;
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::config::Dim;
use crate::ir::{Block, Graph, Node, Op, ValueId};
use crate::plan::{PiecesInPlace, Plan, Storage};
use crate::signature::{Layout, Port, Signature, dim_text};

/// Most statements in one generated function.
pub const MAX_STMTS_PER_FN: usize = 120;

/// Everything the emitter needs.
pub struct EmitInput<'a> {
    /// The graph after passes.
    pub graph: &'a Graph,
    /// The memory plan.
    pub plan: &'a Plan,
    /// Resolved dims of each model input.
    pub input_dims: &'a [Vec<Dim>],
    /// Content hash of the compiled artifact (for weight file checks).
    pub hash: &'a str,
}

pub(crate) fn elem_type(d: DType) -> TokenStream {
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
    /// `(op type, node name)` per profiled node, in emission order.
    labels: Vec<(String, String)>,
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

    /// The statement running `n`, followed (for kernels and views) by the
    /// profiler hook naming it, and noted with the node's op type and
    /// ONNX name (a `//` comment once formatted, see [`format_tokens`]).
    fn node_stmt(&mut self, n: &Node) -> TokenStream {
        let call = self.node_call(n);
        // Model strings only ever reach the note escaped, on one line.
        let note = Literal::string(&format!(
            "{NODE_NOTE}{} `{}`",
            crate::error::escape_controls(&n.op_type),
            crate::error::escape_controls(&n.name)
        ));
        if matches!(n.op, Op::Kernel(_) | Op::View(_)) {
            let id = self.labels.len();
            self.labels.push((n.op_type.clone(), n.name.clone()));
            quote!(#[doc = #note] #call ::lele::kernels::rt::node_done(ctx, #id);)
        } else {
            quote!(#[doc = #note] #call)
        }
    }

    fn node_call(&mut self, n: &Node) -> TokenStream {
        match &n.op {
            Op::Kernel(k)
                if n.outputs.len() == 1 && self.inp.plan.in_place.contains(&n.outputs[0]) =>
            {
                // lele's own kernels may split the region over threads; a
                // user's kernel is not known to be `Sync`.
                let threaded = !crate::extend::is_user_kernel(k.as_ref());
                let k = k.to_rust();
                let srcs = n.inputs.iter().map(|i| self.src(*i)).collect::<Vec<_>>();
                let dst = self.dst(n.outputs[0]);
                if threaded {
                    quote!(::lele::kernels::rt::exec_in_place_threaded(ctx, &#k, &[#(#srcs),*], #dst)?;)
                } else {
                    quote!(::lele::kernels::rt::exec_in_place(ctx, &#k, &[#(#srcs),*], #dst)?;)
                }
            }
            Op::Kernel(k)
                if n.outputs
                    .first()
                    .is_some_and(|o| self.inp.plan.pieces_in_place.contains_key(o)) =>
            {
                let PiecesInPlace { axis, joined } = self.inp.plan.pieces_in_place[&n.outputs[0]];
                let k = k.to_rust();
                let srcs = n.inputs.iter().map(|i| self.src(*i)).collect::<Vec<_>>();
                let dsts = n.outputs.iter().map(|o| self.dst(*o)).collect::<Vec<_>>();
                quote!(::lele::kernels::rt::pieces_in_place(ctx, &#k, &[#(#srcs),*], &[#(#dsts),*], #axis, #joined)?;)
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
                // rustc prints the message raw: model strings escaped.
                let msg = Literal::string(&crate::error::escape_lines(reason));
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
                #[allow(clippy::all, unused_variables, unused_doc_comments)]
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

/// Generates the model module's items (`run` and its helpers), the public
/// signature and the workspace layout.
pub fn emit_core(inp: &EmitInput<'_>) -> (TokenStream, Signature, Layout) {
    let g = inp.graph;
    let mut em = Emitter {
        inp,
        fns: Vec::new(),
        labels: Vec::new(),
    };
    let body = em.block_fns(&g.main, &[]);
    let fns = &em.fns;
    let labels = em.labels.iter().map(|(op, name)| {
        let (op, name) = (Literal::string(op), Literal::string(name));
        quote!((#op, #name))
    });
    let metadata = g.metadata.iter().map(|(key, value)| {
        let (key, value) = (Literal::string(key), Literal::string(value));
        quote!((#key, #value))
    });
    let core = quote! {
        /// `(op type, node name)` of each profiled node, by node index.
        #[allow(dead_code)]
        pub(super) static NODE_LABELS: &[(&str, &str)] = &[#(#labels),*];

        /// The model's `metadata_props`, `(key, value)` in file order.
        #[allow(dead_code)]
        pub(super) static METADATA: &[(&str, &str)] = &[#(#metadata),*];

        pub(super) fn run(ctx: &mut ::lele::kernels::rt::Ctx<'_, '_>) -> ::core::result::Result<(), ::lele::kernels::KernelError> {
            ::lele::kernels::rt::profile_start(ctx);
            #body
            Ok(())
        }

        #(#fns)*
    };
    let inputs = g
        .inputs
        .iter()
        .zip(inp.input_dims)
        .map(|(&v, dims)| Port {
            name: g.values[v].name.clone(),
            dtype: em.dtype(v).name().to_string(),
            dims: dims.iter().map(dim_text).collect(),
        })
        .collect();
    let outputs = g
        .outputs
        .iter()
        .map(|&v| Port {
            name: g.values[v].name.clone(),
            dtype: em.dtype(v).name().to_string(),
            dims: Vec::new(),
        })
        .collect();
    let sig = Signature {
        inputs,
        outputs,
        arena_bytes: inp.plan.arena_bytes as u64,
        weights_bytes: inp.plan.weights.len() as u64,
        model_hash: inp.hash.to_string(),
    };
    let layout = Layout {
        slots: inp.plan.n_slots() as u64,
        input_slots: g
            .inputs
            .iter()
            .map(|&v| match em.slot(v) {
                usize::MAX => -1,
                s => s as i64,
            })
            .collect(),
        output_slots: g.outputs.iter().map(|&v| em.slot(v) as u64).collect(),
        output_offsets: g
            .outputs
            .iter()
            .map(|v| match inp.plan.storage.get(v) {
                Some(Storage::Arena(root)) => {
                    inp.plan.regions.get(root).map(|r| r.0).unwrap_or(0) as u64
                }
                _ => 0,
            })
            .collect(),
    };
    (core, sig, layout)
}

/// How the note on each node's statement begins: `format_tokens` turns
/// these doc attributes into plain `//` comments.
const NODE_NOTE: &str = " lele-node: ";

/// Formats generated tokens as a Rust file; each node's statement is
/// preceded by a comment naming its op type and ONNX node.
pub fn format_tokens(tokens: proc_macro2::TokenStream) -> crate::error::Result<String> {
    let file: syn::File = syn::parse2(tokens).map_err(|e| {
        crate::error::BuildError::Other(format!("generated code does not parse: {e}"))
    })?;
    let text = prettyplease::unparse(&file);
    let mut out = String::with_capacity(text.len());
    let marker = format!("///{NODE_NOTE}");
    for line in text.lines() {
        let body = line.trim_start();
        match body.strip_prefix(&marker) {
            Some(note) => {
                out.push_str(&line[..line.len() - body.len()]);
                out.push_str("// ");
                out.push_str(note);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}
