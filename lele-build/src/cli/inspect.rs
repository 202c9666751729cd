//! `lele inspect`.
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use crate::ir::{DeclaredDim, Op};

/// Prints a summary of a model.
pub fn inspect(path: &Path) -> Result<()> {
    let g = crate::onnx::load(path)?;
    println!("model: {}", path.display());
    println!("opset: {}   producer: {}", g.opset, g.producer);
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
    println!("inputs:");
    for &v in &g.inputs {
        let val = &g.values[v];
        println!(
            "  {:<24} {:<5} {}",
            val.name,
            val.dtype.map(|d| d.name()).unwrap_or("?"),
            dims(&val.declared)
        );
    }
    println!("outputs:");
    for &v in &g.outputs {
        let val = &g.values[v];
        println!(
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
    println!("nodes: {nodes}   parameters: {params}");
    println!("ops:");
    for (op, n) in &hist {
        println!("  {op:<28} {n}");
    }
    let mut unsupported = Vec::new();
    g.for_each_node(&mut |n| {
        if let Op::Unsupported { reason } = &n.op {
            unsupported.push(format!("  {} (node `{}`): {reason}", qualified(n), n.name));
        }
    });
    if unsupported.is_empty() {
        println!("unsupported: none");
    } else {
        let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
        g.for_each_node(&mut |n| {
            if let Op::Unsupported { .. } = &n.op {
                *by_op.entry(qualified(n)).or_default() += 1;
            }
        });
        println!(
            "unsupported op types ({}): {}",
            by_op.len(),
            by_op
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("unsupported nodes ({}):", unsupported.len());
        for u in unsupported {
            println!("{u}");
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
