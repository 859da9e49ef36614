#!/usr/bin/python3
"""The reference CNN of mptrain in PyTorch on the CPU, for comparing training throughput.

Same model (conv 1->5 3x3, relu, maxpool 2, conv 5->12 5x5, relu, GroupNorm(3, 12), fc ->100, relu,
fc 100->10, log-softmax over classes, NLL), same data (FashionMNIST normalised to [-1, 1], resized
bilinearly per batch), SGD with momentum 0.9, batch 32, the same thread count; fp32 and bf16
autocast. Prints images/s of the training loop, data preparation included, as mptrain counts it,
and images per CPU-second (all threads), which a busy machine disturbs less. Two warm-up steps run
first and are not counted: PyTorch builds its CPU primitives lazily on the first steps.

PyTorch 1.13's CPU autocast has no fp32 rule for group_norm and fails on a bf16 input with fp32
affine weights, so the model feeds group_norm an fp32 input, which is what autocast-fp16 and
mptrain's amp modes do (group_norm on the fp32 list) for amp-fp16; under amp-bf16 mptrain runs it
in bf16 (HMP list).
"""
import argparse
import gzip
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class CustomModel(nn.Module):
    def __init__(self, image_size):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 5, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(5, 12, 5)
        self.norm = nn.GroupNorm(3, 12)
        side = (image_size - 2) // 2 - 4
        self.fc1 = nn.Linear(12 * side * side, 100)
        self.fc2 = nn.Linear(100, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.norm(F.relu(self.conv2(x)).float())
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def throughput(images, labels, image_size, autocast_bf16, batch, warmup=2):
    torch.manual_seed(1)
    model = CustomModel(image_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for begin in range(-warmup * batch, len(images), batch):
        if begin == 0:
            start, cpu_start = time.perf_counter(), time.process_time()
        begin = max(begin, 0)
        x = torch.from_numpy(images[begin:begin + batch]).float().div(255).sub(0.5).div(0.5).unsqueeze(1)
        if image_size != x.shape[-1]:
            x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
        y = torch.from_numpy(labels[begin:begin + batch]).long()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return len(images) / (time.perf_counter() - start), len(images) / (time.process_time() - cpu_start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--repeats", type=int, default=3, help="report the best of this many runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    images = read_idx(f"{args.data_dir}/train-images-idx3-ubyte.gz")[:args.images].copy()
    labels = read_idx(f"{args.data_dir}/train-labels-idx1-ubyte.gz")[:args.images].astype(np.int64)
    print(f"PyTorch {torch.__version__}, cnn, batch {args.batch_size}, {args.threads} threads, "
          f"{args.images} training images, best of {args.repeats}")
    print(f"{'mode':<14} {'28px img/s':>11} {'img/cpu-s':>10} {'128px img/s':>12} {'img/cpu-s':>10}")
    for name, bf16 in (("fp32", False), ("autocast-bf16", True)):
        line = f"{name:<14}"
        for size, width in ((28, 11), (128, 12)):
            runs = [throughput(images, labels, size, bf16, args.batch_size) for _ in range(args.repeats)]
            wall, cpu = max(r[0] for r in runs), max(r[1] for r in runs)
            line += f" {wall:>{width}.1f} {cpu:>10.1f}"
        print(line)


if __name__ == "__main__":
    main()
