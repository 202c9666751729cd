//! The fuzzing loop shared by the targets: a seeded PRNG (every case is a
//! pure function of the seed and its index, so any case can be replayed
//! alone), a worker thread per target with a per-case time limit, panics
//! caught with a quiet hook and grouped by site, an allocator that counts
//! memory and refuses giant requests, greedy minimization of each finding
//! and the summary.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Once, mpsc};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- PRNG

/// SplitMix64: seeds the generator and derives per-case seeds.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// xorshift64*: small, fast, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(splitmix(seed) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------- memory

/// Counts live bytes and the peak, and refuses (returns null for) any single
/// request above [`MAX_ALLOC`]: the library either handles it (`try_reserve`)
/// or the process aborts, and either way the case is a finding.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static MAX_ALLOC: AtomicUsize = AtomicUsize::new(usize::MAX);
static GIANT: AtomicUsize = AtomicUsize::new(0);

fn refuse(size: usize) -> bool {
    if size <= MAX_ALLOC.load(Relaxed) {
        return false;
    }
    if GIANT.fetch_max(size, Relaxed) == 0 {
        // No allocation here: formatting integers into stderr does not
        // allocate. If the library does not handle the null, std aborts
        // next; `.current` names the case.
        let _ = std::io::stderr().write_fmt(format_args!(
            "fuzz: refused an allocation of {size} bytes (the case is a finding)\n"
        ));
    }
    true
}

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if refuse(new_size) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

// ---------------------------------------------------------------- config

fn env_num<T: std::str::FromStr>(key: &str) -> Option<T> {
    let v = std::env::var(key).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{key}={v:?} is not a number"),
    }
}

/// Settings from the environment.
pub struct Config {
    /// `LELE_FUZZ_SECS`: how long each target runs (a long run).
    pub secs: Option<f64>,
    /// `LELE_FUZZ_CPU_SECS`: how much CPU time (of this process) each
    /// target may use; on a shared machine this, not the wall clock, says
    /// how much fuzzing a run did.
    pub cpu_secs: Option<f64>,
    /// `LELE_FUZZ_CASES` (default [`DEFAULT_CASES`] when no time is
    /// given): how many cases each target runs. A count, not a time, makes
    /// the default run (CI's) the same cases on every machine.
    pub cases: Option<u64>,
    /// `LELE_FUZZ_SEED` (default fixed): the run's seed.
    pub seed: u64,
    /// `LELE_FUZZ_CASE`: replay this one case instead.
    pub case: Option<u64>,
    /// `LELE_FUZZ_TIMEOUT` (default 20): seconds one case may take.
    pub timeout: Duration,
    /// `LELE_FUZZ_MAX_ALLOC` (default 2 GiB): largest single allocation.
    pub max_alloc: usize,
    /// `LELE_FUZZ_MAX_CASE_BYTES` (default 3 GiB): largest growth of live
    /// memory during one case.
    pub max_case_bytes: usize,
    /// `LELE_FUZZ_VERBOSE=1`: list every outcome label, not the top 8.
    pub verbose: bool,
}

/// CPU seconds this process has used (user + system), from
/// `/proc/self/stat`; `None` where that file does not exist.
pub fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count from its `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // Linux reports these in USER_HZ ticks, which the kernel ABI fixes at
    // 100 per second on every architecture lele runs on.
    Some((utime + stime) / 100.0)
}

pub const DEFAULT_SEED: u64 = 0x1e1e_f022;

/// Cases per target when neither `LELE_FUZZ_SECS` nor `LELE_FUZZ_CASES` is
/// set (a few seconds each in a debug build).
pub const DEFAULT_CASES: u64 = 5000;

impl Config {
    pub fn from_env() -> Config {
        Config {
            secs: env_num("LELE_FUZZ_SECS"),
            cpu_secs: env_num("LELE_FUZZ_CPU_SECS"),
            cases: env_num("LELE_FUZZ_CASES"),
            seed: env_num("LELE_FUZZ_SEED").unwrap_or(DEFAULT_SEED),
            case: env_num("LELE_FUZZ_CASE"),
            timeout: Duration::from_secs_f64(env_num("LELE_FUZZ_TIMEOUT").unwrap_or(20.0)),
            max_alloc: env_num("LELE_FUZZ_MAX_ALLOC").unwrap_or(2 << 30),
            max_case_bytes: env_num("LELE_FUZZ_MAX_CASE_BYTES").unwrap_or(3 << 30),
            verbose: env_num::<u8>("LELE_FUZZ_VERBOSE").unwrap_or(0) != 0,
        }
    }
}

/// The seed of case `index` of a run seeded `seed`.
pub fn case_seed(seed: u64, index: u64) -> u64 {
    splitmix(seed ^ splitmix(index.wrapping_add(0x5eed)))
}

// ---------------------------------------------------------------- panics

thread_local! {
    static IN_CASE: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Installs (once) a hook that records, quietly, the site and message of
/// a panic inside a case, and defers to the default hook elsewhere.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CASE.with(Cell::get) {
                let site = info
                    .location()
                    .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                    .unwrap_or_else(|| "<unknown>".into());
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    s.to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "<non-string payload>".into()
                };
                // `LELE_FUZZ_BACKTRACE=1`: the stack in the message (for
                // panics inside std, whose site says little).
                let msg = if std::env::var_os("LELE_FUZZ_BACKTRACE").is_some() {
                    format!("{msg}\n{}", std::backtrace::Backtrace::force_capture())
                } else {
                    msg
                };
                LAST_PANIC.with(|p| *p.borrow_mut() = Some((site, msg)));
            } else {
                default(info);
            }
        }));
    });
}

// ---------------------------------------------------------------- targets

/// A fuzz target: how to generate a case from a PRNG, run it (any panic is
/// a finding), write it out and shrink it.
pub struct Target<I> {
    pub name: &'static str,
    pub generate: fn(&mut Rng) -> I,
    /// Runs one case; gets a scratch directory of its own; returns a label
    /// of how far it got (the run counts distinct labels, a rough measure
    /// of the paths reached: see [`label`]).
    pub exec: fn(&I, &Path) -> String,
    /// Writes the case under `stem` (adding extensions); returns the files.
    pub save: fn(&I, &Path) -> Vec<PathBuf>,
    /// Candidates one step smaller than the case.
    pub shrink: fn(&I) -> Vec<I>,
}

/// What one execution did.
#[derive(Clone, Debug)]
enum Outcome {
    Ok(String),
    Panic { site: String, msg: String },
}

struct Report {
    outcome: Outcome,
    elapsed: Duration,
    /// Growth of live memory over the case.
    grew: usize,
    /// A refused allocation, if any.
    giant: usize,
}

/// A thread that runs cases one at a time, so that the caller can give up
/// on one that hangs.
struct Worker<I> {
    tx: mpsc::Sender<I>,
    rx: mpsc::Receiver<Report>,
}

impl<I: Send + 'static> Worker<I> {
    fn spawn(name: &str, exec: fn(&I, &Path) -> String, scratch: PathBuf) -> Worker<I> {
        let (tx, job_rx) = mpsc::channel::<I>();
        let (report_tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("fuzz-{name}"))
            // What rustc gives a proc macro and the main thread of a
            // build script: a deep recursion is a finding, not hidden.
            .stack_size(8 << 20)
            .spawn(move || {
                while let Ok(input) = job_rx.recv() {
                    let base = LIVE.load(Relaxed);
                    PEAK.store(base, Relaxed);
                    GIANT.store(0, Relaxed);
                    let start = Instant::now();
                    IN_CASE.with(|c| c.set(true));
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        exec(&input, &scratch)
                    }));
                    IN_CASE.with(|c| c.set(false));
                    drop(input);
                    let outcome = match r {
                        Ok(label) => Outcome::Ok(label),
                        Err(_) => {
                            let (site, msg) = LAST_PANIC
                                .with(|p| p.borrow_mut().take())
                                .unwrap_or_else(|| ("<unknown>".into(), String::new()));
                            Outcome::Panic { site, msg }
                        }
                    };
                    let report = Report {
                        outcome,
                        elapsed: start.elapsed(),
                        grew: PEAK.load(Relaxed).saturating_sub(base),
                        giant: GIANT.load(Relaxed),
                    };
                    if report_tx.send(report).is_err() {
                        break;
                    }
                }
            })
            .expect("spawning the fuzz worker");
        Worker { tx, rx }
    }

    /// Runs one case; `None` if it took longer than `timeout` (the worker
    /// is then stuck and must be abandoned).
    fn run(&self, input: I, timeout: Duration) -> Option<Report> {
        self.tx.send(input).ok()?;
        self.rx.recv_timeout(timeout).ok()
    }
}

/// The workspace's `target/` directory, from the test binary's path
/// (`target/<profile>/deps/fuzz-<hash>`).
pub fn target_dir() -> PathBuf {
    if let Ok(d) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

#[derive(Debug)]
struct Finding {
    kind: String,
    site: String,
    msg: String,
    index: u64,
    occurrences: usize,
    files: Vec<PathBuf>,
    minimized: bool,
}

/// Whether a report is a finding, as `(kind, site, message)`.
fn classify(r: &Report, cfg: &Config) -> Option<(String, String, String)> {
    if let Outcome::Panic { site, msg } = &r.outcome {
        return Some(("panic".into(), site.clone(), msg.clone()));
    }
    if r.giant > 0 {
        return Some((
            "giant allocation".into(),
            format!("a request of {} bytes", r.giant),
            format!("more than LELE_FUZZ_MAX_ALLOC = {}", cfg.max_alloc),
        ));
    }
    if r.grew > cfg.max_case_bytes {
        return Some((
            "memory".into(),
            "live memory growth".into(),
            format!(
                "{} bytes during one case, more than LELE_FUZZ_MAX_CASE_BYTES = {}",
                r.grew, cfg.max_case_bytes
            ),
        ));
    }
    None
}

/// Runs a target for the configured time (or replays one case) and fails
/// the test if anything was found.
pub fn run<I: Clone + Send + 'static>(t: Target<I>) {
    install_hook();
    let cfg = Config::from_env();
    MAX_ALLOC.store(cfg.max_alloc, Relaxed);
    let findings_dir = std::env::var_os("LELE_FUZZ_FINDINGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("fuzz-findings"))
        .join(t.name);
    std::fs::create_dir_all(&findings_dir).expect("creating the findings directory");
    // In memory when possible: the compiler writes (and syncs) files.
    let tmp = Some(PathBuf::from("/dev/shm"))
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let scratch = tmp.join(format!("lele-fuzz-{}-{}", std::process::id(), t.name));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("creating the scratch directory");
    // `.current` names the case being run: if the process dies (an abort
    // on an allocation, a stack overflow), the next run says which.
    let marker = findings_dir.join(".current");
    if let Ok(last) = std::fs::read_to_string(&marker) {
        eprintln!(
            "fuzz {}: WARNING: an earlier run died (abort, stack overflow or kill) in case {}",
            t.name,
            last.trim()
        );
    }
    // Rewritten in place (one pwrite a case, fixed width).
    let marker_file = std::fs::File::create(&marker).expect("creating the case marker");
    let replay = |index: u64| {
        format!(
            "LELE_FUZZ_SEED={} LELE_FUZZ_CASE={index} cargo test --release -p lele-build \
             --test fuzz -- --nocapture {}",
            cfg.seed, t.name
        )
    };
    let mut worker = Worker::spawn(t.name, t.exec, scratch.clone());
    let start = Instant::now();
    let budget = cfg.secs.map(Duration::from_secs_f64);
    let cpu_start = process_cpu_secs().unwrap_or(0.0);
    let cpu_used = || process_cpu_secs().map_or(0.0, |c| c - cpu_start);
    let cases = match (cfg.cases, budget, cfg.cpu_secs) {
        (Some(n), _, _) => n,
        (None, Some(_), _) | (None, None, Some(_)) => u64::MAX,
        (None, None, None) => DEFAULT_CASES,
    };
    let mut findings: BTreeMap<String, Finding> = BTreeMap::new();
    let mut executions = 0u64;
    let mut labels: BTreeMap<String, u64> = BTreeMap::new();
    let mut generating = Duration::ZERO;
    let mut slowest = (Duration::ZERO, 0u64);
    let mut hungriest = (0usize, 0u64);
    let mut hung = false;
    let (first, last) = match cfg.case {
        Some(i) => (i, i + 1),
        None => (0, cases),
    };
    let mut index = first;
    while index < last
        && (cfg.case.is_some()
            || (budget.is_none_or(|b| start.elapsed() < b)
                && cfg.cpu_secs.is_none_or(|c| cpu_used() < c)))
    {
        let mut rng = Rng::new(case_seed(cfg.seed, index));
        let g0 = Instant::now();
        let input = (t.generate)(&mut rng);
        generating += g0.elapsed();
        {
            use std::os::unix::fs::FileExt;
            let line = format!("{index:>20} (seed {:>20})\n", cfg.seed);
            let _ = marker_file.write_at(line.as_bytes(), 0);
        }
        if cfg.case.is_some() {
            let files = (t.save)(&input, &findings_dir.join(format!("replay-{index}")));
            eprintln!("fuzz {}: replaying case {index}: {files:?}", t.name);
        }
        executions += 1;
        let Some(report) = worker.run(input.clone(), cfg.timeout) else {
            let files = (t.save)(&input, &findings_dir.join(format!("hang-{index}")));
            findings.insert(
                format!("hang {index}"),
                Finding {
                    kind: "hang".into(),
                    site: format!("no result after {:?}", cfg.timeout),
                    msg: String::new(),
                    index,
                    occurrences: 1,
                    files,
                    minimized: false,
                },
            );
            hung = true;
            break;
        };
        if let Outcome::Ok(label) = &report.outcome {
            *labels.entry(label.clone()).or_default() += 1;
        }
        if report.elapsed > slowest.0 {
            slowest = (report.elapsed, index);
        }
        if report.grew > hungriest.0 {
            hungriest = (report.grew, index);
        }
        if let Some((kind, site, msg)) = classify(&report, &cfg) {
            let key = format!("{kind} at {site}");
            if let Some(f) = findings.get_mut(&key) {
                f.occurrences += 1;
            } else {
                eprintln!("fuzz {}: case {index}: {kind} at {site}: {msg}", t.name);
                // Shrink while the same site keeps failing (bounded).
                let mut cur = input;
                let mut minimized = false;
                let shrink_start = Instant::now();
                let mut tries = 0;
                'outer: while shrink_start.elapsed() < Duration::from_secs(60) && tries < 4000 {
                    for cand in (t.shrink)(&cur) {
                        tries += 1;
                        if tries >= 4000 || shrink_start.elapsed() > Duration::from_secs(60) {
                            break 'outer;
                        }
                        let Some(r) = worker.run(cand.clone(), cfg.timeout) else {
                            // A smaller case hangs: keep it, the worker is
                            // gone.
                            cur = cand;
                            worker = Worker::spawn(t.name, t.exec, scratch.clone());
                            continue 'outer;
                        };
                        if let Some((k2, s2, _)) = classify(&r, &cfg)
                            && k2 == kind
                            && s2 == site
                        {
                            cur = cand;
                            minimized = true;
                            continue 'outer;
                        }
                    }
                    break;
                }
                let stem = findings_dir.join(format!("{}-{index}", kind.replace(' ', "-")));
                let files = (t.save)(&cur, &stem);
                findings.insert(
                    key,
                    Finding {
                        kind,
                        site,
                        msg,
                        index,
                        occurrences: 1,
                        files,
                        minimized,
                    },
                );
            }
        }
        index += 1;
    }
    let elapsed = start.elapsed();
    let cpu = cpu_used();
    if !hung {
        let _ = std::fs::remove_file(&marker);
        drop(worker);
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let panic_sites = findings.values().filter(|f| f.kind == "panic").count();
    let mut out = format!(
        "fuzz {}: {executions} executions in {:.1} s ({:.1} CPU-s; {:.0}/s, {:.0}% generating), seed {}; {} \
         findings, {panic_sites} distinct panic sites; {} distinct outcomes; slowest case {} \
         ({:.1} ms); largest memory growth {:.1} MiB (case {})\n",
        t.name,
        elapsed.as_secs_f64(),
        cpu,
        executions as f64 / elapsed.as_secs_f64().max(1e-9),
        100.0 * generating.as_secs_f64() / elapsed.as_secs_f64().max(1e-9),
        cfg.seed,
        findings.len(),
        labels.len(),
        slowest.1,
        slowest.0.as_secs_f64() * 1e3,
        hungriest.0 as f64 / (1 << 20) as f64,
        hungriest.1,
    );
    let mut top: Vec<(&String, &u64)> = labels.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    for (label, n) in top.iter().take(if cfg.verbose { usize::MAX } else { 8 }) {
        out.push_str(&format!("  {n:>9}  {label}\n"));
    }
    for f in findings.values() {
        out.push_str(&format!(
            "  {} at {} ({} times): {}\n    first in case {} — replay: {}\n    {} input: {:?}\n",
            f.kind,
            f.site,
            f.occurrences,
            f.msg.lines().next().unwrap_or(""),
            f.index,
            replay(f.index),
            if f.minimized { "minimized" } else { "original" },
            f.files
        ));
    }
    eprint!("{out}");
    if let Ok(mut log) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(findings_dir.join("runs.log"))
    {
        let _ = log.write_all(out.as_bytes());
    }
    assert!(findings.is_empty(), "fuzz {}: findings (see above)", t.name);
}

// ---------------------------------------------------------------- shrinking

/// Byte strings one step smaller: spans removed, halves first.
pub fn shrink_bytes(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut size = b.len() / 2;
    while size >= 1 {
        let mut off = 0;
        while off + size <= b.len() && out.len() < 256 {
            let mut c = b[..off].to_vec();
            c.extend_from_slice(&b[off + size..]);
            out.push(c);
            off += size.max(b.len() / 64).max(1);
        }
        size /= 2;
    }
    out
}

/// Texts one step smaller: lines removed, then spans of characters.
pub fn shrink_text(s: &str) -> Vec<String> {
    let lines: Vec<&str> = s.lines().collect();
    let mut out = Vec::new();
    if lines.len() > 1 {
        for i in 0..lines.len() {
            let mut l = lines.clone();
            l.remove(i);
            out.push(l.join("\n"));
        }
    }
    let chars: Vec<char> = s.chars().collect();
    let mut size = chars.len() / 2;
    while size >= 1 {
        let mut off = 0;
        while off + size <= chars.len() && out.len() < 256 {
            out.push(chars[..off].iter().chain(&chars[off + size..]).collect());
            off += size.max(chars.len() / 64).max(1);
        }
        size /= 2;
    }
    out
}

/// Writes `bytes` to `stem.ext`.
pub fn save_as(stem: &Path, ext: &str, bytes: &[u8]) -> PathBuf {
    let p = stem.with_extension(ext);
    std::fs::write(&p, bytes).expect("writing a finding");
    p
}

/// A label for a result: `ok`, or the error's message with numbers and
/// quoted names blanked and cut to its first words, so that errors of one
/// kind share a label.
pub fn label<T, E: std::fmt::Display>(stage: &str, r: &Result<T, E>) -> String {
    let Err(e) = r else {
        return format!("{stage}: ok");
    };
    let full = e.to_string();
    // toml's errors: the description under the source excerpt.
    let msg = if full.contains("TOML parse error") {
        full.lines()
            .skip(1)
            .filter(|l| !l.contains('|'))
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        full
    };
    let mut out = String::new();
    let mut quoted = false;
    let mut last_digit = false;
    for c in msg.chars() {
        if c == '`' || c == '"' {
            quoted = !quoted;
            if quoted {
                out.push_str("`_`");
            }
            continue;
        }
        if quoted {
            continue;
        }
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('#');
            }
            last_digit = true;
            continue;
        }
        last_digit = false;
        out.push(c);
    }
    let words: Vec<&str> = out.split_whitespace().take(9).collect();
    format!("{stage}: {}", words.join(" "))
}
