//! Converting `TensorProto` into owned tensors of their real dtype.
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use lele_kernels::DType;

use super::{Limits, proto};
use crate::error::{BuildError, Result};
use crate::ir::Tensor;

fn dims_of(t: &proto::TensorProto, limits: &Limits) -> Result<(Vec<usize>, usize)> {
    let mut dims = Vec::with_capacity(t.dims.len());
    let mut numel: u64 = 1;
    for &d in &t.dims {
        if d < 0 {
            return Err(BuildError::Decode(format!(
                "tensor `{}` has a negative dim",
                t.name.as_deref().unwrap_or("")
            )));
        }
        numel = numel
            .checked_mul(d as u64)
            .ok_or_else(|| BuildError::Limit("tensor element count overflows".into()))?;
        dims.push(d as usize);
    }
    if numel > limits.max_tensor_bytes {
        return Err(BuildError::Limit(format!("tensor with {numel} elements")));
    }
    Ok((dims, numel as usize))
}

/// Converts a `TensorProto` (inline or external data) into a [`Tensor`].
pub fn tensor_from_proto(t: &proto::TensorProto, dir: &Path, limits: &Limits) -> Result<Tensor> {
    let name = t.name.clone().unwrap_or_default();
    let code = t.data_type.unwrap_or(0);
    let dtype = DType::from_onnx_code(code).ok_or_else(|| {
        BuildError::Unsupported(vec![crate::error::Unsupported {
            op: "initializer".into(),
            node: name.clone(),
            reason: format!("tensor dtype code {code} is not supported"),
        }])
    })?;
    let (dims, numel) = dims_of(t, limits)?;
    let nbytes = (numel as u64)
        .checked_mul(dtype.size() as u64)
        .ok_or_else(|| BuildError::Limit("tensor size overflows".into()))?;
    if nbytes > limits.max_tensor_bytes {
        return Err(BuildError::Limit(format!(
            "tensor `{name}` has {nbytes} bytes"
        )));
    }
    let bad_len = || {
        BuildError::Decode(format!(
            "tensor `{name}`: data length does not match its dims"
        ))
    };
    if t.data_location == Some(proto::tensor_proto::DataLocation::External as i32) {
        let bytes = read_external(t, dir, nbytes)?;
        return Tensor::from_bytes(dtype, &dims, &bytes).ok_or_else(bad_len);
    }
    if let Some(raw) = &t.raw_data {
        return Tensor::from_bytes(dtype, &dims, raw).ok_or_else(bad_len);
    }
    let mut out = Tensor::zeros(dtype, &dims);
    let b = out.bytes_mut();
    macro_rules! fill {
        ($src:expr, $t:ty, $conv:expr) => {{
            let src = &$src;
            if src.len() != numel {
                return Err(bad_len());
            }
            let dst: &mut [$t] = bytemuck::cast_slice_mut(b);
            for (d, s) in dst.iter_mut().zip(src.iter()) {
                *d = $conv(*s);
            }
        }};
    }
    match dtype {
        DType::F32 => fill!(t.float_data, f32, |v: f32| v),
        DType::F64 => fill!(t.double_data, f64, |v: f64| v),
        DType::I64 => fill!(t.int64_data, i64, |v: i64| v),
        DType::U64 => fill!(t.uint64_data, u64, |v: u64| v),
        DType::U32 => fill!(t.uint64_data, u32, |v: u64| v as u32),
        DType::I32 => fill!(t.int32_data, i32, |v: i32| v),
        DType::I16 => fill!(t.int32_data, i16, |v: i32| v as i16),
        DType::U16 => fill!(t.int32_data, u16, |v: i32| v as u16),
        DType::F16 | DType::BF16 => fill!(t.int32_data, u16, |v: i32| v as u16),
        DType::I8 => fill!(t.int32_data, i8, |v: i32| v as i8),
        DType::U8 => fill!(t.int32_data, u8, |v: i32| v as u8),
        DType::Bool => fill!(t.int32_data, u8, |v: i32| u8::from(v != 0)),
    }
    Ok(out)
}

/// Reads external data, allowing only relative paths inside `dir`.
fn read_external(t: &proto::TensorProto, dir: &Path, nbytes: u64) -> Result<Vec<u8>> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let v = kv.value.clone().unwrap_or_default();
        match kv.key.as_deref() {
            Some("location") => location = Some(v),
            Some("offset") => {
                offset = v
                    .parse()
                    .map_err(|_| BuildError::Decode("bad external offset".into()))?
            }
            Some("length") => {
                length = Some(
                    v.parse::<u64>()
                        .map_err(|_| BuildError::Decode("bad external length".into()))?,
                )
            }
            _ => {}
        }
    }
    let location =
        location.ok_or_else(|| BuildError::Decode("external data without location".into()))?;
    let err = |reason: &str| BuildError::ExternalData {
        location: location.clone(),
        reason: reason.to_string(),
    };
    let rel = Path::new(&location);
    if rel.is_absolute() || location.starts_with('/') || location.starts_with('\\') {
        return Err(err("absolute paths are not allowed"));
    }
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(err("it must stay inside the model's directory"));
    }
    let path = dir.join(rel);
    // Symlinks could still escape: compare canonical paths.
    let canon_dir = dir.canonicalize().map_err(|e| err(&e.to_string()))?;
    let canon = path.canonicalize().map_err(|e| err(&e.to_string()))?;
    // A Hugging Face Hub snapshot links its files to `../../blobs/`.
    let hub_blobs =
        dir.join("../../blobs").canonicalize().ok().filter(|b| {
            b.ends_with("blobs") && dir.parent().is_some_and(|p| p.ends_with("snapshots"))
        });
    let in_blobs = hub_blobs.is_some_and(|b| canon.starts_with(b));
    if !canon.starts_with(&canon_dir) && !in_blobs {
        return Err(err("it resolves outside the model's directory"));
    }
    if let Some(l) = length
        && l != nbytes
    {
        return Err(err("length does not match the tensor's dims"));
    }
    let mut f = std::fs::File::open(&canon).map_err(|e| err(&e.to_string()))?;
    let file_len = f.metadata().map_err(|e| err(&e.to_string()))?.len();
    if offset.checked_add(nbytes).is_none_or(|end| end > file_len) {
        return Err(err("offset and length run past the end of the file"));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| err(&e.to_string()))?;
    let mut buf = vec![0u8; nbytes as usize];
    f.read_exact(&mut buf).map_err(|e| err(&e.to_string()))?;
    Ok(buf)
}
