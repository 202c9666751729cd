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

#[lele::model("tests/models/ppocr_v4_det.toml")]
struct OcrV4Det;

#[lele::model("tests/models/ppocr_v4_rec.toml")]
struct OcrV4Rec;

#[lele::model("tests/models/ppocr_v6_det.toml")]
struct OcrV6Det;

#[lele::model("tests/models/ppocr_v6_rec.toml")]
struct OcrV6Rec;

#[lele::model("tests/models/yolov8n.toml")]
struct Yolo;

#[lele::model("tests/models/minilm_l3.toml")]
struct MiniLm;

#[lele::model("tests/models/asr_whisper80.toml")]
struct Whisper80;

#[lele::model("tests/models/gtcrn.toml")]
struct Gtcrn;

#[lele::model("tests/models/gemma3_270m.toml")]
struct Gemma3;

/// Allocations made by `f`.
fn allocations(mut f: impl FnMut()) -> usize {
    let before = ALLOCS.load(Ordering::SeqCst);
    f();
    ALLOCS.load(Ordering::SeqCst) - before
}

/// One test (the counter is process-wide, so no other test may run
/// concurrently in this binary): every model of the benchmark set that has
/// a `model.toml` here, each called once to warm up, then three times
/// counted. Inputs are loaded before counting.
#[test]
fn forward_does_not_allocate() {
    let mut counts: Vec<(&str, usize)> = Vec::new();

    let cls = OcrCls::new().unwrap();
    let mut ws = cls.workspace();
    let x = load("ppocr_cls_48x192", 0, "in", 0);
    cls.forward(&mut ws, view(&x)).unwrap();
    counts.push((
        "ppocr_cls",
        allocations(|| {
            for _ in 0..3 {
                let out = cls.forward(&mut ws, view(&x)).unwrap();
                assert_eq!(out.save_infer_model_scale_0_tmp_1.dims(), &[1, 2]);
            }
        }),
    ));

    let vad = SileroVad::new().unwrap();
    let mut ws = vad.workspace();
    let input = load("silero_vad_16k", 0, "in", 0);
    let state = load("silero_vad_16k", 0, "in", 1);
    let sr = load("silero_vad_16k", 0, "in", 2);
    vad.forward(&mut ws, view(&input), view(&state), view(&sr))
        .unwrap();
    counts.push((
        "silero_vad",
        allocations(|| {
            for _ in 0..3 {
                let out = vad
                    .forward(&mut ws, view(&input), view(&state), view(&sr))
                    .unwrap();
                assert_eq!(out.output.dims(), &[1, 1]);
            }
        }),
    ));

    macro_rules! one_input {
        ($name:literal, $model:ty, $case:literal) => {{
            let m = <$model>::new().unwrap();
            let mut ws = m.workspace();
            let x = load($case, 0, "in", 0);
            m.forward(&mut ws, view(&x)).unwrap();
            counts.push((
                $name,
                allocations(|| {
                    for _ in 0..3 {
                        m.forward(&mut ws, view(&x)).unwrap();
                    }
                }),
            ));
        }};
    }
    one_input!("ppocr_v4_det", OcrV4Det, "ppocr_v4_det_640x640");
    one_input!("ppocr_v4_rec", OcrV4Rec, "ppocr_v4_rec_48x320");
    one_input!("ppocr_v6_det", OcrV6Det, "ppocr_v6_det_480x480");
    one_input!("ppocr_v6_rec", OcrV6Rec, "ppocr_v6_rec_48x320");
    one_input!("yolov8n", Yolo, "yolov8n_640");

    let lm = MiniLm::new().unwrap();
    let mut ws = lm.workspace();
    let ids = load("minilm_l3_seq128", 0, "in", 0);
    let mask = load("minilm_l3_seq128", 0, "in", 1);
    lm.forward(&mut ws, view(&ids), view(&mask)).unwrap();
    counts.push((
        "minilm_l3",
        allocations(|| {
            for _ in 0..3 {
                lm.forward(&mut ws, view(&ids), view(&mask)).unwrap();
            }
        }),
    ));

    // The STFT with its build-time plan, the vectors of frames in scratch.
    let mel = Whisper80::new().unwrap();
    let mut ws = mel.workspace();
    let wave = load("asr_whisper80_10s", 0, "in", 0);
    let lens = load("asr_whisper80_10s", 0, "in", 1);
    mel.forward(&mut ws, view(&wave), view(&lens)).unwrap();
    counts.push((
        "whisper80 features",
        allocations(|| {
            for _ in 0..3 {
                mel.forward(&mut ws, view(&wave), view(&lens)).unwrap();
            }
        }),
    ));

    // One streaming hop of the GTCRN enhancer.
    let gtcrn = Gtcrn::new().unwrap();
    let mut ws = gtcrn.workspace();
    let hop: Vec<_> = (0..4).map(|i| load("gtcrn_200", 0, "in", i)).collect();
    let run = |ws: &mut _| {
        gtcrn
            .forward(
                ws,
                view(&hop[0]),
                view(&hop[1]),
                view(&hop[2]),
                view(&hop[3]),
            )
            .unwrap();
    };
    run(&mut ws);
    counts.push((
        "gtcrn hop",
        allocations(|| {
            for _ in 0..3 {
                run(&mut ws);
            }
        }),
    ));

    // Decoding with the language model: each step feeds a token through
    // the cache and samples the next (greedy, then top-k/top-p/min-p with
    // a repetition penalty), after a prompt that sized the buffers.
    let gemma = Gemma3::new().unwrap();
    for config in [
        lele::llm::SamplerConfig::greedy(),
        lele::llm::SamplerConfig {
            repetition_penalty: 1.1,
            ..lele::llm::SamplerConfig::default()
        },
    ] {
        let mut generator = lele::llm::Generator::new(&gemma, config).unwrap();
        let mut token = generator.prefill(&[2, 818, 5279, 529, 7001, 563]).unwrap();
        counts.push((
            "gemma3 decoding step",
            allocations(|| {
                for _ in 0..3 {
                    token = generator.step(token).unwrap();
                }
            }),
        ));
    }

    // lele::audio: everything but the constructors.
    {
        use lele::audio::*;
        let x: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.01).sin() * 0.3).collect();
        let window = Window::SqrtHann.build(Symmetry::Periodic, 512);
        let mut stft = StreamingStft::new(512, 256, &window).unwrap();
        let mut istft = StreamingIstft::new(512, 256, &window, &window).unwrap();
        let mut spec = vec![Complex::ZERO; 257];
        let mut out = vec![0.0; 256];
        let mut resampler = Resampler::new(44_100, 16_000).unwrap();
        let mut resampled = vec![0.0; resampler.max_output(x.len())];
        let mut whisper = WhisperLogMel::new(80).unwrap();
        let mut whisper_out = vec![0.0; 80 * WhisperLogMel::FRAMES];
        let mut kaldi = KaldiFbank::new(KaldiOptions::default()).unwrap();
        let mut kaldi_out = vec![0.0; kaldi.frames(x.len()) * 80];
        let mut nemo = NemoLogMel::new(80).unwrap();
        let mut nemo_out = vec![0.0; nemo.frames(x.len()) * 80];
        let mut stacked = vec![0.0; lfr_frames(kaldi.frames(x.len()), 6) * 7 * 80];
        let cmvn = Cmvn::new(vec![0.5; 560], vec![2.0; 560]).unwrap();
        counts.push((
            "lele::audio",
            allocations(|| {
                for hop in x.chunks_exact(256) {
                    stft.push(hop, &mut spec).unwrap();
                    istft.push(&spec, &mut out).unwrap();
                }
                resampler.process(&x, &mut resampled).unwrap();
                resampler.flush(&mut resampled).unwrap();
                whisper.compute(&x, &mut whisper_out).unwrap();
                kaldi.compute(&x, &mut kaldi_out).unwrap();
                nemo.compute(&x, &mut nemo_out).unwrap();
                lfr_stack(&kaldi_out, 80, 7, 6, &mut stacked).unwrap();
                cmvn.apply(&mut stacked).unwrap();
            }),
        ));
    }

    // With the thread pool: the workers and their buffers start here, so a
    // parallel forward allocates nothing either, and every output element
    // is the one the single-threaded run computed.
    let m = Yolo::new().unwrap();
    let mut ws = m.workspace();
    let x = load("yolov8n_640", 0, "in", 0);
    let single: Vec<f32> = m
        .forward(&mut ws, view(&x))
        .unwrap()
        .output0
        .data()
        .to_vec();
    assert_eq!(lele::kernels::threads::set_num_threads(2), 2);
    m.forward(&mut ws, view(&x)).unwrap();
    counts.push((
        "yolov8n, 2 threads",
        allocations(|| {
            for _ in 0..3 {
                let out = m.forward(&mut ws, view(&x)).unwrap();
                assert!(
                    out.output0
                        .data()
                        .iter()
                        .zip(&single)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "2 threads changed YOLOv8n's output"
                );
            }
        }),
    ));
    lele::kernels::threads::set_num_threads(1);

    let allocating: Vec<_> = counts.iter().filter(|(_, n)| *n > 0).collect();
    assert!(allocating.is_empty(), "forward allocated: {allocating:?}");
}
