#!/usr/bin/env python3
"""Reference fixtures for lele's tests: `cargo xtask fixtures` runs this.

For every case, seeded inputs are fed to the zoo model with onnxruntime
(CPUExecutionProvider, one thread) and everything is written as

    <out>/<case>/case.json                 model, inputs and outputs (names, dtypes, shapes)
    <out>/<case>/step<k>/in_<i>.npy        input i of step k (graph inputs in ONNX order,
                                           initializers excluded)
    <out>/<case>/step<k>/out_<j>.npy       output j of step k (graph outputs in ONNX order)
    <out>/<case>/stamp.json                what the files were made from

Arrays keep the exact ONNX dtypes (float32, int64, ...). Inputs come from
numpy's default_rng seeded per case (crc32 of the case name), so every run
produces the same inputs. A case is skipped when its stamp matches (model
sha256, this script's sha256, onnxruntime and numpy versions) and its files
exist; `--force` regenerates. Each case is written to a temporary directory
that is renamed into place, so an interrupted run never leaves a half case.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
import zlib

import numpy as np
import onnx
import onnxruntime as ort

# Graph optimizations stay off so the reference computes the graph exactly as
# written, node by node (no fusions or constant folding changing rounding).
GRAPH_OPT = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
GRAPH_OPT_NAME = "disable_all"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SCRIPT_SHA256 = sha256_file(os.path.abspath(__file__))


# ---------------------------------------------------------------- inputs


def uniform(rng, shape, lo, hi):
    """float32 uniform in [lo, hi)."""
    return (lo + (hi - lo) * rng.random(shape, dtype=np.float32)).astype(np.float32)


def speech_like(rng, sr, n, chunk, silent_chunks):
    """A deterministic speech-like signal: a voiced harmonic source with a
    wandering pitch, two formant-like tones, a syllable-rate envelope, seeded
    noise, peak amplitude ~0.3; the chunks in `silent_chunks` are near-silent
    (seeded noise of amplitude ~1e-3)."""
    t = np.arange(n, dtype=np.float64) / sr
    f0 = 125.0 + 25.0 * np.sin(2 * np.pi * 3.0 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    voiced = sum(a * np.sin(k * phase) for k, a in enumerate([1.0, 0.6, 0.4, 0.25, 0.15], start=1))
    formants = 0.35 * np.sin(2 * np.pi * 700.0 * t) + 0.2 * np.sin(2 * np.pi * 1150.0 * t + 0.5)
    x = voiced + formants * (0.5 + 0.5 * np.sin(2 * np.pi * 9.0 * t))
    x /= np.max(np.abs(x))
    envelope = 0.65 + 0.35 * np.sin(2 * np.pi * 5.0 * t)
    x = 0.3 * envelope * x + 0.01 * rng.standard_normal(n)
    for k in silent_chunks:
        x[k * chunk : (k + 1) * chunk] = 1e-3 * rng.standard_normal(chunk)
    return x.astype(np.float32)


def silero(sr, context, chunk, steps=6):
    """Streaming Silero VAD: each step feeds `context` samples of the previous
    input followed by `chunk` new samples; the state is carried over."""

    def gen(rng):
        signal = speech_like(rng, sr, steps * chunk, chunk, silent_chunks=(2, 5))
        ctx = np.zeros(context, dtype=np.float32)
        state = np.zeros((2, 1, 128), dtype=np.float32)
        for k in range(steps):
            x = np.concatenate([ctx, signal[k * chunk : (k + 1) * chunk]])[None, :]
            outs = yield {"input": x, "state": state, "sr": np.array(sr, dtype=np.int64)}
            state = outs["stateN"]
            ctx = x[0, -context:]

    return gen


def gtcrn(steps):
    """Streaming GTCRN: speech-like audio mixed with white noise at 5 dB SNR,
    one STFT frame per step (n_fft 512, hop 256, sqrt-Hann window), the
    three caches carried over from the previous step's outputs."""

    def gen(rng):
        hop, n_fft = 256, 512
        n = hop * (steps + 1)
        clean = speech_like(rng, 16000, n, 16000, []).astype(np.float64)
        noise = rng.standard_normal(n)
        noise *= np.sqrt(np.mean(clean**2) / np.mean(noise**2) / 10 ** (5 / 10))
        x = clean + noise
        window = np.sqrt(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft))
        conv = np.zeros((2, 1, 16, 16, 33), dtype=np.float32)
        tra = np.zeros((2, 3, 1, 1, 16), dtype=np.float32)
        inter = np.zeros((2, 1, 33, 16), dtype=np.float32)
        for k in range(steps):
            spec = np.fft.rfft(x[k * hop : k * hop + n_fft] * window)
            mix = np.stack([spec.real, spec.imag], axis=-1).astype(np.float32)[None, :, None, :]
            outs = yield {"mix": mix, "conv_cache": conv, "tra_cache": tra, "inter_cache": inter}
            conv, tra, inter = outs["conv_cache_out"], outs["tra_cache_out"], outs["inter_cache_out"]

    return gen


def single(make):
    """A one-step case whose feeds are `make(rng)`."""

    def gen(rng):
        yield make(rng)

    return gen


def waveforms_at(rate, n):
    """One waveform of `n` samples at `rate` Hz and its length."""
    return single(
        lambda rng: {
            "waveforms": speech_like(rng, rate, n, rate, [])[None, :],
            "waveforms_lens": np.array([n], dtype=np.int64),
        }
    )


def waveforms(n):
    """One waveform of `n` samples at 16 kHz and its length (onnx-asr's
    feature graphs)."""
    return single(
        lambda rng: {
            "waveforms": speech_like(rng, 16000, n, 16000, [4])[None, :],
            "waveforms_lens": np.array([n], dtype=np.int64),
        }
    )


def image(name, shape, lo, hi):
    return single(lambda rng: {name: uniform(rng, shape, lo, hi)})


def token_ids(rng, seq):
    ids = rng.integers(1000, 30000, size=(1, seq), dtype=np.int64)
    ids[0, 0] = 101
    ids[0, -1] = 102
    return ids


def minilm_l3(seq, masked_tail=0):
    def make(rng):
        mask = np.ones((1, seq), dtype=np.int64)
        if masked_tail:
            mask[0, -masked_tail:] = 0
        return {"input_ids": token_ids(rng, seq), "attention_mask": mask}

    return single(make)


def minilm_int8(seq):
    def make(rng):
        return {
            "input_ids": token_ids(rng, seq),
            "attention_mask": np.ones((1, seq), dtype=np.int64),
            "token_type_ids": np.zeros((1, seq), dtype=np.int64),
        }

    return single(make)


# case name -> (zoo model file, input generator, description)
CASES = {
    "silero_vad_16k": (
        "silero_vad.onnx",
        silero(16000, 64, 512),
        "6 streaming steps at 16 kHz: 64 samples of context + 512 new; state carried; chunks 2 and 5 near-silent",
    ),
    "silero_vad_8k": (
        "silero_vad.onnx",
        silero(8000, 32, 256),
        "6 streaming steps at 8 kHz: 32 samples of context + 256 new; state carried; chunks 2 and 5 near-silent",
    ),
    "ppocr_v4_det_320x480": ("ppocr_v4_det.onnx", image("x", (1, 3, 320, 480), -1, 1), "uniform [-1,1)"),
    "ppocr_v4_det_640x640": ("ppocr_v4_det.onnx", image("x", (1, 3, 640, 640), -1, 1), "uniform [-1,1)"),
    "ppocr_v4_rec_48x320": ("ppocr_v4_rec.onnx", image("x", (1, 3, 48, 320), -1, 1), "uniform [-1,1)"),
    "ppocr_v4_rec_48x160": ("ppocr_v4_rec.onnx", image("x", (1, 3, 48, 160), -1, 1), "uniform [-1,1)"),
    "ppocr_cls_48x192": ("ppocr_cls.onnx", image("x", (1, 3, 48, 192), -1, 1), "uniform [-1,1)"),
    "ppocr_v6_det_480x480": ("ppocr_v6_det_small.onnx", image("x", (1, 3, 480, 480), -1, 1), "uniform [-1,1)"),
    "ppocr_v6_rec_48x320": ("ppocr_v6_rec_small.onnx", image("x", (1, 3, 48, 320), -1, 1), "uniform [-1,1)"),
    "yolov8n_320": ("yolov8n_320n.onnx", image("images", (1, 3, 320, 320), 0, 1), "uniform [0,1)"),
    "yolov8n_640": ("yolov8n_320n.onnx", image("images", (1, 3, 640, 640), 0, 1), "uniform [0,1)"),
    "minilm_l3_seq16": (
        "minilm_l3.onnx",
        minilm_l3(16),
        "ids: 101, seeded ints in [1000,30000), 102; mask all ones",
    ),
    "minilm_l3_seq128": (
        "minilm_l3.onnx",
        minilm_l3(128, masked_tail=5),
        "ids: 101, seeded ints in [1000,30000), 102; mask ones except the last 5 positions",
    ),
    # The same model after ONNX Runtime's BERT optimizer (derive_models):
    # com.microsoft EmbedLayerNormalization (whose mask index feeds)
    # Attention, SkipLayerNormalization, BiasGelu.
    "minilm_l3_ort_opt_seq128": (
        "minilm_l3_ort_opt.onnx",
        minilm_l3(128, masked_tail=5),
        "ids: 101, seeded ints in [1000,30000), 102; mask ones except the last 5 positions",
    ),
    "minilm_int8_seq32": (
        "minilm_l6_int8.onnx",
        minilm_int8(32),
        "ids: 101, seeded ints in [1000,30000), 102; mask ones; token types zeros",
    ),
    "ddddocr_common_160": ("ddddocr_common.onnx", image("input1", (1, 1, 64, 160), 0, 1), "uniform [0,1)"),
    "ddddocr_common_old_160": (
        "ddddocr_common_old.onnx",
        image("input1", (1, 1, 64, 160), 0, 1),
        "uniform [0,1); int8 model with com.microsoft ops",
    ),
    "oww_mel": ("oww_melspectrogram.onnx", image("input", (1, 1760), -0.5, 0.5), "uniform [-0.5,0.5)"),
    "oww_embedding": ("oww_embedding.onnx", image("input_1", (1, 76, 32, 1), -1, 1), "uniform [-1,1)"),
    # DeepFilterNet3 over 100 frames (1 s at 48 kHz); the decoders' inputs
    # stand in for the encoder's outputs.
    "dfn3_enc_100": (
        "dfn3_enc.onnx",
        single(
            lambda rng: {
                "feat_erb": uniform(rng, (1, 1, 100, 32), -1, 1),
                "feat_spec": uniform(rng, (1, 2, 100, 96), -1, 1),
            }
        ),
        "uniform [-1,1)",
    ),
    "dfn3_erb_dec_100": (
        "dfn3_erb_dec.onnx",
        single(
            lambda rng: {
                "emb": uniform(rng, (1, 100, 512), -1, 1),
                "e3": uniform(rng, (1, 64, 100, 8), 0, 1),
                "e2": uniform(rng, (1, 64, 100, 8), 0, 1),
                "e1": uniform(rng, (1, 64, 100, 16), 0, 1),
                "e0": uniform(rng, (1, 64, 100, 32), 0, 1),
            }
        ),
        "emb uniform [-1,1), e0..e3 uniform [0,1) (post-ReLU)",
    ),
    "dfn3_df_dec_100": (
        "dfn3_df_dec.onnx",
        single(
            lambda rng: {
                "emb": uniform(rng, (1, 100, 512), -1, 1),
                "c0": uniform(rng, (1, 64, 100, 96), 0, 1),
            }
        ),
        "emb uniform [-1,1), c0 uniform [0,1) (post-ReLU)",
    ),
    "gtcrn_200": (
        "gtcrn_simple.onnx",
        gtcrn(200),
        "200 streaming hops of speech-like audio + white noise at 5 dB SNR; caches carried",
    ),
    # The audio feature graphs of onnx-asr over 10 s of speech-like audio
    # at 16 kHz (one near-silent second); each STFT form next to its Conv
    # twin, which computes the same features.
    "asr_whisper80_10s": ("asr_whisper80.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    "asr_whisper80_conv_10s": ("asr_whisper80_conv.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    "asr_kaldi_10s": ("asr_kaldi.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    "asr_kaldi_conv_10s": ("asr_kaldi_conv.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    "asr_nemo80_10s": ("asr_nemo80.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    "asr_nemo80_conv_10s": ("asr_nemo80_conv.onnx", waveforms(160000), "speech-like, 10 s at 16 kHz, second 4 near-silent"),
    # onnx-asr's resamplers to 16 kHz (weights computed in the graph).
    "asr_resample_44_16_1s": ("asr_resample_44_16.onnx", waveforms_at(44100, 44100), "speech-like, 1 s at 44.1 kHz"),
    "asr_resample_48_16_1s": ("asr_resample_48_16.onnx", waveforms_at(48000, 48000), "speech-like, 1 s at 48 kHz"),
}


# ---------------------------------------------------------------- graph signature


def value_info(v):
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] if t.HasField("shape") else None
    return v.name, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)), dims


def signature(model_path):
    """(inputs, outputs) of the graph, in ONNX order, initializers excluded."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer} | {i.values.name for i in m.graph.sparse_initializer}
    inputs = [value_info(v) for v in m.graph.input if v.name not in inits]
    outputs = [value_info(v) for v in m.graph.output]
    return inputs, outputs


def check_feeds(case, feeds, inputs):
    names = [n for n, _, _ in inputs]
    if sorted(feeds) != sorted(names):
        raise SystemExit(f"{case}: the generator feeds {sorted(feeds)} but the graph inputs are {names}")
    for name, dtype, dims in inputs:
        a = feeds[name]
        if a.dtype != dtype:
            raise SystemExit(f"{case}: input {name} is {a.dtype}, the graph wants {dtype}")
        if dims is not None and (
            len(dims) != a.ndim or any(d is not None and d > 0 and d != s for d, s in zip(dims, a.shape))
        ):
            raise SystemExit(f"{case}: input {name} has shape {list(a.shape)}, the graph declares {dims}")


# ---------------------------------------------------------------- generation


# Cases whose reference is ONNX Runtime on a float64 copy of the graph:
# ORT's float32 STFT rounds the power of whisper's narrow low mel bands to
# 4e-3 off in log10 (0.03% of the features, the f64 result and lele agree to
# 1e-5), so float32 ORT is no oracle there. ORT has no float64 Conv, so the
# `_conv` twins keep the float32 reference.
DOUBLE_ORACLE = {"asr_whisper80_10s", "asr_kaldi_10s", "asr_nemo80_10s"}


def to_double(model):
    """A copy of `model` computing in float64 wherever it computed float32."""
    from onnx import TensorProto, numpy_helper

    m = onnx.ModelProto.FromString(model.SerializeToString())
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                wide = numpy_helper.to_array(a.t).astype(np.float64)
                a.t.CopyFrom(numpy_helper.from_array(wide, a.t.name))
    return m.SerializeToString()


class DoubleSession:
    """Runs the float64 copy of a graph on float32 feeds, returning float32."""

    def __init__(self, model_path):
        self.inner = session(to_double(onnx.load(model_path)))

    def get_outputs(self):
        return self.inner.get_outputs()

    def run(self, names, feeds):
        wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
        outs = self.inner.run(names, wide)
        return [o.astype(np.float32) if o.dtype == np.float64 else o for o in outs]


def session(model_path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = GRAPH_OPT
    so.log_severity_level = 3
    return ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])


def stamp_for(model_sha):
    return {
        "model_sha256": model_sha,
        "script_sha256": SCRIPT_SHA256,
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
    }


def up_to_date(case_dir, stamp):
    try:
        with open(os.path.join(case_dir, "stamp.json")) as f:
            if json.load(f) != stamp:
                return False
        with open(os.path.join(case_dir, "case.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    for k in range(meta["steps"]):
        step = os.path.join(case_dir, f"step{k}")
        files = [f"in_{i}.npy" for i in range(len(meta["inputs"]))]
        files += [f"out_{j}.npy" for j in range(len(meta["outputs"]))]
        if not all(os.path.isfile(os.path.join(step, f)) for f in files):
            return False
    return True


def generate(case, model_file, gen, note, model_path, model_sha, case_dir):
    inputs, outputs = signature(model_path)
    in_names = [n for n, _, _ in inputs]
    out_names = [n for n, _, _ in outputs]
    double = case in DOUBLE_ORACLE
    sess = DoubleSession(model_path) if double else session(model_path)
    ort_outs = [o.name for o in sess.get_outputs()]
    if ort_outs != out_names:
        raise SystemExit(f"{case}: onnxruntime reports outputs {ort_outs}, the graph lists {out_names}")

    seed = zlib.crc32(case.encode())
    rng = np.random.default_rng(seed)
    steps = []
    it = gen(rng)
    feeds = next(it)
    while True:
        check_feeds(case, feeds, inputs)
        outs = sess.run(out_names, feeds)
        steps.append(([feeds[n] for n in in_names], outs))
        try:
            feeds = it.send(dict(zip(out_names, outs)))
        except StopIteration:
            break

    def describe(names, arrays_per_step, declared):
        desc = []
        for j, name in enumerate(names):
            arrays = [step[j] for step in arrays_per_step]
            shapes = {a.shape for a in arrays}
            if len(shapes) != 1:
                raise SystemExit(f"{case}: {name} changes shape across steps: {shapes}")
            if arrays[0].dtype != declared[j][1]:
                raise SystemExit(f"{case}: {name} is {arrays[0].dtype}, the graph declares {declared[j][1]}")
            desc.append({"name": name, "dtype": str(arrays[0].dtype), "shape": list(arrays[0].shape)})
        return desc

    meta = {
        "case": case,
        "model": model_file,
        "model_sha256": model_sha,
        "seed": seed,
        "steps": len(steps),
        "note": note,
        "inputs": describe(in_names, [s[0] for s in steps], inputs),
        "outputs": describe(out_names, [s[1] for s in steps], outputs),
        "reference": {
            "runtime": f"onnxruntime {ort.__version__}",
            "provider": "CPUExecutionProvider",
            "intra_op_num_threads": 1,
            "graph_optimization_level": GRAPH_OPT_NAME,
            "precision": "float64 copy of the graph" if double else "as the graph",
        },
    }

    parent = os.path.dirname(case_dir)
    tmp = os.path.join(parent, f".{case}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for k, (ins, outs) in enumerate(steps):
            step = os.path.join(tmp, f"step{k}")
            os.makedirs(step)
            for i, a in enumerate(ins):
                np.save(os.path.join(step, f"in_{i}.npy"), a, allow_pickle=False)
            for j, a in enumerate(outs):
                np.save(os.path.join(step, f"out_{j}.npy"), a, allow_pickle=False)
        with open(os.path.join(tmp, "case.json"), "w") as f:
            f.write(to_json(meta))
        with open(os.path.join(tmp, "stamp.json"), "w") as f:
            json.dump(stamp_for(model_sha), f, indent=2)
            f.write("\n")
        shutil.rmtree(case_dir, ignore_errors=True)
        os.rename(tmp, case_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


def to_json(value):
    """Indented JSON with lists of scalars (shapes) kept on one line."""

    def one_line(m):
        return "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]"

    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", one_line, json.dumps(value, indent=2)) + "\n"


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


# Models derived from zoo models: file -> (source file, how).
def ort_optimized_bert(src, dst):
    """ONNX Runtime's transformer optimizer on a BERT-like model (its Python
    fusions, default options): the file ORT users ship."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    opts = FusionOptions("bert")
    m = optimizer.optimize_model(
        src, model_type="bert", num_heads=12, hidden_size=384, optimization_options=opts, opt_level=0
    )
    m.save_model_to_file(dst)


DERIVED = {"minilm_l3_ort_opt.onnx": ("minilm_l3.onnx", ort_optimized_bert)}


def derive_models(zoo, wanted):
    """Writes each derived model the selected cases use, unless its stamp
    (source sha256, this script, onnxruntime) matches."""
    for name in sorted(wanted & DERIVED.keys()):
        src_name, how = DERIVED[name]
        src, dst = os.path.join(zoo, src_name), os.path.join(zoo, name)
        stamp = {"source": sha256_file(src), "script": SCRIPT_SHA256, "onnxruntime": ort.__version__}
        stamp_path = dst + ".stamp.json"
        if os.path.isfile(dst) and os.path.isfile(stamp_path):
            with open(stamp_path) as f:
                if json.load(f) == stamp:
                    continue
        tmp = dst + ".tmp"
        how(src, tmp)
        os.replace(tmp, dst)
        with open(stamp_path, "w") as f:
            json.dump(stamp, f)
        print(f"derived    {name} from {src_name}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True, help="directory of the zoo models")
    ap.add_argument("--out", required=True, help="fixtures directory")
    ap.add_argument("--force", action="store_true", help="regenerate up-to-date cases too")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("cases", nargs="*", help="only these cases (default: all)")
    args = ap.parse_args()

    if args.list:
        for name, (model, _, note) in CASES.items():
            print(f"{name:<24} {model:<26} {note}")
        return
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {list(CASES)}")
    selected = args.cases or list(CASES)

    os.makedirs(args.out, exist_ok=True)
    derive_models(args.zoo, {CASES[c][0] for c in selected})
    model_sha = {}
    started = time.perf_counter()
    generated = 0
    for case in selected:
        model_file, gen, note = CASES[case]
        model_path = os.path.join(args.zoo, model_file)
        if not os.path.isfile(model_path):
            raise SystemExit(f"{case}: missing model {model_path}; run `cargo xtask models` first")
        if model_file not in model_sha:
            model_sha[model_file] = sha256_file(model_path)
        case_dir = os.path.join(args.out, case)
        if not args.force and up_to_date(case_dir, stamp_for(model_sha[model_file])):
            print(f"ok         {case}", flush=True)
            continue
        t0 = time.perf_counter()
        meta = generate(case, model_file, gen, note, model_path, model_sha[model_file], case_dir)
        generated += 1
        shapes = ", ".join(f"{o['name']}{o['shape']}" for o in meta["outputs"])
        print(
            f"generated  {case:<24} {meta['steps']} step(s), {dir_size(case_dir) / 2**20:6.2f} MiB, "
            f"{time.perf_counter() - t0:5.2f}s -> {shapes}",
            flush=True,
        )
    total = sum(dir_size(os.path.join(args.out, c)) for c in selected)
    print(
        f"{len(selected)} case(s), {generated} generated, {total / 2**20:.1f} MiB in {args.out} "
        f"({time.perf_counter() - started:.1f}s)",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
