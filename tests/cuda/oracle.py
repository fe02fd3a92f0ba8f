"""The Python side of the CUDA tests (tests/cuda/test_cuda.cpp): PyTorch itself computes what policytrain must match.

  oracle.py amp IN.pt DTYPE OUT.pt OUT.json [DEVICE]
      IN.pt (written by the C++ test with torch::pickle_save): the weights and buffers of AmpNet, x and y.
      One training step of AmpNet on (x, y) under torch.autocast(DEVICE, DTYPE) (DEVICE cuda, the default, or cpu;
      fp16 on CUDA: with torch.amp.GradScaler at its defaults, as policytrain's Autocast), SGD lr 0.1. Writes the
      per-op output dtypes, the loss and whether the loss was scaled to OUT.json and the stepped state to OUT.pt.
      The CPU form runs in the CPU CI (tests/unit/test_precision.cpp), so the file format is checked everywhere.
  oracle.py scaler IN.json OUT.json
      IN.json: {"init_scale", "growth_interval", "c": [...], "script": [0 | "inf" | "-inf" | "nan", ...]}.
      Each step: loss = sum(p * c) * script value's factor, scaled and stepped with GradScaler + SGD(lr 0.1) on CUDA.
      Writes scale, growth tracker, stepped and p after each step.
"""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class AmpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x, dtypes):
        c = self.conv(x)
        dtypes["conv"] = c.dtype
        b = self.bn(c)
        dtypes["batch_norm"] = b.dtype
        h = F.max_pool2d(F.relu(b), 2).flatten(1)
        dtypes["max_pool"] = h.dtype
        logits = self.fc(h)
        dtypes["linear"] = logits.dtype
        dtypes["softmax"] = torch.softmax(logits, 1).dtype
        return logits


def dtype_name(d):
    return {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[d]


def amp(inp, dtype_s, out_pt, out_json, device="cuda"):
    # torch::pickle_save writes TorchScript's pickle (torch.jit._pickle.restore_type_tag): since PyTorch 2.6
    # torch.load's default weights_only=True refuses it. The file is the test's own, so full unpickling is safe.
    d = torch.load(inp, weights_only=False)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype_s]
    net = AmpNet().to(device)
    net.load_state_dict({k: v for k, v in d.items() if k not in ("x", "y")})
    x, y = d["x"].to(device), d["y"].to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, enabled=dtype == torch.float16)
    dtypes = {}
    with torch.autocast(device, dtype=dtype):
        logits = net(x, dtypes)
        loss = F.cross_entropy(logits, y)
    dtypes["loss"] = loss.dtype
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    torch.save({k: v.detach().cpu() for k, v in net.state_dict().items()}, out_pt)
    with open(out_json, "w") as f:
        json.dump({"dtypes": {k: dtype_name(v) for k, v in dtypes.items()}, "loss": loss.item(),
                   "scale": scaler.get_scale() if scaler.is_enabled() else 1.0,
                   "scaling": scaler.is_enabled()}, f)


def scaler(inp, out_json):
    spec = json.load(open(inp))
    p = torch.zeros(len(spec["c"]), device="cuda", requires_grad=True)
    c = torch.tensor(spec["c"], device="cuda")
    opt = torch.optim.SGD([p], lr=0.1)
    s = torch.amp.GradScaler("cuda", init_scale=spec["init_scale"], growth_interval=spec["growth_interval"])
    rows = []
    for v in spec["script"]:
        factor = float(v) if isinstance(v, str) else 1.0
        loss = (p * c).sum() * factor if isinstance(v, str) else (p * c).sum()
        s.scale(loss).backward()
        before = p.detach().clone()
        s.step(opt)
        s.update()
        rows.append({"scale": s.get_scale(), "growth_tracker": int(s._growth_tracker.item()),
                     "stepped": not torch.equal(before, p.detach()), "p": p.detach().cpu().tolist()})
        opt.zero_grad(set_to_none=True)
    json.dump({"steps": rows, "state_dict": {k: (v if not torch.is_tensor(v) else v.item())
                                              for k, v in s.state_dict().items()}}, open(out_json, "w"))


if __name__ == "__main__":
    {"amp": amp, "scaler": scaler}[sys.argv[1]](*sys.argv[2:])
