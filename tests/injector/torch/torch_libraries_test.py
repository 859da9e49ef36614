"""End-to-end tests on programs built on libraries nobody here wrote, traced unmodified: a Hugging
Face transformers causal language model built from a config (random weights, nothing downloaded),
trained on the Zen of Python, byte by byte; a model compiled with torch.compile. The libraries come from the PyPI environment
(scripts/python-env.sh), so these tests run under torch 2 only (their names start test_torch2_).

Usage: torch_libraries_test.py --fpscope PATH [--torch-operators observer|dispatch-mode]
       [unittest arguments]
"""
import json
import math
import tempfile

import numpy as np

import torch_test_support as support
from torch_test_support import PYTHON, losses, run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None

# argv: [FAULT_STEP]. GPT-2 of two blocks from transformers, trained six steps with AdamW under CPU
# bf16 autocast on the Zen of Python's bytes (it ships with Python). At FAULT_STEP the second block's
# attention projection is scaled by 1e30 between steps, so its query-key products overflow. Prints
# each step's loss exactly. With LM_REFERENCE set, it also says, from forward hooks of its own, the
# modules whose forward ran at step 0 and the first module whose output held NaN or Inf made from
# finite inputs (hooks run innermost first: a module that only passed its child's NaN on is not it).
GPT2 = """
import codecs, contextlib, io, os, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints it
    import this
torch.manual_seed(0)
torch.set_num_threads(1)
text = codecs.decode(this.s, "rot13").encode()
data = torch.tensor(list(text), dtype=torch.long)
config = GPT2Config(vocab_size=256, n_positions=128, n_embd=64, n_layer=2, n_head=2, bos_token_id=0,
                    eos_token_id=0)
model = GPT2LMHeadModel(config)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
fault_step = int(sys.argv[1]) if len(sys.argv) > 1 else -1
reference = bool(os.environ.get("LM_REFERENCE"))
ran, first_bad, step = [], [], 0

def finite(values):
    return all(torch.isfinite(v).all() for v in values if isinstance(v, torch.Tensor) and v.is_floating_point())

def seen(name):
    def hook(module, args, kwargs, output):
        out = output[0] if isinstance(output, tuple) else output
        if step == 0 and name not in ran:
            ran.append(name)
        inputs = list(args) + [kwargs.get("hidden_states")]  # the mask's -inf are meant
        if not first_bad and finite(inputs) and not finite([out]):
            first_bad.append((name, step))
    return hook

if reference:
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(seen(name), with_kwargs=True)
for step in range(6):
    batch = torch.stack([data[i:i + 64] for i in (0, 100, 200, 300)])
    if step == fault_step:
        with torch.no_grad():
            model.transformer.h[1].attn.c_attn.weight.mul_(1e30)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=batch, labels=batch)
    opt.zero_grad()
    out.loss.backward()
    opt.step()
    print("loss", step, out.loss.item().hex())
if reference:
    print("ran", " ".join(ran))
    print("first", *(first_bad[0] if first_bad else ("none", -1)))
"""


# A small model compiled with torch.compile (TorchDynamo and Inductor, which builds its fused CPU
# kernels with the C++ compiler), trained three steps with SGD. Prints each step's loss exactly, and
# at the end how many frames TorchDynamo compiled.
COMPILED = """
import torch, torch.nn as nn, torch.nn.functional as F
from torch._dynamo.utils import counters
torch.manual_seed(0)
torch.set_num_threads(1)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)) * 2.0)
net = Net()
model = torch.compile(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
for step in range(3):
    opt.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
    print("logits", step, logits.min().item().hex(), logits.max().item().hex())
print("frames compiled", counters["frames"]["ok"])
"""


# torchao's float8 training (convert_to_float8_training: tensorwise scaling, e4m3 for inputs and
# weights, e5m2 for output gradients; torch runs its _scaled_mm on the CPU) on a two-layer MLP,
# three AdamW steps. Prints the first layer's weight amax before training and each loss exactly.
FLOAT8 = """
import torch, torch.nn as nn
from torchao.float8 import convert_to_float8_training
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
convert_to_float8_training(model)
print("amax", model[0].weight.detach().abs().max().item().hex())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 64), torch.randn(16, 32)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.item().hex())
"""


# argv: fp8 | fp32, f32 | bf16 [recount]. FLOAT8's model in fp32 or bf16 (parameters and data),
# trained three steps, with torchao's float8 training (fp8) or without (fp32); the first layer's
# weight holds eight planted values small enough that e4m3 at its tensor's scale flushes or makes
# subnormal most of them. With "recount" it trains
# nothing: it quantizes that weight as current scaling states it (numpy's fp32 quotient 448 / amax
# and product, ml_dtypes' cast after clipping to 448) and prints the values flushed to zero and the
# values made subnormal.
FLOAT8_PAIR = """
import sys
import numpy as np, torch, torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
dtype = torch.bfloat16 if sys.argv[2] == "bf16" else torch.float32
model = nn.Sequential(nn.Linear(64, 128, dtype=dtype), nn.ReLU(), nn.Linear(128, 32, dtype=dtype))
with torch.no_grad():
    model[0].weight[0, :8] = torch.tensor([1e-7, -2e-7, 1e-8, 5e-7, -1e-6, 2e-6, 3e-6, 0.0])
if len(sys.argv) > 3:
    import ml_dtypes
    w = model[0].weight.detach().float().numpy()
    s = np.float32(448.0) / np.float32(np.abs(w).max())
    q = np.clip(w * s, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    print("flushed", int(np.count_nonzero((q == 0) & (w != 0))), "subnormal",
          int(np.count_nonzero((q != 0) & (np.abs(q) < 2.0 ** -6))))
    sys.exit(0)
if sys.argv[1] == "fp8":
    from torchao.float8 import convert_to_float8_training
    convert_to_float8_training(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 64, dtype=dtype), torch.randn(16, 32, dtype=dtype)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.float().item().hex())
"""

class FrontEndTest(support.FrontEndCase):
    def test_torch2_torchao_float8_training_measures_its_fp8_tensors(self):
        """torchao's float8 training, untouched: the program computes what it computes untraced;
        its fp8 tensors are measured in their formats, the e4m3 operands of each layer's forward
        _scaled_mm and the e5m2 gradients of its backward; every cast to fp8 was scaled so that its
        largest value is the format's largest (448, 57344) and nothing saturated; and the weight's
        scale is in the trace, 448 / amax as torchao computes it (in double, rounded to fp32)."""
        script = self.write("float8.py", FLOAT8)
        plain = run([PYTHON, script], self.dir)
        trace, traced = self.trace(script)
        self.assertEqual(traced.stdout, plain.stdout)
        self.assertEqual(self.query(trace, "SELECT count(*) FROM meta WHERE key = 'injector.failure'"), [(0,)])
        operands = self.query(trace, "SELECT k.layer, k.phase, group_concat(t.dtype_name, ' ') FROM v_tensors t"
                                     " JOIN v_kernels k ON k.id = t.kernel_id WHERE k.kernel = '_scaled_mm'"
                                     " AND k.step = 1 AND t.role = 'in' AND t.dtype_name IN ('e4m3', 'e5m2')"
                                     " GROUP BY k.id ORDER BY k.id")
        forward = [(layer, dtypes) for layer, phase, dtypes in operands if phase == "forward"]
        self.assertEqual(forward, [("0", "e4m3 e4m3"), ("2", "e4m3 e4m3")])
        backward = {(layer, dtypes) for layer, phase, dtypes in operands if phase == "backward"}
        self.assertTrue({("0", "e5m2 e4m3"), ("2", "e5m2 e4m3")} <= backward, backward)
        # Each cast to fp8: its output reaches the format's largest value, its input never passed it.
        casts = self.query(trace, "SELECT o.dtype_name, o.absmax, i.absmax, i.e4m3_overflow, i.e5m2_overflow"
                                  " FROM v_tensors o JOIN v_tensors i ON i.kernel_id = o.kernel_id AND i.role = 'in'"
                                  " WHERE o.role = 'out' AND o.dtype_name IN ('e4m3', 'e5m2') AND o.count > 1")
        self.assertGreaterEqual(len(casts), 12)
        for dtype, out_max, in_max, e4m3_overflow, e5m2_overflow in casts:
            largest = 448.0 if dtype == "e4m3" else 57344.0
            self.assertEqual(out_max, largest)
            self.assertLessEqual(in_max, largest)
            self.assertEqual(e4m3_overflow if dtype == "e4m3" else e5m2_overflow, 0)
        # The first layer's weight scale at the first step, as torchao's amax_to_scale makes it.
        amax = float.fromhex(next(l.split()[1] for l in plain.stdout.splitlines() if l.startswith("amax ")))
        scale = float(np.float32(448.0 * (1.0 / amax)))
        scales = [v for (v,) in self.query(trace, "SELECT t.max FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                                  " WHERE k.step = 0 AND k.layer = '0' AND k.phase = 'forward'"
                                                  " AND t.role = 'out' AND t.dtype_name = 'f32' AND t.count = 1")]
        self.assertIn(scale, scales)


    def test_torch2_compare_sets_a_torchao_float8_run_beside_the_forecast(self):
        """`fpscope compare` of a run with the fp8 forecast and the same program trained with
        torchao's float8 (tensorwise, hybrid), in fp32 and in bf16 (where torchao scales an fp32
        copy of each tensor): every operand of both layers has a row with the forecast's recipe
        for it (current-e4m3, current-e5m2 for gradients), the same number of values quantized a
        step in both runs; at step 0 the weights and the first layer's input hold the same values
        in both runs, and there the forecast's counts equal what torchao's casts did; the first
        weight's planted values are flushed and made subnormal as an independent quantizer says;
        current scaling saturates nothing."""
        for dtype in ("f32", "bf16"):
            with self.subTest(dtype=dtype):
                self.compare_with_torchao(dtype)

    def compare_with_torchao(self, dtype):
        script = self.write("float8_pair.py", FLOAT8_PAIR)
        forecast, _ = self.trace(script, "--recipes", "operands", args=["fp32", dtype])
        fp8, _ = self.trace(script, args=["fp8", dtype])
        recount = run([PYTHON, script, "fp32", dtype, "recount"], self.dir).stdout.split()
        compared = json.loads(run([FPSCOPE, "compare", forecast, fp8, "--format", "json"], self.dir).stdout)
        outcome = compared["fp8_outcome"]
        self.assertEqual((outcome["trainer"], outcome["fp8_recipe"], outcome["fp8_format"]), ("torchao", "current", "hybrid"))
        rows = {(r["layer"], r["operand"]): r for r in outcome["operands"]}
        self.assertEqual(set(rows), {(layer, operand) for layer in ("0", "2")
                                     for operand in ("activation", "weight", "gradient")})
        for (layer, operand), r in rows.items():
            self.assertEqual(r["recipe"], "current-e5m2" if operand == "gradient" else "current-e4m3")
            self.assertEqual(r["source"]["quantized"], r["target"]["quantized"], (layer, operand))
            self.assertEqual(r["target"]["saturated"], 0)
            if operand == "weight" or (layer, operand) == ("0", "activation"):
                self.assertTrue(r["step0_same_operand"], (layer, operand))
                self.assertTrue(r["step0_equal"], r)
        weight = rows[("0", "weight")]["target"]
        self.assertEqual(["flushed", str(weight["step0_underflow"]), "subnormal", str(weight["step0_subnormal"])], recount)
        self.assertGreater(weight["step0_underflow"], 0)
        self.assertGreater(weight["step0_subnormal"], 0)
        self.assertEqual(outcome["step0_equal"], outcome["step0_compared"])

    def test_torch2_a_compiled_model_says_what_was_not_measured(self):
        """torch.compile: traced with the C++ observer, the program computes what it computes
        untraced; the compiled forward is one launch measured at its boundary, and the report says
        what that hides (Inductor's fused gelu and mul, its matmuls). With
        `fpscope run --eager` TorchDynamo is off and every operator is measured, as the program
        computes with compilation disabled. Under the dispatch mode TorchDynamo compiles nothing,
        and the trace says so. Each run compiles afresh (an empty Inductor cache of its own), so
        compilation runs real operators of its own: they are not launches of the program, and
        TorchDynamo compiles only the program's frame, none of the front end's hooks."""
        script = self.write("compiled.py", COMPILED)
        def cold():  # an Inductor cache of its own, empty
            return {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-", dir=self.dir)}

        eager_env = {"TORCH_COMPILE_DISABLE": "1"}
        eager = run([PYTHON, script], self.dir, env=eager_env)
        self.assertIn("frames compiled 0", eager.stdout)

        def forward_kernels(trace, step=1):
            return [k for (k,) in self.query(trace, "SELECT kernel FROM v_kernels WHERE step = ? AND sampled = 1"
                                                    " AND phase = 'forward' ORDER BY id", step)]

        def compile_config(trace):
            return self.query(trace, "SELECT value FROM meta WHERE key = 'config.torch_compile'")[0][0]

        if OPERATORS == "observer":
            plain = run([PYTHON, script], self.dir, env=cold())
            self.assertIn("frames compiled 1", plain.stdout)
            trace, traced = self.trace(script, env=cold())
            self.assertEqual(traced.stdout, plain.stdout)
            self.assertEqual(compile_config(trace), "compiled")
            self.assertEqual(self.query(trace, "SELECT count(*) FROM meta WHERE key = 'injector.failure'"), [(0,)])
            # The compiled forward is one launch named after the code it compiles; the first step,
            # which compiles the forward and the backward, holds only the program's operators.
            graph = ["compiled Net.forward", "_log_softmax", "nll_loss_forward"]
            self.assertEqual(forward_kernels(trace, 0), graph)
            self.assertEqual(forward_kernels(trace), graph)
            # Measured at its boundary: the batch and the parameters in, the logits out, as the
            # program holds them.
            boundary = self.query(trace, "SELECT t.role, t.tensor, t.shape FROM v_tensors t JOIN v_kernels k"
                                         " ON k.id = t.kernel_id WHERE k.kernel = 'compiled Net.forward'"
                                         " AND k.step = 1 ORDER BY t.role, t.slot")
            self.assertEqual(boundary, [("in", "randn", "[8,16]"), ("in", "fc1.weight", "[32,16]"),
                                        ("in", "fc1.bias", "[32]"), ("in", "fc2.weight", "[4,32]"),
                                        ("in", "fc2.bias", "[4]"), ("out", "compiled Net.forward", "[8,4]")])
            logits = self.query(trace, "SELECT t.min, t.max FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                       " WHERE k.kernel = 'compiled Net.forward' AND k.step = 2 AND t.role = 'out'")
            printed = next(l.split()[2:] for l in plain.stdout.splitlines() if l.startswith("logits 2 "))
            self.assertEqual(logits, [tuple(float.fromhex(v) for v in printed)])
            self.assertEqual(self.query(trace, "SELECT group_concat(kernel) FROM v_kernels WHERE step = 0"
                                               " AND phase = 'backward'"), self.query(
                trace, "SELECT group_concat(kernel) FROM v_kernels WHERE step = 1 AND phase = 'backward'"))
            summary = run([FPSCOPE, "report", trace, "--section", "summary"], self.dir).stdout
            self.assertIn("compiled by torch.compile", summary)
            self.assertIn("fpscope run --eager", summary)
            trace, traced = self.trace(script, "--eager")
            self.assertEqual(traced.stdout, eager.stdout)
            self.assertEqual(compile_config(trace), "off (--eager): every operator ran eagerly")
        else:
            trace, traced = self.trace(script)
            self.assertEqual(traced.stdout, eager.stdout)
            self.assertEqual(compile_config(trace), "not compiled: the dispatch mode keeps TorchDynamo off")
        self.assertEqual(forward_kernels(trace), ["addmm", "gelu", "mul", "addmm", "_log_softmax", "nll_loss_forward"])
        summary = run([FPSCOPE, "report", trace, "--section", "summary"], self.dir).stdout
        self.assertNotIn("compiled by torch.compile", summary)

    def test_torch2_hugging_face_gpt2_names_its_layers_and_its_first_nan(self):
        """GPT-2 from transformers, untouched: every layer is a module path of the model, the loss
        of every step is the program's, the attention mask's -inf (a scalar_tensor spread by
        where) is intended, and the overflow planted at step 3 is found where forward hooks of
        the program's own first see it, in the product of queries and keys."""
        script = self.write("gpt2.py", GPT2)
        reference = run([PYTHON, script, "3"], self.dir, env={"LM_REFERENCE": "1"})
        ran = next(l.split()[1:] for l in reference.stdout.splitlines() if l.startswith("ran "))
        first_module, first_step = next(l.split()[1:] for l in reference.stdout.splitlines()
                                        if l.startswith("first "))
        self.assertEqual((first_module, first_step), ("transformer.h.1.attn", "3"))

        plain = run([PYTHON, script, "3"], self.dir)
        trace, traced = self.trace(script, args=["3"])
        self.assertEqual(traced.stdout, plain.stdout)
        # The program's hooks change nothing it computes either: the same loss lines.
        self.assertEqual(plain.stdout.splitlines(), reference.stdout.splitlines()[:6])
        recorded = self.query(trace, "SELECT s.step, s.value FROM scalars s JOIN strings n ON n.id = s.name_id"
                                     " WHERE n.value = 'loss' ORDER BY s.step")
        printed = losses(plain.stdout)
        self.assertEqual([step for step, _ in recorded], list(range(6)))
        self.assertEqual(recorded[:3], list(enumerate(printed))[:3])  # finite until the fault
        # NaN losses after it: SQLite keeps a NaN REAL as NULL.
        self.assertTrue(all(v is None and math.isnan(p) for (_, v), p in zip(recorded[3:], printed[3:])))
        # Layers are module paths of the model, and every module with parameters of its own is one.
        layers = {l for (l,) in self.query(trace, "SELECT DISTINCT layer FROM v_kernels"
                                                   " WHERE phase = 'forward' AND layer IS NOT NULL")}
        self.assertTrue(layers <= set(ran), layers - set(ran))
        for name in ("transformer.wte", "transformer.wpe", "transformer.h.0.ln_1", "transformer.h.0.attn.c_attn",
                     "transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.c_proj", "transformer.ln_f", "lm_head"):
            self.assertIn(name, layers)
        # The first NaN/Inf: where the program's hooks saw it, made by the scores' batched matmul.
        first = self.query(trace, "SELECT kernel, layer, phase, step FROM v_first_nonfinite")
        self.assertEqual(first, [("bmm", first_module, "forward", int(first_step))])
        report = json.loads(run([FPSCOPE, "report", trace, "--section", "nonfinite", "--format", "json"],
                                self.dir).stdout)["nonfinite"]
        self.assertEqual(report["first_step"], 3)
        self.assertIn("scalar_tensor", report["intended"]["made_by"])
        # The mask's -inf alone made nothing before the fault.
        self.assertEqual(self.query(trace, "SELECT count(*) FROM nonfinite n JOIN v_kernels k ON k.id = n.kernel_id"
                                           " WHERE n.allowed = 0 AND k.step < 3"), [(0,)])


if __name__ == "__main__":
    support.main(globals())
