//! `url = "https://..."`: downloads into `<cache root>/downloads/`, in a
//! folder named by the pinned hash (or by the URL when unpinned), with the
//! extra files fetched from the same URL folder.
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::http::{self, NetLimits};
use super::{FetchOptions, Fetched, check_pin, file_sha256, lock_file};
use crate::config::ExtraFile;
use crate::error::{BuildError, Result};
use crate::fsutil::hex;

/// The download folder of a URL model.
pub fn download_dir(root: &Path, url: &str, pinned: Option<&str>) -> PathBuf {
    let name = match pinned {
        Some(p) => format!("sha256-{}", p.trim().to_ascii_lowercase()),
        None => format!("url-{}", &hex(&Sha256::digest(url.as_bytes()))[..16]),
    };
    root.join("downloads").join(name)
}

/// The file name a URL is stored under (its last path segment, cleaned).
fn file_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or("");
    let clean: String = last
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    if clean.is_empty() || clean.starts_with('.') {
        "model.onnx".into()
    } else {
        clean
    }
}

/// `name` resolved against the folder of `url`.
fn sibling_url(url: &str, name: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    match path.rfind('/') {
        Some(i) => format!("{}/{name}", &path[..i]),
        None => format!("{path}/{name}"),
    }
}

pub(super) fn resolve(
    url: &str,
    pinned: Option<&str>,
    files: &[ExtraFile],
    opts: &FetchOptions,
    limits: &NetLimits,
) -> Result<Fetched> {
    let dir = download_dir(&opts.root(), url, pinned);
    let _lock = lock_file(&dir.join(".lock"))?;
    // Under the lock, a partial file is what a killed process left.
    http::sweep_parts(&dir);
    let model = dir.join(file_name(url));
    let sha256 = fetch_one(url, &model, pinned, opts, limits)?;
    let mut out = Vec::new();
    for f in files {
        let dest = dir.join(f.name());
        if let Some(sub) = dest.parent() {
            http::sweep_parts(sub);
        }
        fetch_one(&sibling_url(url, f.name()), &dest, f.sha256(), opts, limits)?;
        out.push(dest);
    }
    Ok(Fetched {
        model,
        sha256,
        files: out,
    })
}

/// Makes `dest` hold the (pinned) content of `url`; returns its sha256.
/// A cached file is re-hashed; a wrong one is replaced (online) or an
/// error (offline).
fn fetch_one(
    url: &str,
    dest: &Path,
    pinned: Option<&str>,
    opts: &FetchOptions,
    limits: &NetLimits,
) -> Result<String> {
    if dest.is_file() {
        let have = file_sha256(dest, &opts.root())?;
        if check_pin(url, pinned, &have).is_ok() {
            return Ok(have);
        }
        // Content that does not match the pin is not a cache entry.
        std::fs::remove_file(dest).map_err(|source| BuildError::Io {
            path: dest.to_path_buf(),
            source,
        })?;
    }
    if opts.offline {
        return Err(BuildError::Offline(format!(
            "{url} is not in the download cache ({}) and this build is offline",
            dest.display()
        )));
    }
    download(url, dest, pinned, opts.progress, limits)
}

fn fetch_err(url: &str, msg: impl std::fmt::Display) -> BuildError {
    BuildError::Fetch {
        what: url.to_string(),
        msg: msg.to_string(),
    }
}

fn download(
    url: &str,
    dest: &Path,
    pinned: Option<&str>,
    progress: bool,
    limits: &NetLimits,
) -> Result<String> {
    let client = http::client(limits, reqwest::redirect::Policy::limited(10))?;
    let mut resp = client
        .get(url)
        .send()
        .map_err(|e| fetch_err(url, http::request_error(&e, limits)))?;
    let status = resp.status();
    if !status.is_success() {
        let hint = match status.as_u16() {
            401 | 403 => " (the server wants credentials)",
            404 => " (no such file)",
            _ => "",
        };
        return Err(fetch_err(url, format!("HTTP {status}{hint}")));
    }
    let dir = dest.parent().unwrap_or(Path::new("."));
    let total = resp.content_length();
    let got = http::receive(
        &mut resp,
        total,
        dir,
        url,
        &file_name(url),
        limits,
        progress,
    )?;
    // Dropping `got.part` on an error removes the partial file.
    check_pin(url, pinned, &got.sha256)?;
    got.part.commit(dest)?;
    crate::fsutil::backdate(dest)?;
    Ok(got.sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name("https://h/a/b/model.onnx?x=1"), "model.onnx");
        assert_eq!(file_name("https://h/a/"), "model.onnx");
        assert_eq!(file_name("https://h/a/..%2F"), "model.onnx");
        assert_eq!(
            sibling_url("https://h/a/model.onnx?dl=1", "model.onnx_data"),
            "https://h/a/model.onnx_data"
        );
    }
}
