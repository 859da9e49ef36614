#!/usr/bin/env python3
"""Independent reference for fpscope's scaling-recipe forecast (docs/statistics.md, "Scaling recipes").

Usage: reference_recipes.py MANIFEST.json OUTPUT.json
       reference_recipes.py --quantize MANIFEST.json OUTPUT.json

MANIFEST lists tensors as {"name", "dtype" ("f32", "f16" or "bf16"), "file" (raw little-endian
bits), "rows", "cols", "weight", "history_amax" (one number per recipe, 0 for none)}. For each
tensor and recipe this writes the outcome: values, underflow, subnormal, saturated, blocks,
blocks_lost, blocks_nonfinite, sse, signal, scale; and the tensor's amax.

With --quantize, MANIFEST lists {"name", "file" (fp32 bits), "rows", "cols", "recipe" (a name
below, "current-pow2-e5m2" or "block-e5m2" too), "tile_rows", "history" (the amaxes of the steps
before, for delayed recipes)} and this writes, for each, what the kernel library's fp8 quantize
kernels must produce: "q" (the 8-bit patterns, hex), "scales" (per tensor or block: the decode
scale 1/s as fp32 bits, the E8M0 byte of an MX block, or NVFP4's e4m3 block scale byte, with its
tensor's scale 1/s_g as "global"), "history" (the amaxes after this step),
"y" (the dequantized values, fp32 bits: each pattern's value times its decode scale) and "counts"
(what the kernel's launch report must say of q: "results", the nonzero finite values of finite
blocks; of them "flushed" to zero, made "subnormal", and "saturated", as the forecast counts them).
A NaN is written as 0x7F in both 8-bit formats, an Inf as e5m2's Inf and as e4m3's NaN (which has
no Inf); every value of a non-finite MX block as NaN (0 in e2m1, which has no NaN), its scale as
E8M0's NaN (0xFF); a non-finite NVFP4 block's values as 0 under e4m3's NaN as its scale. e2m1
values are one a byte, in its low four bits (ml_dtypes' float4_e2m1fn).

The element casts are ml_dtypes' (float8_e4m3fn, float8_e5m2, float4_e2m1fn) from fp32 values,
after clipping to the format's largest value; saturation is read off the unclipped cast (Inf or
NaN from ml_dtypes), and for e2m1, which ml_dtypes saturates by itself, off the rounding midpoint
6 and 8 share (7, whose tie goes to 8). Scales are fp32 values computed with numpy's fp32
arithmetic. The squared errors are summed exactly (each square split into exact products,
added by math.fsum). Nothing here shares code with the
C++ implementation.
"""
import json
import math
import sys

import ml_dtypes
import numpy as np

F32 = np.float32
FMAX = np.finfo(np.float32).max

ELEMENTS = {
    "e4m3": dict(dtype=ml_dtypes.float8_e4m3fn, max=448.0, min_normal=2.0 ** -6, emax=8),
    "e5m2": dict(dtype=ml_dtypes.float8_e5m2, max=57344.0, min_normal=2.0 ** -14, emax=15),
    "e2m1": dict(dtype=ml_dtypes.float4_e2m1fn, max=6.0, min_normal=1.0, emax=2),
}

# name, rule, element, block along the row (0 tensor, -1 row), tile rows for weights, history
RECIPES = [
    ("current-e4m3", "current", "e4m3", 0, 1),
    ("current-e5m2", "current", "e5m2", 0, 1),
    ("current-pow2-e4m3", "current-pow2", "e4m3", 0, 1),
    ("delayed-e4m3", "delayed", "e4m3", 0, 1),
    ("delayed16-e4m3", "delayed", "e4m3", 0, 1),
    ("delayed-e5m2", "delayed", "e5m2", 0, 1),
    ("rowwise-e4m3", "pow2", "e4m3", -1, 1),
    ("mxfp8-e4m3", "mx-floor", "e4m3", 32, 1),
    ("mxfp8-e4m3-ceil", "mx-ceil", "e4m3", 32, 1),
    ("mxfp8-e5m2", "mx-floor", "e5m2", 32, 1),
    ("mxfp4", "mx-floor", "e2m1", 32, 1),
    ("nvfp4", "nvfp4", "e2m1", 16, 16),
    ("block-e4m3", "pow2", "e4m3", 128, 128),
]


def decode(raw, dtype):
    if dtype == "f32":
        return np.frombuffer(raw, dtype="<f4").copy()
    if dtype == "f16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if dtype == "bf16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    raise ValueError(f"unknown dtype {dtype!r}")


def fp32_quotient(a, b):
    """max_elem / amax in fp32; the largest finite fp32 where the quotient overflows."""
    with np.errstate(over="ignore", divide="ignore"):
        q = F32(a) / F32(b)
    return FMAX if np.isinf(q) else q


def pow2_down(s):
    """2^floor(log2 s) of a positive fp32, exactly (math.frexp is exact)."""
    m, e = math.frexp(float(s))
    return F32(math.ldexp(1.0, e - 1))


def mx_shared_exponent(amax, element, rule):
    el = ELEMENTS[element]
    if rule == "mx-floor":
        k = math.frexp(float(amax))[1] - 1 - el["emax"]
    else:
        t = F32(amax) / F32(el["max"])
        if t == 0:  # the quotient underflowed fp32: the smallest scale
            return -127
        m, e = math.frexp(float(t))
        k = e - 1 if m == 0.5 else e  # a power of two stays, anything else goes up one
    return min(max(k, -127), 127)


def cast(v, element):
    """Rounds fp32 magnitudes to the element format: (rounded magnitudes, saturated mask)."""
    el = ELEMENTS[element]
    v = np.abs(v.astype(np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        raw = v.astype(el["dtype"]).astype(np.float64)
    if element == "e2m1":
        saturated = v.astype(np.float64) >= 7.0
    else:
        saturated = ~np.isfinite(raw)
    q = np.minimum(v, F32(el["max"])).astype(el["dtype"]).astype(np.float64)
    return q, saturated


def exact_sum_of_squares(v):
    """The sum of v**2 over float64 values v, exact then rounded once: each square is split into
    three exact products (Dekker's split of v into two 26-bit halves) and math.fsum adds them."""
    v = np.asarray(v, dtype=np.float64)
    c = 134217729.0 * v  # 2**27 + 1
    hi = c - (c - v)
    lo = v - hi
    return math.fsum(np.concatenate([hi * hi, 2.0 * hi * lo, lo * lo]).tolist())


class Outcome:
    def __init__(self):
        self.values = self.underflow = self.subnormal = self.saturated = 0
        self.blocks = self.blocks_lost = self.blocks_nonfinite = 0
        self.errors = []   # arrays of (|x| - q/s) per quantized value
        self.magnitudes = []
        self.scale = None

    def add(self, x, s, element):
        """Quantizes the finite fp32 values x at fp32 scale s (0: all lost); returns kept mask."""
        el = ELEMENTS[element]
        self.values += x.size
        m = np.abs(x.astype(np.float64))
        self.magnitudes.append(m)
        if s == 0:
            q = np.zeros_like(m)
            saturated = np.zeros(m.shape, dtype=bool)
        else:
            with np.errstate(over="ignore"):
                v = x.astype(np.float32) * F32(s)  # fp32 product
            q, saturated = cast(v, element)
        nonzero = m != 0
        self.saturated += int(np.count_nonzero(saturated & nonzero))
        self.underflow += int(np.count_nonzero(nonzero & (q == 0)))
        self.subnormal += int(np.count_nonzero(nonzero & (q > 0) & (q < el["min_normal"])))
        # The recovered value q * (1/s), in float64 (1/s itself a float64).
        inv = 0.0 if s == 0 else 1.0 / float(s)
        self.errors.append(np.where(q == 0, m, m - q * inv))
        return nonzero, nonzero & (q != 0)

    def json(self):
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)
        return {
            "values": self.values, "underflow": self.underflow, "subnormal": self.subnormal,
            "saturated": self.saturated, "blocks": self.blocks, "blocks_lost": self.blocks_lost,
            "blocks_nonfinite": self.blocks_nonfinite, "sse": exact_sum_of_squares(cat(self.errors)),
            "signal": exact_sum_of_squares(cat(self.magnitudes)), "scale": self.scale,
        }


def tensor_scale(rule, element, amax, nonfinite, history):
    mx = ELEMENTS[element]["max"]
    usable = not nonfinite and amax > 0
    if rule == "current":
        return fp32_quotient(mx, amax) if usable else F32(1)
    if rule == "current-pow2":
        return pow2_down(fp32_quotient(mx, amax)) if usable else F32(1)
    if rule == "delayed":
        return fp32_quotient(mx, history) if history > 0 and math.isfinite(history) else F32(1)
    if rule == "nvfp4":
        return fp32_quotient(448.0 * 6.0, amax) if usable else F32(1)
    return None


def block_scale(rule, element, amax, nonfinite, tensor_s):
    """(scale, non-finite block)."""
    mx = ELEMENTS[element]["max"]
    if rule in ("current", "current-pow2", "delayed"):
        return tensor_s, False
    if rule == "pow2":
        if nonfinite or amax == 0:
            return F32(1), False
        return pow2_down(fp32_quotient(mx, amax)), False
    if rule in ("mx-floor", "mx-ceil"):
        if nonfinite:
            return None, True
        if amax == 0:
            return F32(1), False
        return F32(math.ldexp(1.0, -mx_shared_exponent(amax, element, rule))), False
    if rule == "nvfp4":
        if nonfinite:
            return None, True
        d = (F32(amax) / F32(6.0)) * F32(tensor_s)
        b = float(np.array([d], dtype=np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)[0])
        if math.isnan(b):  # beyond e4m3: saturates
            b = 448.0
        if b == 0:
            return F32(0), False
        return F32(tensor_s) / F32(b), False
    raise ValueError(rule)


def replay(x, rows, cols, weight, history):
    flat = x.reshape(rows, cols)
    finite = np.isfinite(flat)
    nonfinite = not bool(finite.all())
    amax = float(np.max(np.abs(flat[finite]))) if finite.any() else 0.0
    result = {"amax": "inf" if nonfinite else amax, "recipes": {}}
    if x.size == 0:
        result["recipes"] = {r[0]: Outcome().json() for r in RECIPES}
        return result
    for i, (name, rule, element, block, tile_rows) in enumerate(RECIPES):
        o = Outcome()
        ts = tensor_scale(rule, element, amax, nonfinite, history[i])
        if block == 0 and rule != "nvfp4":
            o.scale = float(ts)
        width = cols if block in (0, -1) else block
        height = rows if block == 0 else (tile_rows if weight and tile_rows > 1 else 1)
        for r0 in range(0, rows, height):
            for c0 in range(0, cols, width):
                tile = flat[r0:r0 + height, c0:c0 + width]
                tf = np.isfinite(tile)
                o.blocks += 1
                vals = tile[tf]
                b_amax = float(np.max(np.abs(vals))) if vals.size else 0.0
                s, poisoned = block_scale(rule, element, b_amax, not bool(tf.all()), ts)
                if poisoned:
                    o.blocks_nonfinite += 1
                    continue
                nonzero, kept = o.add(vals, s, element)
                if nonzero.any() and not kept.any():
                    o.blocks_lost += 1
        result["recipes"][name] = o.json()
    return result


def quantize_bytes(x, s, element):
    """The 8-bit patterns of fp32 values x at fp32 scale s, saturated at the format's largest."""
    el = ELEMENTS[element]
    with np.errstate(over="ignore", invalid="ignore"):
        v = x.astype(np.float32) * F32(s)
    q = np.clip(v, -F32(el["max"]), F32(el["max"])).astype(el["dtype"]).view(np.uint8).copy()
    nan = ~np.isfinite(x)
    q[nan] = 0x7F if element != "e2m1" else 0
    if element == "e5m2":
        q[np.isposinf(x)] = 0x7C
        q[np.isneginf(x)] = 0xFC
    return q


def quantize(t, x):
    """What a quantize kernel writes for t["recipe"] (see the module's docstring)."""
    name, rows, cols = t["recipe"], t["rows"], t["cols"]
    extra = {"current-pow2-e5m2": ("current-pow2", "e5m2", 0), "block-e5m2": ("pow2", "e5m2", 128)}
    rule, element, block = extra[name] if name in extra else next((r[1], r[2], r[3]) for r in RECIPES if r[0] == name)
    flat = x.reshape(rows, cols)
    finite = np.isfinite(flat)
    amax = float(np.max(np.abs(flat[finite]))) if finite.any() else 0.0
    history = list(t.get("history", []))
    longest = max(history) if history else 0.0
    ts = tensor_scale(rule, element, amax, not bool(finite.all()), longest)
    if rule == "delayed" and finite.all():
        history = [amax] + history[:-1]
    q = np.zeros((rows, cols), dtype=np.uint8)
    scales = []
    counted = Outcome()  # what quantizing did to the finite values of finite blocks
    nonzero = 0
    e4m3 = ELEMENTS["e4m3"]["dtype"]
    width = cols if block == 0 else block
    height = rows if block == 0 else t["tile_rows"]
    for r0 in range(0, max(rows, 1), height):
        for c0 in range(0, max(cols, 1), width):
            tile = flat[r0:r0 + height, c0:c0 + width]
            tf = np.isfinite(tile)
            vals = tile[tf]
            b_amax = float(np.max(np.abs(vals))) if vals.size else 0.0
            s, poisoned = block_scale(rule, element, b_amax, not bool(tf.all()), ts)
            if rule in ("mx-floor", "mx-ceil"):
                if poisoned:
                    q[r0:r0 + height, c0:c0 + width] = 0x7F if element != "e2m1" else 0
                    scales.append(0xFF)
                    continue
                scales.append(127 - (math.frexp(float(s))[1] - 1))  # s = 2^-k: the byte of 2^k
            elif rule == "nvfp4":
                if poisoned:  # e2m1 has no NaN: zeros under e4m3's NaN scale
                    q[r0:r0 + height, c0:c0 + width] = 0
                    scales.append(0x7F)
                    continue
                d = np.array([(F32(b_amax) / F32(6.0)) * F32(ts)], dtype=np.float32)
                scales.append(int(np.minimum(d, F32(448)).astype(e4m3).view(np.uint8)[0]))
            else:
                scales.append(int((F32(1) / F32(s)).view(np.uint32)))
            q[r0:r0 + height, c0:c0 + width] = quantize_bytes(tile, s, element)
            counted.add(vals, s, element)
            nonzero += int(np.count_nonzero(vals))
    # Dequantized: each pattern's value (ml_dtypes) times its decode scale, an fp32 product.
    values = q.view(ELEMENTS[element]["dtype"]).astype(np.float32)
    if rule in ("mx-floor", "mx-ceil"):
        per_block = np.array(scales, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    elif rule == "nvfp4":
        per_block = np.array(scales, dtype=np.uint8).view(e4m3).astype(np.float32)
    else:
        per_block = np.array(scales, dtype=np.uint32).view(np.float32)
    per_block = per_block.reshape(-(-max(rows, 1) // height), -(-max(cols, 1) // width))
    expanded = np.repeat(np.repeat(per_block, height, axis=0), width, axis=1)[:rows, :cols]
    with np.errstate(over="ignore", invalid="ignore"):
        y = (values * expanded).astype(np.float32)
        if rule == "nvfp4":
            y = (y * (F32(1) / F32(ts))).astype(np.float32)
    out = {"q": q.tobytes().hex(), "scales": scales, "history": history, "y": y.view(np.uint32).ravel().tolist(),
           "counts": {"results": nonzero, "flushed": counted.underflow, "subnormal": counted.subnormal,
                      "saturated": counted.saturated}}
    if rule == "nvfp4":
        out["global"] = int((F32(1) / F32(ts)).view(np.uint32))
    return out


def main():
    if sys.argv[1] == "--quantize":
        with open(sys.argv[2]) as f:
            tensors = json.load(f)
        out = {}
        for t in tensors:
            with open(t["file"], "rb") as f:
                out[t["name"]] = quantize(t, decode(f.read(), "f32"))
        with open(sys.argv[3], "w") as f:
            json.dump(out, f)
        return
    manifest, output = sys.argv[1], sys.argv[2]
    with open(manifest) as f:
        tensors = json.load(f)
    out = {}
    for t in tensors:
        with open(t["file"], "rb") as f:
            x = decode(f.read(), t["dtype"])
        out[t["name"]] = replay(x, t["rows"], t["cols"], t["weight"], t["history_amax"])
    with open(output, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
