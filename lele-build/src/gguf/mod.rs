//! GGUF, llama.cpp's file format for (mostly quantized) language models:
//! the header, the metadata and the tensor table, read from the file's
//! bytes with every count, length, size and offset checked against what
//! the file holds before anything is allocated for it, so a hostile or
//! truncated file is an error, never a panic or an allocation the file's
//! size does not pay for. The tensors' data are not read here: each
//! [`TensorInfo`] gives the byte range of its data in the file.
//!
//! Layout (version 2 and 3, little-endian): the magic `GGUF`, the version
//! (u32), the tensor count and the metadata count (u64 each), the metadata
//! (key string, value type u32, value), the tensor infos (name, dimension
//! count u32, dimensions u64 innermost first, `ggml` type u32, data offset
//! u64), then the data, starting at the next multiple of the alignment
//! (`general.alignment`, default 32); each tensor's offset is relative to
//! that start and a multiple of the alignment.
mod arch;
mod build;
#[cfg(test)]
mod tests;
mod tokenizer;

use std::collections::HashSet;
use std::path::Path;

pub use arch::{Arch, DecoderConfig, decoder_config};
pub use build::{LOGITS, POSITION, TOKENS, decoder_graph};
pub use lele_kernels::ops::ggml::GgmlType;
pub use tokenizer::tokenizer_blob;

use crate::error::{BuildError, Result};

/// `GGUF` read as a little-endian u32.
const MAGIC: u32 = u32::from_le_bytes(*b"GGUF");

/// Most dimensions a tensor has in GGUF.
pub const MAX_DIMS: usize = 4;

/// Deepest nesting of arrays inside a metadata value.
const MAX_ARRAY_DEPTH: usize = 4;

/// Limits on what a file may declare, besides its own size.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Most tensors.
    pub max_tensors: u64,
    /// Most metadata entries.
    pub max_metadata: u64,
    /// Longest string (a key, a tensor name or a string value), in bytes.
    pub max_string_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tensors: 1 << 16,
            max_metadata: 1 << 16,
            max_string_bytes: 1 << 20,
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `UINT8`.
    U8(u8),
    /// `INT8`.
    I8(i8),
    /// `UINT16`.
    U16(u16),
    /// `INT16`.
    I16(i16),
    /// `UINT32`.
    U32(u32),
    /// `INT32`.
    I32(i32),
    /// `FLOAT32`.
    F32(f32),
    /// `BOOL`.
    Bool(bool),
    /// `STRING` (UTF-8).
    String(String),
    /// `ARRAY`: the element type's code and the elements (all of that
    /// type).
    Array(u32, Vec<Value>),
    /// `UINT64`.
    U64(u64),
    /// `INT64`.
    I64(i64),
    /// `FLOAT64`.
    F64(f64),
}

impl Value {
    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// One tensor of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`, …).
    pub name: String,
    /// Its dimensions, innermost (contiguous) first, as GGUF stores them.
    pub dims: Vec<u64>,
    /// Its element type.
    pub ggml_type: GgmlType,
    /// Where its data starts in the file (absolute).
    pub offset: u64,
    /// Bytes of its data.
    pub bytes: u64,
}

impl TensorInfo {
    /// Elements in all.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A GGUF file's header: what [`parse`] found before the tensor data.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    /// Format version (2 or 3).
    pub version: u32,
    /// The metadata, in file order (keys are unique).
    pub metadata: Vec<(String, Value)>,
    /// The tensors, in file order (names are unique).
    pub tensors: Vec<TensorInfo>,
    /// The data alignment.
    pub alignment: u64,
    /// Where the tensor data start in the file.
    pub data_start: u64,
}

impl Gguf {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture` (`gemma3`, `llama`, …).
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }
}

/// Whether `bytes` start like a GGUF file.
pub fn is_gguf(bytes: &[u8]) -> bool {
    bytes.get(..4) == Some(&MAGIC.to_le_bytes()[..])
}

/// Whether the file at `path` starts with the GGUF magic.
pub fn is_gguf_file(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4);
    crate::fsutil::open_regular_file(path)?
        .take(4)
        .read_to_end(&mut head)
        .map_err(|source| BuildError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(is_gguf(&head))
}

/// Reads the whole GGUF file at `path` (header and tensor data).
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    crate::fsutil::open_regular_file(path)?
        .read_to_end(&mut data)
        .map_err(|source| BuildError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(data)
}

fn bad(msg: impl Into<String>) -> BuildError {
    BuildError::Gguf(msg.into())
}

/// A cursor over the header bytes, every read checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    limits: &'a Limits,
    /// The whole file's length (`bytes` may be only its first part).
    file_len: u64,
    /// Set when a read or a count ran past `bytes` while the file goes on
    /// after them (reading more may help).
    ran_out: bool,
}

impl<'a> Reader<'a> {
    /// Whether `n` more bytes are past what was read (noting when the
    /// file goes on after it).
    fn beyond(&mut self, n: u64) -> bool {
        if n <= self.left() {
            return false;
        }
        if (self.bytes.len() as u64) < self.file_len {
            self.ran_out = true;
        }
        true
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let left = self.left();
        if self.beyond(n) {
            return Err(bad(format!(
                "{what} needs {n} bytes at offset {}, the file has {left} left",
                self.at
            )));
        }
        // `n <= left`, which fits in usize.
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Bytes not read yet.
    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let len = self.u64(what)?;
        if len > self.limits.max_string_bytes {
            return Err(bad(format!(
                "{what}: a string of {len} bytes, the limit is {}",
                self.limits.max_string_bytes
            )));
        }
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| bad(format!("{what}: a string not in UTF-8")))
    }

    /// A value of type `code`, arrays nested at most `depth` more levels.
    fn value(&mut self, code: u32, depth: usize, what: &str) -> Result<Value> {
        Ok(match code {
            0 => Value::U8(self.array::<1>(what)?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(bad(format!("{what}: a bool of byte {b}"))),
            },
            8 => Value::String(self.string(what)?),
            9 => {
                if depth == 0 {
                    return Err(bad(format!(
                        "{what}: arrays nested more than {MAX_ARRAY_DEPTH} deep"
                    )));
                }
                let elem = self.u32(what)?;
                let count = self.u64(what)?;
                // Every element takes at least one byte: a count the rest
                // of the file cannot hold is refused before allocating.
                let min = min_value_bytes(elem)
                    .ok_or_else(|| bad(format!("{what}: an array of unknown value type {elem}")))?;
                if count.checked_mul(min).is_none_or(|b| self.beyond(b)) {
                    return Err(bad(format!(
                        "{what}: an array of {count} elements, more than the file holds"
                    )));
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(elem, depth - 1, what)?);
                }
                Value::Array(elem, items)
            }
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            c => return Err(bad(format!("{what}: unknown value type {c}"))),
        })
    }
}

/// The fewest bytes a value of type `code` takes (`None`: no such type).
fn min_value_bytes(code: u32) -> Option<u64> {
    Some(match code {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        // A string's length, an array's type and count.
        8 => 8,
        9 => 12,
        10..=12 => 8,
        _ => return None,
    })
}

/// Parses a GGUF header from `bytes`, which hold the file's first bytes
/// (at least the whole header); `file_len` is the file's full length, which
/// every tensor's data must fit in.
pub fn parse(bytes: &[u8], file_len: u64, limits: &Limits) -> Result<Gguf> {
    parse_prefix(bytes, file_len, limits).0
}

/// [`parse`], and whether it failed by running out of `bytes`.
fn parse_prefix(bytes: &[u8], file_len: u64, limits: &Limits) -> (Result<Gguf>, bool) {
    let mut r = Reader {
        bytes,
        at: 0,
        limits,
        file_len,
        ran_out: false,
    };
    let parsed = parse_header(&mut r, file_len);
    (parsed, r.ran_out)
}

fn parse_header(r: &mut Reader<'_>, file_len: u64) -> Result<Gguf> {
    let limits = r.limits;
    if r.u32("the magic")? != MAGIC {
        return Err(bad("not a GGUF file (no `GGUF` magic)"));
    }
    let version = r.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(bad(format!(
            "version {version} (versions 2 and 3 are read)"
        )));
    }
    let n_tensors = r.u64("the tensor count")?;
    let n_meta = r.u64("the metadata count")?;
    if n_tensors > limits.max_tensors {
        return Err(bad(format!(
            "{n_tensors} tensors, the limit is {}",
            limits.max_tensors
        )));
    }
    if n_meta > limits.max_metadata {
        return Err(bad(format!(
            "{n_meta} metadata entries, the limit is {}",
            limits.max_metadata
        )));
    }
    // A metadata entry takes at least 13 bytes, a tensor info 28 (with one
    // dimension and an empty name).
    let need = n_meta
        .saturating_mul(13)
        .saturating_add(n_tensors.saturating_mul(28));
    if r.beyond(need) {
        return Err(bad(format!(
            "{n_meta} metadata entries and {n_tensors} tensors, more than the file holds"
        )));
    }
    let mut metadata = Vec::with_capacity(n_meta as usize);
    let mut keys = HashSet::new();
    for i in 0..n_meta {
        let key = r.string(&format!("metadata entry {i}'s key"))?;
        let code = r.u32(&format!("the type of `{key}`"))?;
        let value = r.value(code, MAX_ARRAY_DEPTH, &format!("the value of `{key}`"))?;
        if !keys.insert(key.clone()) {
            return Err(bad(format!("metadata key `{key}` appears twice")));
        }
        metadata.push((key, value));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => 32,
        Some((_, v)) => match v {
            Value::U32(a) if a.is_power_of_two() && *a <= 1 << 16 => u64::from(*a),
            v => {
                return Err(bad(format!(
                    "general.alignment {v:?} (a power of two of at most 65536 as a u32 is read)"
                )));
            }
        },
    };
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = HashSet::new();
    for i in 0..n_tensors {
        let name = r.string(&format!("tensor {i}'s name"))?;
        let what = format!("tensor `{name}`");
        let n_dims = r.u32(&what)?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(bad(format!(
                "{what} has {n_dims} dimensions (1 to {MAX_DIMS} are read)"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(r.u64(&what)?);
        }
        let ggml_type = GgmlType::from_code(r.u32(&what)?);
        let rel = r.u64(&what)?;
        if !names.insert(name.clone()) {
            return Err(bad(format!("{what} appears twice")));
        }
        tensors.push((name, dims, ggml_type, rel));
    }
    let data_start = (r.at as u64).next_multiple_of(alignment);
    let mut infos = Vec::with_capacity(tensors.len());
    for (name, dims, ggml_type, rel) in tensors {
        let what = format!("tensor `{name}`");
        let bytes = data_bytes(&dims, ggml_type).map_err(|e| bad(format!("{what}: {e}")))?;
        if !rel.is_multiple_of(alignment) {
            return Err(bad(format!(
                "{what}: data offset {rel} is not a multiple of the alignment {alignment}"
            )));
        }
        let offset = data_start
            .checked_add(rel)
            .filter(|o| o.checked_add(bytes).is_some_and(|end| end <= file_len))
            .ok_or_else(|| {
                bad(format!(
                    "{what}: its {bytes} bytes at data offset {rel} end past the file's {file_len}"
                ))
            })?;
        infos.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            bytes,
        });
    }
    // Tensors' data do not overlap (each one's bytes are its own).
    let mut ranges: Vec<(u64, u64, &str)> = infos
        .iter()
        .map(|t| (t.offset, t.offset + t.bytes, t.name.as_str()))
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(bad(format!(
                "the data of tensors `{}` and `{}` overlap",
                w[0].2, w[1].2
            )));
        }
    }
    Ok(Gguf {
        version,
        metadata,
        tensors: infos,
        alignment,
        data_start,
    })
}

/// Bytes of a tensor's data: whole blocks along the innermost dimension.
fn data_bytes(dims: &[u64], ty: GgmlType) -> std::result::Result<u64, String> {
    let (block, size) = ty
        .block()
        .map(|(b, s)| (b as u64, s as u64))
        .ok_or_else(|| format!("element type {ty:?} has no known block size"))?;
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or("its element count overflows")?;
    let inner = dims.first().copied().ok_or("it has no dimensions")?;
    if !inner.is_multiple_of(block) {
        return Err(format!(
            "its innermost dimension {inner} is not a multiple of {ty:?}'s block of {block}"
        ));
    }
    (elements / block)
        .checked_mul(size)
        .ok_or_else(|| "its byte size overflows".to_string())
}

/// Reads the header of the GGUF file at `path`: its first megabyte, four
/// times more while the header runs past what was read (a tokenizer's
/// vocabulary takes megabytes), never the tensor data.
pub fn read_header(path: &Path, limits: &Limits) -> Result<Gguf> {
    use std::io::Read;
    let io = |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = crate::fsutil::open_regular_file(path)?;
    let file_len = f.metadata().map_err(io)?.len();
    let mut buf = Vec::new();
    let mut want: u64 = 1 << 20;
    loop {
        let target = want.min(file_len);
        let before = buf.len();
        (&mut f)
            .take(target.saturating_sub(before as u64))
            .read_to_end(&mut buf)
            .map_err(io)?;
        match parse_prefix(&buf, file_len, limits) {
            (Err(_), true) if buf.len() > before && (buf.len() as u64) < file_len => {
                want = want.saturating_mul(4);
            }
            (done, _) => return done,
        }
    }
}
