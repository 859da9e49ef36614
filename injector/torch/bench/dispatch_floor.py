"""What the PyTorch front end's mechanism costs before it measures anything: the example CNN run
plain, and run under a TorchDispatchMode that only forwards every operator (no statistics, no
hooks, no injector). The ratio is the floor of any front end built on a Python dispatch mode.

Usage: /usr/bin/python3 injector/torch/bench/dispatch_floor.py [--reps 5] [--images 6000] [--threads 2]

Runs alternate (plain, forwarding, plain, ...) as whole processes; prints each run's wall seconds,
the medians, and the median of the pair-by-pair ratios with their minimum and maximum.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CNN = os.path.join(HERE, "..", "examples", "fashion_cnn.py")

# Run as `python3 dispatch_floor.py --forward-only CNN ARGS...`: the program under the do-nothing mode.
FORWARD_ONLY = """
import runpy, sys
from torch.utils._python_dispatch import TorchDispatchMode

class ForwardOnly(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

sys.argv = sys.argv[1:]
with ForwardOnly():
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def wall(command):
    start = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--images", type=int, default=6000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    program = [CNN, "--images", str(args.images), "--threads", str(args.threads)]
    plain, forwarding = [], []
    for _ in range(args.reps):
        plain.append(wall([sys.executable] + program))
        forwarding.append(wall([sys.executable, "-c", FORWARD_ONLY] + program))
    ratios = [f / p for f, p in zip(forwarding, plain)]
    print("plain s:        " + " ".join("%.2f" % t for t in plain))
    print("forwarding s:   " + " ".join("%.2f" % t for t in forwarding))
    print("median plain %.2f s, forwarding %.2f s; forwarding/plain %.3fx (%.3f-%.3f), %d alternating runs"
          % (statistics.median(plain), statistics.median(forwarding), statistics.median(ratios), min(ratios),
             max(ratios), args.reps))


if __name__ == "__main__":
    main()
