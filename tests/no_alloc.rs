//! `forward` performs no heap allocation after the first call, checked with
//! a counting global allocator.
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{load, view};

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

#[lele::model("tests/models/ppocr_cls.toml")]
struct OcrCls;

#[lele::model("tests/models/silero_vad.toml")]
struct SileroVad;

#[test]
fn forward_does_not_allocate() {
    let cls = OcrCls::new().unwrap();
    let mut cls_ws = cls.workspace();
    let x = load("ppocr_cls_48x192", 0, "in", 0);
    cls.forward(&mut cls_ws, view(&x)).unwrap();

    let vad = SileroVad::new().unwrap();
    let mut vad_ws = vad.workspace();
    let input = load("silero_vad_16k", 0, "in", 0);
    let state = load("silero_vad_16k", 0, "in", 1);
    let sr = load("silero_vad_16k", 0, "in", 2);
    vad.forward(&mut vad_ws, view(&input), view(&state), view(&sr))
        .unwrap();

    let before = ALLOCS.load(Ordering::SeqCst);
    for _ in 0..3 {
        let out = cls.forward(&mut cls_ws, view(&x)).unwrap();
        assert_eq!(out.save_infer_model_scale_0_tmp_1.dims(), &[1, 2]);
        let out = vad
            .forward(&mut vad_ws, view(&input), view(&state), view(&sr))
            .unwrap();
        assert_eq!(out.output.dims(), &[1, 1]);
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(
        after - before,
        0,
        "forward allocated {} times",
        after - before
    );
}
