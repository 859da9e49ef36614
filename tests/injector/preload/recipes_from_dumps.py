"""Checks a trace's fp8 recipe forecast (tensor_recipes) against the independent quantizer
(tests/injector/stats/reference_recipes.py) run on the tensors --dump wrote.

Usage: recipes_from_dumps.py TRACE.sqlite REFERENCE_DIR

For every dumped tensor that has tensor_recipes rows, the reference replays each recipe over the
.npy file's values, viewed as the injector views them (a weight as shape[0] rows of the rest,
anything else as rows of its last dimension), with delayed scaling's history made from the same
tensor's earlier dumps (the largest finite amax over the last 1024 or 16 versions of its bytes; a
launch that reads the bytes and view the tensor's last forecast replayed gets that one). Counts and
scales must be equal, sse and signal within the rounding of a sum in double. Prints what it
compared; exits 1 on any difference, 2 when nothing could be compared.
"""
import json
import math
import os
import sqlite3
import sys

import numpy as np


def main():
    trace, reference_dir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, reference_dir)
    import reference_recipes as ref

    folder = os.path.dirname(os.path.abspath(trace))
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    tensors = db.execute(
        "SELECT DISTINCT r.tensor_id, r.operand, d.path, k.kernel, coalesce(k.layer, ''), k.step, t.slot, "
        "s.value, t.shape FROM tensor_recipes r JOIN dumps d ON d.tensor_id = r.tensor_id "
        "JOIN v_kernels k ON k.id = r.kernel_id JOIN tensors t ON t.id = r.tensor_id "
        "JOIN strings s ON s.id = t.name_id ORDER BY r.kernel_id").fetchall()
    names = [r[0] for r in ref.RECIPES]
    history = {}  # tensor (layer, name) -> finite amaxes, oldest first
    last = {}     # tensor (layer, name) -> (its bytes and view, the forecast) when last replayed
    compared = failures = 0
    for tensor_id, operand, path, kernel, layer, step, slot, name, shape in tensors:
        a = np.load(path if os.path.isabs(path) else os.path.join(folder, path))
        if a.dtype == np.uint16:  # bf16 as raw bits
            x = (a.astype(np.uint32) << 16).view(np.float32)
        else:
            x = a.astype(np.float32)
        shape = json.loads(shape)
        n = x.size
        weight = operand == "weight"
        if not shape:
            rows, cols = 1, n
        elif weight:
            rows, cols = shape[0], n // shape[0] if shape[0] else 0
        else:
            cols = shape[-1]
            rows = n // cols if cols else 0
        if rows * cols != n:
            rows, cols = 1, n
        # One history per tensor (its layer and name), one amax per version of its bytes: a launch
        # reading the bytes and view the last forecast of that tensor replayed takes that forecast.
        key = (layer, name)
        view = (x.tobytes(), rows, cols, weight)
        if key in last and last[key][0] == view:
            want = last[key][1]
        else:
            past = history.setdefault(key, [])
            hist = [0.0] * len(ref.RECIPES)
            for i, (rname, rule, element, block, tile_rows) in enumerate(ref.RECIPES):
                if rule == "delayed":
                    depth = 16 if rname.startswith("delayed16") else 1024
                    hist[i] = max(past[-depth:], default=0.0)
            want = ref.replay(x.reshape(-1), rows, cols, weight, hist)
            if want["amax"] != "inf":
                past.append(want["amax"])
                del past[:-1024]
            last[key] = (view, want)
        amax = want["amax"]
        got_rows = db.execute(
            "SELECT recipe, quantized, underflow, subnormal, saturated, blocks, blocks_lost, blocks_nonfinite, "
            "sse, signal, scale, amax FROM tensor_recipes WHERE tensor_id = ? ORDER BY recipe", (tensor_id,)).fetchall()
        for recipe, *got in got_rows:
            w = want["recipes"][names[recipe]]
            fields = ["values", "underflow", "subnormal", "saturated", "blocks", "blocks_lost", "blocks_nonfinite"]
            problems = [f"{f} {g} != {w[f]}" for f, g in zip(fields, got[:7]) if g != w[f]]
            sse, signal, scale, got_amax = got[7:]
            bound = (w["values"] + 2) * 2.0 ** -53
            if abs(sse - w["sse"]) > bound * w["sse"]:
                problems.append(f"sse {sse!r} vs {w['sse']!r}")
            if abs(signal - w["signal"]) > bound * w["signal"]:
                problems.append(f"signal {signal!r} vs {w['signal']!r}")
            if (scale is None) != (w["scale"] is None) or (scale is not None and scale != w["scale"]):
                problems.append(f"scale {scale!r} != {w['scale']!r}")
            if (got_amax is None) != (amax == "inf") or (got_amax is not None and got_amax != amax):
                problems.append(f"amax {got_amax!r} != {amax!r}")
            compared += 1
            if problems:
                failures += 1
                print(f"{kernel} step {step} {name} ({operand}) {names[recipe]}: " + "; ".join(problems))
    print(json.dumps({"tensors": len(tensors), "compared": compared, "failures": failures}))
    sys.exit(1 if failures else 2 if compared == 0 else 0)


if __name__ == "__main__":
    main()
