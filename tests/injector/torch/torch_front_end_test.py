"""End-to-end tests of the PyTorch front end: real PyTorch programs run under `fpscope run`.

Each test writes a small training program into a fresh temporary folder, runs it with and without
the tracer, and checks the trace with SQL against independent facts: the losses the program
printed (bit for bit), numpy statistics of tensors the program saved itself, the model's parameter
count, and the operators PyTorch is known to dispatch.

Usage: torch_front_end_test.py --fpscope PATH [unittest arguments]
"""
import argparse
import json
import math
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "preload"))
import npy_stats  # noqa: E402  the numpy reference of the mptrain injection tests

FPSCOPE = None
OPERATORS = "observer"  # --torch-operators of every traced run
MPTRAIN = None
DATA_DIR = None
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "injector", "torch",
                       "examples", "fashion_cnn.py")
FINALIZE_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "collector", "schema",
                            "trace_finalize.sql")
TENSORS = "SELECT count(*) FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
PYTHON = sys.executable  # the interpreter that runs this test has torch and numpy

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


DDP_PROGRAM = """
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
dist.destroy_process_group()
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


def histogram(stored):
    """The exponent histogram as the trace stores it, as npy_stats writes it."""
    return {str(e): c for e, c in json.loads(stored).items()} if stored else {}


def losses(stdout):
    return [float.fromhex(line.split()[2]) for line in stdout.splitlines() if line.startswith("loss ")]


class FrontEndTest(unittest.TestCase):
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

    def test_losses_are_bit_identical_with_and_without_tracing(self):
        script = self.cnn()
        plain = run([PYTHON, script, os.path.join(self.dir, "plain.npy")], self.dir)
        trace, traced = self.trace(script, args=[os.path.join(self.dir, "traced.npy")])
        self.assertEqual(losses(plain.stdout), losses(traced.stdout))
        self.assertEqual(len(losses(plain.stdout)), 3)
        recorded = [v for (v,) in self.query(trace, "SELECT s.value FROM scalars s JOIN strings n ON n.id = s.name_id"
                                             " WHERE n.value = 'loss' ORDER BY step")]
        self.assertEqual(recorded, losses(plain.stdout))

    def test_a_failure_of_the_front_end_stops_tracing_and_the_program_goes_on(self):
        script = self.write("planted.py", PLANTED)
        plain = run([PYTHON, script], self.dir)
        self.assertEqual(len(losses(plain.stdout)), 4)
        # Before an operator runs (its plan), after it ran (its outputs), and in a module hook (a
        # range pushed): the dispatch mode meets the first two, both ways meet the third.
        parts = ["push"] if OPERATORS == "observer" else ["plan", "outputs_of", "push"]
        for part in parts:
            with self.subTest(part=part):
                trace, traced = self.trace(script, args=[part])
                # Every operator ran exactly once: the program computed what it computes untraced,
                # and the front end's dispatch mode is off.
                self.assertEqual(losses(traced.stdout), losses(plain.stdout))
                self.assertIn("counter 4.0", traced.stdout)
                self.assertIn("dispatch modes 0", traced.stdout)
                self.assertIn("tracing stopped in process", traced.stderr)
                self.assertIn("the PyTorch front end failed (RuntimeError: planted in %s" % part, traced.stderr)
                failure = self.query(trace, "SELECT value FROM meta WHERE key = 'injector.failure'")
                self.assertEqual(len(failure), 1, traced.stderr)
                self.assertTrue(failure[0][0].startswith("the PyTorch front end: RuntimeError: planted in %s (" % part),
                                failure[0][0])
                # The trace keeps what came before the failure, and nothing after it.
                steps = self.query(trace, "SELECT DISTINCT step FROM v_kernels WHERE kernel = 'convolution'")
                self.assertEqual({s for (s,) in steps}, {0, 1})
                ended = dict(self.query(trace, "SELECT key, value FROM meta WHERE key IN ('end_reason', 'exit_code')"))
                self.assertEqual(ended, {"end_reason": "exited", "exit_code": "0"})

    def test_operators_layers_phases_and_steps(self):
        trace, _ = self.trace(self.cnn(), args=[os.path.join(self.dir, "out.npy")])
        rows = self.query(trace, "SELECT DISTINCT kernel, ifnull(layer, ''), ifnull(phase, ''), step FROM v_kernels")
        seen = {(k, l, p, s) for k, l, p, s in rows}
        for step in range(3):
            self.assertIn(("convolution", "conv1", "forward", step), seen)
            self.assertIn(("addmm", "fc1", "forward", step), seen)
            self.assertIn(("convolution_backward", "conv1", "backward", step), seen)
            self.assertIn(("mm", "fc1", "backward", step), seen)
            self.assertIn(("threshold_backward", "", "backward", step), seen)
            self.assertIn(("_log_softmax_backward_data", "", "backward", step), seen)
            self.assertIn(("add_", "", "optimizer", step), seen)
        # Step 3 holds what the program did after its last optimizer step (the final print).
        self.assertEqual({s for k, _, _, s in rows if k == "convolution"}, {0, 1, 2})
        self.assertEqual({s for _, _, _, s in rows}, {0, 1, 2, 3})
        # View and metadata operators are counted but not measured.
        unmeasured = self.query(trace, "SELECT DISTINCT kernel FROM v_kernels WHERE sampled = 0")
        self.assertTrue({"t", "detach"} <= {k for (k,) in unmeasured}, unmeasured)
        measured_views = self.query(trace, TENSORS + " WHERE k.kernel IN ('t', 'detach', 'view')")
        self.assertEqual(measured_views[0][0], 0)

    def test_statistics_match_numpy_on_the_programs_own_tensor(self):
        saved = os.path.join(self.dir, "out.npy")
        trace, _ = self.trace(self.cnn(), args=[saved])
        a = np.load(saved).astype(np.float64).ravel()
        row = self.query(trace, "SELECT t.count, t.min, t.max, t.absmax, t.min_nonzero, t.zero, t.nan, t.shape FROM v_tensors t"
                                " JOIN v_kernels k ON k.id = t.kernel_id"
                                " WHERE k.kernel = 'addmm' AND k.layer = 'fc1' AND k.step = 0 AND t.role = 'out'")
        self.assertEqual(len(row), 1)
        count, lo, hi, absmax, min_nonzero, zero, nan, shape = row[0]
        self.assertEqual(count, a.size)
        self.assertEqual(lo, a.min())
        self.assertEqual(hi, a.max())
        self.assertEqual(absmax, np.abs(a).max())
        self.assertEqual(min_nonzero, np.abs(a[a != 0]).min())
        self.assertEqual(zero, int((a == 0).sum()))
        self.assertEqual(nan, 0)
        self.assertEqual(json.loads(shape), [8, 10])

    def test_a_program_that_flushes_subnormals_gets_their_exact_statistics(self):
        # torch.set_flush_denormal sets denormals-are-zero on the program's thread, where the
        # scans run: the statistics must still read subnormals as they are (and the program keep
        # its mode, which its own comparison shows).
        script = self.write("flush.py", """
            import torch
            torch.set_flush_denormal(True)
            x = torch.arange(1, 70001, dtype=torch.int32).view(torch.float32)  # 1..70000 * 2^-149
            y = x.clone()
            print(int((y != 0).sum()))
        """)
        trace, p = self.trace(script)
        self.assertEqual(p.stdout.strip(), "0")  # the program's own compare still flushes them
        rows = self.query(trace, "SELECT t.count, t.zero, t.subnormal, t.min, t.max, t.min_nonzero, t.mean, t.rms"
                                 " FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                 " WHERE k.kernel = 'clone' AND t.role = 'out'")
        self.assertEqual(len(rows), 1)
        n = 70000
        tiny = 2.0 ** -149
        squares = sum(k * k for k in range(1, n + 1))
        self.assertEqual(rows[0], (n, 0, n, tiny, n * tiny, tiny, (n + 1) / 2 * tiny,
                                   math.sqrt(squares * tiny * tiny / n)))

    def test_memory_by_category(self):
        # Gradients kept from step to step (zero_grad(set_to_none=False), torch 1.13's default): at
        # the peak every parameter has its gradient.
        script = self.write("kept.py", CNN.replace("STEPS", "3").replace("opt.zero_grad()",
                                                                         "opt.zero_grad(set_to_none=False)"))
        trace, p = self.trace(script, args=[os.path.join(self.dir, "out.npy")])
        parameters = int(p.stdout.split("parameters")[1].split()[0])
        peak = dict(self.query(trace, "SELECT category, bytes FROM v_memory_peak"))
        self.assertEqual(peak["weight"], 4 * parameters)
        self.assertEqual(peak["gradient"], 4 * parameters)
        self.assertEqual(peak["optimizer_state"], 4 * parameters)  # SGD momentum: one buffer a parameter
        self.assertGreater(peak["activation"], 0)
        names = {n for (n,) in self.query(trace, "SELECT DISTINCT s.value FROM memory_events m JOIN strings s"
                                                 " ON s.id = m.name_id")}
        self.assertTrue({"conv1.weight", "fc1.bias", "conv1.weight.grad", "fc1.weight.momentum_buffer"} <= names, names)
        # Every allocation is freed at most once, and never before it was made.
        bad = self.query(trace, "SELECT a.alloc_id FROM memory_events a JOIN memory_events f ON f.alloc_id = a.alloc_id"
                                " AND f.kind = 'free' WHERE a.kind = 'alloc' AND f.t_ns < a.t_ns")
        self.assertEqual(bad, [])
        # The collector kept the summaries as the rows arrived, storages relabelled as gradients and
        # optimizer state included: the tables are the ones the summaries script writes, row for row.
        kept = dict(self.query(trace, "SELECT key, value FROM meta WHERE key LIKE 'summaries_%rolled_up'"))
        self.assertEqual(kept["summaries_not_rolled_up"], "")
        self.assertIn("summary_memory_peak", kept["summaries_rolled_up"])
        copy = os.path.join(self.dir, "statements.sqlite")
        shutil.copyfile(trace, copy)
        with open(FINALIZE_SQL) as f, sqlite3.connect(copy) as db:
            db.executescript(f.read())
        tables = [t for (t,) in self.query(copy, "SELECT name FROM sqlite_master WHERE name LIKE 'summary_%'")]
        self.assertEqual(len(tables), 10)
        for table in tables:
            rows = "SELECT rowid, * FROM " + table + " ORDER BY rowid"
            self.assertEqual(self.query(trace, rows), self.query(copy, rows), table)

        # Gradients set to None at zero_grad (torch 2's default): each step's is an allocation of its
        # own, made in backward and freed at the next step's zero_grad. (The last is freed at exit,
        # which the dispatch mode may see after the trace has closed.)
        script = self.write("fresh.py", CNN.replace("STEPS", "3").replace("opt.zero_grad()",
                                                                          "opt.zero_grad(set_to_none=True)"))
        trace, _ = self.trace(script, args=[os.path.join(self.dir, "out.npy")])
        events = self.query(trace, "SELECT m.kind, m.step FROM memory_events m JOIN strings s ON s.id = m.name_id"
                                   " WHERE s.value = 'conv1.weight.grad' ORDER BY m.t_ns, m.id")
        self.assertEqual(events[:5], [("alloc", 0), ("free", 1), ("alloc", 1), ("free", 2), ("alloc", 2)])

    def test_the_observer_and_the_dispatch_mode_measure_the_same_tensors(self):
        """The two ways of watching operators see the same measured operators, in the same layers,
        phases and steps, with the same statistics, row for row: the CNN in fp32, and operators
        autocast runs in bf16 (it casts, then calls the operator again: both see the casts and the
        bf16 call). They differ only in operators that measure nothing: the dispatch mode also
        sees the profiler's _record_function_enter, which the observer sees as the empty tensor it
        makes, and detach calls of its own making."""
        if OPERATORS != "observer":
            self.skipTest("runs both ways itself: once, in the observer's suite")
        autocast = self.write("autocast.py", """
            import torch
            torch.manual_seed(0)
            torch.set_num_threads(1)
            a, b = torch.randn(8, 16), torch.randn(16, 4)
            c, d = torch.randn(2, 3, 5), torch.randn(2, 5, 7)
            w = torch.randn(4, 16, requires_grad=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                x = torch.mm(a, b)                          # an operator with an autocast kernel
                y = torch.baddbmm(torch.zeros(2, 3, 7), c, d)
                z = torch.nn.functional.linear(a, w)        # a composite one
            (z.float().sum() + x.float().sum() + y.float().sum()).backward()
        """)
        rows = ("SELECT k.kernel, ifnull(k.layer, ''), k.phase, k.step, t.role, t.slot, t.dtype, t.shape, t.count, "
                "t.nan, t.pos_inf, t.neg_inf, t.zero, t.subnormal, quote(t.min), quote(t.max), quote(t.absmax), "
                "quote(t.min_nonzero), quote(t.mean), quote(t.rms), t.f16_overflow, t.f16_underflow, "
                "t.bf16_underflow, t.e4m3_overflow, t.e5m2_underflow, t.exp_hist "
                "FROM v_kernels k JOIN tensors t ON t.kernel_id = k.id ORDER BY k.id, t.role, t.slot")
        measured = "SELECT kernel FROM v_kernels WHERE sampled = 1 AND kernel != '_record_function_enter' ORDER BY id"
        for script, least in ((self.cnn(), 200), (autocast, 20)):
            runs = {}
            for operators in ("observer", "dispatch-mode"):
                out = os.path.join(self.dir, "%s-%d.sqlite" % (operators, len(os.listdir(self.dir))))
                run([FPSCOPE, "run", "-q", "-o", out, "--torch-operators", operators, "--", PYTHON, script,
                     os.path.join(self.dir, "out.npy")], self.dir)
                watched_by = self.query(out, "SELECT value FROM meta WHERE key = 'config.torch_operators'")[0][0]
                if watched_by != operators:
                    self.skipTest("the observer was not built (libtorch-dev)")
                runs[operators] = out
            a, b = self.query(runs["observer"], rows), self.query(runs["dispatch-mode"], rows)
            self.assertGreater(len(a), least, script)
            self.assertEqual(len(a), len(b), script)
            for i, (row_a, row_b) in enumerate(zip(a, b)):
                self.assertEqual(row_a, row_b, "row %d of %s" % (i, script))
            self.assertEqual(self.query(runs["observer"], measured), self.query(runs["dispatch-mode"], measured))
        # bf16 tensors were measured: the casts autocast made and the operators that read them.
        self.assertGreater(self.query(runs["observer"], "SELECT count(*) FROM v_tensors WHERE dtype_name = 'bf16'")[0][0], 5)

    def test_storages_are_freed_when_the_program_lets_them_go(self):
        script = self.write("frees.py", """
            import numpy as np
            import torch
            torch.set_num_threads(1)
            a = torch.ones(1000).mul(2)        # made by mul: 4000 bytes
            b = a.add(1)
            del a                              # its storage goes now
            arr = np.ones(500, np.float32)
            t = torch.from_numpy(arr)          # memory numpy owns: data
            c = t.mul(3)
            del t, arr                         # the numpy memory goes now
            print(c.sum().item(), b.sum().item())
        """)
        trace, p = self.trace(script)
        self.assertEqual(p.stdout.split(), ["1500.0", "3000.0"])
        kernels = self.query(trace, "SELECT kernel, start_ns FROM v_kernels ORDER BY id")
        start = {}
        for kernel, t in kernels:
            start.setdefault(kernel, []).append(t)
        def events(name):
            return self.query(trace, "SELECT m.kind, m.t_ns, m.bytes FROM memory_events m JOIN strings s"
                                     " ON s.id = m.name_id WHERE s.value = ? ORDER BY m.id", name)
        made_by_mul = events("mul")
        self.assertEqual([(k, n) for k, _, n in made_by_mul[:3]], [("alloc", 4000), ("free", 4000), ("alloc", 2000)])
        # a's storage was freed after b was made and before the next operator ran.
        self.assertLess(start["add"][0], made_by_mul[1][1])
        self.assertLess(made_by_mul[1][1], start["mul"][1])
        # The numpy memory: an allocation of data from its first operator until it was let go, at the
        # latest by the next operator.
        data = events("data f32[500]")
        self.assertEqual([(k, n) for k, _, n in data], [("alloc", 2000), ("free", 2000)])
        self.assertLess(start["mul"][1], data[1][1])
        self.assertLess(data[1][1], start["sum"][0])

    def test_configuration_in_meta(self):
        trace, p = self.trace(self.cnn(), args=[os.path.join(self.dir, "out.npy")])
        meta = dict(self.query(trace, "SELECT key, value FROM meta WHERE key LIKE 'config.%'"))
        self.assertEqual(meta["config.precision"], "fp32")
        self.assertEqual(meta["config.optimizer"], "SGD")
        self.assertEqual(meta["config.lr"], "0.1")
        self.assertEqual(meta["config.optimizer.momentum"], "0.9")
        self.assertEqual(meta["config.parameters"], p.stdout.split("parameters")[1].split()[0])
        self.assertTrue(meta["config.framework"].startswith("torch "))
        # The operators were watched the way the run asked (the observer did not fall back unseen).
        self.assertEqual(meta["config.torch_operators"], OPERATORS)

    def test_every_leaves_unselected_steps_unwatched(self):
        trace, _ = self.trace(self.cnn(steps=4), "--every", "2", args=[os.path.join(self.dir, "out.npy")])
        steps = {s for (s,) in self.query(trace, "SELECT DISTINCT step FROM v_kernels WHERE kernel = 'convolution'")}
        self.assertEqual(steps, {0, 2})
        losses_recorded = self.query(trace, "SELECT count(*) FROM scalars")
        self.assertEqual(losses_recorded[0][0], 4)  # the loss of every step is still recorded
        # No step watched: no operator, yet the losses and the model's configuration are there.
        trace, _ = self.trace(self.cnn(steps=4), "--steps", "100", args=[os.path.join(self.dir, "out.npy")])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM kernels"), [(0,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM scalars"), [(4,)])
        self.assertEqual(self.query(trace, "SELECT value FROM meta WHERE key = 'config.model'"), [("Net",)])

    def test_reused_input_statistics_equal_a_rescan_row_for_row(self):
        """An input that an earlier operator measured as its output, unchanged since, takes those
        statistics instead of a second scan. The program writes tensors every way it can: in place
        (the optimizer's _foreach_ operators, ReLU), through a transposed view, with out=, through
        a complex view, from numpy behind PyTorch's back, on a storage swapped in under a tensor,
        and in steps the front end does not watch; each run equals a rescan of every input."""
        script = self.write("writes.py", """
            import numpy as np
            import torch, torch.nn as nn, torch.nn.functional as F
            torch.manual_seed(0)
            torch.set_num_threads(1)
        """ + textwrap.indent(NET, " " * 12) + """
            net = Net()
            # foreach: _foreach_add_ and kin write their arguments and return nothing
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, foreach=True)
            batch = np.zeros((8, 1, 14, 14), np.float32)
            x = torch.from_numpy(batch)        # refilled by numpy every step
            rng = np.random.default_rng(0)
            y = torch.randint(0, 10, (8,))
            acc = torch.ones(10, 4)
            for step in range(5):
                batch[:] = rng.standard_normal(batch.shape, dtype=np.float32)
                opt.zero_grad()
                out = net(x)
                with torch.no_grad():
                    acc.t().mul_(0.5)                              # through a transposed view
                    torch.add(acc, out[:4].t(), out=acc)          # out=
                    F.relu(acc, inplace=True)
                    torch.view_as_complex(acc.view(10, 2, 2)).mul_(0.5 + 0.25j)  # a dtype not measured
                    acc.data = acc.data.clone()                    # another storage under acc
                loss = F.cross_entropy(out, y) + acc.square().mean()
                loss.backward()
                opt.step()
                print("loss", step, loss.item().hex())
        """)
        # Every statistic of every tensor row (tensor_uid, the allocation's number, is left out: a
        # storage freed and another made at its address may keep or get a number, and the heap's
        # layout differs with the injector's own allocations).
        every_column = ("SELECT t.kernel_id, t.role, t.slot, t.dtype, t.shape, t.count, t.nan, t.pos_inf, "
                        "t.neg_inf, t.zero, t.subnormal, quote(t.min), quote(t.max), quote(t.absmax), "
                        "quote(t.min_nonzero), quote(t.mean), quote(t.rms), t.f16_overflow, t.f16_underflow, "
                        "t.f16_subnormal, t.f16_near_max, t.bf16_overflow, t.bf16_underflow, t.bf16_subnormal, "
                        "t.bf16_near_max, t.e4m3_overflow, t.e4m3_underflow, t.e5m2_overflow, t.e5m2_underflow, "
                        "t.exp_hist FROM tensors t ORDER BY t.kernel_id, t.role, t.slot")
        reused_stats = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'injector.reused_input_stats'"
        for options in ([], ["--every", "2"], ["--ops", "addmm,relu*,add*,mul*,convolution*"]):
            reused, p = self.trace(script, *options)
            scanned, q = self.trace(script, "--rescan-inputs", *options)
            self.assertEqual(p.stdout, q.stdout)
            a, b = self.query(reused, every_column), self.query(scanned, every_column)
            self.assertGreater(len(a), 100, options)
            self.assertEqual(len(a), len(b), options)
            for i, (row_a, row_b) in enumerate(zip(a, b)):
                self.assertEqual(row_a, row_b, "row %d of %s" % (i, options))
            self.assertGreater(self.query(reused, reused_stats)[0][0], 0, options)
            self.assertEqual(self.query(scanned, reused_stats), [], options)

    def test_bf16_tensors_are_measured(self):
        script = self.write("bf16.py", """
            import torch
            torch.manual_seed(0)
            lin = torch.nn.Linear(16, 4).to(torch.bfloat16)
            x = torch.randn(2, 16, dtype=torch.bfloat16)
            y = lin(x)
            bits = y.detach().view(torch.int16).numpy().astype("<u2")
            import numpy as np
            np.save(__import__("sys").argv[1], bits)
        """)
        saved = os.path.join(self.dir, "bf16.npy")
        trace, _ = self.trace(script, args=[saved])
        bits = np.load(saved).astype(np.uint32) << 16
        a = bits.view(np.float32).astype(np.float64).ravel()
        row = self.query(trace, "SELECT t.dtype_name, t.min, t.max, t.count FROM v_tensors t JOIN v_kernels k"
                                " ON k.id = t.kernel_id WHERE k.kernel = 'addmm' AND t.role = 'out'")
        self.assertEqual(row, [("bf16", a.min(), a.max(), a.size)])

    def test_trap_raises_floating_point_error_at_the_users_line(self):
        script = self.write("nan.py", """
            import torch
            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(4, 4)
                def forward(self, x):
                    return torch.log(self.lin(x) - 100.0)  # the line that makes NaN
            m = Model()
            m(torch.ones(2, 4))
        """)
        trace, p = self.trace(script, "--trap", "nonfinite", check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by log", p.stderr)
        self.assertIn("step 0", p.stderr)
        self.assertIn("in log at index 0", p.stderr)  # an output is named after the op (and layer) that made it
        self.assertIn("the line that makes NaN", p.stderr)  # the traceback shows the user's line
        first = self.query(trace, "SELECT kernel, step FROM v_first_nonfinite")
        self.assertEqual(first, [("log", 0)])
        self.assertEqual(p.returncode, 1)  # the exception ended the program, as any uncaught one does

    def test_grad_scaler_operators_become_loss_scale_events(self):
        # Debian's torch 1.13 has no CPU kernels for GradScaler's two operators, so the program
        # registers ones that follow their documented semantics and calls them as GradScaler does.
        script = self.write("scaler.py", """
            import torch
            lib = torch.library.Library("aten", "IMPL", "CPU")
            def unscale(grads, found_inf, inv_scale):
                for g in grads:
                    if not torch.isfinite(g).all():
                        found_inf.fill_(1.0)
                    g.mul_(inv_scale)
            def update(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
                if found_inf.item() > 0:
                    scale.mul_(backoff_factor)
                    growth_tracker.fill_(0)
                elif growth_tracker.item() + 1 == growth_interval:
                    scale.mul_(growth_factor)
                    growth_tracker.fill_(0)
                else:
                    growth_tracker.add_(1)
                return scale
            lib.impl("_amp_foreach_non_finite_check_and_unscale_", unscale)
            lib.impl("_amp_update_scale_", update)
            scale = torch.full((1,), 65536.0)
            tracker = torch.zeros(1, dtype=torch.int32)
            for bad in [True, False, False, True]:
                grads = [torch.tensor([1.0, float("inf") if bad else 2.0])]
                found = torch.zeros(1)
                torch._amp_foreach_non_finite_check_and_unscale_(grads, found, 1.0 / scale)
                before = scale.item()
                torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
                print(before, found.item(), scale.item(), tracker.item())
        """)
        trace, p = self.trace(script)
        expected = [tuple(float(v) for v in line.split()) for line in p.stdout.splitlines()]
        events = self.query(trace, "SELECT scale, found_inf, scale_after, event FROM v_loss_scale ORDER BY t_ns")
        self.assertEqual([(b, f, a) for b, f, a, _ in events], [(b, f, a) for b, f, a, _ in expected])
        self.assertEqual([e for *_, e in events], ["backoff", "unchanged", "growth", "backoff"])
        self.assertEqual(self.query(trace, "SELECT growth_tracker FROM loss_scale ORDER BY t_ns"),
                         [(int(t),) for *_, t in expected])

    def test_a_step_with_grad_scaler_ends_at_its_update_skipped_or_not(self):
        # An enabled scaler's step runs from the end of one update() to the end of the next, the
        # marker op between step() and update() included, whether the scaler skipped
        # optimizer.step() or not. A disabled one leaves the rule as without it: the step ends at
        # optimizer.step().
        script = self.write("scaled.py", SCALED)
        trace, p = self.trace(script)
        enabled = "enabled True" in p.stdout
        def steps(kernel, phase="%"):
            return [s for (s,) in self.query(trace, "SELECT step FROM v_kernels WHERE kernel = ? AND ifnull(phase, '')"
                                                    " LIKE ? ORDER BY id", kernel, phase)]
        self.assertEqual(steps("convolution"), [0, 1, 2, 3])
        if enabled:
            self.assertEqual(steps("neg"), [0, 1, 2, 3])
            self.assertEqual(steps("add_", "optimizer"), [0] * 4 + [2] * 4 + [3] * 4)  # SGD, four parameters
        else:
            self.assertEqual(steps("neg"), [1, 2, 3, 4])
            self.assertEqual(steps("add_", "optimizer"), [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)
        # The loss of each step is the value the program scaled, not the scaled one.
        recorded = self.query(trace, "SELECT s.step, s.value FROM scalars s JOIN strings n ON n.id = s.name_id"
                                     " WHERE n.value = 'loss' ORDER BY s.step")
        self.assertEqual(recorded, list(enumerate(losses(p.stdout))))
        if enabled:
            events = self.query(trace, "SELECT step, event, found_inf, skipped FROM loss_scale ORDER BY t_ns")
            self.assertEqual(events, [(0, "unchanged", 0, 0), (1, "backoff", 1, 1), (2, "unchanged", 0, 0),
                                      (3, "unchanged", 0, 0)])

    def test_compare_aligns_mptrain_and_pytorch_layers_by_name(self):
        if not (MPTRAIN and DATA_DIR):
            self.skipTest("needs --mptrain and --data-dir")
        mptrain, _ = self.trace_program([MPTRAIN, "--model", "cnn", "--train-subset", "320", "--epochs", "1",
                                         "--data-dir", DATA_DIR])
        torch_run, _ = self.trace_program([PYTHON, EXAMPLE, "--images", "320", "--data-dir", DATA_DIR])
        p = run([FPSCOPE, "compare", "--format", "json", mptrain, torch_run], self.dir)
        layers = {l["layer"]: l for l in json.loads(p.stdout)["layers"]}
        for name in ("conv1", "conv2", "norm", "fc1", "fc2"):
            self.assertIsNotNone(layers[name]["source_absmax"], name)
            self.assertIsNotNone(layers[name]["target_absmax"], name)
        # Same architecture, same parameter count, so the same weight, gradient and momentum bytes.
        memory = {m["category"]: m for m in json.loads(p.stdout)["memory_at_peak"]}
        for category in ("weight", "gradient", "optimizer_state"):
            self.assertEqual(memory[category]["source_bytes"], memory[category]["target_bytes"], category)

    def test_seed_cnn_on_fashion_mnist(self):
        if not DATA_DIR:
            self.skipTest("needs --data-dir")
        trace, p = self.trace_program([PYTHON, EXAMPLE, "--images", "320", "--batch-size", "32",
                                       "--data-dir", DATA_DIR, "--threads", "2"])
        rows = self.query(trace, "SELECT DISTINCT layer, phase FROM v_kernels WHERE layer IS NOT NULL")
        for layer in ("conv1", "conv2", "norm", "fc1", "fc2"):
            self.assertIn((layer, "forward"), rows)
            self.assertIn((layer, "backward"), rows)
        # 320 images of 32: ten optimizer steps, a loss each, and the program's own last lines after.
        self.assertEqual(self.query(trace, "SELECT count(DISTINCT step) FROM v_kernels"
                                           " WHERE phase = 'optimizer'"), [(10,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM scalars s JOIN strings n ON n.id = s.name_id"
                                           " WHERE n.value = 'loss'"), [(10,)])
        parameters = int(self.query(trace, "SELECT value FROM meta WHERE key = 'config.parameters'")[0][0])
        self.assertEqual(parameters, 5 * 9 + 5 + 12 * 5 * 25 + 12 + 2 * 12 + 972 * 100 + 100 + 100 * 10 + 10)
        peak = dict(self.query(trace, "SELECT category, bytes FROM v_memory_peak"))
        self.assertEqual(peak["weight"], 4 * parameters)
        self.assertEqual(peak["data"], 320 * 28 * 28 * 4 + 320 * 8)  # images (f32) and labels (i64)

    def test_nan_planted_in_a_layer_at_one_step(self):
        script = self.write("planted.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            class Shift(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.amount = 0.0
                def forward(self, x):
                    return torch.sqrt(x * x + 1.0 - self.amount)  # NaN once amount exceeds 1
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(8, 8)
                    self.act = Shift()
                    self.fc2 = nn.Linear(8, 2)
                def forward(self, x):
                    return self.fc2(self.act(self.fc1(x)))
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.01)
            x = torch.randn(4, 8)
            for step in range(5):
                net.act.amount = 1e6 if step == 3 else 0.0
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        self.assertEqual(self.query(trace, "SELECT kernel, layer, phase, step FROM v_first_nonfinite"),
                         [("sqrt", "act", "forward", 3)])
        # Why: the analyzer walks back to the subtraction whose output jumped at step 3.
        why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace], self.dir).stdout)["why"]
        cause = why["causes"][0]
        self.assertEqual(cause["kind"], "range_jump")
        self.assertEqual(cause["step"], 3)
        self.assertEqual(self.query(trace, "SELECT kernel, layer FROM v_kernels WHERE id = ?", cause["kernel_id"]),
                         [("sub", "act")])
        trace, p = self.trace(script, "--trap", "nan", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("FloatingPointError: fpscope: first NaN made by sqrt (layer act, step 3, phase forward)",
                      p.stderr)
        self.assertIn("NaN once amount exceeds 1", p.stderr)
        # The trace holds everything up to the trap, and nothing of the steps after it.
        self.assertEqual(self.query(trace, "SELECT max(step) FROM v_kernels"), [(3,)])

    def test_a_growing_range_is_forecast_before_it_overflows(self):
        script = self.write("grow.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(16, 16)
                    self.fc2 = nn.Linear(16, 1)
                def forward(self, x):
                    return self.fc2(self.fc1(x))
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.0)
            x = torch.randn(8, 16)
            for step in range(40):
                opt.zero_grad()
                net(x).mean().backward()
                opt.step()
                with torch.no_grad():  # fc1 grows 10% a step, and its outputs with it
                    net.fc1.weight.mul_(1.1)
                    net.fc1.bias.mul_(1.1)
        """)
        trace, _ = self.trace(script)
        why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace], self.dir).stdout)["why"]
        self.assertIsNone(why["origin"])  # nothing overflowed yet
        fc1 = [f for f in why["forecasts"] if f["row"] == "fc1" and f["view"] == "activations" and f["upward"]]
        self.assertEqual(len(fc1), 1, why["forecasts"])
        rate = np.log2(1.1)
        self.assertAlmostEqual(fc1[0]["log2_per_100_steps"], 100 * rate, delta=0.01 * 100 * rate)
        last = self.query(trace, "SELECT max(t.absmax) FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                 " WHERE k.kernel = 'addmm' AND k.layer = 'fc1' AND k.phase = 'forward' AND k.step = 39"
                                 " AND t.role = 'out'")[0][0]
        expected = 39 + (np.log2(65504.0) - np.log2(last)) / rate
        self.assertLessEqual(abs(fc1[0]["crossing_step"] - expected), 1.5, (fc1[0], expected))
        self.assertGreater(fc1[0]["crossing_step"], 39)

    def test_why_walks_through_views_in_a_sampled_run(self):
        # With --every 2, whole steps go unmeasured; inside a measured step a view is unmeasured too
        # but writes nothing, so the walk back goes on through it.
        script = self.write("viewed.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            class Shift(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.amount = 0.0
                def forward(self, x):
                    z = x * x + 1.0 - self.amount
                    return torch.sqrt(z.view(-1, 8))  # the sqrt reads z through a view
            net = nn.Sequential(nn.Linear(8, 8), Shift(), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.01)
            x = torch.randn(4, 8)
            for step in range(4):
                net[1].amount = 1e6 if step == 2 else 0.0
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script, "--every", "2")
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step FROM v_first_nonfinite"), [("sqrt", "1", 2)])
        why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace], self.dir).stdout)["why"]
        self.assertEqual(why["causes"][0]["kind"], "range_jump")
        self.assertFalse([l for l in why["chain"] if "unmeasured" in l["note"]], why["chain"])
        self.assertEqual(self.query(trace, "SELECT kernel FROM v_kernels WHERE id = ?", why["causes"][0]["kernel_id"]),
                         [("sub",)])

    def test_dumped_tensors_match_numpy_field_by_field(self):
        self.dumped_tensors_match(self.cnn(), [], "op=convolution*,step=1")

    def test_bf16_autocast_tensors_and_their_fp16_cast_counts(self):
        script = self.write("autocast.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            x = torch.randn(32, 64) * 3000.0  # large enough that fp16 would overflow some values
            for step in range(2):
                opt.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = net(x)
                out.float().square().mean().backward()
                opt.step()
        """)
        trace = self.dumped_tensors_match(script, ["--every", "1"], "op=addmm,step=1")
        dtypes = {d for (d,) in self.query(trace, "SELECT DISTINCT t.dtype_name FROM v_tensors t JOIN v_kernels k"
                                                  " ON k.id = t.kernel_id WHERE k.kernel = 'addmm' AND t.role = 'out'")}
        self.assertEqual(dtypes, {"bf16"})
        self.assertEqual(self.query(trace, "SELECT value FROM meta WHERE key = 'config.precision'"), [("amp-bf16",)])
        overflow = self.query(trace, "SELECT max(t.f16_overflow) FROM v_tensors t JOIN v_kernels k"
                                     " ON k.id = t.kernel_id WHERE k.kernel = 'addmm' AND t.role = 'out'")
        self.assertGreater(overflow[0][0], 0)

    ATTENTION = """
        import sys, torch, torch.nn as nn, torch.nn.functional as F
        torch.manual_seed(0)
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(16, 48)
            def forward(self, x, mask):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = (q @ k.transpose(-2, -1)) / 4.0
                scores = scores.masked_fill(mask, float("-inf"))  # intended -inf
                return F.softmax(scores, dim=-1) @ v
        att = Attention()
        x = torch.randn(2, 5, 16)
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)  # causal
        if sys.argv[1] == "fully-masked":
            mask[3] = True  # row 3 sees nothing: softmax of all -inf is NaN, a real bug
        out = att(x, mask)
        out.sum().backward()
        print("finite", bool(torch.isfinite(out).all()))
    """

    def test_masked_fill_minus_inf_is_intended(self):
        script = self.write("attention.py", self.ATTENTION)
        trace, p = self.trace(script, "--trap", "nonfinite", args=["causal"])
        self.assertEqual(p.stdout.strip(), "finite True")  # no trap: the -inf were intended
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_first_nonfinite"), [(0,)])
        # Recorded all the same, flagged as allowed; the softmax that turns them into zeros is clean.
        self.assertEqual(self.query(trace, "SELECT k.kernel, n.kind, n.origin, n.allowed FROM nonfinite n"
                                           " JOIN v_kernels k ON k.id = n.kernel_id"),
                         [("masked_fill", "-inf", 1, 1)])
        report = run([FPSCOPE, "report", "--format", "json", trace], self.dir)
        summary = json.loads(report.stdout)
        text = json.dumps(summary)
        self.assertIn('"allowed_nonfinite_tensors": 1', text)
        self.assertIn('"nonfinite_tensors": 0', text)
        # Without the rule the same values are the run's first non-finite origin, and trap.
        trace, p = self.trace(script, "--allow", "none", args=["causal"])
        self.assertEqual(self.query(trace, "SELECT kernel, value FROM v_first_nonfinite"), [("masked_fill", "-inf")])
        _, p = self.trace(script, "--allow", "none", "--trap", "inf", args=["causal"], check=False)
        self.assertIn("FloatingPointError: fpscope: first -Inf made by masked_fill", p.stderr)

    def test_pytorchs_own_causal_mask_is_intended_and_a_later_nan_is_found(self):
        """nn.Transformer's causal mask is torch.full(..., -inf) then triu, added to the attention
        scores by the layer's matmul: intended from end to end, so the first non-finite value the
        trace names is the NaN the program makes at step 3."""
        script = self.write("causal.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
                    self.head = nn.Linear(16, 4)
                    self.scale = 1.0
                def forward(self, x):
                    mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                    return self.head(self.block(x, src_mask=mask) * self.scale)
            model = Model()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(2, 6, 16)
            for step in range(5):
                model.scale = float("nan") if step == 3 else 1.0
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        masks = self.query(trace, "SELECT DISTINCT k.kernel, n.allowed FROM nonfinite n JOIN v_kernels k"
                                  " ON k.id = n.kernel_id WHERE k.step < 3 ORDER BY k.kernel")
        self.assertIn(("full", 1), masks)
        self.assertIn(("triu", 1), masks)
        self.assertEqual({a for _, a in masks}, {1})  # every -inf of the first steps was intended
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step, value FROM v_first_nonfinite"),
                         [("mul", None, 3, "nan")])  # in the model's own forward, after the block
        _, p = self.trace(script, "--trap", "nonfinite", check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by mul (step 3, phase forward)", p.stderr)

    def test_a_fully_masked_row_is_still_caught(self):
        script = self.write("attention.py", self.ATTENTION)
        trace, p = self.trace(script, "--trap", "nan", args=["fully-masked"], check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by _softmax (step 0, phase forward)", p.stderr)
        self.assertEqual(self.query(trace, "SELECT kernel, value FROM v_first_nonfinite"), [("_softmax", "nan")])

    def test_bad_allow_rule_is_refused(self):
        script = self.write("attention.py", self.ATTENTION)
        _, p = self.trace(script, "--allow", "masked_fill*", args=["causal"], check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--allow: allow rule 'masked_fill*' is not GLOB:KINDS", p.stderr)

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

    def test_scheduler_workers_clipping_and_eval(self):
        # What real training scripts use around the model: a learning-rate scheduler (it wraps
        # optimizer.step), DataLoader worker processes (forked: not traced), gradient clipping, and
        # an evaluation under no_grad in eval mode.
        script = self.write("utilities.py", """
            import torch, torch.nn as nn
            from torch.utils.data import DataLoader, TensorDataset
            torch.manual_seed(0)
            data = TensorDataset(torch.randn(96, 10), torch.randint(0, 3, (96,)))
            loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
            net = nn.Sequential(nn.Linear(10, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 3))
            opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6)
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                sched.step()
                print("loss", sched.last_epoch, loss.item().hex())
            net.eval()
            with torch.no_grad():
                print("eval", net(torch.ones(2, 10)).sum().item().hex())
        """)
        plain = run([PYTHON, script], self.dir)
        trace, traced = self.trace(script)
        self.assertEqual(traced.stdout, plain.stdout)  # losses and the evaluation, bit for bit
        self.assertEqual(self.query(trace, "SELECT count(DISTINCT step) FROM v_kernels WHERE phase = 'optimizer'"),
                         [(6,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_kernels WHERE phase = 'eval'"
                                           " AND kernel = 'addmm'"), [(2,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM scalars s JOIN strings n ON n.id = s.name_id"
                                           " WHERE n.value = 'loss'"), [(6,)])

    def test_spawned_data_loader_workers_are_not_traced(self):
        # Workers started by "spawn" are fresh interpreters that import torch: they stay out of the
        # trace, as forked workers do, and the trace holds the one training process.
        script = self.write("spawned.py", """
            import torch, torch.nn as nn
            from torch.utils.data import DataLoader, TensorDataset
            if __name__ == "__main__":
                torch.manual_seed(0)
                data = TensorDataset(torch.randn(48, 10), torch.randint(0, 3, (48,)))
                loader = DataLoader(data, batch_size=16, num_workers=2, multiprocessing_context="spawn")
                net = nn.Linear(10, 3)
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    opt.step()
                    print("loss", loss.item().hex())
        """)
        plain = run([PYTHON, script], self.dir)
        trace, traced = self.trace(script)
        self.assertEqual(traced.stdout, plain.stdout)
        self.assertEqual(self.query(trace, "SELECT count(*) FROM processes"), [(1,)])
        self.assertEqual(self.query(trace, "SELECT count(DISTINCT step) FROM v_kernels WHERE phase = 'optimizer'"),
                         [(3,)])

    def test_ddp_ranks_land_in_one_trace(self):
        """A DistributedDataParallel program (gloo on the CPU) of two ranks, launched with RANK and
        WORLD_SIZE as torchrun would: one trace, each rank's operators under the model's own layer
        names, losses bit-identical with and without tracing."""
        script = self.write("ddp.py", DDP_PROGRAM)

        def launch():
            with socket.socket() as s:  # a free port for the ranks' rendezvous
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            return ["/bin/sh", "-c", "export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=2; "
                    "RANK=0 %s %s & RANK=1 %s %s; wait" % (port, PYTHON, script, PYTHON, script)]

        plain = run(launch(), self.dir)
        out = os.path.join(self.dir, "ddp.sqlite")
        traced = run([FPSCOPE, "run", "-q", "-o", out, "--torch-operators", OPERATORS, "--"] + launch(), self.dir)
        self.assertEqual(traced.stdout, plain.stdout)
        self.assertEqual(plain.stdout.count("loss"), 4)
        self.assertEqual(self.query(out, "SELECT rank, world_size, rank_source, ended FROM processes ORDER BY rank"),
                         [(0, 2, "RANK", "exited"), (1, 2, "RANK", "exited")])
        # The model's own names (DDP holds it as `.module`), in forward and backward, on both ranks.
        layers = self.query(out, "SELECT rank, layer, phase, count(*) FROM v_kernels WHERE layer IS NOT NULL "
                                 "GROUP BY rank, layer, phase ORDER BY 1, 2, 3")
        self.assertEqual([(r, l, p) for r, l, p, _ in layers],
                         [(r, l, p) for r in (0, 1) for l in ("conv1", "fc1") for p in ("backward", "forward")])
        self.assertEqual(self.query(out, "SELECT count(DISTINCT rank) FROM scalars s JOIN strings n ON n.id = s.name_id "
                                         "WHERE n.value = 'loss'"), [(2,)])
        # The all-reduce writes the gradient buckets on gloo's threads, out of the front end's sight:
        # no statistics are reused once the process group exists.
        self.assertEqual(self.query(out, "SELECT count(*) FROM meta WHERE key = 'injector.reused_input_stats'"), [(0,)])

    def test_program_without_torch_and_users_sitecustomize(self):
        own = os.path.join(self.dir, "own")
        os.mkdir(own)
        with open(os.path.join(own, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.USER_SITECUSTOMIZE = 'ran'\n")
        script = self.write("plain.py", """
            import builtins, sys
            print(getattr(builtins, "USER_SITECUSTOMIZE", "missing"), "torch" in sys.modules)
        """)
        _, p = self.trace(script, env={"PYTHONPATH": own})
        self.assertEqual(p.stdout.strip(), "ran False")
        # And with torch: the user's sitecustomize still runs and the front end is installed.
        script = self.write("with_torch.py", """
            import builtins, torch
            print(getattr(builtins, "USER_SITECUSTOMIZE", "missing"))
            torch.ones(3).add_(1)
        """)
        trace, p = self.trace(script, env={"PYTHONPATH": own})
        self.assertEqual(p.stdout.strip(), "ran")
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_kernels WHERE kernel = 'add_'"), [(1,)])


def main():
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
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False)
    result = program.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped and result.testsRun == len(result.skipped):
        sys.exit(77)  # CTest's SKIP_RETURN_CODE: a skipped test must not read as passed


if __name__ == "__main__":
    main()
