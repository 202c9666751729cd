//! Turning model-provided names into safe Rust identifiers.
use std::collections::HashSet;

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
    // Identifiers the generated `forward`, `forward_profiled` and
    // `forward_impl` bind beside the inputs (parameters: `self`, `ws`,
    // `profiler`; locals: `inputs`, `ctx`, `arena`). Their methods and
    // the output struct's fields live in other namespaces.
    "ws", "profiler", "inputs", "ctx", "arena",
];

/// Converts a name into a snake_case identifier: non-alphanumeric characters
/// become `_`, a leading digit gets a `v_` prefix, keywords get a `_` suffix.
pub fn snake_ident(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower {
                out.push('_');
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c.to_ascii_lowercase());
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let trimmed = out.trim_matches('_').to_string();
    let mut s = if trimmed.is_empty() {
        "value".to_string()
    } else {
        trimmed
    };
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s = format!("v_{s}");
    }
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Sanitizes a list of names, making them unique with numeric suffixes.
pub fn unique_idents(names: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .iter()
        .map(|n| {
            let base = snake_ident(n);
            let mut cand = base.clone();
            let mut k = 2;
            while !seen.insert(cand.clone()) {
                cand = format!("{base}_{k}");
                k += 1;
            }
            cand
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes() {
        assert_eq!(snake_ident("input_ids"), "input_ids");
        assert_eq!(
            snake_ident("save_infer_model/scale_0.tmp_1"),
            "save_infer_model_scale_0_tmp_1"
        );
        assert_eq!(snake_ident("387"), "v_387");
        assert_eq!(snake_ident("type"), "type_");
        assert_eq!(snake_ident("stateN"), "state_n");
        assert_eq!(snake_ident("\"); panic!(\""), "panic");
        assert_eq!(
            unique_idents(&["a.b".into(), "a_b".into()]),
            vec!["a_b", "a_b_2"]
        );
        // Names the generated `forward` binds itself get a suffix, and the
        // suffixed names stay unique against names that were spelled so.
        assert_eq!(snake_ident("profiler"), "profiler_");
        assert_eq!(
            unique_idents(&[
                "profiler".into(),
                "profiler_".into(),
                "Profiler".into(),
                "self".into(),
                "ws".into(),
                "ws_".into(),
            ]),
            vec![
                "profiler_",
                "profiler__2",
                "profiler__3",
                "self_",
                "ws_",
                "ws__2"
            ]
        );
        // Non-ASCII names all become `value`, then unique.
        assert_eq!(
            unique_idents(&["é".into(), "ü".into(), "value".into()]),
            vec!["value", "value_2", "value_3"]
        );
    }
}
