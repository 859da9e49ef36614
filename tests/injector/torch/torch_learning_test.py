"""End-to-end tests of the PyTorch front end's parameter updates: what a watched optimizer step
leaves in param_updates, recounted by numpy from the bits the program saved itself, the sums the
front end computes against a plain numpy recount, the learning rate a schedule sets, step by step,
and the forecast of a ratio that a decaying rate brings down to bf16's spacing.

Usage: torch_learning_test.py --fpscope PATH [--torch-operators observer|dispatch-mode]
       [--mptrain PATH] [--data-dir DIR] [unittest arguments]
"""
import json
import math
import os

import numpy as np

import torch_test_support as support
from torch_test_support import run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None


# A bf16 model (no fp32 master weights) with AdamW at a small learning rate: most updates are
# rounded away. The program saves each parameter's bits before and after every optimizer step, and
# its gradient, for numpy to recount.
BF16_ADAMW = """
import sys
import numpy as np
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 10)).to(torch.bfloat16)
opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
saved = {}
for step in range(3):
    x = torch.randn(32, 64).to(torch.bfloat16)
    y = torch.randint(0, 10, (32,))
    loss = torch.nn.functional.cross_entropy(net(x).float(), y)
    opt.zero_grad()
    loss.backward()
    for n, p in net.named_parameters():
        saved["%d/%s/before" % (step, n)] = p.detach().view(torch.int16).numpy().copy()
        saved["%d/%s/grad" % (step, n)] = p.grad.detach().view(torch.int16).numpy().copy()
    opt.step()
    for n, p in net.named_parameters():
        saved["%d/%s/after" % (step, n)] = p.detach().view(torch.int16).numpy().copy()
np.savez(sys.argv[1], **saved)
"""


# A parameter stored transposed (no contiguous memory the injector could copy) beside a plain one,
# two SGD steps; saves each one's values and gradient before and after every step.
STRIDED = """
import sys
import numpy as np
import torch
from fpscope_torch import _training
torch.manual_seed(0)
counted_by_front_end = []
_own = _training._update_sums_torch

def _counting(old, new, grad_nonzero):
    counted_by_front_end.append(tuple(new.shape))
    return _own(old, new, grad_nonzero)

_training._update_sums_torch = _counting

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(6, 5))
        self.b = torch.nn.Parameter(torch.randn(5, 6).t())

    def forward(self, x):
        return (x @ self.a.t()) * (x @ self.b.t())

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
saved = {}
for step in range(2):
    loss = net(torch.randn(4, 5)).square().mean()
    opt.zero_grad()
    loss.backward()
    for n, p in net.named_parameters():
        saved["%d/%s/before" % (step, n)] = p.detach().numpy().copy()
        saved["%d/%s/grad" % (step, n)] = p.grad.detach().numpy().copy()
    opt.step()
    for n, p in net.named_parameters():
        saved["%d/%s/after" % (step, n)] = p.detach().numpy().copy()
np.savez(sys.argv[1], **saved)
print("contiguous", net.a.is_contiguous(), net.b.is_contiguous(), net.b.grad.is_contiguous())
print("counted by the front end", counted_by_front_end)
"""


SCHEDULED = """
import torch
torch.manual_seed(0)
net = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
schedule = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
for step in range(4):
    loss = net(torch.randn(4, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    print("rate", repr(opt.param_groups[0]["lr"]))
    opt.step()
    schedule.step()
"""


# Runs under the front end, whose library binding it uses: the counts and sums of a host
# parameter's step as the injector makes them from its copy (fpscope_update_before/after), against
# a plain numpy recount, on values with NaN and Inf, gradients with -0 and NaN, for each float type
# it copies and for sizes that grow and shrink the memory kept under one key; then what it refuses.
UPDATE_SUMS = """
import ctypes
import numpy as np
import torch
from fpscope_torch import _api
lib = _api.Library()
rng = np.random.default_rng(3)
INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}

def bits(t):
    return t.view(INT[t.element_size()]).numpy().copy()

def recount(old_bits, new_bits, dtype, nonzero):
    def values(b):
        if dtype == torch.bfloat16:
            return (b.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return b.view({2: np.float16, 4: np.float32, 8: np.float64}[b.dtype.itemsize]).astype(np.float64)
    changed = old_bits != new_bits
    old = values(old_bits)
    applied = values(new_bits) - old
    finite = np.isfinite(applied)
    applied, old = applied[finite], old[finite]
    return (int(changed.sum()), int(nonzero.sum()), int((nonzero & ~changed).sum()),
            float(np.abs(applied).sum()), float((applied * applied).sum()), float((old * old).sum()))

cases = 0
with torch.no_grad():
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        code = {torch.bfloat16: _api.DTYPE_BF16, torch.float16: _api.DTYPE_F16, torch.float32: _api.DTYPE_F32,
                torch.float64: _api.DTYPE_F64}[dtype]
        for n in (1, 70000, 300, 5000):
            p = torch.randn(n, dtype=torch.float64).to(dtype)
            q = (p.double() + torch.randn(n, dtype=torch.float64) * 1e-2).to(dtype)
            q[::3] = p[::3]  # unchanged elements, some with a nonzero gradient: lost
            g = torch.from_numpy((rng.random(n) > 0.3).astype(np.float64)).to(dtype)
            if n > 10:
                p[3], q[5], p[7], q[7] = float("nan"), float("inf"), float("-inf"), float("-inf")
                g[0], g[1] = -0.0, float("nan")
            assert lib.update_before(11, p.data_ptr(), g.data_ptr(), n, code) == 1, (dtype, n)
            old = bits(p)
            p.copy_(q)  # the step, in place
            sums = _api.UpdateSums()
            assert lib.update_after(11, b"w", p.data_ptr(), n, code, 0, ctypes.byref(sums)) == 1, (dtype, n)
            got = (sums.changed, sums.nonzero, sums.lost, sums.applied_abs_sum, sums.applied_sq_sum,
                   sums.weight_sq_sum)
            want = recount(old, bits(p), dtype, g.double().numpy() != 0)
            assert got[:3] == want[:3], (dtype, n, got, want)
            for a, b in zip(got[3:], want[3:]):
                assert abs(a - b) <= 1e-12 * abs(b), (dtype, n, got, want)
            # A copy is compared once.
            assert lib.update_after(11, b"w", p.data_ptr(), n, code, 0, None) == 0
            cases += 1
    p, g = torch.ones(8), torch.ones(8)
    # Another element count or dtype than the copy's is no step of it.
    assert lib.update_before(12, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_F32) == 1
    assert lib.update_after(12, b"w", p.data_ptr(), 4, _api.DTYPE_F32, 0, None) == 0
    assert lib.update_before(12, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_F32) == 1
    assert lib.update_after(12, b"w", p.data_ptr(), 8, _api.DTYPE_F64, 0, None) == 0
    # Integer and 8-bit types are not copied: the front end counts those steps itself.
    assert lib.update_before(13, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_I32) == 0
    assert lib.update_before(13, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_E4M3) == 0
    # Prunes keep a key copied during their last eight calls (optimizers stepped in turn), and free
    # one copied before that.
    assert lib.update_before(14, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_F32) == 1
    for _ in range(7):
        lib.update_prune()
    assert lib.update_after(14, b"w", p.data_ptr(), 8, _api.DTYPE_F32, 0, None) == 1
    assert lib.update_before(14, p.data_ptr(), g.data_ptr(), 8, _api.DTYPE_F32) == 1
    for _ in range(8):
        lib.update_prune()
    assert lib.update_after(14, b"w", p.data_ptr(), 8, _api.DTYPE_F32, 0, None) == 0
print("update sums agree in %d cases" % cases)
"""


def bf16_values(bits):
    """Saved bf16 bits (int16) as float64 values."""
    return (bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# A bf16 model without fp32 master weights whose learning rate decays (SGD, ExponentialLR 0.95) for
# 100 steps: its update/weight ratios fall toward bf16's spacing.
DECAYING = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=0.2)
schedule = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
x = torch.randn(512, 64).to(torch.bfloat16)
y = torch.randint(0, 10, (512,))
for step in range(100):
    i = (step * 32) % 512
    loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]).float(), y[i:i + 32])
    opt.zero_grad()
    loss.backward()
    opt.step()
    schedule.step()
"""


class FrontEndTest(support.FrontEndCase):
    def test_a_falling_update_ratio_is_forecast_before_it_reaches_bf16s_spacing(self):
        """Measured on its first 40 steps, the program's second layer's weight is forecast to reach
        bf16's spacing 2^-8 (from the applied change: a front end sees no computed update), after
        step 39; measured to its end, the same run's ratio (a centred mean over 5 steps) gets there
        within half the forecast's horizon of the step forecast."""
        script = self.write("decaying.py", DECAYING)
        early, _ = self.trace(script, "--steps", "0-39")
        whole, _ = self.trace(script)
        report = json.loads(run([FPSCOPE, "report", early, "--section", "learning", "--format", "json"], self.dir).stdout)
        forecasts = {f["param"]: f for f in report["learning"]["forecasts"]}
        self.assertIn("2.weight", forecasts, report["learning"]["forecasts"])
        f = forecasts["2.weight"]
        self.assertEqual((f["ratio"], f["dtype"], f["spacing_log2"], f["last_step"]), ("applied", "bf16", -8, 39))
        self.assertGreater(f["crossing_step"], 39)
        ratios = dict(self.query(whole, "SELECT step, update_ratio FROM v_param_updates WHERE param = '2.weight' "
                                        "AND update_ratio > 0"))
        reached = None
        for step in range(2, 98):
            window = [math.log2(ratios[s]) for s in range(step - 2, step + 3) if s in ratios]
            if window and sum(window) / len(window) <= -8:
                reached = step
                break
        self.assertIsNotNone(reached)
        self.assertLessEqual(abs(reached - f["crossing_step"]), max(3, (f["crossing_step"] - 39) // 2),
                             "forecast %d, reached %d" % (f["crossing_step"], reached))

    def test_update_sums_equal_a_plain_numpy_recount(self):
        _, p = self.trace(self.write("update_sums.py", UPDATE_SUMS))
        self.assertIn("update sums agree in 16 cases", p.stdout)

    def test_a_parameter_the_injector_cannot_copy_is_counted_by_the_front_end(self):
        """A transposed parameter (and its gradient) is no contiguous memory the injector could copy:
        the front end counts its steps with its own operators, while the injector counts the plain
        one beside it. Both equal numpy's recount of the values the program saved."""
        saved_path = os.path.join(self.dir, "strided.npz")
        trace, p = self.trace(self.write("strided.py", STRIDED), args=[saved_path])
        self.assertIn("contiguous True False False", p.stdout)
        self.assertIn("counted by the front end [(6, 5), (6, 5)]", p.stdout)  # b's two steps, not a's
        saved = np.load(saved_path)
        rows = self.query(trace, "SELECT param, step, elements, changed, nonzero, lost, applied_abs_sum, applied_sq_sum, "
                                 "weight_sq_sum FROM v_param_updates ORDER BY step, param")
        self.assertEqual([row[:2] for row in rows], [("a", 0), ("b", 0), ("a", 1), ("b", 1)])
        for param, step, elements, changed, nonzero, lost, applied_abs, applied_sq, weight_sq in rows:
            key = "%d/%s/" % (step, param)
            before, after, grad = saved[key + "before"], saved[key + "after"], saved[key + "grad"]
            moved = before.view(np.uint32) != after.view(np.uint32)
            grad_nonzero = grad != 0
            old, new = before.astype(np.float64), after.astype(np.float64)
            self.assertEqual((elements, changed, nonzero, lost),
                             (before.size, int(moved.sum()), int(grad_nonzero.sum()),
                              int((grad_nonzero & ~moved).sum())), key)
            self.assertAlmostEqual(applied_abs, float(np.abs(new - old).sum()), delta=1e-12 * applied_abs, msg=key)
            self.assertAlmostEqual(applied_sq, float(((new - old) ** 2).sum()), delta=1e-12 * applied_sq, msg=key)
            self.assertAlmostEqual(weight_sq, float((old ** 2).sum()), delta=1e-12 * weight_sq, msg=key)

    def test_a_learning_rate_schedule_is_logged_step_by_step(self):
        """Under ExponentialLR the scalar lr holds, at each step, the rate its optimizer step used
        (as the program printed it), from the first step; the learning report gives its first and
        last. A constant rate logs nothing (the bf16 AdamW program below)."""
        trace, p = self.trace(self.write("scheduled.py", SCHEDULED))
        printed = [float(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("rate ")]
        self.assertEqual(printed, [0.1, 0.05, 0.025, 0.0125])
        logged = self.query(trace, "SELECT s.step, s.value FROM scalars s JOIN strings n ON n.id = s.name_id "
                                   "WHERE n.value = 'lr' ORDER BY s.step")
        self.assertEqual(logged, list(enumerate(printed)))
        report = json.loads(run([FPSCOPE, "report", trace, "--section", "learning", "--format", "json"], self.dir).stdout)
        self.assertEqual(report["learning"]["lr"], {"first_step": 0, "first": 0.1, "last_step": 3, "last": 0.0125})
        constant, _ = self.trace(self.write("constant.py", BF16_ADAMW), args=[os.path.join(self.dir, "c.npz")])
        self.assertEqual(self.query(constant, "SELECT count(*) FROM scalars s JOIN strings n ON n.id = s.name_id "
                                              "WHERE n.value = 'lr'"), [(0,)])

    def test_lost_updates_of_a_bf16_model_equal_numpys_recount(self):
        """For every parameter and optimizer step of a bf16 model trained with AdamW at lr 1e-4,
        param_updates holds what numpy recounts from the bits the program saved before and after
        the step: elements changed, elements whose gradient was nonzero (the front end's nonzero
        update) and of those the ones that did not change (lost), and the sums of the applied change
        and of the weight. Most of fc weights' updates are lost, and the learning report says so."""
        script = self.write("bf16_adamw.py", BF16_ADAMW)
        saved_path = os.path.join(self.dir, "updates.npz")
        trace, _ = self.trace(script, args=[saved_path])
        saved = np.load(saved_path)
        rows = self.query(trace, "SELECT param, step, dtype_name, elements, changed, nonzero_from, nonzero, lost, "
                                 "applied_abs_sum, applied_sq_sum, weight_sq_sum, computed_abs_sum, kernel "
                                 "FROM v_param_updates ORDER BY step, param")
        self.assertEqual(len(rows), 12, rows)  # 4 parameters, 3 steps
        for (param, step, dtype, elements, changed, nonzero_from, nonzero, lost, applied_abs, applied_sq, weight_sq,
             computed_abs, kernel) in rows:
            key = "%d/%s/" % (step, param)
            self.assertIn(key + "before", saved.files, param)
            before, after = saved[key + "before"], saved[key + "after"]
            moved = before != after
            grad_nonzero = bf16_values(saved[key + "grad"]) != 0
            old, new = bf16_values(before), bf16_values(after)
            self.assertEqual((dtype, elements, changed), ("bf16", before.size, int(moved.sum())), key)
            self.assertEqual((nonzero_from, nonzero, lost),
                             ("gradient", int(grad_nonzero.sum()), int((grad_nonzero & ~moved).sum())), key)
            self.assertAlmostEqual(applied_abs, float(np.abs(new - old).sum()), delta=1e-12 * applied_abs, msg=key)
            self.assertAlmostEqual(applied_sq, float(((new - old) ** 2).sum()), delta=1e-12 * applied_sq, msg=key)
            self.assertAlmostEqual(weight_sq, float((old ** 2).sum()), delta=1e-12 * weight_sq, msg=key)
            self.assertIsNone(computed_abs)  # the front end sees no computed update
            self.assertIsNone(kernel)        # a step of many operators, not one launch
        shares = dict(self.query(trace, "SELECT param, sum(lost) * 1.0 / sum(nonzero) FROM v_param_updates GROUP BY param"))
        self.assertGreaterEqual(shares["0.weight"], 0.5, shares)
        report = json.loads(run([FPSCOPE, "report", trace, "--section", "learning", "--format", "json"], self.dir).stdout)
        flagged = {p["param"] for p in report["learning"]["params"] if p["flagged"]}
        self.assertIn("0.weight", flagged)
        advice = [p["advice"] for p in report["learning"]["params"] if p["param"] == "0.weight"][0]
        self.assertIn("keep the parameters in fp32 and compute in bf16 under autocast", advice)
        # --updates off: no copy, no rows.
        off, _ = self.trace(script, "--updates", "off", args=[saved_path])
        self.assertEqual(self.query(off, "SELECT count(*) FROM param_updates"), [(0,)])


if __name__ == "__main__":
    support.main(globals())
