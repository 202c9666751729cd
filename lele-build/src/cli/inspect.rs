//! `lele inspect`.
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Result, escape_controls as esc};
use crate::ir::{DeclaredDim, Op};

/// Prints a summary of a model. Every string from the model (names, op
/// types, domains, dim names, the producer) is shown escaped: control
/// characters and bidi overrides never reach the terminal raw.
pub fn inspect(path: &Path) -> Result<()> {
    if starts_like_gguf(path) {
        return inspect_gguf(path);
    }
    let g = crate::onnx::load(path)?;
    outln!("model: {}", esc(&path.display().to_string()));
    outln!("opset: {}   producer: {}", g.opset, esc(&g.producer));
    let dims = |d: &Option<Vec<DeclaredDim>>| -> String {
        match d {
            None => "?".into(),
            Some(d) => format!(
                "[{}]",
                d.iter()
                    .map(|x| match x {
                        DeclaredDim::Fixed(n) => n.to_string(),
                        DeclaredDim::Dynamic(s) if s.is_empty() => "?".into(),
                        DeclaredDim::Dynamic(s) => esc(s).into_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    outln!("inputs:");
    for &v in &g.inputs {
        let val = &g.values[v];
        outln!(
            "  {:<24} {:<5} {}",
            esc(&val.name),
            val.dtype.map(|d| d.name()).unwrap_or("?"),
            dims(&val.declared)
        );
    }
    outln!("outputs:");
    for &v in &g.outputs {
        let val = &g.values[v];
        outln!(
            "  {:<24} {:<5} {}",
            esc(&val.name),
            val.dtype.map(|d| d.name()).unwrap_or("?"),
            dims(&val.declared)
        );
    }
    let mut hist: BTreeMap<String, usize> = BTreeMap::new();
    let mut nodes = 0;
    g.for_each_node(&mut |n| {
        nodes += 1;
        *hist.entry(qualified(n)).or_default() += 1;
    });
    let params: usize = g
        .values
        .iter()
        .filter_map(|v| v.constant.as_ref())
        .map(|t| t.numel())
        .sum();
    outln!("nodes: {nodes}   parameters: {params}");
    outln!("ops:");
    for (op, n) in &hist {
        outln!("  {op:<28} {n}");
    }
    let mut unsupported = Vec::new();
    g.for_each_node(&mut |n| {
        if let Op::Unsupported { reason } = &n.op {
            unsupported.push(format!(
                "  {} (node `{}`): {}",
                qualified(n),
                esc(&n.name),
                esc(reason)
            ));
        }
    });
    if unsupported.is_empty() {
        outln!("unsupported: none");
    } else {
        let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
        g.for_each_node(&mut |n| {
            if let Op::Unsupported { .. } = &n.op {
                *by_op.entry(qualified(n)).or_default() += 1;
            }
        });
        outln!(
            "unsupported op types ({}): {}",
            by_op.len(),
            by_op
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        outln!("unsupported nodes ({}):", unsupported.len());
        for u in unsupported {
            outln!("{u}");
        }
    }
    Ok(())
}

/// `domain.op_type` (escaped for display).
fn qualified(n: &crate::ir::Node) -> String {
    if n.domain.is_empty() {
        esc(&n.op_type).into_owned()
    } else {
        format!("{}.{}", esc(&n.domain), esc(&n.op_type))
    }
}

/// Whether the file at `path` begins with GGUF's magic (unreadable files
/// go on to the ONNX reader, which reports why).
fn starts_like_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    crate::fsutil::open_regular_file(path)
        .ok()
        .and_then(|mut f| f.read_exact(&mut head).ok())
        .is_some_and(|()| crate::gguf::is_gguf(&head))
}

/// `lele inspect` of a GGUF file: its version, architecture and metadata
/// (long arrays summarized), and its tensors by element type. The tensor
/// data are not read.
fn inspect_gguf(path: &Path) -> Result<()> {
    use crate::gguf::Value;
    let g = crate::gguf::read_header(path, &crate::gguf::Limits::default())?;
    outln!("model: {}", esc(&path.display().to_string()));
    outln!(
        "GGUF version {}   architecture: {}   tensors: {}   data from byte {} (alignment {})",
        g.version,
        esc(g.architecture().unwrap_or("?")),
        g.tensors.len(),
        g.data_start,
        g.alignment
    );
    outln!("metadata:");
    for (key, value) in &g.metadata {
        let shown = match value {
            Value::String(s) => format!("{:?}", esc(s)),
            Value::Array(_, items) if items.len() > 8 => format!("[{} items]", items.len()),
            Value::Array(_, items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => format!("{:?}", esc(s)),
                        v => format!("{v:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            v => format!("{v:?}"),
        };
        outln!("  {:<44} {shown}", esc(key));
    }
    let mut by_type: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
    for t in &g.tensors {
        let e = by_type.entry(format!("{:?}", t.ggml_type)).or_default();
        e.0 += 1;
        e.1 += t.elements();
        e.2 += t.bytes;
    }
    outln!("tensors by element type (count, elements, bytes):");
    for (ty, (n, elements, bytes)) in &by_type {
        outln!("  {ty:<6} {n:>5} {elements:>12} {bytes:>12}");
    }
    match crate::gguf::decoder_config(&g) {
        Ok(c) => outln!(
            "decoder: {:?}, {} layers of width {}, {} heads over {} key/value heads of {}, \
             feed-forward {}, vocabulary {}, context {}{}",
            c.arch,
            c.layers,
            c.width,
            c.heads,
            c.kv_heads,
            c.head_dim,
            c.ffn,
            c.vocab,
            c.context,
            if c.tied_embeddings {
                ", tied embeddings"
            } else {
                ""
            }
        ),
        Err(e) => outln!("decoder: not one lele can build yet: {e}"),
    }
    Ok(())
}
