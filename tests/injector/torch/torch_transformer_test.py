"""End-to-end tests on a small character-level transformer of the tests' own (embedding, LayerNorm,
two blocks of causal attention masked with -inf, GELU MLP, a head tied to the embedding, AdamW),
traced clean and with planted faults, in fp32 and under bf16 autocast: what the reports count and
show must hold on a real program, not just on the trainer's CNN.

Usage: torch_transformer_test.py --fpscope PATH [--torch-operators observer|dispatch-mode]
       [unittest arguments]
"""
import csv
import json
import math
import os

import torch_test_support as support
from torch_test_support import PYTHON, losses, run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None

# argv: MODE STEPS [bf16]. MODE: clean; overflow (a block's log temperature written to 100 at step
# FAULT, so exp overflows); eps0 (a LayerNorm with eps 0 whose input rows are zero from step FAULT).
# Prints each step's loss exactly, and the -inf values the masks hold over the run, counted from the
# mask itself.
TRANSFORMER = """
import math, sys
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
mode, steps, bf16 = sys.argv[1], int(sys.argv[2]), "bf16" in sys.argv[3:]
FAULT = 5
V, T, D, H, B = 24, 12, 32, 2, 4

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.log_temp = nn.Parameter(torch.zeros(()))

    def forward(self, x, mask):
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) * torch.exp(self.log_temp) / math.sqrt(D // H)
        scores = scores.masked_fill(mask, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.emb_ln = nn.LayerNorm(D, eps=0.0 if mode == "eps0" else 1e-5)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(D)

    def forward(self, idx):
        x = self.emb_ln(self.emb(idx))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_f(x) @ self.emb.weight.t()

model = TinyGPT()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = torch.randint(1, V, (B, T + 1), generator=torch.Generator().manual_seed(1))
for step in range(steps):
    if step == FAULT and mode == "overflow":
        with torch.no_grad():
            model.blocks[1].log_temp.fill_(100.0)
    if step == FAULT and mode == "eps0":
        with torch.no_grad():
            model.emb.weight[data[0, 0]].zero_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(data[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, V), data[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
if mode == "eps0":  # the rows the zeroed embedding gives the LayerNorm, counted from the data
    print("zero rows", int((data[:, :-1] == data[0, 0]).sum()))
masked = int(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).sum())
print("mask -inf", steps * len(model.blocks) * B * H * masked)
"""

STEPS = 8

# A small CNN with a GroupNorm and a BatchNorm on inputs of small variance, whose reciprocal
# deviations (side outputs) are far larger than the normalised activations.
NORMS = """
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8),
                    nn.ReLU(), nn.Flatten(), nn.Linear(8 * 10 * 10, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = 0.01 * torch.randn(6, 1, 14, 14), torch.randint(0, 4, (6,))
for step in range(3):
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
"""

# Each forward layer's largest main output (slot 0) and largest side output, from the tensors.
LAYER_OUTPUTS = """
SELECT k.layer, max(iif(t.slot = 0, t.absmax, NULL)), max(iif(t.slot > 0, t.absmax, NULL))
FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id
WHERE t.role = 'out' AND k.phase = 'forward' AND k.layer IS NOT NULL GROUP BY k.layer
"""


def mask_infinities(stdout):
    return int(next(line.split()[-1] for line in stdout.splitlines() if line.startswith("mask -inf")))


class FrontEndTest(support.FrontEndCase):
    def trace_path(self):
        return os.path.join(self.dir, "trace-%d.sqlite" % len(os.listdir(self.dir)))

    def report(self, trace, *options):
        return json.loads(run([FPSCOPE, "report", "--format", "json", *options, trace], self.dir).stdout)

    def test_intended_infinities_are_counted_apart_everywhere(self):
        script = self.write("gpt.py", TRANSFORMER)
        for precision in ["fp32", "bf16"]:
            with self.subTest(precision=precision):
                args = ["clean", str(STEPS)] + (["bf16"] if precision == "bf16" else [])
                plain = run([PYTHON, script, *args], self.dir)
                trace, traced = self.trace(script, args=args)
                self.assertEqual(losses(traced.stdout), losses(plain.stdout))  # tracing changed nothing
                intended = mask_infinities(plain.stdout)
                self.assertGreater(intended, 0)
                # The documented query for troubled steps finds none; every -inf is counted apart.
                self.assertEqual(self.query(trace, "SELECT count(*) FROM v_step_summary WHERE nan_values + inf_values > 0"),
                                 [(0,)])
                self.assertEqual(self.query(trace, "SELECT sum(intended_values) FROM v_step_summary"), [(intended,)])
                self.assertEqual(self.query(trace, "SELECT count(*) FROM v_step_summary WHERE intended_values > 0"),
                                 [(STEPS,)])
                self.assertEqual(self.query(trace, "SELECT sum(nonfinite), sum(intended) FROM v_op_ranges WHERE role = 'out'"),
                                 [(0, intended)])
                report = self.report(trace)
                # Steps are optimizer steps; what the program did after the last one is the tail.
                self.assertEqual((report["run"]["steps"], report["run"]["last_step"], report["run"]["tail_step"]),
                                 (STEPS, STEPS - 1, STEPS))
                nonfinite = report["nonfinite"]
                self.assertEqual((nonfinite["nan"], nonfinite["pos_inf"], nonfinite["neg_inf"]), (0, 0, 0))
                self.assertEqual(nonfinite["intended"], {"tensors": STEPS * 2, "nan": 0, "pos_inf": 0,
                                                         "neg_inf": intended, "made_by": ["masked_fill"]})
                # The attention layers' rows hold no NaN/Inf in any range view.
                for row in report["ranges"]["rows"]:
                    self.assertEqual(row["nonfinite"], 0, row)
                table = run([FPSCOPE, "report", "--section", "ranges", "--format", "csv", trace], self.dir).stdout
                rows = list(csv.DictReader(table.split("# ranges/ranges\n")[1].splitlines()))
                self.assertEqual({row["NaN/Inf"] for row in rows}, {"0"})
                self.assertEqual(sum(int(row["intended NaN/Inf"]) for row in rows), intended)
                self.assertEqual({(row["layer"], row["intended NaN/Inf"]) for row in rows if row["kernel"] == "masked_fill" and row["layer"]},
                                 {("blocks.0", str(intended // 2)), ("blocks.1", str(intended // 2))})
                text = run([FPSCOPE, "report", trace], self.dir).stdout
                self.assertIn("{:,} intended -Inf (masked_fill) in {} output tensors".format(intended, STEPS * 2), text)
                self.assertIn("None: every measured output was finite.", text)
                self.assertIn("steps {} (0 .. {}), then the tail (step {}: after the last optimizer step)".format(
                    STEPS, STEPS - 1, STEPS), " ".join(text.split()))

    def test_the_example_transformer_computes_the_same_traced(self):
        """injector/torch/examples/char_transformer.py under bf16 autocast, traced with full statistics
        and with --every 2: its losses are the untraced run's bit for bit, and its layers carry the
        names its docstring gives."""
        example = os.path.join(os.path.dirname(support.EXAMPLE), "char_transformer.py")
        args = ["--steps", "4", "--threads", "1", "--batch-size", "4", "--context", "16"]
        plain = os.path.join(self.dir, "plain.json")
        run([PYTHON, example, *args, "--losses", plain], self.dir)
        with open(plain) as f:
            want = json.load(f)
        self.assertEqual(len(want), 4)
        for options in ([], ["--every", "2"]):
            traced = os.path.join(self.dir, "traced.json")
            trace, _ = self.trace(example, *options, args=[*args, "--losses", traced])
            with open(traced) as f:
                self.assertEqual(json.load(f), want, options)
            layers = {row[0] for row in self.query(trace, "SELECT DISTINCT layer FROM v_kernels")}
            self.assertLessEqual({"emb", "blocks.0.attn", "blocks.1.fc", "blocks.1.out", "ln_f"}, layers, options)

    def test_a_normalisations_side_outputs_are_not_its_activation(self):
        """LayerNorm (the transformer), GroupNorm and BatchNorm: a layer's activation is what its
        kernels return first; the saved mean and reciprocal deviation are side outputs."""
        for name, program, args, norm_layers in [("gpt.py", TRANSFORMER, ["clean", "3"], {"emb_ln"}),
                                                  ("norms.py", NORMS, [], {"1", "4"})]:
            with self.subTest(program=name):
                trace, _ = self.trace(self.write(name, program), args=args)
                outputs = {layer: (main, side) for layer, main, side in self.query(trace, LAYER_OUTPUTS)}
                for layer in norm_layers:  # the planted difference the rule must see
                    main, side = outputs[layer]
                    self.assertGreater(side, 4 * main, layer)
                rows = self.report(trace, "--section", "ranges")["ranges"]["rows"]
                self.assertEqual({r["row"] for r in rows if r["row"] in outputs}, set(outputs))
                for r in rows:
                    if r["row"] in outputs:
                        self.assertEqual(r["absmax"], outputs[r["row"]][0], r["row"])
                # The layer-range table leaves them out by default and shows them on request.
                for flag, pick in [([], 0), (["--side-outputs"], 1)]:
                    table = run([FPSCOPE, "report", "--section", "ranges", "--format", "csv", *flag, trace], self.dir)
                    rows = list(csv.DictReader(table.stdout.split("# ranges/ranges\n")[1].splitlines()))
                    for layer in norm_layers:
                        forward = [float(r["absmax"]) for r in rows if r["layer"] == layer and "backward" not in r["kernel"]]
                        self.assertEqual(max(forward), max(outputs[layer][:pick + 1]), (layer, flag))
                # Comparing the run with itself: the largest forward output per layer is the activation.
                compared = json.loads(run([FPSCOPE, "compare", "--format", "json", trace, trace], self.dir).stdout)
                for layer in compared["layers"]:
                    if layer["layer"] in norm_layers:
                        self.assertEqual(layer["source_absmax"], outputs[layer["layer"]][0])

    def test_forecasts_follow_the_growth_the_steps_support(self):
        # The clean transformer trains: nothing in it heads for fp16's largest value.
        trace, _ = self.trace(self.write("gpt.py", TRANSFORMER), args=["clean", "30"])
        self.assertEqual(self.report(trace, "--section", "why")["why"]["forecasts"], [])
        # A bias that grows by the same amount each step: a straight line, not exponential growth.
        script = self.write("ramp.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            net = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.0)
            x = torch.randn(4, 8)
            with torch.no_grad():
                net[0].bias.fill_(100.0)
            for step in range(40):
                opt.zero_grad()
                net(x).mean().backward()
                opt.step()
                with torch.no_grad():
                    net[0].bias.add_(1000.0)
        """)
        trace, _ = self.trace(script)
        forecasts = [f for f in self.report(trace, "--section", "why")["why"]["forecasts"]
                     if f["row"] == "0" and f["view"] == "activations"]
        self.assertEqual(len(forecasts), 1, forecasts)
        f = forecasts[0]
        self.assertEqual(f["model"], "linear")
        self.assertAlmostEqual(f["per_step"], 1000.0, delta=1.0)
        last = self.query(trace, "SELECT max(t.absmax) FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                 " WHERE k.layer = '0' AND k.phase = 'forward' AND k.step = 39 AND t.role = 'out'"
                                 " AND t.slot = 0")[0][0]
        expected = 39 + (65504.0 - last) / 1000.0
        self.assertLessEqual(abs(f["crossing_step"] - expected), 1.5, (f, expected))
        self.assertIn("by 1000 a step (a straight line fits best)", f["summary"])

    def test_advise_answers_for_the_runs_own_format_and_names_its_nan(self):
        script = self.write("gpt.py", TRANSFORMER)
        bf16, _ = self.trace(script, args=["clean", "6", "bf16"])
        advice = run([FPSCOPE, "advise", "-o", self.dir, bf16], self.dir).stdout
        self.assertIn("Target: bf16 (the run's precision is amp-bf16; --target fp16 for the other)", advice)
        self.assertIn("Loss scaling: not needed. bf16 has fp32's exponent range", advice)
        self.assertNotIn("NaN/Inf in this run", advice)
        asked = run([FPSCOPE, "advise", "--target", "fp16", "-o", self.dir, bf16], self.dir).stdout
        self.assertIn("Target: fp16 (--target)", asked)
        faulted, _ = self.trace(script, args=["overflow", str(STEPS)])
        advice = run([FPSCOPE, "advise", "-o", self.dir, faulted], self.dir).stdout
        self.assertIn("Target: fp16 (the run's precision is fp32; --target bf16 for the other)", advice)
        self.assertIn("NaN/Inf in this run: first +inf made by exp (layer blocks.1), phase forward, at step 5. Its cause: "
                      "fpscope report %s --section why" % faulted, advice)

    def why(self, trace):
        return self.report(trace, "--section", "why")["why"]

    def test_a_normalisation_without_epsilon_on_constant_rows_is_its_own_cause(self):
        script = self.write("gpt.py", TRANSFORMER)
        for precision in ["fp32", "bf16"]:
            with self.subTest(precision=precision):
                trace, p = self.trace(script, args=["eps0", str(STEPS)] + (["bf16"] if precision == "bf16" else []))
                rows = int(next(line.split()[-1] for line in p.stdout.splitlines() if line.startswith("zero rows")))
                self.assertGreater(rows, 0)
                self.assertEqual(self.query(trace, "SELECT kernel, layer, step, value FROM v_first_nonfinite"),
                                 [("native_layer_norm", "emb_ln", 5, "nan")])
                cause = self.why(trace)["causes"][0]
                self.assertEqual(cause["kind"], "zero_variance_norm")
                self.assertIn("native_layer_norm (emb_ln) made nan: %d of the rows it normalises have no variance "
                              "(its reciprocal deviation emb_ln.native_layer_norm.out2 is Inf there), so its epsilon is 0"
                              % rows, cause["summary"])
                self.assertIn("%d of %d values of its input" % (rows * 32, 4 * 12 * 32), cause["summary"])
                self.assertIn("give the normalisation a positive epsilon", cause["advice"])
                self.assertNotIn("fp32", cause["advice"])  # the op runs in fp32 already (autocast keeps it there)

    def test_a_division_by_zero_names_the_divisor(self):
        script = self.write("divide.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(8, 32)
                    self.scale = nn.Parameter(torch.ones(32))
                def forward(self, x):
                    return torch.relu(self.lin(x)) / self.scale
            enc = Encoder()
            opt = torch.optim.SGD(enc.parameters(), lr=0.01)
            x = torch.randn(64, 8)
            for step in range(4):
                if step == 2:
                    with torch.no_grad():
                        enc.scale.zero_()
                opt.zero_grad()
                enc(x).mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step FROM v_first_nonfinite"), [("div", None, 2)])
        dividend_zeros = self.query(trace, "SELECT t.zero FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                           " WHERE k.kernel = 'div' AND k.step = 2 AND t.role = 'in' AND t.slot = 0")[0][0]
        self.assertGreater(dividend_zeros, 0)  # the dividend holds zeros too: the divisor is still the cause
        cause = self.why(trace)["causes"][0]
        self.assertEqual(cause["kind"], "underflow_into_division")
        self.assertIn("32 of 32 values of its divisor", cause["summary"])
        self.assertIn("(x/0 is Inf, 0/0 is NaN)", cause["summary"])
        self.assertTrue(cause["advice"].startswith("keep the divisor away from zero"), cause["advice"])
        self.assertIn("already runs in fp32", cause["advice"])

    def test_a_write_that_made_a_range_jump_is_the_cause(self):
        """The overflowing exp read a log temperature that one write (fill_ at the fault's step) set
        to 100: that write, its step and the jump are the cause, and the chain holds its link."""
        script = self.write("gpt.py", TRANSFORMER)
        trace, _ = self.trace(script, args=["overflow", str(STEPS)])
        why = self.why(trace)
        cause = why["causes"][0]
        self.assertEqual(cause["kind"], "range_jump", cause)
        self.assertEqual(cause["step"], 5)
        before = self.query(trace, "SELECT max(t.absmax) FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                   " WHERE t.tensor = 'blocks.1.log_temp' AND k.step < 5")[0][0]
        self.assertIn("fill_ at step 5 wrote blocks.1.log_temp with absmax 100, 2^%.1f above its previous"
                      % math.log2(100 / before), cause["summary"])
        self.assertIn("exp (blocks.1) then made +inf of it", cause["summary"])
        link = next(l for l in why["chain"] if l["tensor"] == "blocks.1.log_temp")
        self.assertEqual((link["writer_kernel"], link["absmax_after"]), ("fill_", 100.0))

    def test_zeros_a_write_flushed_into_a_division_are_the_cause(self):
        """A divisor drifting down through fp16's subnormals (step 1) until its product rounds to zero
        (step 2): the division by it makes Inf. The cause names the divisor, the write that flushed it
        and the format to keep."""
        script = self.write("flush.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Ratio(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(8, 8)
                    self.scale = 1.0
                def forward(self, x):
                    h = self.lin(x)
                    with torch.no_grad():  # a ratio the loss reports, outside the backward
                        hh = h.half()
                        d = hh.abs() * self.scale  # fp16: subnormal with 1e-4, zero with 1e-9
                        ratio = (hh / d).float().sum()
                    return h.sum() + ratio
            m = Ratio()
            opt = torch.optim.SGD(m.parameters(), lr=0.0)
            x = torch.randn(4, 8)
            for step in range(4):
                m.scale = {1: 1e-4, 2: 1e-9}.get(step, 1.0)
                opt.zero_grad()
                m(x).backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        self.assertEqual(self.query(trace, "SELECT kernel, step FROM v_first_nonfinite"), [("div", 2)])
        zeros, count = self.query(trace, "SELECT t.zero, t.count FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                         " WHERE k.kernel = 'div' AND k.step = 2 AND t.role = 'in' AND t.slot = 1")[0]
        self.assertEqual((zeros, count), (32, 32))
        cause = self.why(trace)["causes"][0]
        self.assertEqual(cause["kind"], "underflow_into_division", cause)
        self.assertIn("32 of 32 values of its divisor", cause["summary"])
        self.assertIn("mul flushed 32 of them to zero at step 2", cause["summary"])
        self.assertTrue(cause["advice"].startswith("keep this op (and what feeds it) in fp32"), cause["advice"])

    def test_a_nan_in_the_data_of_a_fully_traced_run_is_said_as_such(self):
        """No launch made the NaN: it came in with a batch, loaded without any operator. Every step
        was traced, so the cause points at the data, not at a selection."""
        script = self.write("data.py", """
            import numpy as np, torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            batches = np.random.default_rng(0).standard_normal((4, 8, 6)).astype(np.float32)
            batches[2, 3, 1] = np.nan  # a bad sample in step 2's batch
            data = torch.from_numpy(batches)
            for step in range(4):
                opt.zero_grad()
                net(data[step]).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_first_nonfinite"), [(0,)])
        cause = self.why(trace)["causes"][0]
        self.assertEqual(cause["kind"], "nonfinite_data", cause)
        self.assertEqual(cause["step"], 2)
        self.assertIn("already received it at step 2, from input data", cause["summary"])
        self.assertNotIn("selection", cause["summary"])
        self.assertTrue(cause["advice"].startswith("check the input data for NaN/Inf"), cause["advice"])

    def test_a_sampled_run_that_missed_the_origin_says_which_steps_to_trace(self):
        script = self.write("gpt.py", TRANSFORMER)
        trace, _ = self.trace(script, "--every", "4", args=["overflow", "12"])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_first_nonfinite"), [(0,)])
        cause = self.why(trace)["causes"][0]
        self.assertEqual(cause["kind"], "nonfinite_data")
        self.assertIn("its loss was first NaN/Inf at step 5", cause["summary"])
        suggested = "fpscope run --steps 4-5 -o steps-4-5.sqlite -- %s %s overflow 12" % (PYTHON, script)
        self.assertTrue(cause["advice"].endswith(suggested), cause["advice"])
        # The suggestion, followed, finds the origin.
        followed, _ = self.trace(script, "--steps", "4-5", args=["overflow", "12"])
        self.assertEqual(self.query(followed, "SELECT kernel, layer, step FROM v_first_nonfinite"), [("exp", "blocks.1", 5)])

    def test_a_step_is_an_optimizer_step_whatever_its_micro_batches(self):
        """Gradient accumulation: four backward() calls a step. The step's loss is the mean of its
        micro-batches' losses (NaN when any is), one summary row a step; scalars keeps each."""
        script = self.write("accumulate.py", """
            import math, torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            data = torch.randn(6, 4, 8, 6)
            for step in range(6):
                opt.zero_grad()
                losses = []
                for micro in range(4):
                    x = data[step, micro].clone()
                    if step == 3 and micro == 2:
                        x[0, 0] = float("nan")  # a bad sample in one micro-batch
                    loss = net(x).square().mean() / 4
                    loss.backward()
                    losses.append(loss.item())
                opt.step()
                print("step", step, (sum(losses) / 4).hex() if all(map(math.isfinite, losses)) else "nan")
        """)
        trace, p = self.trace(script)
        expected = {int(w[1]): w[2] for w in (line.split() for line in p.stdout.splitlines()) if w[0] == "step"}
        rows = self.query(trace, "SELECT step, loss FROM v_step_summary WHERE step < 6 ORDER BY step")
        self.assertEqual([step for step, _ in rows], list(range(6)))  # one row a step
        self.assertEqual({step: "nan" if loss is None else float(loss).hex() for step, loss in rows}, expected)
        self.assertEqual(self.query(trace, "SELECT count(*) FROM scalars s JOIN strings n ON n.id = s.name_id"
                                           " WHERE n.value = 'loss'"), [(24,)])  # every micro-batch's, kept
        self.assertEqual(self.query(trace, "SELECT DISTINCT micro_batches FROM v_step_loss"), [(4,)])
        report = self.report(trace)
        self.assertEqual((report["run"]["steps"], report["run"]["final_loss_step"],
                          report["run"]["first_nonfinite_loss_step"], report["run"]["nonfinite_loss_steps"]), (6, 2, 3, 3))
        self.assertEqual(report["nonfinite"]["first_step"], 3)

    def test_models_trained_together_stay_apart(self):
        script = self.write("gan.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Generator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
                def forward(self, z):
                    return self.net(z)
            class Critic(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
                    self.head = nn.Linear(1, 1).double()
                def forward(self, x):
                    return self.head(self.net(x).double())
            g, d = Generator(), Critic()
            og, od = torch.optim.SGD(g.parameters(), lr=0.01), torch.optim.SGD(d.parameters(), lr=0.01)
            nn.Identity()(torch.zeros(1))  # a module without parameters runs first: no model of its own
            for step in range(3):
                z = torch.randn(8, 4)
                od.zero_grad(); d(g(z).detach()).mean().backward(); od.step()
                og.zero_grad(); (-d(g(z))).mean().backward(); og.step()
            print("parameters", sum(p.numel() for p in g.parameters()), sum(p.numel() for p in d.parameters()))
        """)
        trace, p = self.trace(script)
        g_params, d_params = map(int, p.stdout.split()[1:3])
        config = dict(self.query(trace, "SELECT substr(key, 8), value FROM meta WHERE key LIKE 'config.%'"))
        self.assertEqual(config["model"], "Generator, Critic")
        self.assertEqual((config["parameters"], config["parameters.Generator"], config["parameters.Critic"]),
                         (str(g_params + d_params), str(g_params), str(d_params)))
        self.assertEqual(config["precision"], "fp32; fp64 in Critic.head")
        self.assertNotIn("unmeasured", config)  # fp64 is measured like the narrower types
        self.assertEqual(self.query(trace, "SELECT DISTINCT d.name FROM tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                           " JOIN dtypes d ON d.id = t.dtype WHERE k.layer = 'Critic.head'"
                                           " AND t.role = 'out' AND k.phase = 'forward'"), [("f64",)])
        layers = {l for (l,) in self.query(trace, "SELECT DISTINCT layer FROM v_kernels WHERE layer IS NOT NULL")}
        self.assertEqual(layers, {"net.0", "net.1", "net.2", "Critic.net.0", "Critic.net.1", "Critic.net.2", "Critic.head"})
        weights = {n for (n,) in self.query(trace, "SELECT DISTINCT s.value FROM memory_events m JOIN strings s"
                                                   " ON s.id = m.name_id WHERE m.category = 0")}
        self.assertTrue({"net.0.weight", "Critic.net.0.weight"} <= weights, weights)
        report = run([FPSCOPE, "report", "--section", "summary", trace], self.dir).stdout
        self.assertNotIn("not measured", report)

    def test_the_trap_ends_at_the_line_that_holds_the_operator(self):
        """An operator reached through Python's operator methods (`x / d`) traps at its own line, as
        `torch.log(...)` does: not after the module returned, nor at the next line's call."""
        script = self.write("trapline.py", """
            import sys, torch, torch.nn as nn
            class Scale(nn.Module):
                def forward(self, x, d):
                    return x / d  # the dividing line
            class Norm(nn.Module):
                def forward(self, x):
                    y = x / x.norm(dim=1, keepdim=True)  # the normalising line
                    z = torch.div(y, 2.0)  # an innocent line
                    return z
            if sys.argv[1] == "scale":
                Scale()(torch.ones(2, 4), torch.zeros(4))
            else:
                Norm()(torch.zeros(2, 4))
        """)
        for case, line, kind in [("scale", "the dividing line", "+Inf"), ("norm", "the normalising line", "NaN")]:
            with self.subTest(case=case):
                _, p = self.trace(script, "--trap", "nonfinite", args=[case], check=False)
                self.assertIn("FloatingPointError: fpscope: first %s made by div (step 0, phase forward)" % kind, p.stderr)
                frames = [l for l in p.stderr.splitlines() if l.strip().startswith("File ")]
                # The last frame of the program's own is the operator's line (in dispatch mode the
                # front end's raise follows it).
                own = [i for i, l in enumerate(frames) if script in l]
                self.assertTrue(own, p.stderr)
                after = frames[own[-1] + 1:]
                self.assertTrue(all("fpscope_torch" in l for l in after), p.stderr)
                if OPERATORS == "observer":
                    self.assertEqual(after, [], p.stderr)
                source = p.stderr.split(frames[own[-1]])[1].splitlines()[1]
                self.assertIn(line, source, p.stderr)

    def test_a_nan_made_in_an_fp64_module_is_found_where_it_is_made(self):
        script = self.write("double.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.shift = 0.0
                def forward(self, x):
                    return torch.log(self.fc(x).abs() - self.shift)
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(4, 4)
                    self.head = Head().double()  # kept in fp64
                def forward(self, x):
                    return self.head(self.enc(x).double()).float().sum()
            m = Model()
            opt = torch.optim.SGD(m.parameters(), lr=0.01)
            for step in range(3):
                m.head.shift = 1e6 if step == 2 else 0.0
                opt.zero_grad()
                m(torch.randn(2, 4)).backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        # The log of the fp64 module made the NaN: it is the origin, not the cast to fp32 after it.
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step, phase FROM v_first_nonfinite"),
                         [("log", "head", 2, "forward")])
        self.assertEqual(self.query(trace, "SELECT DISTINCT d.name FROM v_first_nonfinite f JOIN tensors t"
                                           " ON t.id = f.tensor_id JOIN dtypes d ON d.id = t.dtype"), [("f64",)])
        cause = self.why(trace)["causes"][0]
        self.assertEqual(cause["kind"], "outside_domain", cause)
        self.assertIn("sub (head) wrote it at step 2", cause["summary"])
        # fp64 statistics are exact: the head's weight as the program holds it.
        config = dict(self.query(trace, "SELECT substr(key, 8), value FROM meta WHERE key LIKE 'config.%'"))
        self.assertNotIn("unmeasured", config)
        self.assertEqual(config["precision"], "fp32; fp64 in head.fc")  # the module holding fp64 parameters

    def test_a_real_origin_is_counted_beside_the_intended_infinities(self):
        script = self.write("gpt.py", TRANSFORMER)
        trace, traced = self.trace(script, args=["overflow", str(STEPS)])
        first = self.query(trace, "SELECT kernel, layer, step, phase, value FROM v_first_nonfinite")
        self.assertEqual(first, [("exp", "blocks.1", 5, "forward", "+inf")])
        steps = self.query(trace, "SELECT step FROM v_step_summary WHERE nan_values + inf_values > 0 ORDER BY step")
        self.assertEqual([s for (s,) in steps], list(range(5, STEPS)))
        # Until the fault the mask's -inf are the only ones, counted apart; its tensors stay intended after.
        nonfinite = self.report(trace)["nonfinite"]
        self.assertEqual(nonfinite["intended"]["made_by"], ["masked_fill"])
        self.assertGreater(nonfinite["pos_inf"] + nonfinite["nan"], 0)
        self.assertEqual(self.query(trace, "SELECT sum(intended_values) FROM v_step_summary WHERE step < 5"),
                         [(5 * mask_infinities(traced.stdout) // STEPS,)])
        # fpscope run's closing lines say so, with the values the trace holds (the mask's left out).
        out = self.trace_path()
        closing = run([FPSCOPE, "run", "-o", out, "--torch-operators", OPERATORS, "--", PYTHON, self.dir + "/gpt.py",
                       "overflow", str(STEPS)], self.dir).stderr
        values, tensors = self.query(out, "SELECT sum(t.nan + t.pos_inf + t.neg_inf), count(*) FROM nonfinite n"
                                          " JOIN tensors t ON t.id = n.tensor_id WHERE n.allowed = 0")[0]
        self.assertIn("fpscope: {} NaN/Inf values in {} output tensors; first: exp (layer blocks.1, phase forward, "
                      "step 5) made +inf\n".format(values, tensors), closing)
        self.assertEqual(values, nonfinite["nan"] + nonfinite["pos_inf"] + nonfinite["neg_inf"])
        clean = run([FPSCOPE, "run", "-o", self.trace_path(), "--torch-operators", OPERATORS, "--", PYTHON,
                     self.dir + "/gpt.py", "clean", "2"], self.dir).stderr
        self.assertNotIn("NaN/Inf", clean)  # the mask's -inf are intended


if __name__ == "__main__":
    support.main(globals())
