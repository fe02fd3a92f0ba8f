"""callbacks::GradClip against torch.nn.utils.clip_grad_norm_ / clip_grad_value_ on a module with a tied weight
(enc.weight is dec.weight): Python's Module.parameters() lists the tied tensor once, so the reference counts its
gradient once in the norm and scales it once. The same gradients as the C++ run, by norm (p = 2, 1, inf, and a
max_norm that does not clip) and by value. Tolerance: rtol 1e-6, atol 1e-9 (float32)."""
import math

import torch

from common import close, finish, run_dump, tensor

d = run_dump("grad_clip")


class Holder(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight = w


class Tied(torch.nn.Module):
    def __init__(self, grads):
        super().__init__()
        w = torch.nn.Parameter(torch.zeros_like(grads["enc.weight"]))
        self.enc, self.dec = Holder(w), Holder(w)
        self.bias = torch.nn.Parameter(torch.zeros_like(grads["bias"]))


n = 0
for c in d["cases"]:
    before = {k: tensor(v) for k, v in c["grads_before"].items()}
    m = Tied(before)
    assert m.enc.weight is m.dec.weight and len(list(m.parameters())) == 2
    names = dict(m.named_parameters())
    for k, p in names.items():
        p.grad = before[k].clone()
    if c["mode"] == "norm":
        p = math.inf if c["p"] == "inf" else c["p"]
        total = torch.nn.utils.clip_grad_norm_(m.parameters(), c["max_norm"], norm_type=p)
        close(c["norm"], total, f"{c['name']}: total norm", 1e-6, 1e-9)
        n += 1
    else:
        torch.nn.utils.clip_grad_value_(m.parameters(), c["clip_value"])
    for k, p in names.items():
        close(tensor(c["grads_after"][k]), p.grad, f"{c['name']}: clipped gradient of {k}", 1e-6, 1e-9)
        n += 1
finish("GradClip vs torch.nn.utils.clip_grad_norm_/clip_grad_value_ (tied weights)", n)
