//! Reading files that a user, a model or a download named: only regular
//! files (after following links), never more than a bound. A FIFO, a
//! device or a directory is an error instead of a hang (`/dev/zero`,
//! `mkfifo`) or a runaway allocation.
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{BuildError, Result};

fn io_err(path: &Path, source: std::io::Error) -> BuildError {
    BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn not_regular(path: &Path, what: &str) -> BuildError {
    io_err(
        path,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({what})"),
        ),
    )
}

/// What kind of non-regular file `meta` describes.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a plain file"
}

/// Opens `path` for reading if it is a regular file (links followed).
/// The type is checked before opening (opening a FIFO would block) and
/// again on the opened handle.
pub fn open_regular_file(path: &Path) -> Result<File> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, kind(&meta)));
    }
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let meta = f.metadata().map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, kind(&meta)));
    }
    Ok(f)
}

/// The bytes of the regular file `path`, refusing files of more than
/// `max_bytes` (checked on the size and while reading, so a file that
/// grows meanwhile cannot exceed it either).
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let f = open_regular_file(path)?;
    let len = f.metadata().map_err(|e| io_err(path, e))?.len();
    let too_big = |n: u64| {
        BuildError::Limit(format!(
            "{} has {n} bytes or more, the limit is {max_bytes}",
            path.display()
        ))
    };
    if len > max_bytes {
        return Err(too_big(len));
    }
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // One byte more than allowed tells a file that grew from one at the limit.
    let cap = max_bytes.saturating_add(1);
    f.take(cap)
        .read_to_end(&mut out)
        .map_err(|e| io_err(path, e))?;
    if out.len() as u64 > max_bytes {
        return Err(too_big(out.len() as u64));
    }
    Ok(out)
}

/// [`read_regular_file`] as UTF-8 text.
pub fn read_regular_text(path: &Path, max_bytes: u64) -> Result<String> {
    let bytes = read_regular_file(path, max_bytes)?;
    String::from_utf8(bytes).map_err(|_| {
        io_err(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        )
    })
}

/// Largest `model.toml` read (they are a few hundred bytes).
pub const MAX_TOML_BYTES: u64 = 16 << 20;

/// Writes a file atomically (temp file + rename), skipping identical content.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() == bytes.len() as u64
        && std::fs::read(path).ok().as_deref() == Some(bytes)
    {
        return Ok(());
    }
    replace_file(path, bytes)
}

/// Writes a file atomically (temp file + rename), always (a new
/// modification time even for the same content).
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|source| BuildError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Gives a file lele created in one of its caches a fixed old
/// modification time (2000-01-01). Cargo rebuilds a crate when a file its
/// macro read is newer than the start of the build; a model downloaded or
/// weights written *during* the build would otherwise cost a second,
/// useless rebuild. Safe because these files are content-addressed: new
/// content gets a new name (or comes with a changed, tracked model.toml).
pub fn backdate(path: &Path) -> Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let io = |source| BuildError::Io {
        path: target.clone(),
        source,
    };
    let f = File::options().write(true).open(&target).map_err(io)?;
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(946_684_800);
    f.set_modified(when).map_err(io)
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `$XDG_CACHE_HOME`, else `~/.cache`, else the temp dir.
pub fn user_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("lele-fsutil-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_regular_files_within_the_bound() {
        let d = scratch("ok");
        let p = d.join("a.txt");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_regular_file(&p, 5).unwrap(), b"hello");
        assert!(matches!(
            read_regular_file(&p, 4),
            Err(BuildError::Limit(_))
        ));
        assert_eq!(read_regular_text(&p, 100).unwrap(), "hello");
        let e = read_regular_file(&d, 100).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        let e = read_regular_file(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("device"), "{e}");
        let d = scratch("fifo");
        let fifo = d.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let e = read_regular_file(&fifo, 100).unwrap_err().to_string();
            assert!(e.contains("FIFO"), "{e}");
            // Through a symlink too.
            let link = d.join("link");
            std::os::unix::fs::symlink(&fifo, &link).unwrap();
            assert!(open_regular_file(&link).is_err());
            // The readers of user-named files: the model, model.toml.
            let limits = crate::onnx::Limits::default();
            assert!(crate::onnx::read_model_proto(&link, &limits).is_err());
            assert!(crate::onnx::load(&fifo).is_err());
            assert!(crate::config::ModelToml::load(&fifo).is_err());
            let opts = crate::driver::CompileOptions::new("M");
            assert!(crate::driver::compile_toml(&fifo, &opts).is_err());
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
