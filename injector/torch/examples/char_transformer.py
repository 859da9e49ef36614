"""A small character-level transformer in plain PyTorch, trained on a text file: an ordinary program
to trace whose steps are many small operators, where the CNN example's are few large ones.

It imports nothing from fpscope. Two pre-LayerNorm blocks of causal self-attention (scores masked
with -inf) and a GELU MLP, learned positions, a head tied to the embedding, AdamW; by default under
bf16 autocast. Its layers are named emb, blocks.0.attn, blocks.0.fc, ..., ln_f.

    fpscope run -o runs/chars.sqlite -- python3 char_transformer.py
    fpscope run -o runs/chars-fp32.sqlite -- python3 char_transformer.py --precision fp32
    fpscope compare runs/chars-fp32.sqlite runs/chars.sqlite

Options: --text FILE (the text to learn; default /usr/share/common-licenses/GPL-3, which every
Debian system has), --steps N (80), --precision fp32|amp-bf16 (amp-bf16), --batch-size (16),
--context (64 characters), --width (64), --heads (4), --lr (3e-3), --seed (1), --threads (0: torch's
default), --step-times FILE (each step's wall seconds, as a JSON list, for timing the training loop
from inside), --losses FILE (each step's loss as a JSON list of float.hex strings, exact).
"""
import argparse
import contextlib
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(mask[:t, :t], float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class CharTransformer(nn.Module):
    def __init__(self, vocabulary, width, heads, context):
        super().__init__()
        self.emb = nn.Embedding(vocabulary, width)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.pos = nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.ModuleList([Block(width, heads), Block(width, heads)])
        self.ln_f = nn.LayerNorm(width)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1),
                             persistent=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        return self.ln_f(x) @ self.emb.weight.t()


def read_text(path, context):
    """The text's characters as indices, and how many distinct ones it has."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        sys.exit("char_transformer.py: cannot read the text %s: %s (pass another with --text)" % (path, e.strerror))
    if len(text) < context + 2:
        sys.exit("char_transformer.py: %s holds %d characters; the context of %d needs at least %d "
                 "(pass a longer --text or a shorter --context)" % (path, len(text), context, context + 2))
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), len(alphabet)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", default="/usr/share/common-licenses/GPL-3", help="the text to learn")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--precision", choices=["fp32", "amp-bf16"], default="amp-bf16")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, default=64, help="characters a sequence")
    parser.add_argument("--width", type=int, default=64, help="the model's width (a multiple of --heads)")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--step-times", metavar="FILE", help="write each step's wall seconds as a JSON list")
    parser.add_argument("--losses", metavar="FILE", help="write each step's loss as a JSON list of float.hex strings")
    args = parser.parse_args()
    if args.steps < 1 or args.batch_size < 1 or args.context < 1 or args.heads < 1 or args.width % args.heads:
        parser.error("--steps, --batch-size, --context and --heads must be positive, and --width a multiple of --heads")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data, vocabulary = read_text(args.text, args.context)
    model = CharTransformer(vocabulary, args.width, args.heads, args.context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.precision == "amp-bf16"
                else contextlib.nullcontext())
    offsets = torch.Generator().manual_seed(args.seed)
    step_times, losses = [], []
    for step in range(args.steps):
        started = time.perf_counter()
        starts = torch.randint(0, len(data) - args.context - 1, (args.batch_size,), generator=offsets)
        window = torch.stack([data[s: s + args.context + 1] for s in starts.tolist()])
        inputs, targets = window[:, :-1], window[:, 1:]
        optimizer.zero_grad()
        with autocast:
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, vocabulary), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 20 == 0 or step == args.steps - 1:
            print("step %d loss %.4f" % (step, losses[-1]))
        step_times.append(time.perf_counter() - started)
    if args.step_times:
        with open(args.step_times, "w") as f:
            json.dump(step_times, f)
    if args.losses:
        with open(args.losses, "w") as f:
            json.dump([float(x).hex() for x in losses], f)


if __name__ == "__main__":
    main()
