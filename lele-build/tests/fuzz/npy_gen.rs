//! `.npy` cases: valid files (every dtype, shapes of rank 0–4) mutated
//! blindly, or rebuilt from a grammar of header dicts with hostile shapes,
//! descrs, versions, header lengths and body lengths.
use lele_kernels::DType;

use crate::harness::Rng;
use crate::mutate;

const DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::Bool,
];

fn valid(rng: &mut Rng) -> Vec<u8> {
    let dtype = *rng.pick(DTYPES);
    let dims: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(5)).collect();
    let n: usize = dims.iter().product::<usize>() * dtype.size();
    let data: Vec<u8> = (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.below(2) as u8,
            _ => rng.next_u64() as u8,
        })
        .collect();
    lele_build::npy::to_bytes(dtype, &dims, &data)
}

fn dim_text(rng: &mut Rng) -> String {
    match rng.below(16) {
        0..=6 => rng.below(5).to_string(),
        7 => "0".into(),
        8 => (1u64 << 32).to_string(),
        9 => (1u64 << 63).to_string(),
        10 => u64::MAX.to_string(),
        11 => "18446744073709551616".into(),
        12 => "-1".into(),
        13 => rng
            .pick(&["1e3", " ", "", "0x10", "1L", "+2", "٣", "None"])
            .to_string(),
        14 => (1u64 << (20 + rng.below(40))).to_string(),
        _ => rng.below(100_000).to_string(),
    }
}

fn shape_text(rng: &mut Rng) -> String {
    if rng.chance(1, 8) {
        return rng
            .pick(&[
                ")(", "((", "(1,,2)", "(", ")", "()", "(,)", "[1, 2]", "(1 2)", "(1,)(2,)", "",
                "((1,),)",
            ])
            .to_string();
    }
    let n = if rng.chance(1, 10) {
        rng.below(70)
    } else {
        rng.below(5)
    };
    let dims: Vec<String> = (0..n).map(|_| dim_text(rng)).collect();
    let trailing = if n == 1 || rng.chance(1, 3) { "," } else { "" };
    format!("({}{trailing})", dims.join(", "))
}

fn header_text(rng: &mut Rng) -> String {
    let descr = if rng.chance(4, 5) {
        DTYPES[rng.below(DTYPES.len())].numpy_descr().to_string()
    } else {
        rng.pick(&[
            ">f4", "<f16", "", "<", "|O", "<U10", "'", "<f4'", "\u{0}", "<c8", "V8", "<M8",
        ])
        .to_string()
    };
    let fortran = *rng.pick(&["False", "False", "True", "false", "0", "", "Fals"]);
    let mut parts = vec![
        format!("'descr': '{descr}'"),
        format!("'fortran_order': {fortran}"),
        format!("'shape': {}", shape_text(rng)),
    ];
    if rng.chance(1, 5) {
        let i = rng.below(parts.len());
        let j = rng.below(parts.len());
        parts.swap(i, j);
    }
    if rng.chance(1, 10) {
        parts.remove(rng.below(parts.len()));
    }
    if rng.chance(1, 10) {
        let p = parts[rng.below(parts.len())].clone();
        parts.push(p);
    }
    let mut h = format!("{{{}, }}", parts.join(", "));
    if rng.chance(1, 10) {
        h = h.replace(['{', '}'], "");
    }
    let pad = rng.below(80);
    h.push_str(&" ".repeat(pad));
    h.push('\n');
    h
}

/// The element size the header implies (for a matching body), if known.
fn elem_size(header: &str) -> usize {
    DTYPES
        .iter()
        .find(|d| header.contains(&format!("'{}'", d.numpy_descr())))
        .map(|d| d.size())
        .unwrap_or(4)
}

fn from_grammar(rng: &mut Rng) -> Vec<u8> {
    let header = header_text(rng);
    let version = *rng.pick(&[1u8, 1, 2, 3, 0, 4, 255]);
    let mut out = b"\x93NUMPY".to_vec();
    out.push(version);
    out.push(0);
    let hlen = header.len();
    let claimed = match rng.below(10) {
        0 => hlen + rng.below(8),
        1 => hlen.saturating_sub(rng.below(8)),
        2 => *rng.pick(&[0, 0xffff, 0x10000, 0xffff_ffff, 1 << 31]),
        _ => hlen,
    };
    if version == 1 || version == 0 {
        out.extend_from_slice(&(claimed as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(claimed as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    // A body of the size the shape asks for (when small), or not.
    let dims: Option<Vec<usize>> = header
        .split("'shape': (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .map(|inner| {
            inner
                .split(',')
                .filter_map(|p| p.trim().parse::<usize>().ok())
                .collect()
        });
    let want = dims
        .and_then(|d| {
            d.iter()
                .try_fold(elem_size(&header), |acc, &x| acc.checked_mul(x))
        })
        .filter(|&n| n <= 1 << 16)
        .unwrap_or(rng.below(64));
    let body = match rng.below(6) {
        0 => want + 1 + rng.below(8),
        1 => want.saturating_sub(1 + rng.below(8)),
        _ => want,
    };
    out.extend((0..body).map(|_| rng.next_u64() as u8));
    out
}

pub fn generate(rng: &mut Rng) -> Vec<u8> {
    match rng.below(3) {
        0 => {
            let seed = valid(rng);
            let others = vec![valid(rng)];
            mutate::mutate_blind(rng, &seed, &others)
        }
        1 => from_grammar(rng),
        _ => {
            let seed = from_grammar(rng);
            mutate::mutate_blind(rng, &seed, &[])
        }
    }
}
