"""Oracle for memory::recompute: PyTorch's own activation checkpointing on the same module and weights.

Usage: recompute_oracle.py DIR MODE SEED
DIR holds what the C++ test wrote with checkpoint::export_weights: weights.pt (the state dict of a
Sequential of blocks Linear -> GELU -> Dropout(p) followed by a Linear), data.pt (x, y, p) and grads.pt (the
C++ gradients, '/' in place of '.' in the names). MODE is fp32 or bf16 (CPU autocast). Python runs every module
of the top Sequential under torch.utils.checkpoint.checkpoint(use_reentrant=False) after torch.manual_seed(SEED),
as the C++ side did, and compares each gradient with the C++ one. Prints the maximum difference per tensor; exits
non-zero unless every gradient is bit for bit equal.
"""
import os
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

d, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(1)
weights = torch.load(os.path.join(d, "weights.pt"))
data = torch.load(os.path.join(d, "data.pt"))
grads_cpp = {k.replace("/", "."): v for k, v in torch.load(os.path.join(d, "grads.pt")).items()}
x, y, p = data["x"], data["y"], float(data["p"].item())

blocks = sorted({int(k.split(".")[0]) for k in weights})
layers = []
for i in blocks:
    w = weights[f"{i}.weight"] if f"{i}.weight" in weights else weights[f"{i}.0.weight"]
    lin = nn.Linear(w.shape[1], w.shape[0])
    layers.append(lin if f"{i}.weight" in weights else nn.Sequential(lin, nn.GELU(), nn.Dropout(p)))
model = nn.Sequential(*layers)
model.load_state_dict(weights)
model.train()

torch.manual_seed(seed)
with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
    h = x
    for m in model:
        h = checkpoint(m, h, use_reentrant=False)
    loss = nn.functional.cross_entropy(h, y)
loss.backward()

ok = True
for name, prm in model.named_parameters():
    want = grads_cpp[name]
    diff = (prm.grad.float() - want.float()).abs().max().item()
    same = torch.equal(prm.grad, want)
    print(f"{name}: max |python - c++| = {diff:.3g}{'' if same else '  DIFFERENT'}")
    ok = ok and same
sys.exit(0 if ok else 1)
