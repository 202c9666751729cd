//! The `#[lele::model("model.toml")]` attribute: a thin shell that parses
//! its input, runs the compiler (`lele-build`) and reports every problem as
//! a `compile_error!` spanned on the attribute's argument.
use std::path::PathBuf;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, quote, quote_spanned};
use syn::{Fields, Item, LitStr};

/// Compiles the ONNX model described by a `model.toml` into the annotated
/// unit struct. See the lele README for the toml format and generated API.
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item2: TokenStream2 = item.clone().into();
    match expand(attr.into(), item2) {
        Ok(ts) => ts.into(),
        Err(errors) => {
            let errs = errors.into_iter().map(|(span, msg)| {
                // rustc prints the message as is: model and toml strings
                // in it are escaped so none reaches a terminal raw.
                let msg = lele_build::error::escape_lines(&msg);
                quote_spanned!(span=> compile_error!(#msg);)
            });
            quote!(#(#errs)*).into()
        }
    }
}

type Errors = Vec<(Span, String)>;

fn expand(attr: TokenStream2, item: TokenStream2) -> Result<TokenStream2, Errors> {
    let lit: LitStr = syn::parse2(attr.clone()).map_err(|e| {
        vec![(
            e.span(),
            "expected the path of a model.toml as a string: #[lele::model(\"model.toml\")]"
                .to_string(),
        )]
    })?;
    let span = lit.span();
    let mut errors: Errors = Vec::new();
    let parsed: Item = syn::parse2(item).map_err(|e| vec![(e.span(), e.to_string())])?;
    let Item::Struct(s) = parsed else {
        return Err(vec![(
            span,
            "#[lele::model] goes on a unit struct: `pub struct MyModel;`".into(),
        )]);
    };
    if !matches!(s.fields, Fields::Unit) {
        errors.push((
            span,
            format!(
                "#[lele::model] needs a unit struct without fields: `struct {};`",
                s.ident
            ),
        ));
    }
    if !s.generics.params.is_empty() {
        errors.push((
            span,
            "#[lele::model] does not accept generic parameters".into(),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_default();
    let toml_path = manifest.join(lit.value());
    if !toml_path.is_file() {
        return Err(vec![(
            span,
            format!(
                "lele: cannot find `{}` (the path is relative to the crate's Cargo.toml)",
                lit.value()
            ),
        )]);
    }
    let vis = s.vis.to_token_stream();
    let attrs: TokenStream2 = s.attrs.iter().map(|a| a.to_token_stream()).collect();
    let name = s.ident.to_string();
    let mut opts = lele_build::CompileOptions::new(&name);
    opts.vis = vis;
    opts.attrs = attrs;
    let compiled = lele_build::compile_toml(&toml_path, &opts).map_err(|e| {
        e.to_string()
            .split("\n\n")
            .map(|m| (span, format!("lele: {m}")))
            .collect::<Vec<_>>()
    })?;
    // include_bytes! makes cargo rebuild when the toml, the model or a lock
    // file changes, option_env! when a variable that changes the result does.
    // The bytes sit in a closure body that is never called: a `const` holding
    // them would copy the model (several times over) into the crate's
    // metadata, which cost gigabytes of disk across the workspace's builds.
    let files = compiled
        .tracked
        .iter()
        .filter(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned());
    let vars = lele_build::driver::TRACKED_ENV
        .iter()
        .map(|v| v.to_string())
        .chain(compiled.env_vars.iter().cloned());
    let tokens = compiled.tokens;
    Ok(quote! {
        #(const _: fn() = || { let _ = include_bytes!(#files); };)*
        #(const _: ::core::option::Option<&str> = option_env!(#vars);)*
        #tokens
    })
}
