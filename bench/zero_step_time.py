#!/usr/bin/env python3
"""Step time and memory of the main job on 2 ranks: DataParallel against ZeRO-1 and ZeRO-2, measured in one run.

Runs `fashion_mnist --nproc 2 --epochs 1 --limit-train-batches B --limit-val-batches 2 --seed 0 --train-eval-size 0`
with `--zero 0`, `--zero 1` and `--zero 2` alternated, R rounds, and prints per variant the median (min-max) of rank
0's training samples/s (summary.json), its ratio to DataParallel's median, rank 0's optimizer state and gradient
bytes, and params_sha256 (the same in every run: the update is the same). A data-parallel step needs several
processes, so this is a script, not a Google Benchmark. Usage:
  bench/zero_step_time.py FASHION_MNIST_BINARY [--rounds R] [--batches B] [--out DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("binary")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--batches", type=int, default=100)
ap.add_argument("--out", default=None)
a = ap.parse_args()
out = a.out or tempfile.mkdtemp(prefix="zero-steps-")
runs = {0: [], 1: [], 2: []}
for r in range(a.rounds):
    for z in (0, 1, 2):
        d = os.path.join(out, f"z{z}-{r}")
        cmd = [a.binary, "--nproc", "2", "--zero", str(z), "--epochs", "1", "--limit-train-batches", str(a.batches),
               "--limit-val-batches", "2", "--seed", "0", "--progress-tty", "0", "--train-eval-size", "0",
               "--run-dir", d]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
        runs[z].append(json.load(open(os.path.join(d, "summary.json"))))
base = statistics.median(s["train_samples_per_second"] for s in runs[0])
print(f"| run | samples/s per process, median of {a.rounds} (min-max) | vs DataParallel | optimizer state bytes, rank 0 "
      "| gradient bytes, rank 0 | params_sha256 |")
print("|---|---|---|---|---|---|")
names = {0: "`--nproc 2` (DataParallel)", 1: "`--nproc 2 --zero 1`", 2: "`--nproc 2 --zero 2`"}
for z, ss in runs.items():
    v = [s["train_samples_per_second"] for s in ss]
    shas = {s["params_sha256"][:12] for s in ss}
    print(f"| {names[z]} | {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f}) | {statistics.median(v) / base:.2f}x | "
          f"{ss[0]['optimizer_state_bytes']:,} | {ss[0]['gradient_bytes']:,} | {', '.join(sorted(shas))}... |")
