//! A Hugging Face Hub stand-in on 127.0.0.1 for tests: serves
//! `/{owner}/{name}/resolve/{revision}/{file}` the way the Hub does (commit
//! and etag headers, byte ranges), plus plain files under `/files/`, and can
//! refuse callers without a token or cut a connection mid-file, and serves
//! hostile answers: none at all, an endless body, a stall mid-body, a
//! `Content-Length` that lies, path-like commit ids and etags.
#![allow(dead_code)]
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

/// One repository.
#[derive(Clone, Default)]
pub struct MockRepo {
    /// Files by path.
    pub files: HashMap<String, Vec<u8>>,
    /// Bearer token required to read it.
    pub token: Option<String>,
    /// Answer every file of the repository this way instead.
    pub hostile: Option<Hostile>,
    /// The `x-repo-commit` header to send instead of the real commit.
    pub commit: Option<String>,
    /// The etag to send instead of the file's sha256.
    pub etag: Option<String>,
    /// Answer with a 302 to `{redirect}/files/{file}` (as the Hub does for
    /// LFS files), the commit and `x-linked-etag` on the redirect only.
    pub redirect: Option<String>,
}

/// A misbehaving answer.
#[derive(Clone, Debug)]
pub enum Hostile {
    /// Reads the request and never answers.
    Silent,
    /// Answers 200 without a length and streams zeros until the client goes.
    Endless,
    /// Sends the headers and the first half of `body`, then stops sending.
    Stall(Vec<u8>),
    /// Announces `len` bytes in `Content-Length` and sends `body`.
    Announce {
        /// The announced length.
        len: u64,
        /// What is sent.
        body: Vec<u8>,
    },
}

#[derive(Default)]
struct State {
    repos: HashMap<String, MockRepo>,
    plain: HashMap<String, Vec<u8>>,
    hostile: HashMap<String, Hostile>,
    cut: bool,
    log: Vec<String>,
}

/// The running server.
pub struct MockHub {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: std::net::SocketAddr,
}

/// Lower-case hex sha256.
pub fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

impl MockHub {
    /// Starts a server.
    pub fn start() -> MockHub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &st);
                });
            }
        });
        MockHub {
            endpoint: format!("http://{addr}"),
            state,
            stop,
            thread: Some(thread),
            addr,
        }
    }

    /// Adds (or replaces) a repository.
    pub fn add_repo(&self, id: &str, repo: MockRepo) {
        self.state
            .lock()
            .unwrap()
            .repos
            .insert(id.to_string(), repo);
    }

    /// Serves `bytes` at `/files/{name}`.
    pub fn add_plain(&self, name: &str, bytes: Vec<u8>) {
        self.state
            .lock()
            .unwrap()
            .plain
            .insert(name.to_string(), bytes);
    }

    /// Answers `/files/{name}` with `how`.
    pub fn add_hostile(&self, name: &str, how: Hostile) {
        self.state
            .lock()
            .unwrap()
            .hostile
            .insert(name.to_string(), how);
    }

    /// Cut every body of more than one byte in half from now on.
    pub fn set_cut(&self, cut: bool) {
        self.state.lock().unwrap().cut = cut;
    }

    /// Request lines received so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    /// Stops the server; the port refuses connections afterwards.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let (status, extra, body, cut, hostile) = {
        let mut st = state.lock().unwrap();
        st.log.push(format!("{method} {path}"));
        if headers.contains_key("authorization") {
            st.log.push(format!("AUTH {path}"));
        }
        let cut = st.cut;
        let (status, extra, body) = route(&st, &path, &headers);
        (status, extra, body, cut, hostile_for(&st, &path))
    };
    if let Some(how) = hostile {
        return misbehave(conn, how);
    }
    respond(
        conn,
        &method,
        status,
        extra,
        body,
        headers.get("range"),
        cut,
    )
}

type Route = (u16, Vec<(String, String)>, Vec<u8>);

fn hostile_for(st: &State, path: &str) -> Option<Hostile> {
    if let Some(name) = path.strip_prefix("/files/") {
        return st.hostile.get(name).cloned();
    }
    let segs: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if segs.len() != 5 {
        return None;
    }
    st.repos
        .get(&format!("{}/{}", segs[0], segs[1]))
        .and_then(|r| r.hostile.clone())
}

/// Headers of a hostile answer (a Hub-like commit and etag included).
fn hostile_head(len: Option<u64>) -> String {
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nconnection: close\r\nx-repo-commit: {COMMIT}\r\netag: \"{}\"\r\n",
        "e".repeat(64)
    );
    if let Some(n) = len {
        head.push_str(&format!("content-length: {n}\r\n"));
    }
    head.push_str("\r\n");
    head
}

fn misbehave(mut conn: TcpStream, how: Hostile) -> std::io::Result<()> {
    // Never longer than this, so a test that fails does not hang.
    let patience = std::time::Duration::from_secs(30);
    match how {
        Hostile::Silent => std::thread::sleep(patience),
        Hostile::Endless => {
            conn.write_all(hostile_head(None).as_bytes())?;
            let chunk = vec![0u8; 1 << 16];
            let start = std::time::Instant::now();
            while start.elapsed() < patience {
                conn.write_all(&chunk)?;
            }
        }
        Hostile::Stall(body) => {
            conn.write_all(hostile_head(Some(body.len() as u64)).as_bytes())?;
            conn.write_all(&body[..body.len() / 2])?;
            conn.flush()?;
            std::thread::sleep(patience);
        }
        Hostile::Announce { len, body } => {
            conn.write_all(hostile_head(Some(len)).as_bytes())?;
            conn.write_all(&body)?;
            conn.flush()?;
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
    }
    Ok(())
}

fn route(st: &State, path: &str, headers: &HashMap<String, String>) -> Route {
    let not_found = |code: &str| {
        (
            404,
            vec![("x-error-code".into(), code.into())],
            b"not found".to_vec(),
        )
    };
    if let Some(name) = path.strip_prefix("/files/") {
        return match st.plain.get(name) {
            Some(b) => (200, Vec::new(), b.clone()),
            None => not_found("EntryNotFound"),
        };
    }
    // /{owner}/{name}/resolve/{revision}/{file...}
    let segs: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if segs.len() != 5 || segs[2] != "resolve" {
        return not_found("RepoNotFound");
    }
    let id = format!("{}/{}", segs[0], segs[1]);
    let Some(repo) = st.repos.get(&id) else {
        return not_found("RepoNotFound");
    };
    if let Some(tok) = &repo.token
        && headers.get("authorization") != Some(&format!("Bearer {tok}"))
    {
        return (
            401,
            vec![("x-error-code".into(), "GatedRepo".into())],
            b"unauthorized".to_vec(),
        );
    }
    let Some(bytes) = repo.files.get(segs[4]) else {
        return not_found("EntryNotFound");
    };
    let sha = repo.etag.clone().unwrap_or_else(|| sha256_hex(bytes));
    let commit = repo.commit.clone().unwrap_or_else(|| COMMIT.into());
    if let Some(to) = &repo.redirect {
        return (
            302,
            vec![
                ("x-repo-commit".into(), commit),
                ("x-linked-etag".into(), format!("\"{sha}\"")),
                ("location".into(), format!("{to}/files/{}", segs[4])),
            ],
            Vec::new(),
        );
    }
    (
        200,
        vec![
            ("x-repo-commit".into(), commit),
            ("x-linked-etag".into(), format!("\"{sha}\"")),
            ("etag".into(), format!("\"{sha}\"")),
            ("accept-ranges".into(), "bytes".into()),
        ],
        bytes.clone(),
    )
}

fn respond(
    mut conn: TcpStream,
    method: &str,
    status: u16,
    mut extra: Vec<(String, String)>,
    body: Vec<u8>,
    range: Option<&String>,
    cut: bool,
) -> std::io::Result<()> {
    let total = body.len();
    let (status, body) = match range.and_then(|r| r.strip_prefix("bytes=")) {
        Some(r) if status == 200 => {
            let (a, b) = r.split_once('-').unwrap_or((r, ""));
            let start: usize = a.parse().unwrap_or(0).min(total);
            let end: usize = b.parse().map(|e: usize| e + 1).unwrap_or(total).min(total);
            extra.push((
                "content-range".into(),
                format!("bytes {start}-{}/{total}", end.saturating_sub(1)),
            ));
            (206, body[start..end.max(start)].to_vec())
        }
        _ => (status, body),
    };
    let reason = match status {
        200 => "OK",
        206 => "Partial Content",
        401 => "Unauthorized",
        302 => "Found",
        _ => "Not Found",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    if method != "HEAD" {
        let n = if cut && body.len() > 1 {
            body.len() / 2
        } else {
            body.len()
        };
        conn.write_all(&body[..n])?;
    }
    conn.flush()?;
    conn.shutdown(std::net::Shutdown::Both)
}
