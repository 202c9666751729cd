//! An LSTM's time steps split over threads by hidden units.
//!
//! Each step multiplies the hidden state by the whole of `R` (`4H × H`, 4
//! MiB per direction at `H = 512`), which does not fit a core's L2, so one
//! direction per thread streams `R` from L3 or memory at every step.
//! Split by hidden units instead, each thread reads the same rows of `R`
//! (its units' four gates) at every step: half of a direction's `R` on two
//! threads, 2 MiB, which stays in that core's L2 from one step to the
//! next (one step's `1×1024×512` product, warm, runs well over twice as
//! fast as a `1×2048×512` one). The directions run one after the
//! other; the threads meet at a barrier after every step, the new hidden
//! state written into a second buffer while the old one is read.
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{DirState, Lstm, OP, Shared, seq_len};
use crate::error::KernelError;
use crate::ops::rnn::{alternates, state_times_rt};
use crate::threads::SharedMut;

/// Fewest hidden units worth splitting: below this a direction's `R`
/// (`16·H²` bytes, 1 MiB at 256) fits L2 anyway and the barriers cost more
/// than they save.
const MIN_HIDDEN: usize = 256;
/// Fewest hidden units per thread.
const MIN_UNITS: usize = 64;

#[cfg(test)]
std::thread_local! {
    /// Set by tests to force this many tasks (1: the other paths).
    pub(crate) static FORCE_TASKS: core::cell::Cell<Option<usize>> =
        const { core::cell::Cell::new(None) };
}

/// Times [`Lstm::run_split`] ran its tasks (tests check the path ran).
#[cfg(test)]
pub(crate) static SPLIT_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Tasks to split `d`'s steps into (1: do not split).
pub(super) fn split_tasks(d: &super::Dims) -> usize {
    let threads = crate::threads::num_threads();
    #[cfg(test)]
    if let Some(t) = FORCE_TASKS.with(|f| f.get()) {
        return t.min(threads);
    }
    if threads < 2 || d.hidden < MIN_HIDDEN {
        1
    } else {
        threads.min(d.hidden / MIN_UNITS)
    }
}

/// Tasks meeting after every step. A task that fails (an error, or a
/// panic while it holds a [`FailOnUnwind`]) sets `failed`, which releases
/// the others.
struct StepBarrier {
    arrived: AtomicUsize,
    failed: AtomicBool,
}

impl StepBarrier {
    /// Arrives, then waits until `target` arrivals in all; `false` when a
    /// task failed instead.
    fn sync(&self, target: usize) -> bool {
        // Release: this task's writes of the step are seen by whoever
        // observes the count (Acquire below).
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        loop {
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
            if self.arrived.load(Ordering::Acquire) >= target {
                return true;
            }
            spins = spins.saturating_add(1);
            if spins > 4096 {
                // A descheduled peer: let it run.
                std::thread::yield_now();
            } else {
                core::hint::spin_loop();
            }
        }
    }
}

/// Sets the flag when dropped during a panic (so the other tasks stop
/// waiting for this one).
struct FailOnUnwind<'a>(&'a AtomicBool);

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// One direction's buffers, shared by the tasks (each writes only its own
/// hidden units of them).
#[derive(Clone, Copy)]
struct DirBufs {
    pre: SharedMut,
    act: SharedMut,
    h: SharedMut,
    h_next: SharedMut,
    c: SharedMut,
    hist: SharedMut,
}

impl Lstm {
    /// Every direction's steps, split over `tasks` threads by hidden units
    /// (see the module docs). `None` when the threads could not be had
    /// together (nothing was run); else the first error, if any.
    pub(super) fn run_split(
        &self,
        sh: &Shared<'_, '_>,
        states: &mut [Option<DirState<'_>>; 2],
        tasks: usize,
        gs: &mut [f32],
    ) -> Option<Result<(), KernelError>> {
        let h = sh.d.hidden;
        let per = h.div_ceil(tasks).next_multiple_of(16);
        let bufs = states.each_mut().map(|st| {
            st.as_mut().map(|st| DirBufs {
                pre: SharedMut::new(st.pre),
                act: SharedMut::new(st.act),
                h: SharedMut::new(st.h),
                h_next: SharedMut::new(st.h_next),
                c: SharedMut::new(st.c),
                hist: SharedMut::new(st.hist),
            })
        });
        let barrier = StepBarrier {
            arrived: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        };
        let first_err: Mutex<Option<KernelError>> = Mutex::new(None);
        let ran = crate::threads::run_together(tasks, gs, &|t, s| {
            let _guard = FailOnUnwind(&barrier.failed);
            let units = (t * per).min(h)..((t + 1) * per).min(h);
            // SAFETY: task t writes only hidden units `units` of each
            // buffer (disjoint from every other task's), reads the shared
            // hidden state only between barriers at which no task writes
            // it, and `run_together` joins every task before the borrows
            // of `states` end.
            let res = unsafe { self.split_task(sh, &bufs, units, tasks, &barrier, s) };
            if let Err(e) = res {
                barrier.failed.store(true, Ordering::Release);
                let mut slot = first_err.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
        });
        if !ran {
            return None;
        }
        #[cfg(test)]
        SPLIT_RUNS.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Some(Err(e));
        }
        if barrier.failed.load(Ordering::Acquire) {
            // A task panicked (the worker caught it): its units are stale.
            return Some(Err(KernelError::Buffer { op: OP }));
        }
        // After an odd number of steps the last state is in `h_next`.
        if sh.d.seq % 2 == 1 {
            for st in states.iter_mut().flatten() {
                st.h.copy_from_slice(st.h_next);
            }
        }
        Some(Ok(()))
    }

    /// Hidden units `units` of every direction, step by step, meeting the
    /// other `tasks - 1` tasks at `barrier` after each step. `s` is GEMM
    /// scratch.
    ///
    /// # Safety
    /// No other task writes these units of the buffers in `bufs`, and the
    /// others follow the same protocol: between two barriers the hidden
    /// state of the step's parity (`h` on even steps, `h_next` on odd) is
    /// only read, the other one only written.
    unsafe fn split_task(
        &self,
        sh: &Shared<'_, '_>,
        bufs: &[Option<DirBufs>; 2],
        units: core::ops::Range<usize>,
        tasks: usize,
        barrier: &StepBarrier,
        s: &mut [f32],
    ) -> Result<(), KernelError> {
        let d = sh.d;
        let (h, g4) = (d.hidden, 4 * d.hidden);
        let (j0, n) = (units.start, units.len());
        let ldx = d.dirs * g4;
        let mut round = 0;
        for (dir, b) in bufs.iter().enumerate() {
            let Some(b) = b else { continue };
            let reverse = self.direction == super::Direction::Reverse || dir == 1;
            let rd = &sh.r[dir * g4 * h..(dir + 1) * g4 * h];
            let pd = sh.peep.map(|p| &p[dir * 3 * h..(dir + 1) * 3 * h]);
            let peep = pd.map(|p| [0, 1, 2].map(|q| &p[q * h + j0..q * h + j0 + n]));
            for step in 0..d.seq {
                let (src, dst) = if step % 2 == 0 {
                    (b.h, b.h_next)
                } else {
                    (b.h_next, b.h)
                };
                for bi in 0..d.batch {
                    let len = seq_len(sh.inputs, d, bi, OP)?;
                    // SAFETY: the whole state of the step's parity is only
                    // read until the next barrier (the caller's contract).
                    let hb_src =
                        unsafe { core::slice::from_raw_parts(src.as_ptr().add(bi * h), h) };
                    // SAFETY: row bi's gates at units j0..j0 + n: this
                    // task's alone (the caller's contract).
                    let gate = |g: usize| unsafe { b.pre.range(bi * g4 + g * h + j0, n) };
                    let mut pre = [gate(0), gate(1), gate(2), gate(3)];
                    // This task's rows of R (its units' rows of each gate's
                    // block), back to front on alternate steps when they
                    // outgrow L2 (see `alternates`).
                    let reverse_r = alternates(step, 16 * n * h);
                    for q in 0..4 {
                        let g = if reverse_r { 3 - q } else { q };
                        let p = &mut pre[g];
                        if step < len {
                            let row = d.x_row(if reverse { len - 1 - step } else { step }, bi);
                            p.copy_from_slice(&sh.xw[row * ldx + dir * g4 + g * h + j0..][..n]);
                        } else {
                            p.fill(0.0);
                        }
                        let rows = &rd[(g * h + j0) * h..(g * h + j0 + n) * h];
                        state_times_rt(reverse_r, 1, n, h, hb_src, rows, 1.0, p, n, s)?;
                    }
                    // SAFETY: units j0..j0 + n of the next state, the cell
                    // state and the gate scratch: this task's alone.
                    let hb = unsafe { dst.range(bi * h + j0, n) };
                    if step >= len {
                        // Past this entry's end the state carries over.
                        hb.copy_from_slice(&hb_src[j0..j0 + n]);
                        continue;
                    }
                    let act = |g: usize| unsafe { b.act.range(g * h + j0, n) };
                    let cb = unsafe { b.c.range(bi * h + j0, n) };
                    self.cell_gates(peep, pre, [act(0), act(1), act(2), act(3)], hb, cb);
                    let t = if reverse { len - 1 - step } else { step };
                    // SAFETY: as above, in the history of step t.
                    unsafe { b.hist.range((t * d.batch + bi) * h + j0, n) }.copy_from_slice(hb);
                }
                round += 1;
                if !barrier.sync(round * tasks) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
