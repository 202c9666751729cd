//! An optional pool of worker threads that GEMM (and so Conv, MatMul, Gemm)
//! splits its work over.
//!
//! Off by default: with one thread (the default) every kernel runs on the
//! caller's thread, as real-time users want. [`set_num_threads`] starts the
//! workers once; each worker owns the packing buffers it needs, allocated
//! when it starts, so a parallel call allocates nothing. Work is split by
//! output columns and every output element is computed by the same sequence
//! of operations whatever the thread count, so results are bit-identical.
//!
//! One parallel region runs at a time: a kernel that finds the pool busy
//! (another model running on another thread) runs on its own thread.
//! Between regions, idle workers spin for a short while (300 µs) before
//! sleeping, so back-to-back kernels do not pay a thread wake-up each.
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

/// Floats of private scratch each worker owns: a kernel splitting its work
/// over the pool fits each task's scratch in it. Sized for the GEMM's
/// largest block (`ops::gemm` asserts that it fits), 1.1 MiB.
pub(crate) const WORKER_SCRATCH: usize = 286_720;

/// Most threads [`set_num_threads`] accepts.
pub const MAX_THREADS: usize = 64;

/// A job: run task `i` with a scratch buffer.
type Job<'a> = &'a (dyn Fn(usize, &mut [f32]) + Sync);

/// The job pointer with its lifetime erased (see [`run_on_pool`]).
#[derive(Clone, Copy)]
struct ErasedJob(*const (dyn Fn(usize, &mut [f32]) + Sync));
// SAFETY: the pointee is `Sync`, and `run_on_pool` keeps it alive until
// every worker has stopped using it.
unsafe impl Send for ErasedJob {}

/// The pool's shared state. A parallel region is handed over through
/// atomics: the caller sets the job, opens its generation and publishes it;
/// a worker that sees the new generation counts itself in `active` and
/// then joins only if the generation is still open. The caller closes it
/// after running out of tasks and waits for `active` to drain, so no worker
/// reads the job after the region ends. No lock is contended on that path
/// (`job`'s is taken once by each side); `sleep`, `work` and `done` only
/// serve a worker idle long enough to sleep and a caller whose workers
/// outlast its spin. It replaced a handover under one state mutex, which
/// made each region markedly slower to start, back to back and even more
/// so after a stretch of serial work.
struct Pool {
    /// The current job; set by the caller holding `region` before it opens
    /// the generation (see [`run_on_pool`]).
    job: Mutex<Option<ErasedJob>>,
    /// Task count of the current job.
    tasks: AtomicUsize,
    /// Next task index of the current job.
    next: AtomicUsize,
    /// Generation of the latest job; workers run each generation once.
    published: AtomicU64,
    /// Generation workers may still join (0: none).
    open: AtomicU64,
    /// Workers counted in the current generation (joining or computing).
    active: AtomicUsize,
    /// Workers asleep (or about to be) on `work`.
    sleepers: AtomicUsize,
    /// The caller is asleep (or about to be) on `done`.
    caller_waiting: AtomicBool,
    /// Guards the sleep/wake handshakes on `work` and `done`.
    sleep: Mutex<()>,
    work: Condvar,
    done: Condvar,
    /// Workers started so far.
    workers: Mutex<usize>,
    /// Serializes parallel regions (`try_lock`: a busy pool means "run
    /// serially").
    region: Mutex<()>,
}

/// How long an idle worker, and a caller waiting for the workers, spin
/// before sleeping. Waking a sleeping thread can take tens of microseconds
/// (on a VM), as long as a small kernel's whole parallel region (small
/// depthwise layers ran slower on two threads than on one); a model's
/// kernels follow each other within microseconds, so a spinning worker
/// catches the next one.
const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

/// Spins until `done()` or [`SPIN`] has passed; returns whether `done()`
/// held.
fn spin_until(done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < SPIN {
        for _ in 0..64 {
            if done() {
                return true;
            }
            core::hint::spin_loop();
        }
    }
    false
}

/// Threads kernels may use (1 = no pool).
static THREADS: AtomicUsize = AtomicUsize::new(1);
static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| Pool {
        job: Mutex::new(None),
        tasks: AtomicUsize::new(0),
        next: AtomicUsize::new(0),
        published: AtomicU64::new(0),
        open: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        sleepers: AtomicUsize::new(0),
        caller_waiting: AtomicBool::new(false),
        sleep: Mutex::new(()),
        work: Condvar::new(),
        done: Condvar::new(),
        workers: Mutex::new(0),
        region: Mutex::new(()),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking task is caught in the worker, so poisoning only means a
    // kernel panicked earlier; the state itself stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets how many threads kernels use (1 to [`MAX_THREADS`]; the caller's
/// thread counts as one). Starts the missing workers; never stops any (a
/// lower count just leaves them idle). Returns the count now in effect.
pub fn set_num_threads(n: usize) -> usize {
    let n = n.clamp(1, MAX_THREADS);
    if n > 1 {
        let p = pool();
        let mut started = lock(&p.workers);
        while *started < n - 1 {
            let spawned = std::thread::Builder::new()
                .name(format!("lele-worker-{}", *started))
                .spawn(move || worker(pool()));
            if spawned.is_err() {
                break;
            }
            *started += 1;
        }
        let n = n.min(*started + 1);
        THREADS.store(n, Ordering::Relaxed);
        return n;
    }
    THREADS.store(1, Ordering::Relaxed);
    1
}

/// Threads kernels currently use.
pub fn num_threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

fn worker(p: &'static Pool) {
    let mut scratch = vec![0f32; WORKER_SCRATCH];
    let mut seen = 0u64;
    loop {
        // A new job usually follows soon: watch for it before sleeping.
        if !spin_until(|| p.published.load(Ordering::Acquire) != seen) {
            // Counted before the check under the lock, so a caller that
            // publishes after the check sees a sleeper and wakes it.
            p.sleepers.fetch_add(1, Ordering::SeqCst);
            let mut guard = lock(&p.sleep);
            while p.published.load(Ordering::SeqCst) == seen {
                guard = p.work.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            drop(guard);
            p.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        let generation = p.published.load(Ordering::Acquire);
        seen = generation;
        // Count in first, then check the generation is still open: the
        // caller closes it first, then waits for the count to drain, so
        // either it waits for this worker or this worker sees it closed.
        p.active.fetch_add(1, Ordering::SeqCst);
        if p.open.load(Ordering::SeqCst) == generation {
            // The caller set the job before opening the generation, and
            // replaces it only after `active` drains.
            let job = *lock(&p.job);
            let tasks = p.tasks.load(Ordering::Relaxed);
            if let Some(ErasedJob(f)) = job {
                // SAFETY: `run_on_pool` does not return (so the job stays
                // alive) until `active` is back to zero, which needs this
                // worker's decrement below.
                let f = unsafe { &*f };
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    loop {
                        let i = p.next.fetch_add(1, Ordering::Relaxed);
                        if i >= tasks {
                            break;
                        }
                        f(i, &mut scratch);
                    }
                }));
            }
        }
        // The last one out wakes a caller that stopped spinning (it set
        // the flag before its check under the lock, so one of the two
        // sees the other).
        if p.active.fetch_sub(1, Ordering::SeqCst) == 1 && p.caller_waiting.load(Ordering::SeqCst) {
            let _guard = lock(&p.sleep);
            p.done.notify_all();
        }
    }
}

/// Runs `f(i, scratch)` for every `i in 0..tasks`, on the pool's workers and
/// the caller's thread (which uses `own_scratch`); returns when all are
/// done. Runs everything on the caller's thread when there is one thread,
/// one task, or the pool is busy.
pub(crate) fn run(tasks: usize, own_scratch: &mut [f32], f: Job<'_>) {
    if tasks <= 1 || num_threads() <= 1 {
        for i in 0..tasks {
            f(i, own_scratch);
        }
        return;
    }
    let p = pool();
    let Ok(_region) = p.region.try_lock() else {
        for i in 0..tasks {
            f(i, own_scratch);
        }
        return;
    };
    run_on_pool(p, tasks, own_scratch, f);
}

/// Runs `f(i, scratch)` for every `i in 0..tasks`, each task on a thread of
/// its own and all of them at once, so tasks may wait for one another
/// (each call runs on the caller's thread or a distinct worker); returns
/// `true` when done. Returns `false` without running anything when that
/// cannot be promised: fewer threads than tasks, or the pool busy (a
/// parallel region already running, e.g. the caller is itself a task).
pub(crate) fn run_together(tasks: usize, own_scratch: &mut [f32], f: Job<'_>) -> bool {
    if tasks < 2 || tasks > num_threads() {
        return false;
    }
    let p = pool();
    let Ok(_region) = p.region.try_lock() else {
        return false;
    };
    // Every worker takes at most one task at a time and `num_threads() - 1`
    // workers exist, idle (the previous region waited for them): the
    // caller and `tasks - 1` of them each claim one, and none returns for
    // another before all have started when tasks wait for each other.
    run_on_pool(p, tasks, own_scratch, f);
    true
}

/// The parallel part of [`run`]: publishes the job, takes tasks on the
/// caller's thread, waits for the workers. The caller holds `p.region`.
fn run_on_pool(p: &Pool, tasks: usize, own_scratch: &mut [f32], f: Job<'_>) {
    // SAFETY (lifetime erasure): the generation is closed and every worker
    // has left it (`active == 0`) before this function returns, so no
    // worker dereferences the job after `f`'s borrow ends.
    let erased = ErasedJob(unsafe { core::mem::transmute::<Job<'_>, Job<'static>>(f) as *const _ });
    *lock(&p.job) = Some(erased);
    p.tasks.store(tasks, Ordering::Relaxed);
    p.next.store(0, Ordering::Relaxed);
    let generation = p.published.load(Ordering::Relaxed) + 1;
    p.open.store(generation, Ordering::SeqCst);
    p.published.store(generation, Ordering::SeqCst);
    if p.sleepers.load(Ordering::SeqCst) > 0 {
        let _guard = lock(&p.sleep);
        p.work.notify_all();
    }
    loop {
        let i = p.next.fetch_add(1, Ordering::Relaxed);
        if i >= tasks {
            break;
        }
        f(i, own_scratch);
    }
    // Workers that have not joined yet must not pick the job up late.
    p.open.store(0, Ordering::SeqCst);
    if !spin_until(|| p.active.load(Ordering::SeqCst) == 0) {
        // A worker is still computing a long task: sleep until the last
        // one leaves.
        p.caller_waiting.store(true, Ordering::SeqCst);
        let mut guard = lock(&p.sleep);
        while p.active.load(Ordering::SeqCst) != 0 {
            guard = p.done.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        drop(guard);
        p.caller_waiting.store(false, Ordering::SeqCst);
    }
}

/// Fewest elements an elementwise map splits over the threads.
pub(crate) const PARALLEL_MIN_ELEMS: usize = 1 << 15;

/// Runs `f(start, chunk)` over `y` cut into contiguous chunks (`chunk` is
/// `y[start..start + chunk.len()]`), one per thread, or over all of `y` on
/// the caller's thread when there is one thread or `y` is shorter than
/// [`PARALLEL_MIN_ELEMS`]. For elementwise maps whose per-element result
/// does not depend on where a chunk starts.
pub(crate) fn for_chunks<T: Send>(y: &mut [T], f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let (n, threads) = (y.len(), num_threads());
    if threads <= 1 || n < PARALLEL_MIN_ELEMS {
        f(0, y);
        return;
    }
    let chunk = n.div_ceil(threads).next_multiple_of(64);
    let shared = SharedMut::new(y);
    run(n.div_ceil(chunk), &mut [], &|t, _| {
        let start = t * chunk;
        // SAFETY: task t alone takes elements start..start + len, and `run`
        // returns after every task, while `y` is still borrowed.
        let part = unsafe { shared.range(start, chunk.min(n - start)) };
        f(start, part);
    });
}

/// Runs `f(first_row, rows)` over `y` cut at row boundaries (rows of
/// `row_len` elements) into one contiguous part per thread, or over all of
/// `y` on the caller's thread when there is one thread, one row, or fewer
/// than [`PARALLEL_MIN_ELEMS`] elements. For row-wise operations whose
/// result for a row does not depend on which part it is in.
pub(crate) fn for_rows<T: Send>(y: &mut [T], row_len: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let threads = num_threads();
    let rows = y.len().checked_div(row_len).unwrap_or(0);
    if threads <= 1 || rows <= 1 || y.len() < PARALLEL_MIN_ELEMS {
        f(0, y);
        return;
    }
    let per = rows.div_ceil(threads);
    let n = y.len();
    let shared = SharedMut::new(y);
    run(rows.div_ceil(per), &mut [], &|t, _| {
        let start = t * per * row_len;
        // SAFETY: task t alone takes rows t·per.. (elements start..start +
        // len), and `run` returns after every task, while `y` is borrowed.
        let part = unsafe { shared.range(start, (per * row_len).min(n - start)) };
        f(t * per, part);
    });
}

/// Runs `f(start, part)` over `y` cut into one contiguous part per thread
/// at multiples of `unit` elements, each part at least `min_units` units,
/// or over all of `y` on the caller's thread when that leaves one part.
/// For kernels whose work per unit is large (a row of a product).
pub(crate) fn for_parts<T: Send>(
    y: &mut [T],
    unit: usize,
    min_units: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let unit = unit.max(1);
    let units = y.len() / unit;
    let parts = (units / min_units.max(1)).min(num_threads());
    if parts <= 1 {
        f(0, y);
        return;
    }
    let per = units.div_ceil(parts) * unit;
    let n = y.len();
    let shared = SharedMut::new(y);
    run(n.div_ceil(per), &mut [], &|t, _| {
        let start = t * per;
        // SAFETY: task t alone takes elements start..start + len, and `run`
        // returns after every task, while `y` is still borrowed.
        let part = unsafe { shared.range(start, per.min(n - start)) };
        f(start, part);
    });
}

/// A mutable buffer that tasks write disjoint parts of.
pub(crate) struct SharedMut<T = f32> {
    ptr: *mut T,
    len: usize,
}
// Copy without requiring `T: Copy` (it is a pointer and a length).
impl<T> Clone for SharedMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedMut<T> {}
// SAFETY: tasks only take disjoint ranges (see `range`), and `run` joins
// them before the buffer's borrow ends.
unsafe impl<T: Send> Send for SharedMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// Shares `buf` for the duration of one `run`.
    pub(crate) fn new(buf: &mut [T]) -> Self {
        SharedMut {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// The buffer's first element, for tasks that write strided regions
    /// through raw pointers (each task only its own elements).
    pub(crate) fn as_ptr(self) -> *mut T {
        self.ptr
    }

    /// Elements `start..start + len` (panics when out of bounds).
    ///
    /// # Safety
    /// No other task accesses any of these elements while the slice lives,
    /// and the buffer outlives it (`'a` is chosen by the caller).
    pub(crate) unsafe fn range<'a>(self, start: usize, len: usize) -> &'a mut [T] {
        assert!(
            start <= self.len && len <= self.len - start,
            "range outside the buffer"
        );
        // SAFETY: in bounds (checked) and exclusive (the caller's contract).
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Serializes the tests that change the thread count.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

/// Sets `n` threads for a test and checks the count in effect: `n` where
/// the platform starts threads, 1 where it cannot (wasm32 without atomics,
/// whose kernels then run on the caller's thread alone).
#[cfg(test)]
pub(crate) fn set_test_threads(n: usize) {
    let expected = if cfg!(all(target_family = "wasm", not(target_feature = "atomics"))) {
        1
    } else {
        n
    };
    assert_eq!(set_num_threads(n), expected, "threads in effect");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_task_runs_once_on_any_thread_count() {
        let _serial = lock(&TEST_LOCK);
        for threads in [1, 2, 3] {
            set_test_threads(threads);
            for tasks in [0, 1, 2, 7, 64] {
                let hits: Vec<AtomicU64> = (0..tasks).map(|_| AtomicU64::new(0)).collect();
                let mut own = vec![0f32; 4];
                for _ in 0..20 {
                    run(tasks, &mut own, &|i, s| {
                        assert!(!s.is_empty());
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 20),
                    "{threads} {tasks}"
                );
            }
        }
        set_num_threads(1);
    }

    /// Tasks that wait for each other all finish (each on its own thread);
    /// more tasks than threads, or a call from inside a task, run nothing.
    #[test]
    #[cfg_attr(
        all(target_family = "wasm", not(target_feature = "atomics")),
        ignore = "needs threads, which this target cannot start"
    )]
    fn tasks_run_together_or_not_at_all() {
        let _serial = lock(&TEST_LOCK);
        let mut own = vec![0f32; 4];
        assert!(!run_together(2, &mut own, &|_, _| unreachable!()));
        for threads in [2, 3] {
            set_test_threads(threads);
            for _ in 0..50 {
                // Every task waits until all have arrived, twice.
                let arrived = AtomicUsize::new(0);
                let ran = run_together(threads, &mut own, &|_, _| {
                    for round in 1..=2 {
                        arrived.fetch_add(1, Ordering::AcqRel);
                        while arrived.load(Ordering::Acquire) < round * threads {
                            core::hint::spin_loop();
                        }
                    }
                });
                assert!(ran);
                assert_eq!(arrived.load(Ordering::Relaxed), 2 * threads);
            }
            assert!(!run_together(threads + 1, &mut own, &|_, _| unreachable!()));
            let inner = AtomicUsize::new(0);
            run(2, &mut own, &|_, s| {
                if !run_together(2, s, &|_, _| unreachable!()) {
                    inner.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert_eq!(inner.load(Ordering::Relaxed), 2);
        }
        set_num_threads(1);
    }

    /// Both sleeping handshakes: workers idle past the spin time sleep and
    /// must be woken for the next region; a caller whose worker computes
    /// past the spin time sleeps and must be woken when it finishes. The
    /// worker's writes are visible when `run` returns.
    #[test]
    #[cfg_attr(
        all(target_family = "wasm", not(target_feature = "atomics")),
        ignore = "needs threads, which this target cannot start"
    )]
    fn sleeping_workers_and_caller_are_woken() {
        let _serial = lock(&TEST_LOCK);
        for threads in [2, 3] {
            set_test_threads(threads);
            let mut own = vec![0f32; 4];
            let caller = std::thread::current().id();
            for round in 0..6u64 {
                // Longer than the spin: idle workers are asleep by now.
                std::thread::sleep(SPIN * 3);
                let done = AtomicU64::new(0);
                let on_workers = AtomicUsize::new(0);
                let arrived = AtomicUsize::new(0);
                let ran = run_together(threads, &mut own, &|_, _| {
                    // All tasks at once, so the sleeping workers took some.
                    arrived.fetch_add(1, Ordering::AcqRel);
                    while arrived.load(Ordering::Acquire) < threads {
                        core::hint::spin_loop();
                    }
                    if std::thread::current().id() != caller {
                        // Outlast the caller's spin so it sleeps.
                        std::thread::sleep(SPIN * 3);
                        on_workers.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(round + 1, Ordering::Relaxed);
                });
                assert!(ran);
                // (Workers started for a higher count may join too.)
                assert!(on_workers.load(Ordering::Relaxed) >= threads - 1);
                assert_eq!(done.load(Ordering::Relaxed), threads as u64 * (round + 1));
            }
        }
        set_num_threads(1);
    }
}
