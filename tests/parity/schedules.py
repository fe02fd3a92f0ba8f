#!/usr/bin/env python3
"""schedule::Lr side by side with torch.optim.lr_scheduler (CTest: parity.schedules).

Writes the cases (kind, options, optimizer, param-group lrs, length, skipped steps, scripted validation
metrics), runs the C++ side (tests/parity/schedules.cpp, which trains each case with schedule::Lr in a Trainer
and records the lr and momentum every optimizer step was taken with, and a MetricsLog), computes the same
sequence with PyTorch's schedulers on a torch.optim.SGD / AdamW optimizer stepped the way PyTorch users step it
(optimizer.step() skipped on the scripted steps, as GradScaler does, scheduler.step() after every attempt), and
compares: the lr of every group, the momentum (SGD) / beta1 (AdamW) of every group, and MetricsLog's lr column.

Tolerance: relative 1e-9 (absolute 1e-15): PyTorch computes most schedules recursively (lr_t from lr_{t-1}),
ours in closed form, so the two differ by rounding only, a few ulps per step.

Usage: schedules.py PARITY_SCHEDULES_BINARY OUT_DIR
"""
import json
import math
import os
import subprocess
import sys
import warnings

import torch
from torch.optim import lr_scheduler as L

RTOL, ATOL = 1e-9, 1e-15
SKIP = [1, 4, 5, 11]  # attempt indexes skipped in the "skip" variant of every case


def base_cases():
    """(name, kind, options, optimizer, lrs, momentum, epochs, steps_per_epoch, val metrics)."""
    sgd2 = dict(optimizer="sgd", lrs=[0.1, 0.02], momentum=0.9)
    sgd1 = dict(optimizer="sgd", lrs=[0.1], momentum=0.9)
    adamw2 = dict(optimizer="adamw", lrs=[1e-3, 3e-3], momentum=0.9)
    adamw1 = dict(optimizer="adamw", lrs=[2e-3], momentum=0.9)
    run = dict(epochs=4, steps_per_epoch=5)  # T = 20
    c = []
    add = lambda name, kind, opts, opt, r=run, val=None: c.append(
        dict(name=name, kind=kind, options=opts, **opt, **r, val=val or []))
    add("step_steps", "step", dict(step_size=3, gamma=0.5), sgd2)
    add("step_epochs", "step", dict(unit="epochs", step_size=1, gamma=0.3), adamw2)
    add("multistep", "multistep", dict(milestones=[4, 9, 13], gamma=0.3), sgd2)
    add("multistep_epochs", "multistep", dict(unit="epochs", milestones=[1, 3], gamma=0.1), sgd1)
    add("exponential", "exponential", dict(gamma=0.9), sgd2)
    add("exponential_epochs", "exponential", dict(unit="epochs", gamma=0.5), adamw1)
    add("linear", "linear", dict(lrf=0.05), sgd2)
    add("linear_after_run", "linear", dict(lrf=0.05, decay_end="after_run"), adamw2)
    add("cosine", "cosine", dict(lrf=0.1), sgd1)
    add("cosine_two_groups_to_zero", "cosine", dict(lrf=0.0), adamw2)
    add("cosine_after_run", "cosine", dict(lrf=0.1, decay_end="after_run"), adamw1)
    add("poly", "poly", dict(lrf=0.0, power=2.0), sgd2)
    add("poly_after_run", "poly", dict(lrf=0.0, power=0.5, decay_end="after_run"), adamw1)
    # OneCycleLR: the case (T = 10, pct_start 0.3: the peak at step 2), defaults (cos, momentum cycled).
    add("onecycle_T10", "onecycle", dict(lrf=0.004), sgd1, dict(epochs=1, steps_per_epoch=10))
    add("onecycle", "onecycle", dict(lrf=0.001), sgd2)
    add("onecycle_adamw_beta1", "onecycle", dict(lrf=0.01, pct_start=0.25, div_factor=10.0, base_momentum=0.8,
                                                 max_momentum=0.9), adamw2)
    add("onecycle_three_phase_linear", "onecycle", dict(lrf=0.002, three_phase=True, anneal="linear"), adamw1)
    add("onecycle_three_phase_cos", "onecycle", dict(lrf=0.01, three_phase=True, pct_start=0.4), sgd2)
    add("onecycle_no_momentum", "onecycle", dict(lrf=0.01, cycle_momentum=False), sgd1)
    add("onecycle_pct0", "onecycle", dict(lrf=0.01, pct_start=0.0), sgd1)
    # ReduceLROnPlateau, one validation per epoch (metrics in steps of 1/8, exact in float and double).
    plateau_run = dict(epochs=10, steps_per_epoch=2)
    # Chosen so that a relative and an absolute threshold of 0.1 disagree (0.78125 after 0.875; 0.5625 after 0.5).
    vals = [1.0, 0.875, 0.78125, 0.78125, 0.75, 0.75, 0.75, 0.625, 0.625, 0.625]
    add("plateau_min_rel", "plateau", dict(lrf=0.2, patience=1, factor=0.5, threshold=0.1), sgd2, plateau_run, vals)
    add("plateau_cooldown", "plateau", dict(lrf=0.05, patience=0, factor=0.5, cooldown=2), adamw2, plateau_run, vals)
    add("plateau_min_abs", "plateau", dict(lrf=0.01, patience=1, factor=0.1, threshold=0.1, threshold_mode="abs"), sgd1,
        plateau_run, vals)
    accs = [0.5, 0.5625, 0.5625, 0.625, 0.75, 0.75, 0.8125, 0.8125, 0.8125, 0.875]
    add("plateau_max_rel", "plateau", dict(lrf=0.1, maximize=True, patience=1, factor=0.5, threshold=0.1), sgd2,
        plateau_run, accs)
    add("plateau_max_abs", "plateau", dict(lrf=0.1, maximize=True, patience=0, factor=0.5, threshold=0.1,
                                           threshold_mode="abs", cooldown=1), adamw1, plateau_run, accs)
    add("plateau_floor_eps", "plateau", dict(lrf=0.3, patience=0, factor=0.7, plateau_eps=1e-3), sgd2, plateau_run,
        [1.0] * 10)
    # Warmup: SequentialLR([LinearLR(start, 1, W), main], milestones=[W]).
    add("warmup_cosine", "cosine", dict(lrf=0.1, warmup_steps=4, warmup_start_factor=0.1), sgd1)
    add("warmup_linear", "linear", dict(lrf=0.0, warmup_steps=5, warmup_start_factor=0.25), adamw2)
    add("warmup_step", "step", dict(step_size=4, gamma=0.5, warmup_steps=3, warmup_start_factor=0.5), sgd2)
    add("warmup_constant", "constant", dict(warmup_steps=6, warmup_start_factor=0.01), adamw2)
    add("warmup_exponential", "exponential", dict(gamma=0.8, warmup_steps=2, warmup_start_factor=0.2), sgd2)
    return c


def all_cases():
    out = []
    for c in base_cases():
        out.append(dict(c, name=c["name"] + "/noskip", skip=[]))
        T = c["epochs"] * c["steps_per_epoch"]
        out.append(dict(c, name=c["name"] + "/skip", skip=[s for s in SKIP if s < T]))
    # PyTorch's loop where the user steps the scheduler only after steps that updated the weights.
    c = [b for b in base_cases() if b["name"] == "exponential"][0]
    out.append(dict(c, name="exponential_count_taken/skip", skip=SKIP,
                    options=dict(c["options"], count_skipped_steps=False)))
    return out


def main_scheduler(kind, o, opt, T, spe, lrs):
    """PyTorch's scheduler for one of our kinds over a horizon of T steps (None: constant)."""
    u = spe if o.get("unit") == "epochs" else 1
    L_ = max(T - 1, 1) if o.get("decay_end", "last_step") == "last_step" else T
    lrf = o.get("lrf", 0.01)
    if kind == "constant":
        return None
    if kind == "step":
        s = o["step_size"] * u
        assert s == int(s)
        return L.StepLR(opt, step_size=int(s), gamma=o.get("gamma", 0.1))
    if kind == "multistep":
        return L.MultiStepLR(opt, milestones=[int(m * u) for m in o["milestones"]], gamma=o.get("gamma", 0.1))
    if kind == "exponential":
        return L.ExponentialLR(opt, gamma=o.get("gamma", 0.1) ** (1.0 / u))
    if kind == "linear":
        return L.LinearLR(opt, start_factor=1.0, end_factor=lrf, total_iters=L_)
    if kind == "cosine":
        # eta_min is one absolute value for every group: equal to lrf x base only with one group or lrf = 0.
        assert len(lrs) == 1 or lrf == 0
        return L.CosineAnnealingLR(opt, T_max=L_, eta_min=lrf * lrs[0])
    if kind == "poly":
        assert lrf == 0, "PolynomialLR decays to 0: compare with lrf = 0"
        return L.PolynomialLR(opt, total_iters=L_, power=o.get("power", 1.0))
    if kind == "onecycle":
        div = o.get("div_factor", 25.0)
        return L.OneCycleLR(opt, max_lr=list(lrs), total_steps=T, pct_start=o.get("pct_start", 0.3),
                            anneal_strategy=o.get("anneal", "cos"), cycle_momentum=o.get("cycle_momentum", True),
                            base_momentum=o.get("base_momentum", 0.85), max_momentum=o.get("max_momentum", 0.95),
                            div_factor=div, final_div_factor=1.0 / (lrf * div), three_phase=o.get("three_phase", False))
    if kind == "plateau":
        return L.ReduceLROnPlateau(opt, mode="max" if o.get("maximize") else "min", factor=o.get("factor", 0.1),
                                   patience=o.get("patience", 10), threshold=o.get("threshold", 1e-4),
                                   threshold_mode=o.get("threshold_mode", "rel"), cooldown=o.get("cooldown", 0),
                                   min_lr=[lrf * b for b in lrs], eps=o.get("plateau_eps", 1e-8))
    raise ValueError(kind)


def reference(c):
    """The lr and momentum of every group per step, from PyTorch."""
    o, lrs, T, spe = c["options"], c["lrs"], c["epochs"] * c["steps_per_epoch"], c["steps_per_epoch"]
    params = [torch.zeros(1, requires_grad=True) for _ in lrs]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, lrs)]
    if c["optimizer"] == "sgd":
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=c["momentum"])
    else:
        opt = torch.optim.AdamW(groups, lr=lrs[0], betas=(c["momentum"], 0.999))
    W = o.get("warmup_steps", 0)
    if W > 0:
        warm = L.LinearLR(opt, start_factor=o.get("warmup_start_factor", 0.0), end_factor=1.0, total_iters=W)
        main = main_scheduler(c["kind"], o, opt, T - W, spe, lrs) or L.ConstantLR(opt, factor=1.0, total_iters=0)
        sched = L.SequentialLR(opt, [warm, main], milestones=[W])
    else:
        sched = main_scheduler(c["kind"], o, opt, T, spe, lrs)
    plateau = c["kind"] == "plateau"
    count_skipped = o.get("count_skipped_steps", True)
    lr, mom = [], []
    for k in range(T):
        lr.append([g["lr"] for g in opt.param_groups])
        mom.append([g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups])
        skipped = k in c["skip"]
        if not skipped:
            for p in params:
                p.grad = torch.zeros_like(p)
            opt.step()
        if sched is not None and not plateau and (count_skipped or not skipped):
            sched.step()
        if plateau and (k + 1) % spe == 0:
            sched.step(c["val"][k // spe])
    return lr, mom


def close(a, b):
    return abs(a - b) <= ATOL + RTOL * abs(b)


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    cases = all_cases()
    cases_path, results_path = os.path.join(out_dir, "cases.json"), os.path.join(out_dir, "results.json")
    with open(cases_path, "w") as f:
        json.dump(cases, f, indent=1)
    subprocess.run([binary, cases_path, results_path, os.path.join(out_dir, "logs")], check=True)
    with open(results_path) as f:
        results = {r["name"]: r for r in json.load(f)}
    warnings.filterwarnings("ignore", category=UserWarning)  # "scheduler.step() before optimizer.step()" on a skip
    failures = 0
    for c in cases:
        got = results[c["name"]]
        ref_lr, ref_mom = reference(c)
        problems = []
        if len(got["lr"]) != len(ref_lr):
            problems.append(f"{len(got['lr'])} steps, PyTorch {len(ref_lr)}")
        if got["skipped_steps"] != len(c["skip"]):
            problems.append(f"skipped {got['skipped_steps']} steps, expected {len(c['skip'])}")
        for k, (gl, rl, gm, rm) in enumerate(zip(got["lr"], ref_lr, got["momentum"], ref_mom)):
            for g in range(len(rl)):
                if not close(gl[g], rl[g]):
                    problems.append(f"step {k} group {g}: lr {gl[g]!r}, PyTorch {rl[g]!r}")
                if not close(gm[g], rm[g]):
                    problems.append(f"step {k} group {g}: momentum {gm[g]!r}, PyTorch {rm[g]!r}")
        with open(got["steps_jsonl"]) as f:
            logged = [json.loads(line)["lr"] for line in f if line.strip()]
        if len(logged) != len(ref_lr):
            problems.append(f"MetricsLog has {len(logged)} rows, expected {len(ref_lr)}")
        for k, (a, r) in enumerate(zip(logged, ref_lr)):
            if not close(a, r[0]):
                problems.append(f"MetricsLog step {k}: lr {a!r}, PyTorch {r[0]!r}")
        status = "ok" if not problems else "FAIL"
        print(f"{status:4} {c['name']} ({len(ref_lr)} steps, {len(c['lrs'])} groups, {c['optimizer']})")
        for p in problems[:8]:
            print("     " + p)
        failures += bool(problems)
    print(f"{len(cases) - failures} of {len(cases)} cases match PyTorch {torch.__version__} "
          f"(rtol {RTOL:g}, atol {ATOL:g})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
