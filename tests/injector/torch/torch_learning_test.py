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


# Runs under the front end, so it imports it: the counts and sums of _update_sums_numpy (scratch
# arrays reused, einsum) against a plain numpy recount, on values with NaN and Inf, for each float type
# and for sizes that grow and shrink the reused arrays.
UPDATE_SUMS = """
import numpy as np
import torch
from fpscope_torch import _training
rng = np.random.default_rng(3)
scratch = _training._Scratch()

def recount(old_bits, new_bits, dtype, nonzero):
    def values(bits):
        if dtype == torch.bfloat16:
            return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.view({2: np.float16, 4: np.float32, 8: np.float64}[bits.dtype.itemsize]).astype(np.float64)
    changed = old_bits != new_bits
    old = values(old_bits)
    applied = values(new_bits) - old
    finite = np.isfinite(applied)
    applied, old = applied[finite], old[finite]
    return (int(changed.sum()), int(nonzero.sum()), int((nonzero & ~changed).sum()),
            float(np.abs(applied).sum()), float((applied * applied).sum()), float((old * old).sum()))

cases = 0
for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
    for n in (1, 70000, 300, 5000):
        p = torch.randn(n, dtype=torch.float64).to(dtype)
        q = (p.double() + torch.randn(n, dtype=torch.float64) * 1e-2).to(dtype)
        if n > 10:
            p[3], q[5], p[7], q[7] = float("nan"), float("inf"), float("-inf"), float("-inf")
        old = _training._bits_of(p).copy()
        new = _training._bits_of(q)
        nonzero = rng.random(n) > 0.3
        got = _training._update_sums_numpy(old, new, dtype, nonzero, scratch)
        want = recount(old, new, dtype, nonzero)
        assert got[:3] == want[:3], (dtype, n, got, want)
        for g, w in zip(got[3:], want[3:]):
            assert abs(g - w) <= 1e-12 * abs(w), (dtype, n, got, want)
        cases += 1
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
