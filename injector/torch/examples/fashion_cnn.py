"""mptrain's CNN in plain PyTorch, trained on FashionMNIST: an ordinary program to trace.

It imports nothing from fpscope. Its layers carry mptrain's names (conv1, conv2, norm, fc1, fc2),
so `fpscope compare` lines the two trainers up layer by layer:

    fpscope run -o runs/torch-fp32.sqlite -- python3 fashion_cnn.py
    fpscope run -o runs/torch-bf16.sqlite -- python3 fashion_cnn.py --precision amp-bf16
    fpscope compare runs/mptrain-fp32.sqlite runs/torch-fp32.sqlite

Options: --precision fp32|bf16|amp-bf16|amp-fp16 (amp-fp16: with GradScaler, on the CPU from torch
2.3), --init-scale (GradScaler's first loss scale, 65536), --device cpu|cuda, --images N (6000),
--batch-size (32), --lr (0.01), --optimizer sgd|adamw, --data-dir
(/usr/share/datasets/fashion-mnist), --seed, --threads, --step-times FILE (each step's seconds, as a
JSON list, for timing the training loop from inside). With a GradScaler, each printed step says the
loss scale after it and whether the scaler skipped the optimizer's step.
"""
import argparse
import contextlib
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, images):
    def find(stem):
        for name in (stem, stem + ".gz"):
            path = os.path.join(data_dir, name)
            if os.path.exists(path):
                return path
        sys.exit("fashion_cnn.py: %s not found in %s (apt-get install dataset-fashion-mnist, or pass "
                 "--data-dir)" % (stem, data_dir))
    x = read_idx(find("train-images-idx3-ubyte"))[:images].astype(np.float32) / 255.0
    y = read_idx(find("train-labels-idx1-ubyte"))[:images].astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def cpu_autocast_on():
    # torch.is_autocast_enabled("cpu") from torch 2.4, torch.is_autocast_cpu_enabled() before
    if hasattr(torch, "get_autocast_dtype"):
        return torch.is_autocast_enabled("cpu")
    return torch.is_autocast_cpu_enabled()


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 5, 3)
        self.conv2 = nn.Conv2d(5, 12, 5)
        self.norm = nn.GroupNorm(3, 12)
        self.fc1 = nn.Linear(12 * 9 * 9, 100)
        self.fc2 = nn.Linear(100, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        # torch 1.13's CPU autocast leaves group_norm out of its fp32 list, and group_norm then
        # refuses bf16 input with fp32 weights: under autocast it runs in fp32, as on the GPU.
        if cpu_autocast_on():
            with torch.autocast("cpu", enabled=False):
                x = self.norm(x.float())
        else:
            x = self.norm(x)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precision", choices=["fp32", "bf16", "amp-bf16", "amp-fp16"], default="fp32")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--images", type=int, default=6000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--init-scale", type=float, default=65536.0, help="GradScaler's first loss scale")
    parser.add_argument("--step-times", metavar="FILE",
                        help="write each training step's wall seconds (batch slicing to optimizer step) as a JSON list")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("fashion_cnn.py: --device cuda, but this PyTorch sees no CUDA device")
    if args.precision == "amp-fp16" and args.device != "cuda" and not hasattr(torch.amp, "GradScaler"):
        sys.exit("fashion_cnn.py: --precision amp-fp16 on the CPU needs torch 2.3 or newer (torch.amp.GradScaler); "
                 "this is torch %s: use --device cuda" % torch.__version__)

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x, y = load(args.data_dir, args.images)
    model = Cnn()  # made on the CPU, then moved: the same initial weights on either device
    if args.precision == "bf16":
        model = model.to(torch.bfloat16)
        x = x.to(torch.bfloat16)
    if args.device != "cpu":
        model = model.to(args.device)
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    amp_dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.precision)
    autocast = (torch.autocast(args.device, dtype=amp_dtype) if amp_dtype is not None
                else contextlib.nullcontext())
    scaler = None
    if args.precision == "amp-fp16":  # torch.amp.GradScaler from torch 2.3, torch.cuda.amp's before
        scaler = (torch.amp.GradScaler(args.device, init_scale=args.init_scale) if hasattr(torch.amp, "GradScaler")
                  else torch.cuda.amp.GradScaler(init_scale=args.init_scale))
    steps = len(x) // args.batch_size
    step_times = []
    for step in range(steps):
        started = time.perf_counter()
        batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
        inputs, labels = x[batch], y[batch]
        if args.device != "cpu":
            inputs, labels = inputs.to(args.device), labels.to(args.device)
        optimizer.zero_grad()
        with autocast:
            loss = F.cross_entropy(model(inputs), labels)
        skipped = ""
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            before = scaler.get_scale()
            scaler.update()
            skipped = " scale %r%s" % (scaler.get_scale(), " skipped" if scaler.get_scale() < before else "")
        else:
            loss.backward()
            optimizer.step()
        if step % 50 == 0 or step == steps - 1 or skipped.endswith("skipped"):
            print("step %d loss %.4f%s" % (step, loss.item(), skipped))
        step_times.append(time.perf_counter() - started)
    if args.step_times:
        with open(args.step_times, "w") as f:
            json.dump(step_times, f)


if __name__ == "__main__":
    main()
