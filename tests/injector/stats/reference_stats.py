#!/usr/bin/env python3
"""Independent reference for fpscope's tensor statistics (docs/statistics.md).

Usage: reference_stats.py MANIFEST.json OUTPUT.json

MANIFEST lists tensors as {"name", "dtype", "file"} where each file holds the raw little-endian element
bits; dtype is "f32", "f16", "bf16", "f64", or one of the 8-bit formats "e4m3", "e5m2", "e4m3fnuz",
"e5m2fnuz" and "e8m0", or "e2m1" (FP4, one value a byte), which ml_dtypes (PyPI) decodes: only a
manifest that holds them needs it. For each tensor this writes every statistic of TensorStats at the
Full level, computed with numpy and exact Python arithmetic only: nothing here shares code or
thresholds with the C++ implementation. Cast outcomes come from actually rounding each value:
fp16 by numpy's astype(np.float16); bf16, fp8 e4m3 and fp8 e5m2 by round-to-nearest-even against a
table of every representable magnitude of the format. fp64 sums and squares are exact fractions.
NaN results are written as null, infinities as "inf" and "-inf".
"""
import json
import math
import sys
from fractions import Fraction

import numpy as np

HIST_MIN_EXPONENT = -149
HIST_MAX_EXPONENT = 127
HIST_BINS = HIST_MAX_EXPONENT - HIST_MIN_EXPONENT + 1


def decode(raw, dtype):
    """Returns (values as float64, sign bits, raw bits as int64) of a raw little-endian array."""
    with np.errstate(invalid="ignore"):  # signalling NaNs become quiet NaNs: still NaN
        return _decode(raw, dtype)


def _decode(raw, dtype):
    if dtype == "f32":
        bits = np.frombuffer(raw, dtype="<u4").astype(np.int64)
        values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        sign = (bits >> 31) & 1
    elif dtype == "f16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.int64)
        values = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        sign = (bits >> 15) & 1
    elif dtype == "f64":
        bits = np.frombuffer(raw, dtype="<u8")
        values = np.frombuffer(raw, dtype="<f8").astype(np.float64)
        sign = (bits >> np.uint64(63)).astype(np.int64)
        bits = [int(b) for b in bits]  # all 64 bits, beyond int64
    elif dtype == "bf16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.int64)
        values = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        sign = (bits >> 15) & 1
    elif dtype in BYTE_FORMATS:
        import ml_dtypes
        bits = np.frombuffer(raw, dtype="u1").astype(np.int64)
        values = np.frombuffer(raw, dtype=getattr(ml_dtypes, BYTE_FORMATS[dtype])).astype(np.float64)
        # e8m0 has no sign bit; e2m1's is bit 3 (of its one value a byte); elsewhere the top bit is
        # the sign (of zeros too, where there is -0)
        sign = np.zeros_like(bits) if dtype == "e8m0" else (bits >> 3) & 1 if dtype == "e2m1" else (bits >> 7) & 1
    else:
        raise ValueError(f"unknown dtype {dtype!r}")
    return values, sign, bits


# The formats of one byte a value, by the names of ml_dtypes' types.
BYTE_FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
                "e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu", "e2m1": "float4_e2m1fn"}


def smallest_normal(dtype):
    if dtype in BYTE_FORMATS:
        import ml_dtypes
        return float(ml_dtypes.finfo(getattr(ml_dtypes, BYTE_FORMATS[dtype])).smallest_normal)
    return {"f32": 2.0 ** -126, "f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f64": 2.0 ** -1022}[dtype]


def number(x):
    """x for JSON: infinities as the strings "inf" and "-inf" (JSON has no literal for them)."""
    if x is not None and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def as_float(fraction):
    """The double nearest an exact fraction; +-Inf beyond double's range."""
    try:
        return float(fraction)
    except OverflowError:
        return math.inf if fraction > 0 else -math.inf


def magnitude_table(exponent_bits, mantissa_bits, bias):
    """Every nonnegative magnitude of a binary format with unbounded top exponent, by bit pattern,
    up to and including the pattern after the largest finite one (used to see overflow)."""
    count = (1 << (exponent_bits + mantissa_bits))
    table = []
    for pattern in range(count):
        field, mant = pattern >> mantissa_bits, pattern & ((1 << mantissa_bits) - 1)
        if field == 0:
            table.append(math.ldexp(mant, 1 - bias - mantissa_bits))
        else:
            table.append(math.ldexp((1 << mantissa_bits) + mant, field - bias - mantissa_bits))
    return np.array(table, dtype=np.float64)


class RoundedFormat:
    """Round-to-nearest-even into a format given by its table of magnitudes."""

    def __init__(self, exponent_bits, mantissa_bits, bias, max_finite_pattern):
        self.table = magnitude_table(exponent_bits, mantissa_bits, bias)
        self.max_pattern = max_finite_pattern
        self.min_normal_pattern = 1 << mantissa_bits
        # Patterns past the largest finite one only matter as "beyond": keep one of them.
        self.table = self.table[: max_finite_pattern + 2]

    def round_patterns(self, magnitudes):
        """Pattern each magnitude rounds to (max_pattern + 1 stands for every overflow)."""
        t = self.table
        hi = np.searchsorted(t, magnitudes, side="left")
        beyond = hi >= len(t)
        hi = np.minimum(hi, len(t) - 1)
        lo = np.maximum(hi - 1, 0)
        exact = t[hi] == magnitudes
        with np.errstate(over="ignore"):
            twice = 2.0 * magnitudes             # exact in float64 (Inf only beyond the table)
        mid = t[lo] + t[hi]                      # exact: adjacent values of a short format
        pick_hi = (twice > mid) | ((twice == mid) & (hi % 2 == 0))
        result = np.where(exact, hi, np.where(pick_hi, hi, lo))
        return np.where(beyond, len(t) - 1, result)

    def outcomes(self, magnitudes):
        p = self.round_patterns(magnitudes)
        overflow = p > self.max_pattern
        underflow = (p == 0) & (magnitudes != 0)
        subnormal = (p > 0) & (p < self.min_normal_pattern)
        return overflow, underflow, subnormal


FORMATS = {
    "bf16": (RoundedFormat(8, 7, 127, 0x7F7F), float.fromhex("0x1.fep127")),
    "e4m3": (RoundedFormat(4, 3, 7, 0x7E), 448.0),
    "e5m2": (RoundedFormat(5, 2, 15, 0x7B), 57344.0),
}
F16_MAX = 65504.0


def cast_counts(finite_values):
    mags = np.abs(finite_values)
    out = []
    with np.errstate(over="ignore", under="ignore"):
        # numpy rounds float64 to float16 directly, once (never through float32)
        h = finite_values.astype(np.float16)
    h_mag = np.abs(h.astype(np.float64))
    ovf = np.isinf(h)
    out.append({
        "overflow": int(ovf.sum()),
        "underflow": int(((h_mag == 0) & (mags != 0)).sum()),
        "subnormal": int(((h_mag > 0) & (h_mag < 2.0 ** -14)).sum()),
        "near_max": int(((mags >= F16_MAX / 2) & ~ovf).sum()),
    })
    for name in ("bf16", "e4m3", "e5m2"):
        fmt, max_finite = FORMATS[name]
        ovf, unf, sub = fmt.outcomes(mags)
        out.append({
            "overflow": int(ovf.sum()),
            "underflow": int(unf.sum()),
            "subnormal": int(sub.sum()),
            "near_max": int(((mags >= max_finite / 2) & ~ovf).sum()),
        })
    return out


def extreme(values, sign, want_min):
    """min/max over finite values with -0 ordered below +0."""
    if values.size == 0:
        return None
    v = values.min() if want_min else values.max()
    if v == 0:
        zeros_negative = sign[values == 0] == 1
        has_neg, has_pos = zeros_negative.any(), (~zeros_negative).any()
        negative = has_neg if want_min else not has_pos
        return -0.0 if negative else 0.0
    return float(v)


def statistics(raw, dtype):
    values, sign, bits = decode(raw, dtype)
    n = values.size
    nan = np.isnan(values)
    posinf = np.isposinf(values)
    neginf = np.isneginf(values)
    nonfinite = nan | posinf | neginf
    finite = values[~nonfinite]
    finite_sign = sign[~nonfinite]
    mags = np.abs(finite)
    min_normal = smallest_normal(dtype)
    nonzero = mags[mags != 0]

    first = np.flatnonzero(nonfinite)
    hist = [0] * HIST_BINS
    below = above = 0
    if nonzero.size:
        _, exps = np.frexp(nonzero)               # |x| = m * 2^e with 0.5 <= m < 1
        idx, counts = np.unique(exps - 1 - HIST_MIN_EXPONENT, return_counts=True)
        for i, c in zip(idx, counts):
            if i < 0:
                below += int(c)
            elif i >= HIST_BINS:
                above += int(c)
            else:
                hist[int(i)] = int(c)

    mean = rms = None
    sum_abs = 0.0
    if finite.size and dtype == "f64":
        # Exact sums; a sum of squares beyond double's range makes rms +Inf (docs/statistics.md).
        as_list = [Fraction(x) for x in finite.tolist()]
        mean = as_float(sum(as_list) / finite.size)
        squares = sum(x * x for x in as_list)
        rms = math.inf if squares > Fraction(sys.float_info.max) else math.sqrt(float(squares / finite.size))
        sum_abs = as_float(sum(abs(x) for x in as_list))
    elif finite.size:
        as_list = finite.tolist()
        mean = math.fsum(as_list) / finite.size
        rms = math.sqrt(math.fsum(x * x for x in as_list) / finite.size)  # x*x exact for these
        sum_abs = math.fsum(abs(x) for x in as_list)
    return {
        "count": int(n),
        "nan": int(nan.sum()),
        "pos_inf": int(posinf.sum()),
        "neg_inf": int(neginf.sum()),
        "zero": int((mags == 0).sum()),
        "subnormal": int(((mags > 0) & (mags < min_normal)).sum()),
        "min": extreme(finite, finite_sign, True),
        "max": extreme(finite, finite_sign, False),
        "absmax": float(mags.max()) if mags.size else None,
        "min_nonzero": float(nonzero.min()) if nonzero.size else None,
        "mean": number(mean),
        "rms": number(rms),
        "sum_abs": number(sum_abs),
        "first_nonfinite": int(first[0]) if first.size else -1,
        "first_nonfinite_bits": int(bits[first[0]]) if first.size else 0,
        "hist": hist,
        "hist_below": below,
        "hist_above": above,
        "cast": cast_counts(finite),
    }


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    with open(argv[1]) as f:
        manifest = json.load(f)
    results = {}
    for entry in manifest:
        with open(entry["file"], "rb") as f:
            results[entry["name"]] = statistics(f.read(), entry["dtype"])
    with open(argv[2], "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
