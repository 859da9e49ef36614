"""Independent reference for the injection tests: the statistics fpscope records for a tensor,
computed with numpy from the .npy file --dump wrote. Prints one JSON object per file, in order.

bf16 files hold raw bits ('<u2'); they are widened to fp32 exactly by shifting into the high half.
"""
import json
import sys

import numpy as np

SMALLEST_NORMAL = {"f32": 2.0 ** -126, "f16": 2.0 ** -14, "bf16": 2.0 ** -126}


def load(path):
    a = np.load(path)
    if a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64), "bf16"
    kind = "f16" if a.dtype == np.float16 else "f32"
    return a.astype(np.float64), kind


def f16_casts(finite):
    with np.errstate(over="ignore"):
        r = finite.astype(np.float16).astype(np.float64)
    nonzero = finite != 0
    overflow = np.isinf(r)
    return {
        "overflow": int(overflow.sum()),
        "underflow": int((nonzero & (r == 0)).sum()),
        "subnormal": int((nonzero & (r != 0) & (np.abs(r) < 2.0 ** -14)).sum()),
        "near_max": int(((np.abs(finite) >= 65504.0 / 2) & ~overflow).sum()),
    }


def stats(path):
    x, kind = load(path)
    x = x.ravel()
    finite = x[np.isfinite(x)]
    nonzero = finite[finite != 0]
    out = {
        "count": int(x.size),
        "nan": int(np.isnan(x).sum()),
        "pos_inf": int(np.isposinf(x).sum()),
        "neg_inf": int(np.isneginf(x).sum()),
        "zero": int((x == 0).sum()),
        "subnormal": int(((nonzero != 0) & (np.abs(nonzero) < SMALLEST_NORMAL[kind])).sum()),
        "min": float(finite.min()) if finite.size else None,
        "max": float(finite.max()) if finite.size else None,
        "absmax": float(np.abs(finite).max()) if finite.size else None,
        "min_nonzero": float(np.abs(nonzero).min()) if nonzero.size else None,
        "mean": float(finite.mean()) if finite.size else None,
        "rms": float(np.sqrt((finite * finite).mean())) if finite.size else None,
        "f16": f16_casts(finite),
    }
    _, exponents = np.frexp(np.abs(nonzero))
    values, counts = np.unique(exponents - 1, return_counts=True)
    out["hist"] = {str(int(e)): int(c) for e, c in zip(values, counts)}
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps(stats(p)))
