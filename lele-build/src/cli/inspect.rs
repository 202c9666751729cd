//! `lele inspect`.
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use crate::ir::{DeclaredDim, Op};

/// Prints a summary of a model.
pub fn inspect(path: &Path) -> Result<()> {
    let g = crate::onnx::load(path)?;
    outln!("model: {}", path.display());
    outln!("opset: {}   producer: {}", g.opset, g.producer);
    let dims = |d: &Option<Vec<DeclaredDim>>| -> String {
        match d {
            None => "?".into(),
            Some(d) => format!(
                "[{}]",
                d.iter()
                    .map(|x| match x {
                        DeclaredDim::Fixed(n) => n.to_string(),
                        DeclaredDim::Dynamic(s) if s.is_empty() => "?".into(),
                        DeclaredDim::Dynamic(s) => s.clone(),
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
            val.name,
            val.dtype.map(|d| d.name()).unwrap_or("?"),
            dims(&val.declared)
        );
    }
    outln!("outputs:");
    for &v in &g.outputs {
        let val = &g.values[v];
        outln!(
            "  {:<24} {:<5} {}",
            val.name,
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
            unsupported.push(format!("  {} (node `{}`): {reason}", qualified(n), n.name));
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

fn qualified(n: &crate::ir::Node) -> String {
    if n.domain.is_empty() {
        n.op_type.clone()
    } else {
        format!("{}.{}", n.domain, n.op_type)
    }
}
