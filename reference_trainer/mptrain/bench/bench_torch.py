#!/usr/bin/python3
"""The reference CNN of mptrain in PyTorch on the CPU, for comparing training throughput.

Same model (conv 1->5 3x3, relu, maxpool 2, conv 5->12 5x5, relu, GroupNorm(3, 12), fc ->100, relu,
fc 100->10, log-softmax over classes, NLL), same data (FashionMNIST normalised to [-1, 1], resized
bilinearly per batch), SGD with momentum 0.9, batch 32, the same thread count; fp32 and bf16
autocast. Prints images/s of the training loop, data preparation included, as mptrain counts it.
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
        x = self.norm(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def throughput(images, labels, image_size, autocast_bf16, batch):
    torch.manual_seed(1)
    model = CustomModel(image_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start = time.perf_counter()
    for begin in range(0, len(images), batch):
        x = torch.from_numpy(images[begin:begin + batch]).float().div(255).sub(0.5).div(0.5).unsqueeze(1)
        if image_size != x.shape[-1]:
            x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
        y = torch.from_numpy(labels[begin:begin + batch]).long()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return len(images) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    images = read_idx(f"{args.data_dir}/train-images-idx3-ubyte.gz")[:args.images].copy()
    labels = read_idx(f"{args.data_dir}/train-labels-idx1-ubyte.gz")[:args.images].astype(np.int64)
    print(f"PyTorch {torch.__version__}, cnn, batch {args.batch_size}, {args.threads} threads, {args.images} training images")
    print(f"{'mode':<14} {'28px img/s':>14} {'128px img/s':>14}")
    for name, bf16 in (("fp32", False), ("autocast-bf16", True)):
        rates = [throughput(images, labels, size, bf16, args.batch_size) for size in (28, 128)]
        print(f"{name:<14} {rates[0]:>14.1f} {rates[1]:>14.1f}")


if __name__ == "__main__":
    main()
