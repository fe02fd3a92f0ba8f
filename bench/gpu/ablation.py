#!/usr/bin/env python3
"""The ablation of the main job's GPU recipe (issue 55): the base recipe, then each technique added or taken away,
every row on the same seeds, within a time budget; a table of seed, technique, validation and test accuracy and
training seconds, and each row's mean against the base.

    python3 bench/gpu/ablation.py --exe FASHION_MNIST --out DIR [--rows FILE] [--seeds 0,1] [--budget SECONDS]
    python3 bench/gpu/ablation.py --exe FASHION_MNIST --out DIR --device cpu   # every row, tiny, on the CPU

FILE (default bench/gpu/ablation.txt): `LABEL | base: FLAGS` first, then `LABEL | add: FLAGS | drop: FLAGS` (drop
names flags of the base, each removed with its value). Rows run in file order, all seeds of a row together, and no
row starts once the budget is spent (the rows left are listed). The test accuracy is reported, never used to choose:
the ablation measures, goal.py chooses on validation. --device cpu replaces the CUDA-only flags (graph, bf16,
channels-last, cuDNN, data on the device) and shrinks every run to one epoch of a few batches: the rows' flags and
the report run somewhere without a GPU (CTest bench.gpu.ablation_smoke).
Writes DIR/ablation.json and DIR/ablation.md (appended to gpu-suite's summary).
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from goal import num, run  # noqa: E402  (the same main-job runner and summary reader as the goal)

CUDA_ONLY = {"--cuda-graph": 0, "--data-on-device": 0, "--channels-last": 0, "--cudnn-benchmark": 0, "--precision": 1}
CPU_TINY = ["--device", "cpu", "--threads", "1", "--epochs", "1", "--limit-train-batches", "3", "--limit-val-batches",
            "1", "--eval-batch-size", "100", "--whiten-images", "200"]


def drop(flags, names):
    """flags without each flag of names and its value (the next token, unless it is a flag)."""
    out, i = [], 0
    while i < len(flags):
        if flags[i] in names:
            i += 1
            if i < len(flags) and not flags[i].startswith("--"):
                i += 1
            continue
        out.append(flags[i])
        i += 1
    return out


def set_flags(flags, extra):
    """flags with extra's flags added; a flag already there takes extra's value (the last one given wins in CLI11
    too, but one occurrence keeps the table's command lines readable)."""
    names = [t for t in extra if t.startswith("--")]
    return drop(flags, set(names)) + extra


def parse_rows(path):
    rows, base = [], None
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        label, *parts = [p.strip() for p in line.split("|")]
        spec = {}
        for p in parts:
            key, _, val = p.partition(":")
            if key.strip() not in ("base", "add", "drop"):
                raise SystemExit(f"ablation: {path}: '{p}' in row '{label}'; expected base:, add: or drop:")
            spec[key.strip()] = shlex.split(val)
        if base is None:
            if "base" not in spec:
                raise SystemExit(f"ablation: {path}: the first row '{label}' has no base:; give the base recipe first")
            base = spec["base"]
            rows.append((label, list(base)))
            continue
        flags = drop(base, set(spec.get("drop", [])))
        missing = [f for f in spec.get("drop", []) if f.startswith("--") and f not in base]
        if missing:
            raise SystemExit(f"ablation: {path}: row '{label}' drops {missing}, which the base lacks; drop flags of the base")
        rows.append((label, set_flags(flags, spec.get("add", []))))
    return rows


def for_cpu(flags):
    f = drop(flags, {k for k in CUDA_ONLY} | {"--device", "--epochs", "--batch-size"})
    return set_flags(f, CPU_TINY + ["--batch-size", "64"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exe", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default=os.path.join(HERE, "ablation.txt"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--budget", type=float, default=150, help="seconds of wall time; no row starts after it")
    ap.add_argument("--run-timeout", type=float, default=60)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = parse_rows(a.rows)
    if a.device == "cpu":
        rows = [(label, for_cpu(flags)) for label, flags in rows]
    seeds = [int(s) for s in a.seeds.split(",") if s]
    t0 = time.time()
    results, not_run = [], []
    for i, (label, flags) in enumerate(rows):
        if time.time() - t0 > a.budget:
            not_run = [r[0] for r in rows[i:]]
            print(f"ablation: budget spent; {len(not_run)} rows not run: {', '.join(not_run)}", flush=True)
            break
        for s in seeds:
            r = run(a.exe, a.out, f"row{i}", flags, s, a.run_timeout)
            r["label"] = label
            results.append(r)
    json.dump({"seeds": seeds, "rows": results, "not_run": not_run}, open(os.path.join(a.out, "ablation.json"), "w"),
              indent=1)

    md = ["### Ablation (bench/gpu/ablation.py; seeds " + a.seeds + ")", "",
          "| seed | technique | val | test | training s | samples/s | epochs |", "|---|---|---|---|---|---|---|"]
    for r in results:
        md.append(f"| {r['seed']} | {r['label']} | {num(r['val'], '.4f')} | {num(r['test'], '.4f')} | "
                  f"{num(r['train_seconds'], '.2f')} | {num(r['sps'], '.0f')} | {r['epochs'] if r['epochs'] is not None else 'n/a'}"
                  + (f" (exit {r['rc']})" if r["rc"] != 0 else "") + " |")
    by = {}
    for r in results:
        by.setdefault(r["label"], []).append(r)
    base_label = rows[0][0]

    def mean(rs, k):
        v = [r[k] for r in rs if r[k] is not None]
        return statistics.mean(v) if v and len(v) == len(rs) else None

    md += ["", "| technique | mean val | mean test | test vs base | mean training s | flags |", "|---|---|---|---|---|---|"]
    bt = mean(by.get(base_label, []), "test")
    for label, rs in by.items():
        t = mean(rs, "test")
        d = f"{t - bt:+.4f}" if t is not None and bt is not None else "n/a"
        md.append(f"| {label} | {num(mean(rs, 'val'), '.4f')} | {num(t, '.4f')} | {d} | "
                  f"{num(mean(rs, 'train_seconds'), '.2f')} | `{rs[0]['flags']}` |")
    if not_run:
        md += ["", "Not run (budget): " + ", ".join(not_run)]
    failed = [r for r in results if r["rc"] != 0 or r["val"] is None]
    md += ["", f"ablation: {len(results)} runs, {len(failed)} failed, {time.time() - t0:.0f} s"]
    open(os.path.join(a.out, "ablation.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
