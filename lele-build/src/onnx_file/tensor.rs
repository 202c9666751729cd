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
    // The rule sizing holds every value to (`passes::sizing::addressable`),
    // here for constants, which kernels see before sizing runs (an empty
    // `[0, 2^63 - 1, 3]` holds nothing, but a kernel multiplying its other
    // dims would overflow).
    let addressable = dims
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .is_some_and(|b| b <= isize::MAX as usize);
    if !addressable {
        return Err(BuildError::Limit(format!(
            "tensor `{name}` of dims {dims:?} has more bytes than this machine can address"
        )));
    }
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
    // The typed field's length is checked before the tensor is allocated: a
    // file must not make us allocate gigabytes for a tensor it does not hold.
    let mut out = None;
    macro_rules! fill {
        ($src:expr, $t:ty, $conv:expr) => {{
            let src = &$src;
            if src.len() != numel {
                return Err(bad_len());
            }
            let o = out.insert(Tensor::zeros(dtype, &dims).ok_or_else(bad_len)?);
            let dst: &mut [$t] = bytemuck::cast_slice_mut(o.bytes_mut());
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
    out.ok_or_else(bad_len)
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
    // A Hugging Face Hub snapshot links its files into its repository's
    // blobs, which only a model inside a snapshot may reach.
    let in_blobs = hub_blobs(&canon_dir).is_some_and(|b| canon.parent() == Some(b.as_path()));
    if !canon.starts_with(&canon_dir) && !in_blobs {
        return Err(err("it resolves outside the model's directory"));
    }
    if let Some(l) = length
        && l != nbytes
    {
        return Err(err("length does not match the tensor's dims"));
    }
    // A FIFO or a device would block or never end: regular files only.
    let mut f = crate::fsutil::open_regular_file(&canon).map_err(|e| err(&e.to_string()))?;
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

/// The `blobs` folder of the Hub repository whose snapshot holds the
/// (canonical) directory `dir`: `dir` must be
/// `<hub>/models--<owner>--<name>/snapshots/<40-hex commit>[/<folders>]`,
/// and `blobs` a real folder of that same repository (not a link elsewhere).
fn hub_blobs(dir: &Path) -> Option<std::path::PathBuf> {
    let snapshot = dir.ancestors().find(|a| {
        let commit = a.file_name().and_then(|n| n.to_str());
        let snapshots = a.parent().and_then(Path::file_name);
        let repo = a
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        commit.is_some_and(crate::config::is_commit)
            && snapshots.is_some_and(|s| s == "snapshots")
            && repo.is_some_and(|r| r.len() > "models--".len() && r.starts_with("models--"))
    })?;
    let repo = snapshot.parent()?.parent()?;
    let blobs = repo.join("blobs");
    let canon = blobs.canonicalize().ok()?;
    (canon == blobs).then_some(canon)
}

#[cfg(test)]
mod external_tests {
    use super::*;
    use std::path::PathBuf;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lele-ext-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    fn external(location: &str) -> proto::TensorProto {
        let kv = |k: &str, v: &str| proto::StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v.into()),
        };
        proto::TensorProto {
            name: Some("w".into()),
            dims: vec![2],
            data_type: Some(1),
            data_location: Some(proto::tensor_proto::DataLocation::External as i32),
            external_data: vec![kv("location", location), kv("length", "8")],
            ..Default::default()
        }
    }

    fn load(dir: &Path, location: &str) -> Result<Tensor> {
        tensor_from_proto(&external(location), dir, &Limits::default())
    }

    /// A Hub-like tree: `<root>/<repo>/snapshots/<commit>/<sub>` with
    /// `w.bin` linked to `<root>/<repo>/blobs/b`; returns the model's folder.
    #[cfg(unix)]
    fn hub_tree(root: &Path, repo: &str, commit: &str, sub: &str) -> PathBuf {
        let repo = root.join(repo);
        std::fs::create_dir_all(repo.join("blobs")).unwrap();
        std::fs::write(repo.join("blobs/b"), [0u8; 8]).unwrap();
        let dir = repo.join("snapshots").join(commit).join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        let up = sub.split('/').filter(|s| !s.is_empty()).count() + 2;
        std::os::unix::fs::symlink(
            PathBuf::from("../".repeat(up)).join("blobs/b"),
            dir.join("w.bin"),
        )
        .unwrap();
        dir
    }

    #[cfg(unix)]
    #[test]
    fn hub_snapshots_reach_their_own_blobs_only() {
        let root = scratch("hub");
        // The real layout, the model at the top or in a folder.
        let top = hub_tree(&root.join("a"), "models--o--n", COMMIT, "");
        assert!(
            load(&top, "w.bin").is_ok(),
            "{:?}",
            load(&top, "w.bin").err()
        );
        let nested = hub_tree(&root.join("b"), "models--o--n", COMMIT, "onnx");
        assert!(load(&nested, "w.bin").is_ok());
        // Any folder named `blobs` two levels up is not enough.
        for (name, repo, commit) in [
            ("c", "evil", COMMIT),
            ("d", "models--o--n", "main"),
            ("e", "models--", COMMIT),
        ] {
            let dir = hub_tree(&root.join(name), repo, commit, "");
            let e = load(&dir, "w.bin").unwrap_err().to_string();
            assert!(
                e.contains("outside the model's directory"),
                "{repo} {commit}: {e}"
            );
        }
        // A snapshot of one repository cannot read another's blobs.
        let other = hub_tree(&root.join("f"), "models--o--n", COMMIT, "");
        let x = root.join("f/models--x--y");
        std::fs::create_dir_all(x.join("blobs")).unwrap();
        std::fs::write(x.join("blobs/b"), [0u8; 8]).unwrap();
        std::os::unix::fs::symlink("../../../models--x--y/blobs/b", other.join("x.bin")).unwrap();
        assert!(load(&other, "x.bin").is_err());
        // `blobs` itself a link out of the repository.
        let g = root.join("g");
        let dir = hub_tree(&g, "models--o--n", COMMIT, "");
        let blobs = g.join("models--o--n/blobs");
        std::fs::rename(&blobs, g.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(g.join("elsewhere"), &blobs).unwrap();
        assert!(load(&dir, "w.bin").is_err());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn fifo_external_data_is_refused_without_blocking() {
        let dir = scratch("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("w.bin"))
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let e = load(&dir, "w.bin").unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
        std::os::unix::fs::symlink("/dev/zero", dir.join("z.bin")).unwrap();
        // Outside the folder anyway, but a device inside one is refused too.
        assert!(load(&dir, "z.bin").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
