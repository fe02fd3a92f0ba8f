"""The reference side of tests/unit/test_ddp_oracle.cpp: PyTorch's DistributedDataParallel (Gloo, CPU) on an MLP
with batch norm and one parameter the forward never uses, started by torchrun (--nproc-per-node 2).

Rank 0 first writes the data set and the initial weights (the C++ side loads both); every rank then trains with
DDP and writes its parameters, buffers and AdamW state after the last step. Files: a directory per tensor set with
manifest.json ({name: {dtype, shape, file}}) and one raw little-endian file per tensor (float32 or int64).

Scenarios (--scenario):
  plain       global batch 16 (8 per rank), the unused parameter frozen (requires_grad False)
  accumulate  4 per rank per micro-step, 2 micro-steps per optimizer step, the first under ddp.no_sync()
  unused      as plain, the unused parameter trainable, find_unused_parameters=True
  bf16        as plain, gradients all-reduced in bf16 (the built-in bf16_compress_hook)
  fp16        as plain, gradients all-reduced in fp16 (the built-in fp16_compress_hook)
  view        as accumulate, with gradient_as_bucket_view=True
  static      as plain, with static_graph=True
  rc-*        as the scenario after "rc-" (plain, accumulate, view, static, static-unused: static_graph and
              find_unused_parameters, the unused parameter trainable; unused), with activation checkpointing:
              fc1+tanh and fc2 each run under torch.utils.checkpoint(use_reentrant=True) (the C++ side:
              memory::recompute), the input requiring grad (reentrant checkpointing needs one input that does),
              160 samples (20 optimizer steps). rc-unused is what Python DDP refuses: find_unused_parameters
              without static_graph fails in the first backward ("Expected to mark a variable ready only once");
              with --non-reentrant it runs with checkpoint(use_reentrant=False) instead.
"""
import argparse, json, os, sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N, IN, HIDDEN, OUT = 48, 8, 16, 3
EPOCHS, GLOBAL_BATCH = 2, 16
LR, WD = 0.01, 0.1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.bn = nn.BatchNorm1d(HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, OUT)
        self.unused = nn.Parameter(torch.ones(4))  # never used by forward

    # Batch norm after the nonlinearity: right after fc1 it would cancel fc1's bias, whose gradient would then be
    # rounding noise that AdamW amplifies to lr-sized steps in either implementation.
    def forward(self, x):
        if not self.recompute:
            return self.fc2(self.bn(torch.tanh(self.fc1(x))))
        h = cp.checkpoint(lambda t: torch.tanh(self.fc1(t)), x, use_reentrant=self.reentrant)
        return cp.checkpoint(self.fc2, self.bn(h), use_reentrant=self.reentrant)

    recompute, reentrant = False, True


def save_tensors(directory, tensors):
    os.makedirs(directory, exist_ok=True)
    manifest = {}
    for i, (name, t) in enumerate(tensors.items()):
        t = t.detach().cpu().contiguous()
        if t.is_floating_point():
            t = t.to(torch.float32)
            dtype = "float32"
        else:
            t = t.to(torch.int64)
            dtype = "int64"
        fname = f"{i}.bin"
        t.numpy().tofile(os.path.join(directory, fname))
        manifest[name] = {"dtype": dtype, "shape": list(t.shape), "file": fname}
    with open(os.path.join(directory, "manifest.json.tmp"), "w") as f:
        json.dump(manifest, f)
    os.replace(os.path.join(directory, "manifest.json.tmp"), os.path.join(directory, "manifest.json"))


BASE = ["plain", "accumulate", "unused", "bf16", "fp16", "view", "static"]
SCENARIOS = BASE + ["rc-" + b for b in ("plain", "accumulate", "view", "static", "static-unused", "unused")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True, choices=SCENARIOS)
    ap.add_argument("--non-reentrant", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    recompute = a.scenario.startswith("rc-")
    base = a.scenario[3:] if recompute else a.scenario
    n = 160 if recompute else N

    # Every rank builds the same data and initial weights from fixed seeds; rank 0 saves them for the C++ side.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, IN, generator=g)
    y = torch.randint(0, OUT, (n,), generator=g)
    torch.manual_seed(0)
    net = Net()
    if rank != 0:  # DDP must broadcast rank 0's weights: start the others from different ones
        torch.manual_seed(100 + rank)
        net = Net()
    if rank == 0:
        save_tensors(os.path.join(a.out, "data"), {"x": x, "y": y})
        save_tensors(os.path.join(a.out, "init"), dict(net.state_dict()))
    unused = base in ("unused", "static-unused")
    if not unused:
        net.unused.requires_grad_(False)
    net.recompute, net.reentrant = recompute, not a.non_reentrant

    accumulate = 2 if base in ("accumulate", "view") else 1
    ddp = DDP(net, find_unused_parameters=unused, gradient_as_bucket_view=(base == "view"),
              static_graph=base in ("static", "static-unused"))
    if base in ("bf16", "fp16"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        # DDP refuses the bf16 hook by its name without CUDA/NCCL (a check, not a limit of the hook: Gloo reduces
        # bf16 on the CPU); the same function runs under another name.
        hook = default_hooks.bf16_compress_hook if base == "bf16" else default_hooks.fp16_compress_hook

        def compress_hook(state, bucket):
            return hook(state, bucket)

        ddp.register_comm_hook(dist.group.WORLD, compress_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=LR, weight_decay=WD)
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH // world // accumulate, sampler=sampler)
    steps = 0
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            if recompute:
                xb.requires_grad_(True)
            last = (i + 1) % accumulate == 0
            if last:
                loss = F.cross_entropy(ddp(xb), yb) / accumulate
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                steps += 1
            else:
                with ddp.no_sync():
                    loss = F.cross_entropy(ddp(xb), yb) / accumulate
                    loss.backward()

    out = {}
    for name, p in net.named_parameters():
        out["param." + name] = p
    for name, b in net.named_buffers():
        out["buffer." + name] = b
    for name, p in net.named_parameters():
        st = opt.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq", "step"):
            if key in st:
                out[f"opt.{name}.{key}"] = torch.as_tensor(st[key], dtype=torch.float32)
    finish_rank(a.out, rank, out, steps, loss)


def finish_rank(out_dir, rank, out, steps, loss):
    """Writes this rank's tensors to OUT_DIR/py/rank<r> and exits. Every rank has written its files; it leaves
    without tearing the Gloo process group down, whose destructor sometimes aborts ("terminate called without an
    active exception") after a run that went well, which torchrun reports as a failure."""
    save_tensors(os.path.join(out_dir, "py", f"rank{rank}"), out)
    print(f"rank {rank}: {steps} steps, loss {loss.item():.6f}", file=sys.stderr)
    dist.barrier()
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
