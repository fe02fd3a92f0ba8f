#!/usr/bin/env python3
"""The step of bench/bm_overhead.cpp in Python eager, for the ratio "policytrain vs Python" measured in one job.

Same model (Linear 64-128, tanh, Linear 128-10, cross-entropy), same data shape (2048 samples of 64 features,
10 classes, batch 32, reshuffled every epoch: 64 steps per epoch), same optimizers (AdamW lr 1e-3: PyTorch's
default implementation, which on the CPU is the per-parameter loop, and fused=True), one intra-op thread.
The loop is what a Python user writes: forward, loss, backward, step, zero_grad(set_to_none=True); no read of the
loss (policytrain's default step reads none either).

Prints one JSON object per line: {"variant", "epoch_ms": [...], "steps_per_s_median"}.
Run by bench/python/overhead_vs_python.py beside bm_overhead; usable alone: overhead.py [repetitions].
"""
import json
import statistics
import sys
import time

import torch

SAMPLES, BATCH, IN, HIDDEN, OUT = 2048, 32, 64, 128, 10


def run(variant: str, repetitions: int) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=(variant == "python_adamw_fused"))
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(SAMPLES, IN, generator=gen)
    y = torch.randint(0, OUT, (SAMPLES,), generator=gen)
    shuffle = torch.Generator().manual_seed(1)
    loss_fn = torch.nn.functional.cross_entropy

    def epoch():
        perm = torch.randperm(SAMPLES, generator=shuffle)
        for i in range(0, SAMPLES, BATCH):
            idx = perm[i:i + BATCH]
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(3):  # warm-up
        epoch()
    times = []
    for _ in range(repetitions):
        t0 = time.perf_counter()
        epoch()
        times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    return {"variant": variant, "epoch_ms": times, "steps_per_s_median": SAMPLES // BATCH / (med / 1e3)}


if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for v in ("python_adamw", "python_adamw_fused"):
        print(json.dumps(run(v, reps)), flush=True)
