#!/usr/bin/env python3
"""Compile cost of including policytrain, against torch/torch.h alone, measured in one run.

Compiles small translation units with the project's flags (C++20, -O2, LibTorch's distributed defines), each
`--reps` times in interleaved order, and prints the median wall time of each and its ratio to torch/torch.h:

  torch            #include <torch/torch.h>
  umbrella         + #include <policytrain/policytrain.hpp>   (the Trainer, the cheap policies and callbacks),
                   header-only (policytrain::header_only)
  umbrella-separate  the same with separate compilation (-DPOLICYTRAIN_SEPARATE_COMPILATION, what CMake's
                   policytrain::policytrain does)
  all              + #include <policytrain/all.hpp>           (+ checkpoint.hpp, observe.hpp, datasets.hpp)
  all+parallel     + #include <policytrain/parallel.hpp>      (data parallelism: c10d, Gloo, NCCL, the launcher)
  plain            bench/compile/plain.cpp: a user's program (bf16 autocast, accumulation, warmup + cosine, EMA,
                   early stopping, clipping, checkpoints with resume, a CSV log) written in plain LibTorch
  composition      bench/compile/composition.cpp: the same program as a Trainer of ten policies, header-only
                   (CMake's policytrain::header_only)
  composition-separate  the same file with separate compilation (-DPOLICYTRAIN_SEPARATE_COMPILATION, what CMake's
                   policytrain::policytrain does): the heavy non-template code is only declared there
  library          <policytrain/src.hpp>: the one translation unit that defines that code (compiled once per
                   program, like LibTorch's own libraries; not part of any ratio)

once as a full compile (-O2 -c) and once as the front end alone (-fsyntax-only). Each time is the compiler's CPU
time (user + system, of the compiler process and its children), which a busy machine inflates far less than the
wall time; the wall times are printed too. Usage:
  bench/compile_cost.py [--reps N] [--cxx g++] [--units a,b,...] [--modes full,syntax] [--root DIR] [--max-ratio R]
                        [--max-composition-ratio R] [--max-header-only-ratio R]
--root measures another checkout's headers with this script (a before/after comparison); --modes full measures only
the full compile.
--max-ratio makes it exit 1 when umbrella-separate/torch (full compile) exceeds R (umbrella/torch when
umbrella-separate is not measured); --max-composition-ratio when
composition-separate/plain does (composition/plain when composition-separate is not measured);
--max-header-only-ratio when composition/plain does (the header-only composition). Every ratio is of two medians
measured in the same run, so a loaded machine slows both sides of it.
"""
import argparse
import os
import resource
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
ap.add_argument("--max-ratio", type=float, default=None)
ap.add_argument("--max-composition-ratio", type=float, default=None)
ap.add_argument("--max-header-only-ratio", type=float, default=None)
ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
ap.add_argument("--modes", default="full,syntax")
ap.add_argument("--units", default="torch,umbrella,umbrella-separate,all,all+parallel,plain,composition,"
                                   "composition-separate,library")
a = ap.parse_args()
root = pathlib.Path(a.root).resolve()

import torch  # noqa: E402  (only for its include directory)

tdir = pathlib.Path(torch.__file__).parent
flags = ["-std=c++20", "-DFMT_HEADER_ONLY=1", "-DUSE_C10D_GLOO", "-DUSE_DISTRIBUTED", "-DUSE_RPC", "-DUSE_TENSORPIPE",
         f"-I{root / 'include'}", "-isystem", str(tdir / "include"), "-isystem",
         str(tdir / "include" / "torch" / "csrc" / "api" / "include")]
units = {
    "torch": "#include <torch/torch.h>\n",
    "umbrella": "#include <torch/torch.h>\n#include <policytrain/policytrain.hpp>\n",
    "umbrella-separate": "#include <torch/torch.h>\n#include <policytrain/policytrain.hpp>\n",
    "all": "#include <torch/torch.h>\n#include <policytrain/all.hpp>\n",
    "all+parallel": "#include <torch/torch.h>\n#include <policytrain/all.hpp>\n#include <policytrain/parallel.hpp>\n",
    "plain": (root / "bench" / "compile" / "plain.cpp").read_text(),
    "composition": (root / "bench" / "compile" / "composition.cpp").read_text(),
    "composition-separate": (root / "bench" / "compile" / "composition.cpp").read_text(),
    "library": "#include <policytrain/src.hpp>\n",
}
# Flags of one unit beyond the common ones.
unit_flags = {"composition-separate": ["-DPOLICYTRAIN_SEPARATE_COMPILATION"],
              "umbrella-separate": ["-DPOLICYTRAIN_SEPARATE_COMPILATION"]}
wanted = a.units.split(",")
unknown = [u for u in wanted if u not in units]
if unknown:
    sys.exit(f"compile_cost.py: unknown unit(s) {', '.join(unknown)}; expected some of {', '.join(units)}")
if "torch" not in wanted:
    wanted.insert(0, "torch")
units = {u: units[u] for u in wanted}
flags.append(f"-I{root / 'bench' / 'compile'}")
modes = {"-O2 -c": ["-O2", "-c", "-o", os.devnull], "-fsyntax-only": ["-fsyntax-only"]}
mode_names = {"full": "-O2 -c", "syntax": "-fsyntax-only"}
if any(m not in mode_names for m in a.modes.split(",")):
    sys.exit(f"compile_cost.py: --modes {a.modes}; expected full, syntax or both")
modes = {mode_names[m]: modes[mode_names[m]] for m in a.modes.split(",")}
times = {(u, m): [] for u in units for m in modes}
walls = {(u, m): [] for u in units for m in modes}
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
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run([a.cxx, *flags, *unit_flags.get(u, []), *mflags, str(files[u])], check=True)
                walls[(u, m)].append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                times[(u, m)].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)

print(f"compiler: {subprocess.run([a.cxx, '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
print(f"{'translation unit':20} {'mode':14} {'CPU s':>7} {'vs torch':>9} {'vs plain':>9} {'wall s':>7}  CPU runs")
umbrella_ratios = {}
comp_ratios = {}
for m in modes:
    base = statistics.median(times[("torch", m)])
    plain = statistics.median(times[("plain", m)]) if ("plain", m) in times else None
    for u in units:
        med = statistics.median(times[(u, m)])
        vs_plain = f"{med / plain:8.2f}x" if plain and u.startswith(("plain", "composition")) else f"{'':9}"
        print(f"{u:20} {m:14} {med:7.2f} {med / base:8.2f}x {vs_plain} {statistics.median(walls[(u, m)]):7.2f}  "
              f"{', '.join(f'{t:.1f}' for t in times[(u, m)])}")
        if u.startswith("umbrella") and m == "-O2 -c":
            umbrella_ratios[u] = med / base
        if u.startswith("composition") and m == "-O2 -c" and plain:
            comp_ratios[u] = med / plain
status = 0
umbrella_unit = "umbrella-separate" if "umbrella-separate" in umbrella_ratios else "umbrella"
ratio = umbrella_ratios.get(umbrella_unit)
comp_unit = "composition-separate" if "composition-separate" in comp_ratios else "composition"
comp_ratio = comp_ratios.get(comp_unit)
if a.max_ratio is not None and ratio is not None and ratio > a.max_ratio:
    print(f"compile_cost.py: policytrain.hpp ({umbrella_unit}) costs {ratio:.2f}x torch/torch.h, above {a.max_ratio}x",
          file=sys.stderr)
    status = 1
if a.max_composition_ratio is not None and comp_ratio is not None and comp_ratio > a.max_composition_ratio:
    print(f"compile_cost.py: the composition ({comp_unit}) costs {comp_ratio:.2f}x the plain LibTorch program, above "
          f"{a.max_composition_ratio}x", file=sys.stderr)
    status = 1
header_only = comp_ratios.get("composition")
if a.max_header_only_ratio is not None and header_only is not None and header_only > a.max_header_only_ratio:
    print(f"compile_cost.py: the header-only composition costs {header_only:.2f}x the plain LibTorch program, above "
          f"{a.max_header_only_ratio}x", file=sys.stderr)
    status = 1
sys.exit(status)
