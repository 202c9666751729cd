"""Makes the example apps' committed test inputs in examples/data/.

    target/venv/bin/python xtask/python/make_app_inputs.py [--out examples/data] [--zoo ZOO]

Needs: espeak-ng on PATH (Debian: `apt-get install espeak-ng`; made with
eSpeak NG 1.51), the DejaVuSans font (Debian: fonts-dejavu-core; looked up in
/usr/share/fonts), and the Python packages numpy, Pillow and onnxruntime (the
pinned venv of xtask/python/requirements.txt has them all). The VAD check
needs ZOO/silero_vad.onnx (ZOO: --zoo, else $LELE_ZOO, else
~/.cache/lele/zoo). The outputs are committed: rerun only to change them
(another espeak-ng or font version gives slightly different files).

Writes:
- speech_16k.wav: mono 16 kHz 16-bit PCM, about 8 s: silence (1.018 s),
  utterance A, silence (1.680 s), utterance B, silence (1.5 s), plus white
  Gaussian noise of standard deviation 1e-3 of full scale everywhere
  (numpy default_rng seed 0).
  Each utterance is spoken by espeak-ng (voice en-us, 22050 Hz), resampled
  to 16 kHz by FFT (our own band-limited resampler below), scaled to a peak
  of 0.5 of full scale and trimmed to its first and last sample whose
  |amplitude| exceeds TRIM = 0.01 of full scale (before the noise is added).
- speech_8k.wav: the same signal (noise included) resampled by FFT from
  16 kHz to 8 kHz, 16-bit.
- speech.json: {"speech": [[start_s, end_s], ...]}: per utterance, its first
  and last sample above TRIM as placed in the 16 kHz signal (end = one past
  the last sample), in seconds; also "samples_16000" and the texts.
- text.png + text.txt: three lines of black-on-white text in DejaVuSans at
  40 px (RGB PNG, 8-bit), 40 px margins, 36 px gaps between lines; text.txt
  holds the lines, one per line.

Then checks the VAD reference pipeline of apps_reference.py (Silero VAD under
ONNX Runtime) on both WAV files: it must find as many segments as
speech.json has, each boundary within 100 ms. Exits non-zero otherwise.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apps_reference  # noqa: E402

UTTERANCES = [
    "my voice is heard by a tiny model",
    "our program hears every word you say",
]
# Silences in 16 kHz samples: before A (1.018 s), between A and B (1.680 s),
# after B (1.5 s). The Silero segment end lags the last loud sample by about
# 30 to 170 ms (up to one 32 ms window of grid, the model's own lag, 30 ms of
# padding) depending on where the utterance falls on the window grid; these
# offsets were picked (by trying grid shifts) so that both rates land within
# the 100 ms that check_vad allows.
SILENCES = [16288, 26878, 24000]
ESPEAK_RATE = 22050
RATE = 16000
PEAK = 0.5
TRIM = 0.01
NOISE_STD = 1e-3
TEXT_LINES = [
    "Plain Rust from ONNX models",
    "No allocation in forward 2026",
    "Fast kernels on one core",
]
# At 32 or 36 px the PP-OCRv4 recognizer (RapidOCR 1.4.4) drops some spaces;
# at 40 px it reads every line exactly.
FONT_PX = 40
MARGIN = 40
LINE_GAP = 36


def fail(msg):
    print(f"make_app_inputs: error: {msg}", file=sys.stderr)
    sys.exit(1)


def espeak(text):
    """espeak-ng speech as float64 in [-1, 1) at 22050 Hz."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "u.wav")
        try:
            subprocess.run(["espeak-ng", "-v", "en-us", "-w", path, text], check=True)
        except FileNotFoundError:
            fail("espeak-ng not found (apt-get install espeak-ng)")
        with wave.open(path, "rb") as w:
            if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, ESPEAK_RATE):
                fail("unexpected espeak-ng output format")
            data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float64) / 32768.0


def resample(x, rate_in, rate_out):
    """Band-limited resampling by FFT.

    The signal is zero-padded (on each side by the first multiple of
    rate_in / gcd >= 1024 samples, more at the end to make its length a
    multiple of rate_in / gcd) so that the
    circular FFT does not wrap, its spectrum is cut at the lower Nyquist
    frequency with a raised-cosine taper over the top 10 % of the kept band,
    and transformed back at the new length. Returns the samples that
    correspond to the input span (output length round(len * rate_out / rate_in)).
    """
    g = np.gcd(rate_in, rate_out)
    p, q = rate_out // g, rate_in // g  # out = in * p / q
    pad = q * -(-1024 // q)  # a multiple of q: the output offset is exact
    n = len(x) + 2 * pad
    n += (-n) % q
    buf = np.zeros(n)
    buf[pad : pad + len(x)] = x
    m = n * p // q
    spec = np.fft.rfft(buf)
    keep = min(len(spec), m // 2 + 1)
    out_spec = np.zeros(m // 2 + 1, dtype=complex)
    out_spec[:keep] = spec[:keep]
    k = np.arange(m // 2 + 1)
    edge = min(n, m) // 2  # lower Nyquist bin
    start = int(edge * 0.9)
    taper = np.ones(m // 2 + 1)
    ramp = (k >= start) & (k <= edge)
    taper[ramp] = 0.5 * (1 + np.cos(np.pi * (k[ramp] - start) / (edge - start)))
    taper[k > edge] = 0
    y = np.fft.irfft(out_spec * taper, m) * (m / n)
    off = pad * p // q
    return y[off : off + int(round(len(x) * p / q))]


def to_pcm16(x):
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2")


def write_wav(path, samples_i16, rate):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples_i16.tobytes())


def make_speech(out_dir):
    pieces = []
    for text in UTTERANCES:
        u = resample(espeak(text), ESPEAK_RATE, RATE)
        u *= PEAK / np.max(np.abs(u))
        loud = np.nonzero(np.abs(u) > TRIM)[0]
        pieces.append(u[loud[0] : loud[-1] + 1])
    sig = []
    spans = []
    pos = 0
    for i, n in enumerate(SILENCES):
        sig.append(np.zeros(n))
        pos += n
        if i < len(pieces):
            sig.append(pieces[i])
            spans.append([pos, pos + len(pieces[i])])
            pos += len(pieces[i])
    sig = np.concatenate(sig)
    if len(sig) % 2:
        sig = np.concatenate([sig, [0.0]])
    sig += np.random.default_rng(0).normal(0.0, NOISE_STD, len(sig))
    s16 = to_pcm16(sig)
    s8 = to_pcm16(resample(sig, RATE, 8000))
    write_wav(os.path.join(out_dir, "speech_16k.wav"), s16, RATE)
    write_wav(os.path.join(out_dir, "speech_8k.wav"), s8, 8000)
    info = {
        "speech": [[s / RATE, e / RATE] for s, e in spans],
        "samples_16000": spans,
        "utterances": UTTERANCES,
        "trim_threshold": TRIM,
        "duration_s": len(s16) / RATE,
    }
    with open(os.path.join(out_dir, "speech.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


def find_font(name="DejaVuSans.ttf"):
    for root in ["/usr/share/fonts", "/usr/local/share/fonts", os.path.expanduser("~/.fonts")]:
        for d, _, files in os.walk(root):
            if name in files:
                return os.path.join(d, name)
    fail(f"font {name} not found (apt-get install fonts-dejavu-core)")


def make_text(out_dir):
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(find_font(), FONT_PX)
    ascent, descent = font.getmetrics()
    pitch = ascent + descent + LINE_GAP
    widths = [font.getbbox(line)[2] for line in TEXT_LINES]
    width = max(widths) + 2 * MARGIN
    height = 2 * MARGIN + len(TEXT_LINES) * (ascent + descent) + (len(TEXT_LINES) - 1) * LINE_GAP
    if width > 800:
        fail(f"text image too wide ({width} px)")
    img = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(TEXT_LINES):
        draw.text((MARGIN, MARGIN + i * pitch), line, font=font, fill=0)
    img.convert("RGB").save(os.path.join(out_dir, "text.png"), optimize=True)
    with open(os.path.join(out_dir, "text.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(TEXT_LINES) + "\n")
    return width, height


def check_vad(out_dir, zoo, expected):
    model = os.path.join(zoo, "silero_vad.onnx")
    if not os.path.isfile(model):
        fail(f"missing {model} (fetch the zoo first)")
    ok = True
    for name in ["speech_16k.wav", "speech_8k.wav"]:
        _, secs, _, sr = apps_reference.run_vad(model, os.path.join(out_dir, name))
        good = len(secs) == len(expected) and all(
            abs(a - b) <= 0.1 for s, e in zip(secs, expected) for a, b in zip(s, e))
        ok &= good
        got = ", ".join(f"{s:.3f}-{e:.3f}" for s, e in secs)
        print(f"vad {sr} Hz: {got}  {'OK' if good else 'MISMATCH'}", file=sys.stderr)
    if not ok:
        fail("the ORT Silero segments differ from speech.json by more than 100 ms")


def default_zoo():
    if os.environ.get("LELE_ZOO"):
        return os.environ["LELE_ZOO"]
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache")
    return os.path.join(base, "lele", "zoo")


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(root, "examples", "data"))
    p.add_argument("--zoo", default=default_zoo())
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info = make_speech(a.out)
    spans = ", ".join(f"{s:.4f}-{e:.4f}" for s, e in info["speech"])
    print(f"speech: {info['duration_s']:.3f} s, utterances at {spans} s", file=sys.stderr)
    w, h = make_text(a.out)
    print(f"text.png: {w}x{h}", file=sys.stderr)
    check_vad(a.out, a.zoo, info["speech"])


if __name__ == "__main__":
    main()
