"""Fit the piecewise polynomial table of GELU's normal CDF used by lele's f32 GELU.

Phi(x) = (1 + erf(x / sqrt 2)) / 2 on [-4, 4) is split into 32 intervals of width 1/4; on each,
Phi(c + t) (c the interval's centre, |t| <= 1/8) is fitted by a degree-6 polynomial in t that
minimizes the largest *relative* error (Lawson's iteratively reweighted least squares on
Chebyshev nodes), then rounded to f32. The relative fit matters on the negative side, where
Phi is a small tail and GELU(x) = x * Phi(x) must keep its relative accuracy.

Prints the Rust table `GELU_PHI[j][i]` (coefficient of t^j on interval i) and, on stderr, the
worst relative error of the rounded coefficients in exact arithmetic and of an f32 evaluation
(Horner with fused multiply-adds, then x * Phi), both against math.erfc in f64.

    python xtask/python/fit_gelu.py > table.rs
"""

import math
import sys

import numpy as np

INTERVALS = 32
WIDTH = 0.25
LOW = -4.0
DEGREE = 6

erfc = np.frompyfunc(math.erfc, 1, 1)


def phi(x):
    return (0.5 * erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))).astype(np.float64)


def fit_interval(centre):
    half = WIDTH / 2
    nodes = 256
    t = half * np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    y = phi(centre + t)
    basis = np.vander(t, DEGREE + 1, increasing=True)
    weight = np.ones_like(t)
    coef = None
    for _ in range(80):
        scale = weight / y
        coef, *_ = np.linalg.lstsq(basis * scale[:, None], y * scale, rcond=None)
        err = np.abs(basis @ coef - y) / y
        weight = weight * np.sqrt(err) + 1e-300
        weight /= weight.max()
    return coef.astype(np.float32)


def fma32(a, b, c):
    # a*b is exact in f64 for f32 operands; one rounding of the sum to f64, then to f32
    # (a double rounding that can differ from a true f32 FMA only in rare ties).
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def evaluate_f32(table, x):
    """GELU of f32 `x` (all inside the table) the way the Rust code computes it."""
    f = fma32(x, np.full_like(x, 4.0), np.full_like(x, 16.0))
    inside = (f >= 0) & (f < INTERVALS)
    x, f = x[inside], f[inside]
    idx = f.astype(np.int32)
    fl = idx.astype(np.float32)
    centre = fma32(fl, np.full_like(fl, WIDTH), np.full_like(fl, LOW + WIDTH / 2))
    t = (x - centre).astype(np.float32)
    p = table[DEGREE][idx]
    for j in range(DEGREE - 1, -1, -1):
        p = fma32(p, t, table[j][idx])
    return x, (x * p).astype(np.float32)


def rust_f32(v):
    """The shortest literal that reads back as the same f32."""
    v = np.float32(v)
    if v != 0 and not 1e-3 <= abs(v) < 1e4:
        return np.format_float_scientific(v, unique=True, exp_digits=1).replace("e+", "e")
    text = np.format_float_positional(v, unique=True)
    return text + "0" if text.endswith(".") else text


def main():
    per_interval = [fit_interval(LOW + (i + 0.5) * WIDTH) for i in range(INTERVALS)]
    table = np.array(per_interval, dtype=np.float32).T.copy()  # [degree + 1][intervals]
    worst_fit = 0.0
    for i in range(INTERVALS):
        centre = LOW + (i + 0.5) * WIDTH
        t = np.linspace(-WIDTH / 2, WIDTH / 2, 4001)
        want = phi(centre + t)
        got = np.polyval(table[:, i][::-1].astype(np.float64), t)
        worst_fit = max(worst_fit, float((np.abs(got - want) / want).max()))
    rng = np.random.default_rng(7)
    x = np.concatenate(
        [rng.uniform(LOW, -LOW, 2_000_000), np.linspace(LOW, -LOW, 2_000_001)]
    ).astype(np.float32)
    x, y = evaluate_f32(table, x)
    want = x.astype(np.float64) * phi(x.astype(np.float64))
    nonzero = want != 0
    rel = np.abs(y[nonzero].astype(np.float64) - want[nonzero]) / np.abs(want[nonzero])
    print(f"fit (f32 coefficients, exact arithmetic): {worst_fit:.3e}", file=sys.stderr)
    print(f"GELU evaluated in f32: {rel.max():.3e} (mean {rel.mean():.3e})", file=sys.stderr)
    print(f"pub(crate) const GELU_PHI: [[f32; {INTERVALS}]; {DEGREE + 1}] = [")
    for j in range(DEGREE + 1):
        print("    [")
        for k in range(0, INTERVALS, 4):
            print("        " + " ".join(f"{rust_f32(v)}," for v in table[j][k:k + 4]))
        print("    ],")
    print("];")


if __name__ == "__main__":
    main()
