#!/usr/bin/env python3
"""Compile cost of including policytrain, against torch/torch.h alone, measured in one run.

Compiles small translation units with the project's flags (C++20, -O2, LibTorch's distributed defines), each
`--reps` times in interleaved order, and prints the median wall time of each and its ratio to torch/torch.h:

  torch            #include <torch/torch.h>
  umbrella         + #include <policytrain/policytrain.hpp>   (the Trainer, the cheap policies and callbacks)
  all              + #include <policytrain/all.hpp>           (+ checkpoint.hpp, observe.hpp, datasets.hpp)
  all+parallel     + #include <policytrain/parallel.hpp>      (data parallelism: c10d, Gloo, NCCL, the launcher)

once as a full compile (-O2 -c) and once as the front end alone (-fsyntax-only). Usage:
  bench/compile_cost.py [--reps N] [--cxx g++] [--max-ratio R]
--max-ratio makes it exit 1 when umbrella/torch (full compile) exceeds R.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

root = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
ap.add_argument("--max-ratio", type=float, default=None)
a = ap.parse_args()

import torch  # noqa: E402  (only for its include directory)

tdir = pathlib.Path(torch.__file__).parent
flags = ["-std=c++20", "-DFMT_HEADER_ONLY=1", "-DUSE_C10D_GLOO", "-DUSE_DISTRIBUTED", "-DUSE_RPC", "-DUSE_TENSORPIPE",
         f"-I{root / 'include'}", "-isystem", str(tdir / "include"), "-isystem",
         str(tdir / "include" / "torch" / "csrc" / "api" / "include")]
units = {
    "torch": "#include <torch/torch.h>\n",
    "umbrella": "#include <torch/torch.h>\n#include <policytrain/policytrain.hpp>\n",
    "all": "#include <torch/torch.h>\n#include <policytrain/all.hpp>\n",
    "all+parallel": "#include <torch/torch.h>\n#include <policytrain/all.hpp>\n#include <policytrain/parallel.hpp>\n",
}
modes = {"-O2 -c": ["-O2", "-c", "-o", os.devnull], "-fsyntax-only": ["-fsyntax-only"]}
times = {(u, m): [] for u in units for m in modes}
with tempfile.TemporaryDirectory() as d:
    files = {}
    for u, text in units.items():
        f = pathlib.Path(d) / (u.replace("+", "_") + ".cpp")
        f.write_text(text + "int policytrain_compile_cost_probe() { return 0; }\n")
        files[u] = f
    for r in range(a.reps):
        order = list(units) if r % 2 == 0 else list(reversed(units))
        for m, mflags in modes.items():
            for u in order:
                t0 = time.perf_counter()
                subprocess.run([a.cxx, *flags, *mflags, str(files[u])], check=True)
                times[(u, m)].append(time.perf_counter() - t0)

print(f"compiler: {subprocess.run([a.cxx, '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
print(f"{'translation unit':20} {'mode':14} {'median s':>9} {'vs torch':>9}  runs")
ratio = None
for m in modes:
    base = statistics.median(times[("torch", m)])
    for u in units:
        med = statistics.median(times[(u, m)])
        print(f"{u:20} {m:14} {med:9.2f} {med / base:8.2f}x  {', '.join(f'{t:.1f}' for t in times[(u, m)])}")
        if u == "umbrella" and m == "-O2 -c":
            ratio = med / base
if a.max_ratio is not None and ratio is not None and ratio > a.max_ratio:
    print(f"compile_cost.py: policytrain.hpp costs {ratio:.2f}x torch/torch.h, above {a.max_ratio}x", file=sys.stderr)
    sys.exit(1)
