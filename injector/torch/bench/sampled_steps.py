#!/usr/bin/python3
"""What a sampled PyTorch run pays, step by step: an example program timed from inside (--step-times),
the CNN (fashion_cnn.py, AdamW, few large operators a step) or with --example transformer the
character-level transformer (char_transformer.py, AdamW, bf16 autocast, many small operators), untraced and under `fpscope run` with full statistics (with and
without `--updates`), with `--every N`, and with no step watched (`--steps` past the run's end), the
runs alternating mode after mode, repetition after repetition.

Prints per mode: the training loop's median seconds, the median of the per-repetition ratios to the
untraced run of the same repetition (with their minimum and maximum), and, against the untraced
run's median step: the median watched step and the median unwatched step, and the median of the
unwatched steps just after a watched one (which pay for anything a watched step leaves behind). The
first steps (PyTorch builds its primitives lazily) are left out of the step medians. With --before, another
build's fpscope runs every traced mode too, in the same alternation against the same untraced runs:
its rows are marked "(before)", for a before/after table from one sitting.

Usage: injector/torch/bench/sampled_steps.py [--build build] [--before BUILD] [--reps 5]
       [--example cnn|transformer] [--images 6400] [--steps 200] [--every 10] [--python /usr/bin/python3]
       [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = {"cnn": os.path.join(HERE, "..", "examples", "fashion_cnn.py"),
            "transformer": os.path.join(HERE, "..", "examples", "char_transformer.py")}
WARMUP = 5  # steps left out of the step medians


def run(cmd, times_path):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with open(times_path) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--build", default="build", help="the build folder whose fpscope is timed (default build)")
    parser.add_argument("--before", help="another build folder whose fpscope runs every traced mode too")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of every mode (default 5)")
    parser.add_argument("--example", choices=sorted(EXAMPLES), default="cnn", help="the program timed (default cnn)")
    parser.add_argument("--images", type=int, default=6400, help="the CNN's training images, 32 a step (default 6400)")
    parser.add_argument("--steps", type=int, default=200, help="the transformer's steps (default 200)")
    parser.add_argument("--every", type=int, default=10, help="the sampled mode's --every (default 10)")
    parser.add_argument("--python", default="/usr/bin/python3", help="the interpreter with torch")
    parser.add_argument("--threads", type=int, default=2, help="the program's threads (default 2)")
    args = parser.parse_args()
    if args.reps < 1 or args.images < 32 * 10 or args.steps < 10 or args.every < 2:
        sys.exit("sampled_steps.py: --reps must be at least 1, --images at least 320, --steps at least 10, "
                 "--every at least 2")
    builds = [("", args.build)] + ([(" (before)", args.before)] if args.before else [])
    for _, build in builds:
        if not os.access(os.path.join(build, "bin", "fpscope"), os.X_OK):
            sys.exit("sampled_steps.py: %s not found; build fpscope and the injector first" %
                     os.path.join(build, "bin", "fpscope"))
    steps = args.images // 32 if args.example == "cnn" else args.steps
    traced = [("full", []), ("full, no updates", ["--updates", "off"]), ("every %d" % args.every, ["--every", str(args.every)]),
              ("none watched", ["--steps", "%d-" % (steps + 1000)])]
    # (row name, fpscope or None for the untraced run, options)
    modes = [("untraced", None, None)] + [(name + mark, os.path.join(build, "bin", "fpscope"), options)
                                          for mark, build in builds for name, options in traced]
    loops = {name: [] for name, _, _ in modes}
    watched, unwatched, after = ({name: [] for name, _, _ in modes} for _ in range(3))
    with tempfile.TemporaryDirectory() as work:
        times = os.path.join(work, "steps.json")
        program = [args.python, EXAMPLES[args.example], "--threads", str(args.threads), "--step-times", times]
        program += (["--optimizer", "adamw", "--images", str(args.images)] if args.example == "cnn"
                    else ["--steps", str(args.steps)])
        for rep in range(args.reps):
            for name, fpscope, options in modes:
                cmd = program if fpscope is None else [fpscope, "run", "-q", "--force", *options, "-o",
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
    what = ("the CNN, %d images (%d steps of 32), AdamW" % (args.images, steps) if args.example == "cnn"
            else "the character-level transformer, %d steps, AdamW, bf16 autocast" % steps)
    print("%s, %d threads, %d repetitions, %s" % (what, args.threads, args.reps, args.python))
    print("untraced median step: %.3f ms" % (1000 * base_step))
    print("%-26s %10s %24s %14s %16s %18s" % ("mode", "loop s", "loop / untraced (min-max)", "watched step",
                                              "unwatched step", "step after watched"))
    for name, _, _ in modes:
        ratios = [a / b for a, b in zip(loops[name], loops["untraced"])]
        cell = lambda xs: ("%.2fx" % (statistics.median(xs) / base_step)) if xs else "-"
        print("%-26s %10.3f %10.2f (%.2f-%.2f) %14s %16s %18s" %
              (name, statistics.median(loops[name]), statistics.median(ratios), min(ratios), max(ratios),
               cell(watched[name]), cell(unwatched[name]), cell(after[name])))


if __name__ == "__main__":
    main()
