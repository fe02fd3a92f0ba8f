"""The reference side of tests/unit/test_zero.cpp: PyTorch's DistributedDataParallel with
torch.distributed.optim.ZeroRedundancyOptimizer(AdamW) (Gloo, CPU), started by torchrun on 2 or 3 ranks.

The model, data and files are those of ddp_oracle.py (an MLP with batch norm and one frozen parameter the forward
never uses; a directory per tensor set with manifest.json and raw little-endian files). 120 samples, 4 per rank per
step, 2 epochs: 30 steps on 2 ranks, 20 on 3 (uneven partitions). Every rank writes its parameters, buffers and the
optimizer state of its own partition (`local.<name>.<key>`, ZeroRedundancyOptimizer's local optimizer); rank 0
also writes the consolidated state (`consolidate_state_dict(to=0)`, `opt.<name>.<key>`).

Scenarios (--scenario):
  plain     AdamW (lr 0.01, weight decay 0.1)
  clip      as plain, the gradients clipped to a global norm of 0.05 (clip_grad_norm_ over the whole model) first
  bf16      as clip, the forward under torch.autocast("cpu", bfloat16) and the loss scaled by GradScaler("cpu")
            (growth every 3 steps); one sample of rank 1's third batch is inf, so that step's gradients are NaN on
            rank 1 only before the all-reduce, and every rank skips it, in both epochs (writes `skipped`, the steps
            skipped, and `scale`, the final scale)
"""
import argparse, os, sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_oracle import IN, OUT, Net, finish_rank, save_tensors  # noqa: E402

N, EPOCHS, BATCH_PER_RANK = 120, 2, 4
LR, WD, MAX_NORM = 0.01, 0.1, 0.05


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True, choices=["plain", "clip", "bf16"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, IN, generator=g)
    y = torch.randint(0, OUT, (N,), generator=g)
    if a.scenario == "bf16":
        x[1 + 2 * BATCH_PER_RANK * world] = float("inf")  # rank 1's third batch (DistributedSampler, no shuffle)
    torch.manual_seed(0)
    net = Net()
    if rank != 0:  # DDP broadcasts rank 0's weights: start the others from different ones
        torch.manual_seed(100 + rank)
        net = Net()
    if rank == 0:
        save_tensors(os.path.join(a.out, "data"), {"x": x, "y": y})
        save_tensors(os.path.join(a.out, "init"), dict(net.state_dict()))
    net.unused.requires_grad_(False)

    ddp = DDP(net)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=LR, weight_decay=WD)
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_PER_RANK, sampler=sampler)
    bf16 = a.scenario == "bf16"
    scaler = torch.amp.GradScaler("cpu", growth_interval=3) if bf16 else None
    steps = skipped = 0
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(ddp(xb), yb)
            if bf16:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            else:
                loss.backward()
            if a.scenario in ("clip", "bf16"):
                torch.nn.utils.clip_grad_norm_(net.parameters(), MAX_NORM)
            if bf16:
                before = scaler.get_scale()
                scaler.step(opt)
                scaler.update()
                skipped += scaler.get_scale() < before
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
            steps += 1

    names = [n for n, _ in net.named_parameters()]
    by_param = {p: n for n, p in net.named_parameters()}
    out = {}
    for name, p in net.named_parameters():
        out["param." + name] = p
    for name, b in net.named_buffers():
        out["buffer." + name] = b
    if bf16:
        out["skipped"] = torch.tensor(skipped, dtype=torch.int64)
        out["scale"] = torch.tensor(scaler.get_scale(), dtype=torch.float32)
    for p, st in opt.optim.state.items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            if key in st:
                out[f"local.{by_param[p]}.{key}"] = torch.as_tensor(st[key], dtype=torch.float32)
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        sd = opt.state_dict()
        for i, st in sd["state"].items():
            for key in ("exp_avg", "exp_avg_sq", "step"):
                if key in st:
                    out[f"opt.{names[i]}.{key}"] = torch.as_tensor(st[key], dtype=torch.float32)
    finish_rank(a.out, rank, out, steps, loss)


if __name__ == "__main__":
    main()
