#!/usr/bin/env python3
"""Turns the raw outputs of gpu-checks.sh into summary.md: test counts, accuracy per precision
mode (GPU against CPU), step times with ratios to fp32, tracing overhead, the check of a GPU
trace against a CPU one, the PyTorch anchor, the PyTorch front end on the GPU and the benchmark
tables. Only numbers found in the results folder are printed; a missing run shows as "not run"."""
import glob
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(value, pattern="{:.2f}"):
    return "not run" if value is None else pattern.format(value)


def tests(out):
    lines = ["## Unit tests", "", "| binary | tests | failures | skipped |", "|---|---|---|---|"]
    for name in ("mpt_cuda_tests", "fpscope_gpu_tests"):
        j = load(os.path.join(out, name + ".json"))
        if not j:
            lines.append(f"| {name} | not run | | |")
            continue
        skipped = sum(1 for s in j.get("testsuites", []) for t in s.get("testsuite", [])
                      if t.get("result") == "SKIPPED")
        lines.append(f"| {name} | {j.get('tests')} | {j.get('failures')} | {skipped} |")
    return lines


def run(out, name):
    return load(os.path.join(out, "runs", name + ".json"))


def accuracy(out):
    lines = ["## Accuracy per precision mode (cnn, seed 1, 4096 train / 1000 test images)", "",
             "| mode | CPU test acc % | GPU test acc % | CPU last loss | GPU last loss | GPU skipped steps |",
             "|---|---|---|---|---|---|"]
    for mode in ("fp32", "amp-fp16", "amp-bf16", "fp16", "bf16", "fp8-current", "fp8-mxfp8", "fp8-nvfp4"):
        cpu, gpu = run(out, f"accuracy-{mode}-cpu"), run(out, f"accuracy-{mode}-cuda")
        def last_loss(r):
            losses = [x for x in (r or {}).get("losses", []) if x is not None]
            return losses[-1] if losses else None
        lines.append(f"| {mode} | {fmt(cpu and cpu.get('test_accuracy'))} | "
                     f"{fmt(gpu and gpu.get('test_accuracy'))} | {fmt(last_loss(cpu), '{:.4f}')} | "
                     f"{fmt(last_loss(gpu), '{:.4f}')} | {fmt(gpu and gpu.get('skipped_steps'), '{}')} |")
    return lines


def step_times(out):
    lines = ["## Step time on the GPU (mptrain --device cuda)", "",
             "| model | mode | step ms | vs fp32 | images/s |", "|---|---|---|---|---|"]
    for model in ("mlp", "cnn"):
        base = run(out, f"steptime-{model}-fp32")
        for mode in ("fp32", "amp-fp16", "amp-bf16"):
            r = run(out, f"steptime-{model}-{mode}")
            ms = r and r.get("step_time_ms")
            ratio = ms / base["step_time_ms"] if ms and base and base.get("step_time_ms") else None
            lines.append(f"| {model} | {mode} | {fmt(ms, '{:.3f}')} | {fmt(ratio)} | "
                         f"{fmt(r and r.get('images_per_s'), '{:.0f}')} |")
    return lines


def tracing(out):
    lines = ["## Tracing overhead (mlp amp-fp16, runs of each mode in turn)", "",
             "| mode | step ms, median | min-max | vs untraced |", "|---|---|---|---|"]
    medians = {}
    for mode, label in (("plain", "untraced"), ("launches", "launches only (`--ops zzz`)"),
                        ("basic", "basic statistics"), ("full", "full statistics")):
        times = []
        for path in sorted(glob.glob(os.path.join(out, "runs", f"overhead-{mode}-*.json"))):
            j = load(path)
            if j and j.get("step_time_ms"):
                times.append(j["step_time_ms"])
        if not times:
            lines.append(f"| {label} | not run | | |")
            continue
        medians[mode] = statistics.median(times)
        base = medians.get("plain")
        lines.append(f"| {label} | {medians[mode]:.3f} | {min(times):.3f}-{max(times):.3f} | "
                     f"{fmt(medians[mode] / base if base else None)} |")
    return lines + [""] + section_file(out, "loss_scale_check.md", "Loss-scale events of the traced run")


def section_file(out, name, title):
    lines = [f"### {title}", ""]
    try:
        with open(os.path.join(out, name)) as f:
            return lines + [f.read().rstrip()]
    except OSError:
        return lines + ["not run"]


def trace_check(out):
    return ["## A traced run on the GPU against the same run on the CPU (check_gpu_trace.py)", ""] + \
        section_file(out, "trace_check.md", "mptrain, CNN fp32")[2:]


def torch_front_end(out):
    return ["## The PyTorch front end on CUDA tensors (fashion_cnn.py)", ""] + \
        section_file(out, "torch_trace_check.md", "traced on the GPU against on the CPU; GradScaler")[2:]


def torch_anchor(out):
    j = load(os.path.join(out, "torch_anchor.json"))
    lines = ["## PyTorch anchor (autocast + GradScaler)", ""]
    if not j:
        return lines + ["not run"]
    lines += ["| model | mode | step ms | vs fp32 |", "|---|---|---|---|"]
    for model, modes in j["results"].items():
        base = modes.get("fp32")
        for mode, ms in modes.items():
            lines.append(f"| {model} | {mode} | {ms:.3f} | {fmt(ms / base if base else None)} |")
    lines.append("")
    lines.append(f"device: {j.get('device')}, torch {j.get('torch')}")
    return lines


def benchmarks(out):
    lines = ["## Micro-benchmarks", ""]
    for name in ("cuda_kernels_benchmark", "gpu_stats_benchmark"):
        j = load(os.path.join(out, name + ".json"))
        lines += [f"### {name}", ""]
        if not j:
            lines += ["not run", ""]
            continue
        lines += ["| benchmark | time | unit | items/s |", "|---|---|---|---|"]
        for b in j.get("benchmarks", []):
            if b.get("error_occurred"):
                lines.append(f"| {b['name']} | error: {b.get('error_message')} | | |")
                continue
            rate = b.get("items_per_second")
            lines.append(f"| {b['name']} | {b['real_time']:.3f} | {b['time_unit']} | "
                         f"{'' if rate is None else f'{rate:.3e}'} |")
        lines.append("")
    return lines


def main():
    out = sys.argv[1]
    env = ""
    try:
        with open(os.path.join(out, "environment.txt")) as f:
            env = f.read().strip()
    except OSError:
        pass
    parts = [["# GPU checks", "", "```", env, "```"], tests(out), accuracy(out), step_times(out),
             tracing(out), trace_check(out), torch_anchor(out), torch_front_end(out), benchmarks(out)]
    print("\n\n".join("\n".join(p) for p in parts))


if __name__ == "__main__":
    main()
