//! Mutations of byte strings: blind ones (flips, inserts, deletes, spans
//! duplicated or spliced) and protobuf-aware ones on a parsed field tree
//! (varints and lengths rewritten to huge values, fields repeated,
//! renumbered or retyped) that re-encode with correct outer lengths, so
//! the damage reaches past the first message.
use crate::harness::Rng;

/// Values a varint is rewritten to.
pub const INTERESTING_U64: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0xffff,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 1,
    1 << 53,
    1 << 62,
    i64::MAX as u64,
    1 << 63,
    u64::MAX,
    u64::MAX - 1,
    (-2i64) as u64,
    (-(1i64 << 32)) as u64,
];

fn interesting(rng: &mut Rng) -> u64 {
    if rng.chance(1, 4) {
        rng.next_u64() >> rng.below(64)
    } else {
        *rng.pick(INTERESTING_U64)
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift < 64 {
            v |= ((byte & 0x7f) as u64) << shift;
        }
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// One protobuf field.
#[derive(Clone, Debug)]
pub struct Field {
    pub num: u64,
    pub wire: u8,
    pub val: Val,
    /// A length prefix written instead of the true one.
    pub len_override: Option<u64>,
}

#[derive(Clone, Debug)]
pub enum Val {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(Vec<u8>),
    Msg(Vec<Field>),
}

/// Parses `b` as a message (every length-delimited payload that parses as
/// one, too, up to `depth`); `None` if it is not exactly a message.
pub fn parse(b: &[u8], depth: usize) -> Option<Vec<Field>> {
    let mut pos = 0;
    let mut fields = Vec::new();
    while pos < b.len() {
        let tag = get_varint(b, &mut pos)?;
        let (num, wire) = (tag >> 3, (tag & 7) as u8);
        if num == 0 {
            return None;
        }
        let val = match wire {
            0 => Val::Varint(get_varint(b, &mut pos)?),
            1 => {
                let v: [u8; 8] = b.get(pos..pos + 8)?.try_into().ok()?;
                pos += 8;
                Val::Fixed64(v)
            }
            5 => {
                let v: [u8; 4] = b.get(pos..pos + 4)?.try_into().ok()?;
                pos += 4;
                Val::Fixed32(v)
            }
            2 => {
                let len = usize::try_from(get_varint(b, &mut pos)?).ok()?;
                let payload = b.get(pos..pos.checked_add(len)?)?;
                pos += len;
                match (depth > 0 && !payload.is_empty())
                    .then(|| parse(payload, depth - 1))
                    .flatten()
                {
                    Some(m) => Val::Msg(m),
                    None => Val::Bytes(payload.to_vec()),
                }
            }
            _ => return None,
        };
        fields.push(Field {
            num,
            wire,
            val,
            len_override: None,
        });
    }
    Some(fields)
}

pub fn encode(fields: &[Field], out: &mut Vec<u8>) {
    for f in fields {
        put_varint(out, (f.num << 3) | f.wire as u64);
        match &f.val {
            Val::Varint(v) => put_varint(out, *v),
            Val::Fixed64(v) => out.extend_from_slice(v),
            Val::Fixed32(v) => out.extend_from_slice(v),
            Val::Bytes(b) => {
                put_varint(out, f.len_override.unwrap_or(b.len() as u64));
                out.extend_from_slice(b);
            }
            Val::Msg(m) => {
                let mut inner = Vec::new();
                encode(m, &mut inner);
                put_varint(out, f.len_override.unwrap_or(inner.len() as u64));
                out.extend_from_slice(&inner);
            }
        }
    }
}

/// Paths (child indices) of every field of the tree.
fn paths(fields: &[Field], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    for (i, f) in fields.iter().enumerate() {
        prefix.push(i);
        out.push(prefix.clone());
        if let Val::Msg(m) = &f.val {
            paths(m, prefix, out);
        }
        prefix.pop();
    }
}

/// The list holding the field at `path`, and the field's index in it.
fn parent_mut<'a>(fields: &'a mut Vec<Field>, path: &[usize]) -> (&'a mut Vec<Field>, usize) {
    let (&last, init) = path.split_last().expect("non-empty path");
    let mut cur = fields;
    for &i in init {
        cur = match &mut cur[i].val {
            Val::Msg(m) => m,
            _ => unreachable!("paths only descend into messages"),
        };
    }
    (cur, last)
}

/// One structure-aware mutation of a parsed message.
fn mutate_tree(rng: &mut Rng, tree: &mut Vec<Field>) {
    let mut all = Vec::new();
    paths(tree, &mut Vec::new(), &mut all);
    if all.is_empty() {
        tree.push(Field {
            num: 1 + rng.below(20) as u64,
            wire: 2,
            val: Val::Bytes(vec![]),
            len_override: None,
        });
        return;
    }
    let path = rng.pick(&all).clone();
    let donor = rng.pick(&all).clone();
    let donor_field = {
        let (list, i) = parent_mut(tree, &donor);
        list[i].clone()
    };
    let (list, i) = parent_mut(tree, &path);
    match rng.below(10) {
        // A varint's value, or a length prefix, made hostile.
        0..=2 => match &mut list[i].val {
            Val::Varint(v) => *v = interesting(rng),
            Val::Bytes(_) | Val::Msg(_) => {
                let real = {
                    let mut tmp = Vec::new();
                    encode(std::slice::from_ref(&list[i]), &mut tmp);
                    tmp.len() as u64
                };
                list[i].len_override = Some(if rng.chance(1, 2) {
                    interesting(rng)
                } else {
                    real.wrapping_add(rng.range(-3, 3) as u64)
                });
            }
            Val::Fixed32(v) => *v = (interesting(rng) as u32).to_le_bytes(),
            Val::Fixed64(v) => *v = interesting(rng).to_le_bytes(),
        },
        // Repeated many times (amplification), capped at ~1 MB added.
        3 => {
            let mut one = Vec::new();
            encode(std::slice::from_ref(&list[i]), &mut one);
            let max = (1 << 20) / one.len().max(1);
            let n = match rng.below(3) {
                0 => 1,
                1 => rng.below(16),
                _ => rng.below(max.max(1)),
            };
            let f = list[i].clone();
            list.splice(i..i, std::iter::repeat_n(f, n.min(max)));
        }
        4 => {
            list.remove(i);
        }
        // Renumbered or retyped.
        5 => {
            if rng.chance(1, 2) {
                list[i].num = if rng.chance(1, 4) {
                    interesting(rng) >> 3
                } else {
                    1 + rng.below(24) as u64
                }
                .max(1);
            } else {
                let wire = *rng.pick(&[0u8, 1, 2, 5]);
                list[i].wire = wire;
                list[i].val = match wire {
                    0 => Val::Varint(interesting(rng)),
                    1 => Val::Fixed64(interesting(rng).to_le_bytes()),
                    5 => Val::Fixed32((interesting(rng) as u32).to_le_bytes()),
                    _ => Val::Bytes(vec![0; rng.below(8)]),
                };
            }
        }
        // A field from elsewhere in the tree copied here.
        6 => {
            let at = rng.below(list.len() + 1);
            list.insert(at, donor_field);
        }
        // A payload replaced, emptied or given random bytes.
        7 => {
            let n = rng.below(12);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            list[i].wire = 2;
            list[i].val = Val::Bytes(bytes);
        }
        // A new field.
        8 => {
            let f = Field {
                num: 1 + rng.below(24) as u64,
                wire: 0,
                val: Val::Varint(interesting(rng)),
                len_override: None,
            };
            list.insert(rng.below(list.len() + 1), f);
        }
        // Packed/bytes payload grown or cut.
        _ => {
            if let Val::Bytes(b) = &mut list[i].val {
                if rng.chance(1, 2) && !b.is_empty() {
                    let cut = rng.below(b.len());
                    b.truncate(cut);
                } else {
                    for _ in 0..rng.below(16) {
                        b.push(interesting(rng) as u8);
                    }
                }
            }
        }
    }
}

/// One blind byte-level mutation.
fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = data.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            let r = rng.next_u64() as u8;
            data[i] = *rng.pick(&[0u8, 0xff, 0x7f, 0x80, 0x01, r]);
        }
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let ins: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, ins);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            data.drain(at..at + n);
        }
        4 if len > 0 => data.truncate(rng.below(len)),
        5 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(256));
            let span = data[at..at + n].to_vec();
            let to = rng.below(len + 1);
            for _ in 0..1 + rng.below(4) {
                data.splice(to..to, span.iter().copied());
            }
        }
        6 if !others.is_empty() => {
            let o = rng.pick(others);
            if !o.is_empty() {
                let at = rng.below(o.len());
                let n = 1 + rng.below(o.len() - at);
                let to = rng.below(len + 1);
                let end = (to + rng.below(n + 1)).min(len);
                data.splice(to..end, o[at..at + n].iter().copied());
            }
        }
        7 => {
            let at = rng.below(len + 1);
            let mut v = Vec::new();
            put_varint(&mut v, interesting(rng));
            let end = (at + v.len().min(rng.below(3))).min(len);
            data.splice(at..end, v);
        }
        _ if len > 0 => {
            let i = rng.below(len);
            data[i] = data[i].wrapping_add(rng.range(-8, 8) as u8);
        }
        _ => data.push(rng.next_u64() as u8),
    }
}

/// 1–8 stacked mutations of `seed`, protobuf-aware about half the time.
pub fn mutate_proto(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seed.to_vec();
    if rng.chance(1, 2)
        && let Some(mut tree) = parse(seed, 12)
    {
        for _ in 0..1 + rng.below(4) {
            mutate_tree(rng, &mut tree);
        }
        data.clear();
        encode(&tree, &mut data);
        if rng.chance(1, 4) {
            mutate_bytes(rng, &mut data, others);
        }
        return data;
    }
    for _ in 0..1 + rng.below(8) {
        mutate_bytes(rng, &mut data, others);
    }
    data
}

/// 1–8 stacked blind mutations.
pub fn mutate_blind(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        mutate_bytes(rng, &mut data, others);
    }
    data
}
