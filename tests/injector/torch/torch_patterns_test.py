"""Training-loop patterns of a newcomer's own program, each with a NaN planted at a known step in a
known module (a log of values shifted below zero from iteration 3 on, in the layer `faulty`):
activation checkpointing, a learning-rate scheduler with gradient clipping and a no_grad evaluation
every step, a model called twice a step (a siamese pair), a scripted submodule, gradient
accumulation (three micro-batches a step), two models each with its optimizer, and a model of
mixed dtypes (the faulty layer in fp64, the head in bf16). Each must name the origin, its layer,
step and phase, stop the trap at the program's line, and count the steps: a step is one
optimizer.step() (with two optimizers, two steps an iteration).

Usage: torch_patterns_test.py --fpscope PATH [--torch-operators observer|dispatch-mode] [unittest arguments]
"""
import json

import torch_test_support as support
from torch_test_support import run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None

# argv: PATTERN (checkpoint, scheduler, twice, scripted, accumulate, two_models, mixed, plain). 5
# iterations; from iteration 3 on the layer `faulty` takes the log of negative values.
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
        if pattern == "mixed":  # the faulty layer kept in fp64, the head in bf16
            self.faulty.double()
            self.out.bfloat16()

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        if pattern == "checkpoint":
            h = checkpoint(self.faulty, h)
        elif pattern == "mixed":
            h = self.faulty(h.double()).bfloat16()
        else:
            h = self.faulty(h)
        return self.out(h).float()


class Critic(nn.Module):  # the second model of two_models: trained on the first one's outputs
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(1, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, y):
        return self.out(torch.relu(self.inp(y)))


model = Body()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
critic = Critic()
critic_opt = torch.optim.SGD(critic.parameters(), lr=0.01)
data = torch.randn(STEPS, 3, 4, 8)
for step in range(STEPS):
    if step == FAULT:
        model.faulty.shift = 1e6
    opt.zero_grad()
    x = data[step, 0].requires_grad_(pattern == "checkpoint")
    if pattern == "twice":  # a siamese pair: the model called twice a step
        loss = (model(data[step, 0]) - model(data[step, 1])).square().mean()
    elif pattern == "accumulate":  # three micro-batches, one optimizer step
        for micro in range(3):
            (model(data[step, micro]).square().mean() / 3).backward()
    else:
        loss = model(x).square().mean()
    if pattern != "accumulate":
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
    if pattern == "two_models":  # the critic learns from the model's outputs, with its own optimizer
        critic_opt.zero_grad()
        critic(model(data[step, 1]).detach()).square().mean().backward()
        critic_opt.step()
print("done")
"""


class FrontEndTest(support.FrontEndCase):
    def check(self, pattern, trap_line, step=3, steps=5):
        """The origin at `step` (iteration 3's), `steps` optimizer steps, the trap at `trap_line`."""
        script = self.write("patterns.py", PATTERNS)
        trace, p = self.trace(script, args=[pattern])
        self.assertEqual(p.stdout.strip(), "done")
        self.assertEqual(self.query(trace, "SELECT kernel, layer, phase, step FROM v_first_nonfinite"),
                         [("log", "faulty", "forward", step)])
        summary = json.loads(run([FPSCOPE, "report", "--section", "summary", "--format", "json", trace],
                                 self.dir).stdout)["run"]
        self.assertEqual((summary["steps"], summary["tail_step"], summary["first_nonfinite_loss_step"]),
                         (steps, steps, step))
        trapped_trace, trapped = self.trace(script, "--trap", "nonfinite", args=[pattern], check=False)
        # Stopped inside the step's forward: that step is a step, not the run's tail.
        stopped = json.loads(run([FPSCOPE, "report", "--section", "summary", "--format", "json", trapped_trace],
                                 self.dir).stdout)["run"]
        self.assertEqual((stopped["steps"], stopped["last_step"], stopped["tail_step"]), (step + 1, step, None))
        self.assertIn("FloatingPointError: fpscope: first NaN made by log (layer faulty, step %d, phase forward)" % step,
                      trapped.stderr)
        lines = trapped.stderr.splitlines()
        own = [i for i, line in enumerate(lines) if line.strip().startswith('File "%s"' % script)]
        self.assertTrue(own, trapped.stderr)
        self.assertIn(trap_line, lines[own[-1] + 1], trapped.stderr)
        return trace

    def test_activation_checkpointing(self):
        self.check("checkpoint", "# the planted line")

    def test_a_scheduler_with_clipping_and_an_evaluation_each_step(self):
        self.check("scheduler", "# the planted line")

    def test_a_model_called_twice_a_step(self):
        self.check("twice", "# the planted line")

    def test_a_scripted_submodule(self):
        # Its operators run inside TorchScript: the trap stops at the line that called it.
        self.check("scripted", "h = self.faulty(h)")

    def test_gradient_accumulation(self):
        trace = self.check("accumulate", "# the planted line")
        self.assertEqual(self.query(trace, "SELECT DISTINCT micro_batches FROM v_step_loss WHERE step < 5"), [(3,)])

    def test_two_models_with_their_own_optimizers(self):
        # Two optimizer steps an iteration: iteration 3 begins at step 6.
        trace = self.check("two_models", "# the planted line", step=6, steps=10)
        layers = {l for (l,) in self.query(trace, "SELECT DISTINCT layer FROM v_kernels WHERE layer IS NOT NULL")}
        self.assertTrue({"faulty", "Critic.inp", "Critic.out"} <= layers, layers)

    def test_a_model_of_mixed_dtypes(self):
        trace = self.check("mixed", "# the planted line")
        self.assertEqual(self.query(trace, "SELECT DISTINCT d.name FROM v_first_nonfinite f JOIN tensors t"
                                           " ON t.id = f.tensor_id JOIN dtypes d ON d.id = t.dtype"), [("f64",)])
        config = dict(self.query(trace, "SELECT substr(key, 8), value FROM meta WHERE key LIKE 'config.%'"))
        self.assertEqual(config["precision"], "fp32; fp64 in faulty.lin; bf16 in out")


if __name__ == "__main__":
    support.main(globals())
