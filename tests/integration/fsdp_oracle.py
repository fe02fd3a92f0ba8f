"""The reference side of tests/unit/test_fsdp.cpp: PyTorch's FSDP2 (`fully_shard`, Gloo, a CPU device mesh),
started by torchrun on 2 or 3 ranks.

The model has four parts: a convolution with batch norm, a linear layer, an embedding (its ids derived from the
input's signs) and a linear head. `fully_shard` is applied to the first three (the units) and to the root, which
holds the head (what no unit claims). Every parameter is chunked on dim 0 across the ranks (torch.chunk, padded):
on 3 ranks the convolution's 4 output channels give rank 2 an empty shard. The convolution has no bias (batch norm
removes it: its gradient would be rounding noise, which AdamW's normalisation turns into steps of the learning rate).

The data and the initial weights come from --seed (torch.Generator), so the C++ side trains the same inputs; the
ranks' batches are DistributedSampler's (no shuffle). At the last step the gradient shards are kept (before the
optimizer steps); at the end every rank writes:
  param.<name>   the full parameter (DTensor.full_tensor(): an all-gather)
  shard.<name>   this rank's shard (DTensor.to_local(): torch.chunk's piece, unpadded; may be empty)
  grad.<name>    this rank's gradient shard at the last step (reduce-scattered, averaged over the ranks)
  state.<name>.<key>  the optimizer state of this rank's shard (AdamW: exp_avg, exp_avg_sq, step; SGD with
                 momentum: momentum_buffer)
  buffer.<name>  this rank's buffers (batch norm's running statistics: FSDP2 does not synchronise buffers)
Options: --optimizer adamw|sgd, --steps N (optimizer steps), --reshard 0|1 (reshard_after_forward of the units),
--param-dtype / --reduce-dtype fp32|bf16|fp16 (MixedPrecisionPolicy of every fully_shard call; fp32, the default for
the first, leaves the policy out: no mixed precision; the second defaults to none: FSDP2 reduces in param_dtype).
"""
import argparse, os, sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_oracle import finish_rank, save_tensors  # noqa: E402

BATCH_PER_RANK = 4
LR_ADAMW, WD, LR_SGD, MOMENTUM = 0.01, 0.1, 0.1, 0.9
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4))
        self.fc = nn.Linear(64, 16)
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(20, 3)

    def forward(self, x):
        ids = (x.flatten(1)[:, :3] > 0).long() + torch.arange(3) * 3  # 0..8
        h = torch.tanh(self.fc(torch.relu(self.conv(x)).flatten(1)))
        return self.head(torch.cat([h, self.emb(ids).mean(1)], 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reshard", type=int, default=1)
    ap.add_argument("--param-dtype", choices=list(DTYPES), default="fp32")
    ap.add_argument("--reduce-dtype", choices=list(DTYPES), default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = a.steps * BATCH_PER_RANK * world

    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(n, 2, 4, 4, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    torch.manual_seed(a.seed)
    net = Net()
    if rank == 0:
        save_tensors(os.path.join(a.out, "data"), {"x": x, "y": y})
        save_tensors(os.path.join(a.out, "init"), dict(net.state_dict()))
    names = [name for name, _ in net.named_parameters()]

    mesh = init_device_mesh("cpu", (world,))
    mp = {}
    if a.param_dtype != "fp32" or a.reduce_dtype is not None:
        mp["mp_policy"] = MixedPrecisionPolicy(param_dtype=DTYPES[a.param_dtype],
                                               reduce_dtype=DTYPES[a.reduce_dtype] if a.reduce_dtype else None)
        # FSDP2 casts parameters, not buffers, and batch_norm wants its running statistics in its weight's dtype
        # ("expected scalar type BFloat16 but found Float"): the test keeps them in param_dtype.
        for b in net.conv[1].buffers():
            if b.is_floating_point():
                b.data = b.data.to(DTYPES[a.param_dtype])
    for unit in (net.conv, net.fc, net.emb):
        fully_shard(unit, mesh=mesh, reshard_after_forward=bool(a.reshard), **mp)
    fully_shard(net, mesh=mesh, **mp)
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=LR_ADAMW, weight_decay=WD)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=LR_SGD, momentum=MOMENTUM)

    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_PER_RANK, sampler=sampler)
    out, steps = {}, 0
    for xb, yb in loader:
        loss = F.cross_entropy(net(xb), yb)
        loss.backward()
        steps += 1
        if steps == a.steps:
            for name, p in net.named_parameters():
                out["grad." + name] = p.grad.to_local()
        opt.step()
        opt.zero_grad(set_to_none=True)

    by_param = {p: name for name, p in net.named_parameters()}
    for name, p in net.named_parameters():
        out["param." + name] = p.full_tensor()
        out["shard." + name] = p.to_local()
    for name, b in net.named_buffers():
        out["buffer." + name] = b
    for p, st in opt.state.items():
        for key in ("exp_avg", "exp_avg_sq", "step", "momentum_buffer"):
            if key in st:
                v = st[key]
                v = v.to_local() if hasattr(v, "to_local") else torch.as_tensor(v, dtype=torch.float32)
                out[f"state.{by_param[p]}.{key}"] = v
    assert len(names) == len(by_param)
    finish_rank(a.out, rank, out, steps, loss)


if __name__ == "__main__":
    main()
