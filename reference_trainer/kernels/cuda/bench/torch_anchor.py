#!/usr/bin/env python3
"""PyTorch anchor for mptrain's GPU step times: the same MLP (1024-4096-4096-10, batch 256) and
CNN (FashionMNIST resized to 128 px, batch 64; conv 1->5 3x3, relu, maxpool 2, conv 5->12 5x5,
relu, GroupNorm(3, 12), fc 41772->100, relu, fc 100->10, log_softmax + nll) trained with SGD
(lr 0.01, momentum 0.9) in fp32, with autocast fp16 + GradScaler, and with autocast bf16. Inputs
are random tensors of the right shape: only time is measured. Prints a table and, with --json,
writes {"device", "torch", "results": {model: {mode: median step ms}}}.

    python3 torch_anchor.py [--steps 60] [--json out.json]
"""
import argparse
import json
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(1024, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


class Cnn(nn.Module):
    def __init__(self, size=128):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 5, 3), nn.Conv2d(5, 12, 5)
        self.norm = nn.GroupNorm(3, 12)
        side = (size - 2) // 2 - 4
        self.fc1, self.fc2 = nn.Linear(12 * side * side, 100), nn.Linear(100, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = self.norm(F.relu(self.conv2(x)))
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def step_times(model, batch, mode, steps, device):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=(mode == "amp-fp16"))
    dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(mode)
    x = torch.randn(*batch, device=device)
    y = torch.randint(0, 10, (batch[0],), device=device)
    times = []
    for i in range(steps + 10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.nll_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        end.record()
        torch.cuda.synchronize()
        if i >= 10:  # warm-up: cuBLAS/cuDNN heuristics, allocator
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--json")
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_anchor.py: PyTorch sees no CUDA device")
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in mptrain
    torch.backends.cudnn.allow_tf32 = False
    results = {}
    for name, make, batch in (("mlp", Mlp, (256, 1, 32, 32)), ("cnn", Cnn, (64, 1, 128, 128))):
        results[name] = {}
        for mode in ("fp32", "amp-fp16", "amp-bf16"):
            torch.manual_seed(1)
            results[name][mode] = step_times(make(), batch, mode, a.steps, device)
            print(f"{name:4s} {mode:9s} {results[name][mode]:9.3f} ms/step")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
