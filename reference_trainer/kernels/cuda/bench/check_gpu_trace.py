#!/usr/bin/env python3
"""Checks a trace of a training run on the GPU (mptrain `--device cuda`, or a PyTorch program on
CUDA tensors, under `fpscope run`) against a trace of the same run on the CPU, and prints the
result as markdown.

    check_gpu_trace.py GPU_TRACE CPU_TRACE
    check_gpu_trace.py --loss-scale TRACE

The GPU trace must hold CUPTI activity (meta injector.cupti_status = active, rows in cuda_kernels
and cuda_memcpy), device launches with measured tensors, and no dropped or malformed records. The
statistics that the GPU library computed on the device are then compared with the CPU library's
for the same values: each parameter and the input batch at their first use as a forward input in
step 0 hold the same bits on both devices (the initial weights are made on the host and copied),
so every field must be equal, with mean and rms within 1e-12 of rms (both sides keep compensated
sums, summed in different orders).

With --loss-scale, the trace of a run with dynamic loss scaling on the GPU must hold its loss-scale
events: at least one `loss_scale` row, every scale finite and positive, rows in steps, one row per
step at most.

Exit status: 0 when every check passed, 1 when one failed, 2 when a trace cannot be read."""
import math
import sqlite3
import sys

# Columns of `tensors` that are not statistics (ids and where the row sits).
NOT_STATISTICS = {"id", "kernel_id", "role", "slot", "tensor_uid", "name_id"}
SUMS = {"mean", "rms"}
SUM_TOLERANCE = 1e-12


def open_trace(path):
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.execute("SELECT count(*) FROM meta").fetchone()
        return db
    except sqlite3.Error as e:
        print(f"check_gpu_trace: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def meta(db, key):
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def count(db, sql):
    return db.execute(sql).fetchone()[0]


def first_forward_inputs(db, device):
    """{tensor name: row as a dict} for the parameters and the input batch at their first use as
    an input of a forward launch of step 0 on the given device (0 CPU, 1 CUDA)."""
    columns = [r[1] for r in db.execute("PRAGMA table_info(tensors)")]
    rows = db.execute(
        f"SELECT t.tensor, {', '.join('t.' + c for c in columns)} FROM v_tensors t "
        "JOIN v_kernels k ON k.id = t.kernel_id "
        "WHERE t.role = 'in' AND k.step = 0 AND k.phase = 'forward' AND k.device = ? "
        "ORDER BY t.id", (device,)).fetchall()
    found = {}
    for row in rows:
        name = row[0]
        if name in found or not (name == "input" or name.endswith((".weight", ".bias"))):
            continue
        found[name] = dict(zip(columns, row[1:]))
    return found


def differences(gpu, cpu):
    out = []
    for column, want in cpu.items():
        if column in NOT_STATISTICS:
            continue
        got = gpu.get(column)
        if column in SUMS and got is not None and want is not None:
            scale = max(abs(cpu.get("rms") or 0.0), math.ulp(0.0))
            if abs(got - want) > SUM_TOLERANCE * scale:
                out.append(f"{column} {got!r} != {want!r}")
        elif got != want:
            out.append(f"{column} {got!r} != {want!r}")
    return out


def loss_scale_checks(db, check):
    rows = db.execute("SELECT step, scale_before, scale_after, event FROM loss_scale ORDER BY t_ns").fetchall()
    check("loss-scale events recorded", len(rows) > 0, f"{len(rows)} loss_scale rows")
    bad = [r for r in rows if not all(x is not None and math.isfinite(x) and x > 0 for x in r[1:3])]
    check("scales finite and positive", rows and not bad, f"{len(bad)} rows with another scale" +
          (f", first {bad[0]}" if bad else (f"; first {rows[0][1]:g}, last {rows[-1][2]:g}" if rows else "")))
    steps = [r[0] for r in rows if r[0] is not None]
    check("one event per step at most", steps and len(steps) == len(set(steps)),
          f"{len(steps)} events in {len(set(steps))} steps; events: " +
          ", ".join(f"{e} {sum(1 for r in rows if r[3] == e)}" for e in sorted({r[3] for r in rows})))


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    checks = []

    def check(name, ok, detail):
        checks.append((name, bool(ok), detail))

    if len(args) == 2 and args[0] == "--loss-scale":
        loss_scale_checks(open_trace(args[1]), check)
        return report(checks)
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    gpu, cpu = open_trace(args[0]), open_trace(args[1])

    status = meta(gpu, "injector.cupti_status")
    check("CUPTI collection active", status == "active", f"injector.cupti_status = {status}")
    kernels, copies = count(gpu, "SELECT count(*) FROM cuda_kernels"), count(gpu, "SELECT count(*) FROM cuda_memcpy")
    check("CUPTI kernel and copy records", kernels > 0 and copies > 0,
          f"{kernels} cuda_kernels rows, {copies} cuda_memcpy rows")
    launches = count(gpu, "SELECT count(*) FROM kernels WHERE device = 1 AND sampled = 1")
    measured = count(gpu, "SELECT count(*) FROM tensors t JOIN kernels k ON k.id = t.kernel_id WHERE k.device = 1")
    check("device launches measured", launches > 0 and measured > 0,
          f"{launches} sampled device launches, {measured} measured tensors")
    lost = [f"{k} = {meta(gpu, k)}" for k in ("dropped_records", "malformed_records", "corrupt_ring_records")]
    check("no records lost", all(x.endswith("= 0") for x in lost), ", ".join(lost))
    check("run ended normally", meta(gpu, "end_reason") == "exited" and meta(gpu, "exit_code") == "0",
          f"end_reason = {meta(gpu, 'end_reason')}, exit_code = {meta(gpu, 'exit_code')}")

    on_gpu, on_cpu = first_forward_inputs(gpu, 1), first_forward_inputs(cpu, 0)
    check("same tensors compared", on_cpu and set(on_gpu) == set(on_cpu),
          f"GPU {sorted(on_gpu)}; CPU {sorted(on_cpu)}")
    for name in sorted(set(on_gpu) & set(on_cpu)):
        diff = differences(on_gpu[name], on_cpu[name])
        check(f"statistics of {name} (GPU = CPU)", not diff,
              "; ".join(diff) if diff else f"{on_cpu[name]['count']} elements, every field equal")

    return report(checks)


def report(checks):
    print("| check | result | detail |")
    print("|---|---|---|")
    for name, ok, detail in checks:
        print(f"| {name} | {'pass' if ok else 'FAIL'} | {detail} |")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
