"""A small GPT-2 (transformers, built from a config: nothing is downloaded) trained with AdamW under
bf16 autocast on the Zen of Python's bytes: the PyTorch program updates_cost.sh traces with
`fpscope run --updates on` and `off`. Prints the parameters' count and bytes, and the mean time of
a training step after the first (the first pays for allocations both ways).

    python updates_gpt2.py [STEPS] [EMBED]      (defaults 12 and 256)
"""
import codecs
import contextlib
import io
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints it
    import this

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
embed = int(sys.argv[2]) if len(sys.argv) > 2 else 256
torch.manual_seed(0)
torch.set_num_threads(1)
text = codecs.decode(this.s, "rot13").encode()
data = torch.tensor(list(text), dtype=torch.long)
config = GPT2Config(vocab_size=256, n_positions=128, n_embd=embed, n_layer=2, n_head=4, bos_token_id=0,
                    eos_token_id=0)
model = GPT2LMHeadModel(config)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
params = sum(p.numel() for p in model.parameters())
print("parameters %d bytes %d" % (params, sum(p.numel() * p.element_size() for p in model.parameters())))
times = []
for step in range(steps):
    start = time.perf_counter()
    batch = torch.stack([data[i:i + 64] for i in (0, 100, 200, 300)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=batch, labels=batch)
    opt.zero_grad()
    out.loss.backward()
    opt.step()
    times.append(time.perf_counter() - start)
if len(times) > 1:
    print("step_ms %.3f" % (1000 * sum(times[1:]) / len(times[1:])))
