//! `model.toml` cases from a grammar of the real keys with hostile values
//! (huge numbers, odd bounds, control characters, `..`, absolute paths,
//! bad revisions), sometimes mutated as text. Besides "no panic", what the
//! parser accepts must be safe: revisions and file names stay inside the
//! directory they are joined under, bounds are non-empty.
use std::path::{Component, Path};

use lele_build::ModelToml;
use lele_build::config::{Dim, Source};

use crate::harness::Rng;

const STRINGS: &[&str] = &[
    "m.onnx",
    "onnx/model.onnx",
    "main",
    "v1.0",
    "refs/pr/1",
    "..",
    "../x",
    "a/../../b",
    "/etc/passwd",
    "/dev/zero",
    "a//b",
    "./a",
    ".hidden",
    "x.lock",
    "${HOME}/m.onnx",
    "${LELE_FUZZ_UNSET_VAR}",
    "${",
    "${}",
    "${LELE_ZOO}/a.onnx",
    "https://example.invalid/m.onnx",
    "http://",
    "ftp://h/m",
    "file:///etc/passwd",
    "o/n",
    "a/b/c",
    "a--b/c",
    "C:\\\\x",
    "\\\\server\\\\share",
    "a\\u0000b",
    "a\\u001b[2Jb",
    "\\u202e",
    "a\\nb",
    "a\\rb",
    "é",
    "a?b",
    "a#b",
    "",
    " ",
    "n <= 18446744073709551615",
    "n <= 18446744073709551616",
    "n <= 4611686018427387904",
    "n <= 0",
    "0 <= n <= 4",
    "3 <= n <= 2",
    "n <= 16",
    "1 <= n <= 1",
    "n <=",
    "<= 5",
    "n <= 5 <= 6",
    "n <= -1",
    "n<=+3",
    "n <= 1e3",
    "n\\t<= 3",
    "é <= 4",
    "embed",
    "mmap",
    "f32",
    "f16",
];

fn string(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => "a".repeat(rng.below(3000)),
        1 => "a/".repeat(rng.below(200)) + "m",
        2 => "0123456789abcdef".repeat(4),
        3 => "0123456789abcdef0123456789abcdef01234567".into(),
        _ => rng.pick(STRINGS).to_string(),
    }
}

fn number(rng: &mut Rng) -> String {
    rng.pick(&[
        "0",
        "1",
        "-1",
        "7",
        "65536",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "4294967296",
        "4611686018427387904",
        "1e309",
        "inf",
        "nan",
        "-0.0",
        "1.5",
        "0x7fffffffffffffff",
        "0o777",
        "1_000",
    ])
    .to_string()
}

fn value(rng: &mut Rng, depth: usize) -> String {
    match rng.below(if depth > 2 { 4 } else { 7 }) {
        0 | 1 => format!("\"{}\"", string(rng)),
        2 => number(rng),
        3 => rng.pick(&["true", "false"]).to_string(),
        4 => {
            let items: Vec<String> = (0..rng.below(5)).map(|_| value(rng, depth + 1)).collect();
            format!("[{}]", items.join(", "))
        }
        5 => format!("'{}'", string(rng).replace('\'', "")),
        _ => {
            let keys = ["repo", "file", "revision", "name", "sha256", "x"];
            let items: Vec<String> = (0..rng.below(4))
                .map(|_| format!("{} = {}", rng.pick(&keys), value(rng, depth + 1)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
    }
}

fn hf_value(rng: &mut Rng) -> String {
    let mut parts = vec![
        format!("repo = \"{}\"", string(rng)),
        format!("file = \"{}\"", string(rng)),
    ];
    if rng.chance(2, 3) {
        parts.push(format!("revision = \"{}\"", string(rng)));
    }
    if rng.chance(1, 6) {
        parts.remove(rng.below(parts.len()));
    }
    format!("{{ {} }}", parts.join(", "))
}

fn dims_value(rng: &mut Rng) -> String {
    let items: Vec<String> = (0..rng.below(6))
        .map(|_| {
            if rng.chance(1, 3) {
                number(rng)
            } else {
                format!("\"{}\"", rng.pick(STRINGS))
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn from_grammar(rng: &mut Rng) -> String {
    let sha = "ab".repeat(32);
    let mut t = String::from("[model]\n");
    type Gen = fn(&mut Rng) -> String;
    let model_keys: &[(&str, Gen)] = &[
        ("path", |r| format!("\"{}\"", string(r))),
        ("url", |r| format!("\"{}\"", string(r))),
        ("hf", hf_value),
        ("sha256", |r| {
            if r.chance(1, 2) {
                format!("\"{}\"", "ab".repeat(32))
            } else {
                format!("\"{}\"", string(r))
            }
        }),
        ("allow_unpinned", |r| r.pick(&["true", "false"]).to_string()),
        ("files", |r| {
            let items: Vec<String> = (0..r.below(4))
                .map(|_| {
                    if r.chance(1, 2) {
                        format!("\"{}\"", string(r))
                    } else {
                        format!("{{ name = \"{}\", sha256 = \"{}\" }}", string(r), string(r))
                    }
                })
                .collect();
            format!("[{}]", items.join(", "))
        }),
        ("max_download_bytes", number),
    ];
    // Usually one source, pinned when remote, so the deeper checks run.
    match rng.below(4) {
        0 => t.push_str(&format!("path = \"{}\"\n", string(rng))),
        1 => t.push_str(&format!("hf = {}\nsha256 = \"{sha}\"\n", hf_value(rng))),
        2 => t.push_str(&format!(
            "url = \"https://h.invalid/{}\"\nallow_unpinned = true\n",
            string(rng)
        )),
        _ => {}
    }
    for _ in 0..rng.below(4) {
        let (k, v) = rng.pick(model_keys);
        t.push_str(&format!("{k} = {}\n", v(rng)));
    }
    if rng.chance(1, 2) {
        t.push_str("[codegen]\n");
        let keys = [
            "weights",
            "weights_file",
            "precision",
            "constant_folding",
            "flush_subnormal_weights",
            "max_arena_bytes",
            "bogus",
        ];
        for _ in 0..rng.below(4) {
            let k = rng.pick(&keys);
            let v = match *k {
                "weights" | "weights_file" | "precision" => format!("\"{}\"", string(rng)),
                _ => value(rng, 0),
            };
            t.push_str(&format!("{k} = {v}\n"));
        }
    }
    if rng.chance(2, 3) {
        t.push_str("[inputs]\n");
        for _ in 0..rng.below(4) {
            let name = rng.pick(&["x", "input", "\"a.b\"", "\"\"", "\"\\u0001\"", "'ü'"]);
            t.push_str(&format!("{name} = {}\n", dims_value(rng)));
        }
    }
    if rng.chance(1, 10) {
        t.push_str(&format!(
            "[{}]\n",
            rng.pick(&["other", "model", "inputs.x", ""])
        ));
    }
    t
}

fn mutate_text(rng: &mut Rng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let len = chars.len();
        match rng.below(5) {
            0 => {
                let c = *rng.pick(&[
                    '"', '\'', '[', ']', '{', '}', '=', ',', '\n', '\\', '\0', '\u{7f}', '\u{1b}',
                    '\r', '#', '.', '\u{202e}', 'é', '9', '<',
                ]);
                chars.insert(rng.below(len + 1), c);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(16));
                chars.drain(at..at + n);
            }
            2 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                let span: Vec<char> = chars[at..at + n].to_vec();
                let to = rng.below(len + 1);
                chars.splice(to..to, span);
            }
            3 => {
                let to = rng.below(len + 1);
                chars.splice(to..to, number(rng).chars());
            }
            _ if len > 0 => chars.truncate(rng.below(len)),
            _ => {}
        }
    }
    chars.into_iter().collect()
}

pub fn generate(rng: &mut Rng) -> String {
    let t = from_grammar(rng);
    if rng.chance(1, 3) {
        mutate_text(rng, &t)
    } else {
        t
    }
}

/// Whether `name`, joined under a directory, stays inside it.
fn stays_inside(name: &str) -> bool {
    let p = Path::new(name);
    !p.is_absolute() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

// The harness passes `&I` with `I = String`.
#[allow(clippy::ptr_arg)]
pub fn exec(text: &String, _dir: &Path) -> String {
    let parsed = ModelToml::parse(text);
    let Ok(t) = &parsed else {
        return crate::harness::label("parse", &parsed);
    };
    let _ = t.source(Path::new("/base"));
    let _ = t.model_path(Path::new("/base"));
    if let Some(hf) = &t.model.hf {
        assert!(
            stays_inside(&hf.revision),
            "accepted hf.revision {:?} escapes the snapshot directory",
            hf.revision
        );
        assert!(
            stays_inside(&hf.file),
            "accepted hf.file {:?} escapes",
            hf.file
        );
        assert!(
            !hf.revision.chars().any(char::is_control),
            "accepted hf.revision {:?} has control characters",
            hf.revision
        );
    }
    for f in &t.model.files {
        assert!(
            stays_inside(f.name()),
            "accepted file name {:?} escapes",
            f.name()
        );
    }
    if let Ok(Source::Url(u)) = t.source(Path::new("/base")) {
        assert!(
            u.starts_with("http://") || u.starts_with("https://"),
            "{u:?}"
        );
    }
    for name in t.inputs.keys() {
        if let Some(Ok(dims)) = t.input_dims(name) {
            for d in dims {
                if let Dim::Range { min, max } = d {
                    assert!(
                        1 <= min && min <= max,
                        "accepted an empty bound {min}..={max} for input {name:?}"
                    );
                }
            }
        }
    }
    let source = t.source(Path::new("/base"));
    crate::harness::label("source", &source)
}
