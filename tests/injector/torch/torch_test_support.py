"""What the PyTorch front end's end-to-end tests share: the programs they write, the way they run
them under `fpscope run`, and their command line (every torch_*_test.py beside it)."""
import argparse
import importlib.metadata
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "preload"))
import npy_stats  # noqa: E402  the numpy reference of the mptrain injection tests

FPSCOPE = None
OPERATORS = "observer"  # --torch-operators of every traced run
MPTRAIN = None
DATA_DIR = None
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "injector", "torch",
                       "examples", "fashion_cnn.py")
FINALIZE_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "contract", "schema",
                            "trace_finalize.sql")
TENSORS = "SELECT count(*) FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
PYTHON = sys.executable  # the interpreter that runs this test has torch and numpy
# The torch that interpreter imports, as (major, minor), read without importing it.
TORCH_VERSION = tuple(int(n) for n in importlib.metadata.version("torch").split(".")[:2])
TORCH_MAJOR = TORCH_VERSION[0]

# The small model of the test programs.
NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.fc1 = nn.Linear(4 * 6 * 6, 10)
    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2)
        return self.fc1(x.flatten(1))
"""

CNN = """
import sys
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)

""" + NET + """
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(8, 1, 14, 14)
y = torch.randint(0, 10, (8,))
for step in range(STEPS):
    opt.zero_grad()
    out = net(x)
    if step == 0:
        np.save(sys.argv[1], out.detach().numpy())
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
print("parameters", sum(p.numel() for p in net.parameters()))
"""


# How the DDP programs end. torch 2's gloo work threads can drop the last reference to a finished
# all-reduce while the interpreter is being finalized, and its destructor then asks for the GIL and
# aborts the rank ("terminate called without an active exception": ProcessGroupGloo::runLoop,
# ~AsyncWork, gil_scoped_acquire; seen untraced, in 2 of 16 torchrun runs beside another). Waiting
# for the ranks, letting the model and the optimizer go and collecting before the group is
# destroyed ended 48 runs of 48 cleanly.
DDP_ENDING = """dist.barrier()
del model, opt
gc.collect()
dist.destroy_process_group()"""

DDP_PROGRAM = """
import gc
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
""" + NET + """model = DistributedDataParallel(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1 + rank)  # each rank its own data
for step in range(4):
    x = torch.randn(8, 1, 14, 14, generator=g)
    y = torch.randint(0, 10, (8,), generator=g)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if rank == 0:
        print("loss", step, loss.item().hex())
""" + DDP_ENDING + """
"""

# The DDP program as the DDP tutorial starts it: the ranks are processes the program spawns itself
# (torch.multiprocessing.spawn, or mp.Process under the "spawn" start method when argv[2] is
# "process"), each told its rank by its argument and joining the group with it; rank 1 takes the
# log of its batch at step 2, which makes NaN. argv[1] is a free port for the rendezvous.
SPAWNED_DDP_PROGRAM = """
import gc, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
""" + NET + """
def train(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(4):
        x = torch.randn(8, 1, 14, 14, generator=g)
        if rank == 1 and step == 2:
            x = torch.log(x)  # NaN where x < 0
        y = torch.randint(0, 10, (8,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        os.write(1, ("rank %d loss %d %s\\n" % (rank, step, loss.item().hex())).encode())  # one write a line
""" + textwrap.indent(DDP_ENDING, "    ") + """

if __name__ == "__main__":
    if sys.argv[2] == "spawn":
        mp.spawn(train, args=(2, sys.argv[1]), nprocs=2)
    else:
        context = mp.get_context("spawn")
        ranks = [context.Process(target=train, args=(r, 2, sys.argv[1])) for r in range(2)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join()
        sys.exit(max(p.exitcode for p in ranks))
"""

# The seed program with an error planted in the front end from step 2 on, when argv[1] names the
# part to break: fault injection, the program reaching into the front end as no real one would.
PLANTED = """
import sys
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
""" + NET + """
def plant(part):
    from fpscope_torch import _front_end
    front = _front_end._front
    def broken(*args, **kwargs):
        raise RuntimeError("planted in " + part)
    setattr(front.ranges if part == "push" else front, part, broken)

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(8, 1, 14, 14)
y = torch.randint(0, 10, (8,))
counter = torch.zeros(1)
for step in range(4):
    if step == 2 and len(sys.argv) > 1:
        plant(sys.argv[1])
    counter.add_(1)  # the first operator after the plant: it must run exactly once
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
print("counter", counter.item())
print("dispatch modes", torch._C._len_torch_dispatch_stack())
"""

# A function given values outside its domain at step 2 only: `python3 OUTSIDE_DOMAIN FUNCTION
# SHIFT [view]`. Layer "1" computes z = sigmoid(x) / 2 + 1/4 - shift, inside (0, 1) when the shift
# is 0, as at every step but step 2; its last op is the `sub` that writes z. The function
# (torch.sqrt, torch.log, torch.acos, ...) reads z, or with "view" a view of it. A large SHIFT
# makes z's range jump as well.
OUTSIDE_DOMAIN = """
import sys, torch, torch.nn as nn
torch.manual_seed(0)
function, shift, through_view = getattr(torch, sys.argv[1]), float(sys.argv[2]), sys.argv[3:] == ["view"]
class Shift(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = 0.0
    def forward(self, x):
        z = torch.sigmoid(x) * 0.5 + 0.25 - self.shift
        return function(z.view(-1, 8) if through_view else z)
net = nn.Sequential(nn.Linear(8, 8), Shift(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(4, 8)
for step in range(4):
    net[1].shift = shift if step == 2 else 0.0
    opt.zero_grad()
    net(x).square().mean().backward()
    opt.step()
"""

# A GradScaler's steps, a marker op between step() and update(). torch 2.3 on has an enabled scaler
# on the CPU, which skips step 1 (its gradients infinite) and backs off; torch 1.13 has none there:
# a disabled one, which never skips.
SCALED = """
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
""" + NET + """
try:
    scaler, enabled = torch.amp.GradScaler("cpu"), True
except (AttributeError, TypeError, RuntimeError):
    scaler, enabled = torch.cuda.amp.GradScaler(enabled=False), False
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(8, 1, 14, 14)
y = torch.randint(0, 10, (8,))
for step in range(4):
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    if enabled and step == 1:
        loss = loss * float("inf")
    print("loss", step, loss.item().hex())
    scaler.scale(loss).backward()
    scaler.step(opt)
    torch.ones(2).neg()  # the marker
    scaler.update()
print("enabled", enabled)
"""


def run(args, cwd, env=None, check=True):
    full_env = dict(os.environ)
    full_env.pop("PYTHONPATH", None)
    if env:
        full_env.update(env)
    p = subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (args, p.returncode, p.stdout, p.stderr))
    return p


# The abort of DDP_ENDING's note, should it still come: the rank's training ran to the end.
GLOO_EXIT_ABORT = "terminate called without an active exception"


def run_ranks(command, cwd, tries=3):
    """Runs a multi-process program (`command()` makes its command line, with a fresh port each
    time) as run() does, again when a rank died of gloo's abort at exit and nothing else failed."""
    for attempt in range(tries):
        p = run(command(), cwd, check=False)
        if p.returncode == 0 or GLOO_EXIT_ABORT not in p.stderr or attempt == tries - 1:
            break
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (command(), p.returncode, p.stdout, p.stderr))
    return p


def free_port():
    """A TCP port nobody listens on now, for a process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def histogram(stored):
    """The exponent histogram as the trace stores it, as npy_stats writes it."""
    return {str(e): c for e, c in json.loads(stored).items()} if stored else {}


def losses(stdout):
    return [float.fromhex(line.split()[2]) for line in stdout.splitlines() if line.startswith("loss ")]


class FrontEndCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fpscope-torch-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def trace(self, script, *options, args=(), env=None, check=True):
        out = os.path.join(self.dir, "trace-%d.sqlite" % len(os.listdir(self.dir)))
        p = run([FPSCOPE, "run", "-q", "-o", out, "--torch-operators", OPERATORS, *options, "--", PYTHON, script, *args],
                self.dir, env, check)
        return out, p

    def query(self, trace, sql, *params):
        with sqlite3.connect(trace) as db:
            return db.execute(sql, params).fetchall()

    def cnn(self, steps=3):
        return self.write("cnn.py", CNN.replace("STEPS", str(steps)))

    def dumped_tensors_match(self, script, options, dump):
        trace, _ = self.trace(script, *options, "--dump", dump, args=[os.path.join(self.dir, "out.npy")])
        rows = self.query(trace, "SELECT d.path, t.count, t.nan, t.pos_inf, t.neg_inf, t.zero, t.subnormal, t.min,"
                                 " t.max, t.absmax, t.min_nonzero, t.mean, t.rms, t.f16_overflow, t.f16_underflow,"
                                 " t.f16_subnormal, t.f16_near_max, t.exp_hist"
                                 " FROM dumps d JOIN v_tensors t ON t.id = d.tensor_id")
        self.assertGreaterEqual(len(rows), 2)
        folder = os.path.dirname(trace)  # dump paths are relative to the trace's folder
        for path, *fields in rows:
            reference = npy_stats.stats(os.path.join(folder, path))
            names = ["count", "nan", "pos_inf", "neg_inf", "zero", "subnormal", "min", "max", "absmax",
                     "min_nonzero"]
            for name, value in zip(names, fields):
                self.assertEqual(value, reference[name], "%s of %s" % (name, path))
            mean, rms = fields[10], fields[11]
            self.assertAlmostEqual(mean, reference["mean"], delta=1e-12 * max(1.0, abs(mean)))
            self.assertAlmostEqual(rms, reference["rms"], delta=1e-12 * max(1.0, rms))
            for name, value in zip(["overflow", "underflow", "subnormal", "near_max"], fields[12:16]):
                self.assertEqual(value, reference["f16"][name], "f16 %s of %s" % (name, path))
            self.assertEqual(histogram(fields[16]), reference["hist"], path)
        return trace

    def trace_program(self, command):
        out = os.path.join(self.dir, "trace-%d.sqlite" % len(os.listdir(self.dir)))
        p = run([FPSCOPE, "run", "-q", "-o", out, "--torch-operators", OPERATORS, "--", *command], self.dir)
        return out, p

def main(test_globals):
    """Reads the command line into this module and the test module's globals, runs its tests."""
    global FPSCOPE, OPERATORS, MPTRAIN, DATA_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--fpscope", required=True)
    parser.add_argument("--torch-operators", default="observer", choices=["observer", "dispatch-mode"])
    parser.add_argument("--mptrain")
    parser.add_argument("--data-dir")
    known, rest = parser.parse_known_args()
    FPSCOPE = os.path.abspath(known.fpscope)
    OPERATORS = known.torch_operators
    MPTRAIN = known.mptrain and os.path.abspath(known.mptrain)
    DATA_DIR = known.data_dir
    test_globals.update(FPSCOPE=FPSCOPE, OPERATORS=OPERATORS, MPTRAIN=MPTRAIN, DATA_DIR=DATA_DIR)
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False)
    result = program.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped and result.testsRun == len(result.skipped):
        sys.exit(77)  # CTest's SKIP_RETURN_CODE: a skipped test must not read as passed
