//! Fingerprints the compiler's own sources (and the kernels it evaluates
//! constants with) so that cached artifacts of a different compiler build
//! are never reused, even without a version bump.
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dirs = [manifest.join("src"), manifest.join("../lele-kernels/src")];
    let mut files = Vec::new();
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
        collect(d, &mut files);
    }
    files.sort();
    // Two independent FNV-1a lanes: a fingerprint, not a security boundary.
    let (mut a, mut b): (u64, u64) = (0xcbf2_9ce4_8422_2325, 0x84222325cbf29ce4);
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        for &x in f.to_string_lossy().as_bytes().iter().chain(&bytes) {
            a = (a ^ x as u64).wrapping_mul(0x0100_0000_01b3);
            b = (b ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3 | 0x9e37_0000_0000_0000);
        }
    }
    println!("cargo:rustc-env=LELE_BUILD_FINGERPRINT={a:016x}{b:016x}");
}
