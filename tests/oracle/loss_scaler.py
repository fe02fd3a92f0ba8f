"""precision::LossScaler against torch.amp.GradScaler("cpu") on the scripted sequence of finite and non-finite
gradients oracle_dump writes: the scale before and after each step, the growth tracker, whether the step was
taken, the unscaled gradients, the parameters, and a state_dict round trip (our scaler saved and loaded into a
fresh one after `reload_at` steps; GradScaler's state_dict() / load_state_dict() at the same point).
Tolerances: the scale and tracker exactly; gradients and parameters to float32 rounding (rtol 1e-6)."""
import torch

from common import check, close, finish, run_dump, tensor

d = run_dump("loss_scaler")
o = d["options"]
steps = d["steps"]


def new_scaler(state=None):
    s = torch.amp.GradScaler("cpu", init_scale=o["init_scale"], growth_factor=o["growth_factor"],
                             backoff_factor=o["backoff_factor"], growth_interval=o["growth_interval"])
    if state is not None:
        s.load_state_dict(state)
    s.scale(torch.ones(()))  # GradScaler creates its scale lazily, on the CPU here (as the C++ side does)
    return s


params = [torch.nn.Parameter(tensor(p)) for p in d["init"]]
opt = torch.optim.SGD(params, lr=d["lr"])
scaler = new_scaler()
n = 0
for k, s in enumerate(steps):
    if k == d["reload_at"]:
        sd = scaler.state_dict()
        for key in ("scale", "growth_factor", "backoff_factor", "growth_interval"):
            close(d["saved_state"][key], sd[key], f"state_dict['{key}'] at step {k}", 0, 0)
        close(d["saved_state"]["growth_tracker"], sd["_growth_tracker"], f"state_dict growth tracker at step {k}", 0, 0)
        scaler = new_scaler(sd)
        n += 5
    S = scaler.get_scale()
    close(s["scale_before"], S, f"scale before step {k}", 0, 0)
    grads = [tensor(g) for g in s["grads"]]
    for p, g in zip(params, grads):
        p.grad = g * S
    before = [p.detach().clone() for p in params]
    scaler.unscale_(opt)
    for i, p in enumerate(params):
        close(tensor(s["unscaled"][i]), p.grad, f"unscaled gradient {i} at step {k} ({s['kind']})", 1e-6, 0)
    scaler.step(opt)
    scaler.update()
    stepped = any(not torch.equal(b, p.detach()) for b, p in zip(before, params))
    check(stepped == s["stepped"], f"step {k} ({s['kind']}): ours stepped={s['stepped']}, GradScaler {stepped}")
    close(s["scale_after"], scaler.get_scale(), f"scale after step {k}", 0, 0)
    close(s["growth_tracker"], scaler._get_growth_tracker(), f"growth tracker after step {k}", 0, 0)
    for i, p in enumerate(params):
        close(tensor(s["params_after"][i]), p.detach(), f"parameter {i} after step {k}", 1e-6, 1e-7)
    n += 4 + 2 * len(params)
skipped = sum(1 for s in steps if not s["stepped"])
check(skipped == sum(1 for s in steps if s["kind"] != "f"), "every non-finite step skipped, no finite one")
check(steps[-1]["skipped_steps"] == skipped, f"skipped_steps {steps[-1]['skipped_steps']}, counted {skipped}")
finish("LossScaler vs torch.amp.GradScaler", n)
