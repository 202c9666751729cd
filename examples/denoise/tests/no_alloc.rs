//! The denoisers' processing calls allocate nothing after construction
//! (checked with a counting global allocator): GTCRN's `process_hop` and
//! DeepFilterNet3's `process_block`.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use lele_example_denoise::Denoiser;
use lele_example_denoise::dfn3::Dfn3;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates every call to the system allocator unchanged and only
// counts allocations.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::SeqCst);
    f();
    ALLOCS.load(Ordering::SeqCst) - before
}

/// One test: the counter is process-wide.
#[test]
fn processing_calls_do_not_allocate() {
    let signal: Vec<f32> = (0..48_000).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect();

    let mut gtcrn = Denoiser::new().unwrap();
    let mut out = [0.0f32; Denoiser::HOP];
    gtcrn
        .process_hop(&signal[..Denoiser::HOP], &mut out)
        .unwrap();
    let n = allocations(|| {
        for hop in signal.chunks_exact(Denoiser::HOP).take(100) {
            gtcrn.process_hop(hop, &mut out).unwrap();
        }
    });
    assert_eq!(n, 0, "GTCRN process_hop allocated {n} times");

    let mut dfn3 = Dfn3::new().unwrap();
    let block = &signal[..Dfn3::HOP * 20];
    let mut enhanced = vec![0.0f32; block.len()];
    dfn3.process_block(block, &mut enhanced).unwrap();
    let n = allocations(|| {
        for _ in 0..3 {
            dfn3.process_block(block, &mut enhanced).unwrap();
        }
    });
    assert_eq!(n, 0, "DeepFilterNet3 process_block allocated {n} times");
}
