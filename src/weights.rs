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
    ///
    /// On Linux their pages are mapped in at once ([`prefault`]): the
    /// first `forward` reads every weight, and taking its page faults one
    /// by one cost PP-OCRv6 rec's first output (process start to the end
    /// of the first `forward`, 21 MB of weights) about 0.9 ms more, 20.97
    /// against 20.09 ms (medians of ten alternated runs).
    pub fn embedded(bytes: &'static [u8]) -> Weights {
        prefault(bytes);
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
        // Mapped in at once where the system can (the first `forward`
        // reads every weight; see [`Weights::embedded`]).
        let mut options = memmap2::MmapOptions::new();
        options.populate();
        // SAFETY: the mapping is read-only and private to this process; the
        // file is a build artifact that lele writes atomically (temp file and
        // rename) and never modifies in place, so its contents cannot change
        // under the mapping while the model is alive.
        let map = unsafe { options.map(&file) }
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

/// Asks the system to map in the pages of `bytes` now rather than on first
/// touch (Linux 5.14 and later; elsewhere, or when refused, nothing
/// changes: the pages still come in as they are read).
fn prefault(bytes: &[u8]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = bytes.as_ptr();
        let skip = start.align_offset(PAGE);
        if skip >= bytes.len() {
            return;
        }
        let len = (bytes.len() - skip) / PAGE * PAGE;
        if len == 0 {
            return;
        }
        // SAFETY: the range is whole pages inside `bytes`, which stays
        // mapped for the program's life; MADV_POPULATE_READ only reads the
        // pages in (it changes no byte), and its result is advisory: an
        // error leaves the mapping as it was.
        unsafe {
            libc::madvise(
                start.add(skip).cast_mut().cast(),
                len,
                libc::MADV_POPULATE_READ,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}
