"""optim::FusedAdamW against torch.optim.AdamW(fused=True) and AdamW(foreach=False) on the same parameters,
param groups (own lr, betas, eps, weight decay) and gradient sequence, with amsgrad off and on.
Tolerance: rtol 1e-5, atol 1e-6 on the parameters after every step (float32 kernels; the fused kernel and the
per-parameter loop differ in rounding order)."""
import torch

from common import close, finish, run_dump, tensor

d = run_dump("fused_adamw")
n = 0
for c in d["cases"]:
    for flavour in ({"fused": True}, {"foreach": False}):
        params = [torch.nn.Parameter(tensor(p)) for p in c["init"]]
        groups, i = [], 0
        for g in c["groups"]:
            groups.append({"params": params[i:i + g["n"]], "lr": g["lr"], "weight_decay": g["weight_decay"],
                           "betas": tuple(g["betas"]), "eps": g["eps"]})
            i += g["n"]
        opt = torch.optim.AdamW(groups, amsgrad=c["amsgrad"], **flavour)
        for k, s in enumerate(c["steps"]):
            for p, g in zip(params, s["grads"]):
                p.grad = tensor(g)
            opt.step()
            for j, p in enumerate(params):
                close(tensor(s["params_after"][j]), p.detach(),
                      f"amsgrad={c['amsgrad']} {flavour}: parameter {j} after step {k}", 1e-5, 1e-6)
                n += 1
finish("FusedAdamW vs torch.optim.AdamW (fused and foreach=False)", n)
