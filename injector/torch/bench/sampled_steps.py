#!/usr/bin/python3
"""What a sampled PyTorch run pays, step by step: the example CNN (fashion_cnn.py, AdamW) timed from
inside the program (--step-times), untraced and under `fpscope run` with full statistics (with and
without `--updates`), with `--every N`, and with no step watched (`--steps` past the run's end), the
runs alternating mode after mode, repetition after repetition.

Prints per mode: the training loop's median seconds, the median of the per-repetition ratios to the
untraced run of the same repetition (with their minimum and maximum), and, against the untraced
run's median step: the median watched step and the median unwatched step, and the median of the
unwatched steps just after a watched one (which pay for anything a watched step leaves behind). The
first steps (PyTorch builds its primitives lazily) are left out of the step medians.

Usage: injector/torch/bench/sampled_steps.py [--build build] [--reps 5] [--images 6400] [--every 10]
       [--python /usr/bin/python3] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "fashion_cnn.py")
WARMUP = 5  # steps left out of the step medians


def run(cmd, times_path):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with open(times_path) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--images", type=int, default=6400)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--python", default="/usr/bin/python3", help="the interpreter with torch")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fpscope = os.path.join(args.build, "bin", "fpscope")
    if not os.access(fpscope, os.X_OK):
        sys.exit("sampled_steps.py: %s not found; build fpscope and the injector first" % fpscope)
    steps = args.images // 32
    modes = [("untraced", None), ("full", []), ("full, no updates", ["--updates", "off"]),
             ("every %d" % args.every, ["--every", str(args.every)]), ("none watched", ["--steps", "%d-" % (steps + 1000)])]
    loops = {name: [] for name, _ in modes}
    watched, unwatched, after = ({name: [] for name, _ in modes} for _ in range(3))
    with tempfile.TemporaryDirectory() as work:
        times = os.path.join(work, "steps.json")
        program = [args.python, EXAMPLE, "--optimizer", "adamw", "--images", str(args.images),
                   "--threads", str(args.threads), "--step-times", times]
        for rep in range(args.reps):
            for name, options in modes:
                cmd = program if options is None else [fpscope, "run", "-q", "--force", *options, "-o",
                                                       os.path.join(work, "t.sqlite"), "--", *program]
                t = run(cmd, times)
                loops[name].append(sum(t))
                for i, s in enumerate(t[WARMUP:], start=WARMUP):
                    is_watched = name.startswith("full") or (name.startswith("every") and i % args.every == 0)
                    (watched if is_watched else unwatched)[name].append(s)
                    if name.startswith("every") and i % args.every == 1:
                        after[name].append(s)
            print("repetition %d of %d done" % (rep + 1, args.reps), file=sys.stderr)
    base_step = statistics.median(unwatched["untraced"])
    print("%d images (%d steps of 32), AdamW, %d threads, %d repetitions, %s" %
          (args.images, steps, args.threads, args.reps, args.python))
    print("untraced median step: %.3f ms" % (1000 * base_step))
    print("%-17s %10s %24s %14s %16s %18s" % ("mode", "loop s", "loop / untraced (min-max)", "watched step",
                                              "unwatched step", "step after watched"))
    for name, _ in modes:
        ratios = [a / b for a, b in zip(loops[name], loops["untraced"])]
        cell = lambda xs: ("%.2fx" % (statistics.median(xs) / base_step)) if xs else "-"
        print("%-17s %10.3f %10.2f (%.2f-%.2f) %14s %16s %18s" %
              (name, statistics.median(loops[name]), statistics.median(ratios), min(ratios), max(ratios),
               cell(watched[name]), cell(unwatched[name]), cell(after[name])))


if __name__ == "__main__":
    main()
