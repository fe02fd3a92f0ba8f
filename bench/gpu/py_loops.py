#!/usr/bin/env python3
"""The Python half of benchmark 2 (bench/gpu): the same models, data and optimizer as `gpu_bench loops`, trained
by a plain PyTorch eager loop and by Lightning. Same repetition scheme as bench/gpu/common.hpp's time_reps:
`warmup` untimed repetitions of `steps` steps, then timed repetitions (each ending with a device sync) until both
`reps` and `min-seconds` are reached; median seconds per step; the timed window in Unix seconds for the NVML
sidecar.

Models (identical to the C++ ones): the Fashion-MNIST CNN of examples/fashion_mnist/model.hpp, and the MLP of
bench/gpu/common.hpp. Optimizer: torch.optim.AdamW(lr=1e-3, fused=True) (the kernel optim::FusedAdamW calls).
fp32. Data: 8 random batches already on the device, cycled.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Module):
    """examples/fashion_mnist/model.hpp's CnnImpl, layer for layer."""

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
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def mlp(d_in, hidden, depth, d_out):
    """bench/gpu/common.hpp's MlpImpl."""
    layers, w = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(w, hidden), nn.ReLU()]
        w = hidden
    layers.append(nn.Linear(w, d_out))
    return nn.Sequential(*layers)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class Reps:
    """Counts steps; at each repetition boundary syncs, times, and says when to stop (time_reps's rule)."""

    def __init__(self, dev, steps, warmup, min_reps, max_reps, min_seconds):
        self.dev, self.steps, self.warmup = dev, steps, warmup
        self.min_reps, self.max_reps, self.min_seconds = min_reps, max_reps, min_seconds
        self.k, self.reps, self.t0, self.t1 = 0, [], None, None
        self.start = self.last = None
        if warmup == 0:
            self._begin()

    def _begin(self):
        sync(self.dev)
        self.t0 = time.time()
        self.start = self.last = time.perf_counter()

    def step_done(self):
        """Call after every step; returns True when the timed repetitions are complete."""
        self.k += 1
        if self.k % self.steps:
            return False
        rep = self.k // self.steps
        if rep < self.warmup:
            return False
        if rep == self.warmup:
            self._begin()
            return False
        sync(self.dev)
        now = time.perf_counter()
        self.reps.append(now - self.last)
        self.last = now
        n = len(self.reps)
        if n >= self.max_reps or (n >= self.min_reps and now - self.start >= self.min_seconds):
            self.t1 = time.time()
            return True
        return False

    def result(self):
        med = statistics.median(self.reps)
        mean = statistics.fmean(self.reps)
        cv = statistics.pstdev(self.reps) / mean if mean > 0 else 0.0
        return {"step_seconds": med / self.steps, "steps_per_second": self.steps / med, "reps": len(self.reps),
                "steps_per_rep": self.steps, "warmup_reps": self.warmup, "cv": cv, "window": [self.t0, self.t1]}


class Cycle:
    """`n` batches cycling over `batches` (an iterable with a length, as Lightning wants)."""

    def __init__(self, batches, n):
        self.batches, self.n = batches, n

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            yield self.batches[i % len(self.batches)]


def run_eager(model, batches, reps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    model.train()
    i = 0
    while True:
        x, y = batches[i % len(batches)]
        i += 1
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if reps.step_done():
            return


def run_graph(model, batches, reps, dev):
    """PyTorch's "whole network capture" (torch.cuda.graphs docs): warm-up on a side stream, forward, backward and
    the fused, capturable AdamW captured into one CUDA graph, replayed per batch after copying it into static inputs.
    The reference for step::CudaGraph."""
    if dev.type != "cuda":
        raise RuntimeError("python_graph captures a CUDA graph: it needs --device cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True, capturable=True)
    model.train()
    sx, sy = batches[0][0].clone(), batches[0][1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        F.cross_entropy(model(sx), sy).backward()
        opt.step()
    i = 0
    while True:
        x, y = batches[i % len(batches)]
        i += 1
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()
        if reps.step_done():
            return


def run_lightning(model, batches, reps, dev):
    import lightning as L

    class Lit(L.LightningModule):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=True)

    class Timer(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if reps.step_done():
                trainer.should_stop = True

    trainer = L.Trainer(accelerator="cuda" if dev.type == "cuda" else "cpu", devices=1, precision="32-true",
                        max_epochs=1, max_steps=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0, callbacks=[Timer()])
    cap = reps.steps * (reps.warmup + reps.max_reps) + 1
    trainer.fit(Lit(model), train_dataloaders=Cycle(batches, cap))
    if reps.t1 is None:
        raise RuntimeError("py_loops: Lightning stopped before the timed repetitions were complete "
                           f"({len(reps.reps)} of {reps.min_reps} repetitions)")
    return L.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="fmnist,mlp")
    p.add_argument("--variants", default="python_eager,lightning")
    p.add_argument("--fmnist-batch", type=int, default=256)
    p.add_argument("--mlp-batch", type=int, default=64)
    p.add_argument("--mlp-in", type=int, default=256)
    p.add_argument("--mlp-hidden", type=int, default=256)
    p.add_argument("--mlp-depth", type=int, default=4)
    p.add_argument("--mlp-out", type=int, default=10)
    p.add_argument("--fmnist-steps", type=int, default=50)
    p.add_argument("--mlp-steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--max-reps", type=int, default=1000)
    p.add_argument("--min-seconds", type=float, default=0.0)
    a = p.parse_args()

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("py_loops: --device cuda, but torch.cuda.is_available() is False")
    result = {"benchmark": "loops_py", "torch": torch.__version__, "device": str(dev),
              "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "rows": []}
    failures = []
    for m in a.models.split(","):
        for v in a.variants.split(","):
            torch.manual_seed(0)
            if m == "fmnist":
                steps, bs = a.fmnist_steps, a.fmnist_batch
                model = Cnn().to(dev)
                batches = [(torch.randn(bs, 1, 28, 28, device=dev), torch.randint(10, (bs,), device=dev))
                           for _ in range(8)]
            elif m == "mlp":
                steps, bs = a.mlp_steps, a.mlp_batch
                model = mlp(a.mlp_in, a.mlp_hidden, a.mlp_depth, a.mlp_out).to(dev)
                batches = [(torch.randn(bs, a.mlp_in, device=dev), torch.randint(a.mlp_out, (bs,), device=dev))
                           for _ in range(8)]
            else:
                sys.exit(f"py_loops: model '{m}'; expected fmnist or mlp")
            reps = Reps(dev, steps, a.warmup, a.reps, a.max_reps, a.min_seconds)
            row = {"model": m, "variant": v}
            try:
                if v == "python_eager":
                    run_eager(model, batches, reps)
                elif v == "python_graph":
                    run_graph(model, batches, reps, dev)
                elif v == "lightning":
                    row["lightning"] = run_lightning(model, batches, reps, dev)
                else:
                    sys.exit(f"py_loops: variant '{v}'; expected python_eager, python_graph or lightning")
                row.update(reps.result())
                row["samples_per_second"] = row["steps_per_second"] * bs
                print(f"loops_py: {m} {v} {row['steps_per_second']:.1f} steps/s (cv {row['cv']:.3f}, "
                      f"{row['reps']} reps)", file=sys.stderr)
            except Exception as e:  # recorded, and the exit status says so; the other rows still run
                row["error"] = f"{type(e).__name__}: {e}"
                failures.append(f"{m}/{v}: {row['error']}")
                print(f"loops_py: {m} {v} FAILED: {row['error']}", file=sys.stderr)
            result["rows"].append(row)
            with open(a.out, "w") as f:
                json.dump(result, f, indent=2)
    if failures:
        sys.exit("py_loops: failed: " + "; ".join(failures))


if __name__ == "__main__":
    main()
