#!/usr/bin/env python3
"""Runs bm_overhead (C++) and bench/python/overhead.py (Python eager) in alternating rounds in one job, and prints
the median epoch time and steps/s of every variant with its ratio to Python's AdamW loop.

    bench/python/overhead_vs_python.py build/bench/bm_overhead [rounds=3] [repetitions per round=5]

Rounds alternate C++ and Python so that a change of load on a shared machine hits both sides; only the ratios of
one run mean anything. Each round of bm_overhead uses Google Benchmark's random interleaving of its variants.
"""
import json
import os
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
binary = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
env = dict(os.environ, OMP_NUM_THREADS="1")
times: dict[str, list[float]] = {}
for r in range(rounds):
    out = subprocess.run([binary, f"--benchmark_repetitions={reps}", "--benchmark_enable_random_interleaving=true",
                          "--benchmark_format=json", "--benchmark_report_aggregates_only=false"],
                         check=True, capture_output=True, text=True, env=env).stdout
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        ms = b["real_time"] if b["time_unit"] == "ms" else b["real_time"] / 1e6
        times.setdefault(b["run_name"].split("/")[0], []).append(ms)
    out = subprocess.run([sys.executable, os.path.join(here, "overhead.py"), str(reps)], check=True,
                         capture_output=True, text=True, env=env).stdout
    for line in out.splitlines():
        d = json.loads(line)
        times.setdefault(d["variant"], []).extend(d["epoch_ms"])

steps = 2048 // 32
base = statistics.median(times["python_adamw"])
print(f"{'variant':32} {'median epoch ms':>16} {'steps/s':>9} {'vs Python AdamW':>16}  (n)")
for name, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
    med = statistics.median(ts)
    print(f"{name:32} {med:16.2f} {steps / med * 1e3:9.0f} {base / med:15.2f}x  ({len(ts)})")
