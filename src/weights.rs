//! Where a generated model's weights live: embedded in the binary or
//! memory-mapped from a file.
use std::path::Path;

use crate::Error;

/// The weights blob of a model.
pub struct Weights {
    inner: Inner,
}

enum Inner {
    Static(&'static [u8]),
    Mapped(memmap2::Mmap),
}

impl Weights {
    /// Weights embedded with `include_bytes!` (64-byte aligned by the caller).
    pub fn embedded(bytes: &'static [u8]) -> Weights {
        Weights {
            inner: Inner::Static(bytes),
        }
    }

    /// Memory-maps a weights file, checking its length.
    pub fn map(path: &Path, expected_len: usize) -> Result<Weights, Error> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::Weights(format!("{}: {e}", path.display())))?;
        let len = file
            .metadata()
            .map_err(|e| Error::Weights(format!("{}: {e}", path.display())))?
            .len();
        if len != expected_len as u64 {
            return Err(Error::Weights(format!(
                "{} has {len} bytes, the model expects {expected_len}",
                path.display()
            )));
        }
        if len == 0 {
            return Ok(Weights::embedded(&[]));
        }
        // SAFETY: the mapping is read-only and private to this process; the
        // file is a build artifact that lele writes atomically (temp file and
        // rename) and never modifies in place, so its contents cannot change
        // under the mapping while the model is alive.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| Error::Weights(format!("{}: {e}", path.display())))?;
        Ok(Weights {
            inner: Inner::Mapped(map),
        })
    }

    /// `relative` resolved against the directory of the running executable
    /// (absolute paths are returned as they are).
    pub fn beside_executable(relative: &str) -> Result<std::path::PathBuf, Error> {
        let rel = Path::new(relative);
        if rel.is_absolute() {
            return Ok(rel.to_path_buf());
        }
        let exe = std::env::current_exe()
            .map_err(|e| Error::Weights(format!("cannot locate the executable: {e}")))?;
        let dir = exe.parent().unwrap_or(Path::new("."));
        Ok(dir.join(rel))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.inner {
            Inner::Static(b) => b,
            Inner::Mapped(m) => m,
        }
    }
}
