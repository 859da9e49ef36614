"""The cost of one small operator: torch.add of two 64-float tensors, N times, timed inside the
program. Run it plain and under `fpscope run` with different options to see what tracing adds to
each operator (docs/pytorch.md, "Overhead"). The default number of calls leaves the collector time
to keep up: with many more, the trace's ring fills (meta producer_waits in the trace) and the
figure is the collector's pace rather than the operator's cost.

    /usr/bin/python3 injector/torch/bench/operator_cost.py
    fpscope run -q --force -o /tmp/op.sqlite -- /usr/bin/python3 injector/torch/bench/operator_cost.py
    fpscope run -q --force -o /tmp/op.sqlite --ops nothing -- /usr/bin/python3 injector/torch/bench/operator_cost.py
    fpscope run -q --force -o /tmp/op.sqlite --stats basic -- /usr/bin/python3 injector/torch/bench/operator_cost.py
"""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000, help="operator calls timed (default 5000)")
    parser.add_argument("--elements", type=int, default=64, help="elements of each tensor (default 64)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    a, b = torch.randn(args.elements), torch.randn(args.elements)
    for _ in range(200):  # warm-up
        torch.add(a, b)
    start = time.perf_counter()
    for _ in range(args.calls):
        torch.add(a, b)
    print("%.2f us per operator (%d calls of add on %d floats)"
          % ((time.perf_counter() - start) / args.calls * 1e6, args.calls, args.elements))


if __name__ == "__main__":
    main()
