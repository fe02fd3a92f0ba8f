#!/usr/bin/env python3
"""differential.metrics: every declared metric, evaluated through the Trainer's real validation path on 1 to 3 ranks,
equals torchmetrics computed in one process on exactly the validation set.

A seed draws a case: a kind (regression, a multi-class task of 2 to 7 classes, a binary task), random predictions and
targets (ties, absent classes, a single class, logits or probabilities), a validation size that is not a multiple
of ranks x batch, a batch size, a world size of 1 to 3 and a loader: TensorLoader (its padding left out), from_torch
with data::UnrepeatedDistributedSampler (uneven shards), with LibTorch's DistributedSequentialSampler padded (its
padding left out) or not, or with DistributedRandomSampler. The C++ side (differential_ranks, tests/differential/
ranks.cpp) evaluates the case's predictions with Trainer::evaluate on every rank: the task's declared epoch-level
metrics (metric/regression.hpp, metric/classification.hpp) and the built-in loss, accuracy and confusion matrix. This
driver computes the same with torchmetrics (and torch's losses) over the whole validation set in one process, and
compares: the sample count exactly, confusion matrices exactly, regression values to 1e-9 relative (float64 sums in
another order), classification values to 1e-6 (torchmetrics divides its integer counts in float32). Every rank must
report the same values. A loader that cannot count every sample once (LibTorch's samplers with a data set that does
not divide by the ranks) must be refused with the library's message, naming data::UnrepeatedDistributedSampler.

  metrics.py --binary PATH --seeds A-B                 the seeds A to B (the quick tier: differential.metrics)
  metrics.py --binary PATH --random SECONDS --start N  fresh seeds from N for about SECONDS (.ci/run)

Run it with a python that has torchmetrics (the venv of the torchmetrics.venv test). On a difference it prints the
first one, the seed and the command that reproduces it, and exits 1; at the end it prints how many inputs it compared.
"""
import json
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import warnings

import seed_loop

import torch
import torch.nn.functional as F
import torchmetrics as tm
import torchmetrics.classification as tc

LOADERS = ["tensor", "tensor", "unrepeated", "unrepeated", "sequential_padded", "sequential", "random", "random_padded"]
AVERAGES = ("micro", "macro", "weighted")


def draw(seed):
    """The case a seed draws (plain JSON: what the C++ side reads)."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    world = rng.choice([1, 2, 3])
    batch = rng.randint(1 if world > 1 else 2, 9)  # ranks x batch > 1, so that some size is not a multiple of it
    n = rng.randint(1, 64)
    while n % (world * batch) == 0:
        n = rng.randint(1, 64)
    c = {"seed": seed, "world": world, "batch": batch, "n": n, "loader": rng.choice(LOADERS),
         "shuffle": rng.random() < 0.5, "loader_seed": rng.randint(0, 1000), "workers": rng.choice([0, 0, 1])}
    kind = rng.choice(["regression", "multiclass", "binary"])
    c["kind"] = kind
    if kind == "regression":
        scale, offset = 10 ** rng.uniform(-2, 2), rng.uniform(-5, 5)
        t = offset + scale * torch.randn(n, generator=g, dtype=torch.float64)
        p = t + rng.uniform(0, 2) * scale * torch.randn(n, generator=g, dtype=torch.float64)
        if rng.random() < 0.3:  # ties and exact hits
            p, t = (p * 4).round() / 4, (t * 4).round() / 4
        c["column"] = rng.random() < 0.5
        c["prediction"], c["target"] = p.tolist(), t.tolist()
    elif kind == "multiclass":
        k = rng.randint(2, 7)
        present = rng.sample(range(k), rng.randint(1, k))  # some classes never a target
        t = torch.tensor([rng.choice(present) for _ in range(n)], dtype=torch.long)
        p = torch.randn(n, k, generator=g, dtype=torch.float64) + rng.uniform(0, 3) * F.one_hot(t, k)
        if rng.random() < 0.3:  # tied scores
            p = p.round()
        c["classes"], c["top_k"] = k, rng.randint(2, k)
        c["prediction"], c["target"] = p.reshape(-1).tolist(), t.tolist()
    else:
        t = (torch.rand(n, generator=g) < rng.uniform(0, 1)).to(torch.float64)
        if rng.random() < 0.5:  # probabilities, maybe tied
            p = torch.sigmoid(rng.uniform(0, 3) * (2 * t - 1) + torch.randn(n, generator=g, dtype=torch.float64))
            if rng.random() < 0.5:
                p = (p * 20).round() / 20
        else:  # logits
            p = rng.uniform(0.5, 4) * torch.randn(n, generator=g, dtype=torch.float64) + rng.uniform(-1, 1) * t
        c["prediction"], c["target"] = p.tolist(), t.tolist()
    return c


def reference(c):
    """torchmetrics (and torch's losses) over the whole validation set, in one process."""
    n, kind = c["n"], c["kind"]
    p = torch.tensor(c["prediction"], dtype=torch.float64)
    out = {"declared": {}, "builtin": {}}
    if kind == "regression":
        t = torch.tensor(c["target"], dtype=torch.float64)
        for name, m in {"mse": tm.MeanSquaredError(), "rmse": tm.MeanSquaredError(squared=False),
                        "mae": tm.MeanAbsoluteError(), "r2": tm.R2Score()}.items():
            m.set_dtype(torch.float64)
            m.update(p, t)
            if name == "r2" and n < 2:  # torchmetrics raises; ours gives NaN (docs/metrics.md, "Departures")
                out["declared"][name] = math.nan
                continue
            out["declared"][name] = m.compute().item()
        out["builtin"]["loss"] = F.mse_loss(p, t).item()
    elif kind == "multiclass":
        k, top = c["classes"], c["top_k"]
        p = p.view(n, k)
        t = torch.tensor(c["target"], dtype=torch.long)
        for avg in AVERAGES:
            for tk in sorted({1, top}):
                pre = "" if tk == 1 else f"top{tk}_"
                for name, cls in (("accuracy", tc.MulticlassAccuracy), ("precision", tc.MulticlassPrecision),
                                  ("recall", tc.MulticlassRecall), ("f1", tc.MulticlassF1Score)):
                    out["declared"][f"{pre}{name}_{avg}"] = cls(k, average=avg, top_k=tk)(p, t).item()
        confusion = tc.MulticlassConfusionMatrix(k)(p, t)
        out["declared"]["confusion_matrix"] = confusion.reshape(-1).tolist()
        out["builtin"]["loss"] = F.cross_entropy(p, t).item()
        out["builtin"]["accuracy"] = tc.MulticlassAccuracy(k, average="micro")(p, t).item()
        out["builtin"]["builtin_confusion"] = confusion.tolist()
    else:
        t = torch.tensor(c["target"], dtype=torch.long)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a single class: torchmetrics warns and gives 0
            out["declared"]["auroc"] = tc.BinaryAUROC()(p, t).item()
    return out


def refused(c):
    """The library's refusal a case must meet, or None: LibTorch's samplers over a data set that does not divide by
    the ranks cannot count every sample once."""
    if c["world"] > 1 and c["n"] % c["world"] != 0 and c["loader"] in ("sequential", "random", "random_padded"):
        return "UnrepeatedDistributedSampler"
    return None


def close(name, got, want, kind):
    if isinstance(want, list):
        return got == want
    if isinstance(want, float) and math.isnan(want):  # JSON has no NaN: the C++ side writes null
        return got is None or (isinstance(got, float) and math.isnan(got))
    if kind == "regression":
        return got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    if name == "loss":
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    return abs(got - want) <= 1e-6


def compare(c, ranks):
    """The first difference between the ranks' results and the reference, or None; and how many values agreed."""
    for r, res in enumerate(ranks[1:], 1):
        if res != ranks[0]:
            return f"rank {r} reports other values than rank 0: {json.dumps(res)[:400]} vs {json.dumps(ranks[0])[:400]}", 0
    got = ranks[0]
    why = refused(c)
    for side in ("declared", "builtin"):
        g = got[side]
        if why:
            if "error" not in g or why not in g["error"] or "policytrain::" not in g["error"]:
                return f"{side}: expected a refusal naming {why}, got {json.dumps(g)[:400]}", 0
        elif "error" in g:
            return f"{side}: refused: {g['error']}", 0
    if why:
        return None, 2
    want = reference(c)
    checked = 0
    for side in ("declared", "builtin"):
        g = got[side]
        if g["samples"] != c["n"]:
            return f"{side}: {g['samples']} samples evaluated, the validation set has {c['n']}", checked
        values = dict(g.get("metrics", {}))
        values.update({k: g[k] for k in ("loss", "accuracy", "builtin_confusion") if k in g})
        for name, w in want[side].items():
            if name not in values:
                return f"{side}: '{name}' not reported (reported: {sorted(values)})", checked
            if not close(name, values[name], w, c["kind"]):
                return f"{side}: {name} = {values[name]!r}, torchmetrics {tm.__version__} gives {w!r}", checked
            checked += 1
    return None, checked


def run_cases(binary, cases, tmp):
    """Runs the cases of each world size on that many ranks; returns each case's per-rank results."""
    results = {}
    for world in sorted({c["world"] for c in cases}):
        group = [c for c in cases if c["world"] == world]
        path, out = os.path.join(tmp, f"cases{world}.json"), os.path.join(tmp, f"out{world}")
        with open(path, "w") as f:
            json.dump(group, f)
        p = subprocess.run([binary, "metrics", "--nproc", str(world), path, out], capture_output=True, text=True)
        if p.returncode != 0:
            return None, f"differential_ranks on {world} ranks exited {p.returncode}: {p.stderr[-2000:]}", group[0]
        per_rank = []
        for r in range(world):
            with open(f"{out}.rank{r}.json") as f:
                per_rank.append(json.load(f))
        for i, c in enumerate(group):
            results[c["seed"]] = [pr[i] for pr in per_rank]
    return results, None, None


def reproduce(seed):
    argv = [sys.executable, os.path.abspath(__file__)]
    skip = False
    for a in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("--seeds", "--random", "--start"):
            skip = True
            continue
        argv.append(a)
    return shlex.join(argv + ["--seeds", f"{seed}-{seed}"])


def check(binary, seeds, totals):
    cases = [draw(s) for s in seeds]
    with tempfile.TemporaryDirectory(prefix="policytrain-diff-metrics-") as tmp:
        results, err, case = run_cases(binary, cases, tmp)
    if err:
        print(f"differential.metrics: {err}\n  seeds {seeds[0]}-{seeds[-1]} (world {case['world']})\n"
              f"  reproduce: {reproduce(case['seed'])}")
        return False
    for c in cases:
        diff, checked = compare(c, results[c["seed"]])
        totals["inputs"] += 1
        totals["values"] += checked
        if diff:
            print(f"differential.metrics: seed {c['seed']}: {diff}\n  case: {c['kind']}, n {c['n']}, world {c['world']}, "
                  f"batch {c['batch']}, loader {c['loader']} (shuffle {c['shuffle']}), classes {c.get('classes')}, "
                  f"top_k {c.get('top_k')}\n  reproduce: {reproduce(c['seed'])}")
            return False
    return True


def main():
    return seed_loop.drive("metrics", __doc__, check, 30,
                           lambda t: f"{t['values']} values against torchmetrics {tm.__version__}")


if __name__ == "__main__":
    sys.exit(main())
