"""Checks a trace's parameter updates (param_updates) against the optimizer launches' tensors that
--dump wrote: the parameter before the step (input 0), its gradient (input 1) and the parameter
after it (output 0).

Usage: updates_from_dumps.py TRACE.sqlite

For every param_updates row whose launch has those three dumps, numpy recomputes from the files
alone: the elements whose stored bits changed, the sums of |new - old|, (new - old)^2 and old^2
over finite elements. For plain SGD (config.optimizer 'sgd(momentum=0,weight_decay=0)') the
computed update is -(fp32(lr) * grad) in fp32, so the elements with a nonzero update, those of them
left unchanged (lost) and the computed sums are recomputed too. Counts must be equal, sums equal
within 1e-12 of their size (the kernel adds the same doubles in another order). Prints a JSON
summary; exits 1 on any difference, 2 when nothing could be compared.
"""
import json
import os
import sqlite3
import sys

import numpy as np


def as_f32(a, dtype_name):
    """The values of a dumped floating tensor as float32 (bf16 is dumped as its 16 bits)."""
    if dtype_name == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def bits(values):
    return values.view(np.uint32)


def close(got, want):
    return got is not None and abs(got - want) <= 1e-12 * abs(want) + 1e-300


def main():
    trace = sys.argv[1]
    folder = os.path.dirname(os.path.abspath(trace))
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    plain_sgd = meta.get("config.optimizer") == "sgd(momentum=0,weight_decay=0)"
    lr = np.float32(float(meta["config.lr"])) if plain_sgd else None

    def dump(kernel_id, role, slot):
        row = db.execute(
            "SELECT d.path FROM dumps d JOIN tensors t ON t.id = d.tensor_id "
            "WHERE t.kernel_id = ? AND t.role = ? AND t.slot = ?", (kernel_id, role, slot)).fetchone()
        if row is None:
            return None
        return np.load(row[0] if os.path.isabs(row[0]) else os.path.join(folder, row[0]))

    rows = db.execute(
        "SELECT u.kernel_id, u.param, u.dtype_name, u.elements, u.changed, u.nonzero, u.lost, "
        "u.computed_abs_sum, u.computed_sq_sum, u.applied_abs_sum, u.applied_sq_sum, u.weight_sq_sum "
        "FROM v_param_updates u ORDER BY u.kernel_id").fetchall()
    compared = failures = 0
    problems = []
    lost_total = nonzero_total = 0
    for (kernel_id, param, dtype_name, elements, changed, nonzero, lost, computed_abs, computed_sq,
         applied_abs, applied_sq, weight_sq) in rows:
        before, grad, after = dump(kernel_id, "in", 0), dump(kernel_id, "in", 1), dump(kernel_id, "out", 0)
        if before is None or grad is None or after is None:
            continue
        old = as_f32(before, dtype_name).ravel()
        new = as_f32(after, dtype_name).ravel()
        finite = np.isfinite(old) & np.isfinite(new)
        moved = bits(old) != bits(new)
        applied = new.astype(np.float64) - old.astype(np.float64)
        want = {
            "elements": (elements, old.size),
            "changed": (changed, int(moved.sum())),
        }
        sums = {
            "applied_abs_sum": (applied_abs, float(np.abs(applied[finite]).sum())),
            "applied_sq_sum": (applied_sq, float((applied[finite] ** 2).sum())),
            "weight_sq_sum": (weight_sq, float((old[finite].astype(np.float64) ** 2).sum())),
        }
        if plain_sgd:
            g = as_f32(grad, "f32" if grad.dtype != np.uint16 else "bf16").ravel()
            u = -(lr * g).astype(np.float64)  # the product in fp32, then exactly in double
            has_update = u != 0
            want["nonzero"] = (nonzero, int(has_update.sum()))
            want["lost"] = (lost, int((has_update & ~moved).sum()))
            sums["computed_abs_sum"] = (computed_abs, float(np.abs(u[finite]).sum()))
            sums["computed_sq_sum"] = (computed_sq, float((u[finite] ** 2).sum()))
            lost_total += want["lost"][1]
            nonzero_total += want["nonzero"][1]
        for name, (got, expected) in want.items():
            if got != expected:
                failures += 1
                problems.append(f"{param} launch {kernel_id}: {name} {got} != {expected}")
        for name, (got, expected) in sums.items():
            if not close(got, expected):
                failures += 1
                problems.append(f"{param} launch {kernel_id}: {name} {got!r} != {expected!r}")
        compared += 1
    print(json.dumps({"compared": compared, "failures": failures, "plain_sgd": plain_sgd,
                      "lost": lost_total, "nonzero": nonzero_total, "problems": problems[:20]}, indent=1))
    if failures:
        return 1
    return 0 if compared else 2


if __name__ == "__main__":
    sys.exit(main())
