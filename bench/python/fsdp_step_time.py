#!/usr/bin/env python3
"""Step time of PyTorch's FSDP2 (torch.distributed.fsdp.fully_shard) on the main job's CNN, 2 ranks on Gloo with a
CPU device mesh: the Python row that the C++ stage-3 benchmark (issue 53) is compared with.

The model is examples/fashion_mnist/model.hpp's Cnn (width 32: conv1 1->32 and conv2 32->64, 3x3 without bias, each
with BatchNorm2d, ReLU and 2x2 max pooling; fc1 3136->128, dropout 0.25, fc2 128->10), every child module with
parameters a unit (fully_shard on conv1, bn1, conv2, bn2, fc1, fc2, then on the root), AdamW(lr 1e-3), cross
entropy, random inputs of the Fashion-MNIST shape. Each rank times every step (forward, backward with the
reduce-scatters, optimizer step; the next forward's all-gathers belong to the next step) after the warm-up steps, and
rank 0 prints one Markdown row: the median step time over the ranks' steps (the slower rank's time of each step),
its min-max, and samples per second per rank.

    bench/python/fsdp_step_time.py [--batch 64] [--steps 50] [--warmup 5] [--threads 1] [--reshard-after-forward 1]

Prints: | what | ranks | batch per rank | step ms, median (min-max) | samples/s per rank |
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Cnn(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.fc1 = nn.Linear(2 * width * 7 * 7, 128)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


def rank_main(rank, world, port, a, out):
    torch.set_num_threads(a.threads)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = Cnn()
    for m in (model.conv1, model.bn1, model.conv2, model.bn2, model.fc1, model.fc2):
        fully_shard(m, mesh=mesh, reshard_after_forward=bool(a.reshard_after_forward))
    fully_shard(model, mesh=mesh, reshard_after_forward=bool(a.reshard_after_forward))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    times = []
    for step in range(a.warmup + a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    # The slower rank's time of each step: a step ends for the job when its last rank ends it.
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put(t.tolist())
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reshard-after-forward", type=int, default=1)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, a.ranks, port, a, q)) for r in range(a.ranks)]
    for p in procs:
        p.start()
    times = q.get()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"fsdp_step_time: a rank exited with code {p.exitcode}")
    ms = [1e3 * t for t in times]
    med = statistics.median(ms)
    print("| what | ranks | batch per rank | step ms, median (min-max) | samples/s per rank |")
    print("|---|---|---|---|---|")
    print(f"| Python fully_shard (torch {torch.__version__}, Gloo, CPU mesh, reshard_after_forward="
          f"{bool(a.reshard_after_forward)}, {a.threads} thread) | {a.ranks} | {a.batch} | {med:.2f} "
          f"({min(ms):.2f}-{max(ms):.2f}) | {a.batch / med * 1e3:.0f} |")


if __name__ == "__main__":
    main()
