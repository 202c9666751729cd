//! GGUF cases: valid files from a grammar (metadata of every value type,
//! nested arrays, tensors of every block type lele knows and some it does
//! not, custom alignments), then either left valid, mutated blindly, or
//! with one of their little-endian integers (counts, lengths, dimensions,
//! offsets, type codes) set to a hostile value.
use crate::harness::Rng;
use crate::mutate;

/// Type codes the grammar gives tensors (the last ones have no block size
/// lele knows).
const TENSOR_TYPES: &[u32] = &[0, 1, 2, 3, 6, 7, 8, 10, 12, 13, 14, 24, 26, 28, 30, 23, 99];

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A value of type `code`, arrays nested up to `depth` more levels.
fn value(rng: &mut Rng, code: u32, depth: usize, out: &mut Vec<u8>) {
    match code {
        0 | 1 => out.push(rng.next_u64() as u8),
        7 => out.push(rng.below(2) as u8),
        2 | 3 => out.extend((rng.next_u64() as u16).to_le_bytes()),
        4..=6 => out.extend((rng.next_u64() as u32).to_le_bytes()),
        8 => {
            let len = rng.below(12);
            let s: String = (0..len)
                .map(|_| *rng.pick(&['a', 'é', '▁', '<', '0']))
                .collect();
            string(out, &s);
        }
        9 => {
            // No nested array once the depth is used up (types 0..9).
            let elem = rng.below(if depth == 0 { 9 } else { 13 }) as u32;
            let n = rng.below(6);
            out.extend(elem.to_le_bytes());
            out.extend((n as u64).to_le_bytes());
            for _ in 0..n {
                value(rng, elem, depth.saturating_sub(1), out);
            }
        }
        _ => out.extend(rng.next_u64().to_le_bytes()),
    }
}

/// A valid file from the grammar.
fn valid(rng: &mut Rng) -> Vec<u8> {
    let alignment: u64 = *rng.pick(&[32, 32, 64, 1, 16]);
    let mut meta = Vec::new();
    let n_meta = rng.below(8);
    let mut count = 0u64;
    if alignment != 32 || rng.chance(1, 4) {
        string(&mut meta, "general.alignment");
        meta.extend(4u32.to_le_bytes());
        meta.extend((alignment as u32).to_le_bytes());
        count += 1;
    }
    for i in 0..n_meta {
        string(&mut meta, &format!("key.{i}"));
        let code = rng.below(13) as u32;
        meta.extend(code.to_le_bytes());
        value(rng, code, 2, &mut meta);
        count += 1;
    }
    let mut table = Vec::new();
    let mut data_len = 0u64;
    let n_tensors = rng.below(5);
    for i in 0..n_tensors {
        let code = *rng.pick(TENSOR_TYPES);
        let block = lele_kernels::ops::ggml::GgmlType::from_code(code)
            .block()
            .map_or(32, |(b, _)| b as u64);
        let size = lele_kernels::ops::ggml::GgmlType::from_code(code)
            .block()
            .map_or(18, |(_, s)| s as u64);
        let rank = 1 + rng.below(3);
        let mut dims = vec![block * (1 + rng.below(3) as u64)];
        dims.extend((1..rank).map(|_| 1 + rng.below(3) as u64));
        string(&mut table, &format!("blk.{i}.weight"));
        table.extend((rank as u32).to_le_bytes());
        for d in &dims {
            table.extend(d.to_le_bytes());
        }
        table.extend(code.to_le_bytes());
        table.extend(data_len.to_le_bytes());
        let bytes = dims.iter().product::<u64>() / block * size;
        data_len = (data_len + bytes).next_multiple_of(alignment);
    }
    let mut out = b"GGUF".to_vec();
    out.extend((*rng.pick(&[3u32, 3, 2])).to_le_bytes());
    out.extend((n_tensors as u64).to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(meta);
    out.extend(table);
    out.resize((out.len() as u64).next_multiple_of(alignment) as usize, 0);
    out.extend((0..data_len).map(|_| rng.next_u64() as u8));
    out
}

/// Sets one aligned-looking integer of `b` (a u32 or u64 at a random
/// offset) to a hostile value.
fn poke_integer(rng: &mut Rng, b: &mut [u8]) {
    if b.len() < 8 {
        return;
    }
    let at = rng.below(b.len() - 7);
    let v = *rng.pick(mutate::INTERESTING_U64);
    if rng.chance(1, 2) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    } else {
        b[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
    }
}

pub fn generate(rng: &mut Rng) -> Vec<u8> {
    let mut b = valid(rng);
    match rng.below(4) {
        0 => b,
        1 => mutate::mutate_blind(rng, &b, &[]),
        _ => {
            for _ in 0..1 + rng.below(3) {
                poke_integer(rng, &mut b);
            }
            b
        }
    }
}
