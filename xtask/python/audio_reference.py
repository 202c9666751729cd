#!/usr/bin/env python3
"""NumPy references of `lele::audio` (src/audio/): `cargo xtask fixtures` runs this.

    audio_reference.py --zoo ZOO --out OUTDIR

Each reference is written here from the definition of what it computes
(Whisper's, NeMo's and Kaldi's front ends as their projects describe them),
in float64, and saved as float32 .npy files in OUTDIR, with the inputs they
were computed from. The mel filterbanks come from ZOO/asr_fbanks.npz (onnx-asr
0.12.0 computed them with librosa and torchaudio), so the front ends are
checked against the filters the real projects use; lele's own filters are
checked against the same file. tests/audio_library.rs compares.

OUTDIR/stamp.json records this script's and the filterbank file's sha256 and
numpy's version; when it matches and the files exist, nothing is redone.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import speech_like  # noqa: E402

RATE = 16_000


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def periodic(fn, n):
    """A periodic window of length n from NumPy's symmetric one of n + 1."""
    return fn(n + 1)[:-1]


def frames_of(x, length, hop, count):
    """`count` frames of `length` samples, `hop` apart, from x[0]."""
    idx = np.arange(count)[:, None] * hop + np.arange(length)[None, :]
    return x[idx]


def power_spectrum(frames, n_fft):
    spec = np.fft.rfft(frames, n_fft)
    return spec.real**2 + spec.imag**2


# ---------------------------------------------------------------- front ends


def whisper(x, fb):
    """Whisper's log-mel of one 30 s window: [mels, 3000]."""
    n = 480_000
    x = np.pad(x[:n], (0, max(0, n - len(x))))
    x = np.pad(x, (200, 200), mode="reflect")
    frames = frames_of(x, 400, 160, 3000) * periodic(np.hanning, 400)
    mel = power_spectrum(frames, 400) @ fb
    logmel = np.log10(np.maximum(mel, 1e-10))
    return ((np.maximum(logmel, logmel.max() - 8.0) + 4.0) / 4.0).T


def nemo(x, fb):
    """NeMo's normalized log-mel: [mels, 1 + len // 160]."""
    y = x - 0.97 * np.concatenate([[0.0], x[:-1]])
    y = np.pad(y, (256, 256))
    count = 1 + len(x) // 160
    window = np.pad(np.hanning(400), (56, 56))
    mel = power_spectrum(frames_of(y, 512, 160, count) * window, 512) @ fb
    logmel = np.log(mel + 2.0**-24)
    valid = len(x) // 160
    used = logmel[:valid]
    mean = used.mean(axis=0)
    std = np.sqrt(((used - mean) ** 2).sum(axis=0) / (valid - 1))
    out = np.zeros_like(logmel)
    out[:valid] = (used - mean) / (std + 1e-5)
    return out.T


def kaldi(x, fb, snip_edges):
    """Kaldi fbank (dither 0, DC removal, pre-emphasis 0.97, Povey window,
    power, natural log floored at the f32 epsilon) with the filters `fb`
    (onnx-asr's: 20 Hz to 400 Hz below Nyquist): [frames, mels]."""
    length, shift = 400, 160
    if snip_edges:
        count = 1 + (len(x) - length) // shift
        starts = np.arange(count) * shift
    else:
        count = (len(x) + shift // 2) // shift
        starts = np.arange(count) * shift + shift // 2 - length // 2
    idx = starts[:, None] + np.arange(length)[None, :]
    # Mirror at both ends until every index is inside.
    n = len(x)
    while (idx < 0).any() or (idx >= n).any():
        idx = np.where(idx < 0, -idx - 1, idx)
        idx = np.where(idx >= n, 2 * n - 1 - idx, idx)
    frames = x[idx]
    frames = frames - frames.mean(axis=1, keepdims=True)
    previous = np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)
    frames = frames - 0.97 * previous
    frames = frames * np.hanning(length) ** 0.85
    mel = power_spectrum(frames, 512) @ fb
    return np.log(np.maximum(mel, np.finfo(np.float32).eps))


def lfr(feats, m, n):
    """Stack m frames every n, the first frame repeated (m - 1) // 2 times
    before the start and the last after the end."""
    t = feats.shape[0]
    padded = np.concatenate([np.repeat(feats[:1], (m - 1) // 2, axis=0), feats])
    rows = []
    for i in range(-(-t // n)):
        chunk = padded[i * n : i * n + m]
        if len(chunk) < m:
            chunk = np.concatenate([chunk, np.repeat(feats[-1:], m - len(chunk), axis=0)])
        rows.append(chunk.reshape(-1))
    return np.stack(rows)


# ---------------------------------------------------------------- STFT, resampling


def stft_stream(x, n_fft, hop, window):
    """The frames a streaming STFT gives one hop at a time: frame k ends at
    sample (k + 1)·hop, zeros before the signal; [frames, bins, 2]."""
    w = len(window)
    padded = np.concatenate([np.zeros(w - hop), x])
    count = len(x) // hop
    spec = np.fft.rfft(frames_of(padded, w, hop, count) * window, n_fft)
    return np.stack([spec.real, spec.imag], axis=-1)


def istft_stream(spec, n_fft, hop, analysis, synthesis):
    """Weighted overlap-add of the frames, divided by the overlap-added
    analysis·synthesis product at each position of a hop; the samples the
    stream gives out (hop per frame)."""
    w = len(synthesis)
    count = spec.shape[0]
    y = np.zeros(count * hop + w)
    for k in range(count):
        frame = np.fft.irfft(spec[k, :, 0] + 1j * spec[k, :, 1], n_fft)[:w]
        y[k * hop : k * hop + w] += frame * synthesis
    gain = np.array([sum(analysis[i] * synthesis[i] for i in range(j, w, hop)) for j in range(hop)])
    out = y[: count * hop]
    return out / np.tile(gain, count)


def resample(x, src, dst, zeros=16, beta=8.0, rolloff=0.94):
    """Output k = the Kaiser-windowed sinc interpolation of x at input time
    k·src/dst, ceil(len·dst/src) outputs."""
    g = np.gcd(src, dst)
    up, down = dst // g, src // g
    cutoff = rolloff * min(1.0, up / down) / 2.0
    half = int(np.ceil(zeros / (2.0 * cutoff)))
    count = -(-len(x) * up // down)
    k = np.arange(count)
    base = (k * down) // up
    frac = ((k * down) % up) / up
    j = np.arange(2 * half)
    idx = base[:, None] + 1 - half + j[None, :]
    d = frac[:, None] + (half - 1) - j[None, :]
    r = d / half
    window = np.where(np.abs(r) < 1, np.i0(beta * np.sqrt(np.clip(1 - r * r, 0, None))) / np.i0(beta), 0.0)
    taps = 2 * cutoff * np.sinc(2 * cutoff * d) * window
    xs = np.where((idx >= 0) & (idx < len(x)), x[np.clip(idx, 0, len(x) - 1)], 0.0)
    return (xs * taps).sum(axis=1)


# ---------------------------------------------------------------- main


def write_all(out, fbanks):
    def save(name, a):
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(a, dtype=np.float32))

    rng = np.random.default_rng(20261207)
    x = speech_like(rng, RATE, 52_800, RATE, [2]).astype(np.float64)
    save("signal", x)

    for kind, fn in [("hann", np.hanning), ("hamming", np.hamming), ("blackman", np.blackman)]:
        for n in (7, 400):
            save(f"window_{kind}_symmetric_{n}", fn(n))
            save(f"window_{kind}_periodic_{n}", periodic(fn, n))
    save("window_povey_400", np.hanning(400) ** 0.85)
    save("window_sqrt_hann_periodic_512", np.sqrt(periodic(np.hanning, 512)))

    with np.load(fbanks) as data:
        fb = {k: data[k].astype(np.float64) for k in data.files}
    for name in ("whisper80", "whisper128", "nemo80", "nemo128", "kaldi", "gigaam_v2"):
        save(f"fbank_{name}", fb[name])

    save("whisper80", whisper(x, fb["whisper80"]))
    save("nemo80", nemo(x, fb["nemo80"]))
    k_snip = kaldi(x, fb["kaldi"], snip_edges=True)
    k_centred = kaldi(x, fb["kaldi"], snip_edges=False)
    save("kaldi_snip_edges", k_snip)
    save("kaldi_centred", k_centred)
    # LFR on the centred Kaldi features as stored (float32), then CMVN.
    k32 = k_centred.astype(np.float32).astype(np.float64)
    stacked = lfr(k32, 7, 6)
    save("lfr_7_6", stacked)
    shift = rng.normal(0.0, 3.0, stacked.shape[1])
    scale = rng.uniform(0.5, 2.0, stacked.shape[1])
    save("cmvn_shift", shift)
    save("cmvn_scale", scale)
    s32 = stacked.astype(np.float32).astype(np.float64)
    save("cmvn_applied", (s32 + shift.astype(np.float32)) * scale.astype(np.float32))
    mean = k32.mean(axis=0)
    std = k32.std(axis=0)
    save("cmvn_utterance", (k32 - mean) / std)

    sqrt_hann = np.sqrt(periodic(np.hanning, 512))
    save("stft_512_256", stft_stream(x, 512, 256, sqrt_hann))
    hann400 = periodic(np.hanning, 400)
    spec = stft_stream(x, 512, 160, hann400)
    # A smooth gain over frequency, as an enhancement model would apply.
    gain = 0.5 + 0.5 * np.cos(np.pi * np.arange(257) / 256)
    spec = spec * gain[None, :, None]
    save("istft_input_512_160", spec)
    save("istft_512_160", istft_stream(spec, 512, 160, hann400, hann400))

    x44 = speech_like(rng, 44_100, 22_050, 44_100, []).astype(np.float64)
    save("resample_in_44100", x44)
    save("resample_44100_16000", resample(x44, 44_100, 16_000))
    x16 = x[:8_000]
    save("resample_16000_48000", resample(x16, 16_000, 48_000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    fbanks = os.path.join(args.zoo, "asr_fbanks.npz")
    if not os.path.isfile(fbanks):
        sys.exit(f"audio_reference: {fbanks} is missing (run `cargo xtask models`)")
    stamp = {
        "script_sha256": sha256_file(os.path.abspath(__file__)),
        "fixtures_sha256": sha256_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures.py")),
        "fbanks_sha256": sha256_file(fbanks),
        "numpy": np.__version__,
    }
    stamp_path = os.path.join(args.out, "stamp.json")
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp:
                print("audio references: up to date", file=sys.stderr)
                return
    except (OSError, ValueError):
        pass
    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_all(tmp, fbanks)
    with open(os.path.join(tmp, "stamp.json"), "w") as f:
        json.dump(stamp, f, indent=1)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"audio references: written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
