"""Oracle for tests/unit/test_fused_optim.cpp: runs torch.optim.{AdamW,Adam,SGD}(fused=True) on the CPU over the
initial parameters and gradient sequence the C++ test wrote (torch::pickle_save), with grad_scale/found_inf set on
the optimizer as torch.amp.GradScaler does for an optimizer with _step_supports_amp_scaling, and writes the
parameters after every step and the final state (torch.save, read by torch::pickle_load).
Usage: fused_optim_oracle.py IN OUT [IN OUT ...] (one torch import for many cases)"""
import sys

import torch
import torch.jit._pickle

torch.set_num_threads(1)
# torch::pickle_save writes typed containers through torch.jit._pickle's builders: allow those, nothing else.
BUILDERS = [getattr(torch.jit._pickle, n) for n in dir(torch.jit._pickle) if n.startswith(("build_", "restore_"))]


def run_case(in_path, out_path):
    with torch.serialization.safe_globals(BUILDERS):
        inp = torch.load(in_path, weights_only=True)
    kind, opts = inp["kind"], dict(inp["options"])
    params = [p.clone().requires_grad_(True) for p in inp["params"]]
    groups = []
    for g, lr in enumerate(inp["group_lr"]):
        groups.append({"params": [p for p, gi in zip(params, inp["group_of"]) if gi == g], "lr": lr})
    if kind in ("adamw", "adam"):
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        opt = cls(groups, betas=(opts["beta1"], opts["beta2"]), eps=opts["eps"], weight_decay=opts["weight_decay"],
                  amsgrad=bool(opts["amsgrad"]), fused=True)
    elif kind == "sgd":
        opt = torch.optim.SGD(groups, momentum=opts["momentum"], dampening=opts["dampening"],
                              weight_decay=opts["weight_decay"], nesterov=bool(opts["nesterov"]), fused=True)
    else:
        raise SystemExit(f"unknown optimizer kind {kind!r}")
    assert opt._step_supports_amp_scaling  # the GradScaler path that sets grad_scale/found_inf below

    per_step = []
    for t, grads in enumerate(inp["grads"]):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        scale, inf = inp["grad_scale"][t], inp["found_inf"][t]
        if scale > 0:
            opt.grad_scale = torch.full((), scale, dtype=torch.float32)
        if inf >= 0:
            opt.found_inf = torch.full((), inf, dtype=torch.float32)
        opt.step()
        for name in ("grad_scale", "found_inf"):
            if hasattr(opt, name):
                delattr(opt, name)
        per_step.append([p.detach().clone() for p in params])

    state = []
    for p in params:
        s = {k: v.detach().clone() for k, v in opt.state[p].items() if isinstance(v, torch.Tensor)}
        state.append(s)
    torch.save({"params": per_step, "state": state}, out_path)


for k in range(1, len(sys.argv) - 1, 2):
    run_case(sys.argv[k], sys.argv[k + 1])
