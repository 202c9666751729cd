//! `lele inspect`.
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Result, escape_controls as esc};
use crate::ir::{DeclaredDim, Op};

/// Prints a summary of a model. Every string from the model (names, op
/// types, domains, dim names, the producer) is shown escaped: control
/// characters and bidi overrides never reach the terminal raw.
pub fn inspect(path: &Path) -> Result<()> {
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
