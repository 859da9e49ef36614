"""Training-loop patterns of a newcomer's own program, each with a NaN planted at a known step in a
known module (a log of values shifted below zero from step 3 on, in the layer `faulty`):
activation checkpointing, a learning-rate scheduler with gradient clipping and a no_grad evaluation
every step, a model called twice a step (a siamese pair), and a scripted submodule. Each must name
the origin, its layer, step and phase, stop the trap at the program's line, and count the steps.
(Gradient accumulation, two models trained together and mixed dtypes are in
torch_transformer_test.py.)

Usage: torch_patterns_test.py --fpscope PATH [--torch-operators observer|dispatch-mode] [unittest arguments]
"""
import json

import torch_test_support as support
from torch_test_support import run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None

# argv: PATTERN (checkpoint, scheduler, twice, scripted, plain). 5 optimizer steps; from step 3 on
# the layer `faulty` takes the log of negative values.
PATTERNS = """import sys
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
torch.set_num_threads(1)
pattern, FAULT, STEPS = sys.argv[1], 3, 5


class Faulty(nn.Module):
    # The log of its input shifted by `shift`: NaN from finite inputs once the shift is large.
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.shift = -10.0

    def forward(self, x):
        return torch.log(self.lin(x).abs() - self.shift)  # the planted line


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.faulty = torch.jit.script(Faulty(16)) if pattern == "scripted" else Faulty(16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        if pattern == "checkpoint":
            h = checkpoint(self.faulty, h)
        else:
            h = self.faulty(h)
        return self.out(h)


model = Body()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
data = torch.randn(STEPS, 2, 4, 8)
for step in range(STEPS):
    if step == FAULT:
        model.faulty.shift = 1e6
    opt.zero_grad()
    x = data[step, 0].requires_grad_(pattern == "checkpoint")
    if pattern == "twice":  # a siamese pair: the model called twice a step
        loss = (model(data[step, 0]) - model(data[step, 1])).square().mean()
    else:
        loss = model(x).square().mean()
    loss.backward()
    if pattern == "scheduler":
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if pattern == "scheduler":
        sched.step()
        model.eval()
        with torch.no_grad():
            model(data[step, 1])
        model.train()
print("done")
"""


class FrontEndTest(support.FrontEndCase):
    def check(self, pattern, trap_line):
        script = self.write("patterns.py", PATTERNS)
        trace, p = self.trace(script, args=[pattern])
        self.assertEqual(p.stdout.strip(), "done")
        self.assertEqual(self.query(trace, "SELECT kernel, layer, phase, step FROM v_first_nonfinite"),
                         [("log", "faulty", "forward", 3)])
        summary = json.loads(run([FPSCOPE, "report", "--section", "summary", "--format", "json", trace],
                                 self.dir).stdout)["run"]
        self.assertEqual((summary["steps"], summary["tail_step"], summary["final_loss_step"],
                          summary["first_nonfinite_loss_step"]), (5, 5, 2, 3))
        trapped_trace, trapped = self.trace(script, "--trap", "nonfinite", args=[pattern], check=False)
        # Stopped inside step 3's forward: step 3 is a step, not the run's tail.
        stopped = json.loads(run([FPSCOPE, "report", "--section", "summary", "--format", "json", trapped_trace],
                                 self.dir).stdout)["run"]
        self.assertEqual((stopped["steps"], stopped["last_step"], stopped["tail_step"]), (4, 3, None))
        self.assertIn("FloatingPointError: fpscope: first NaN made by log (layer faulty, step 3, phase forward)",
                      trapped.stderr)
        lines = trapped.stderr.splitlines()
        own = [i for i, line in enumerate(lines) if line.strip().startswith('File "%s"' % script)]
        self.assertTrue(own, trapped.stderr)
        self.assertIn(trap_line, lines[own[-1] + 1], trapped.stderr)

    def test_activation_checkpointing(self):
        self.check("checkpoint", "# the planted line")

    def test_a_scheduler_with_clipping_and_an_evaluation_each_step(self):
        self.check("scheduler", "# the planted line")

    def test_a_model_called_twice_a_step(self):
        self.check("twice", "# the planted line")

    def test_a_scripted_submodule(self):
        # Its operators run inside TorchScript: the trap stops at the line that called it.
        self.check("scripted", "h = self.faulty(h)")


if __name__ == "__main__":
    support.main(globals())
