//! Times what the macro does for a `model.toml`: the first expansion
//! (compile, or a cache hit from an earlier run) and warm re-expansions.
//!
//! `cargo run -p lele-build --example warm_expansion -- tests/models/ppocr_v4_rec.toml`
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let toml = std::env::args()
        .nth(1)
        .ok_or("usage: warm_expansion MODEL.toml")?;
    let toml = std::path::PathBuf::from(toml);
    for i in 0..5 {
        let t = Instant::now();
        let mut opts = lele_build::CompileOptions::new("Model");
        opts.offline = false;
        let c = lele_build::compile_toml(&toml, &opts)?;
        println!(
            "expansion {i}: {:.1} ms ({})",
            t.elapsed().as_secs_f64() * 1e3,
            if c.from_cache {
                "cache hit"
            } else {
                "compiled"
            }
        );
    }
    Ok(())
}
