#!/usr/bin/env python3
"""Compile time of policytrain's type-level operations (policy lookup by category, duplicate-category check, hook
detection over a pack of ten policies, for 60 compositions) written with our concepts and folds (concepts.cpp)
against the same written with Boost.Hana (hana.cpp), and of including <boost/hana.hpp> alone (hana_include).
Each unit is compiled --reps times (-std=c++20 -fsyntax-only, interleaved); printed: the median of the compiler's
CPU time (user + system of the child process), which a busy machine inflates far less than the wall time.
Usage: bench/compile/hana_vs_concepts/measure.py [--reps N] [--cxx g++]"""
import argparse, os, pathlib, resource, statistics, subprocess, sys, tempfile

here = pathlib.Path(__file__).resolve().parent
root = here.parent.parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
args = ap.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    include_only = pathlib.Path(tmp) / "hana_include.cpp"
    include_only.write_text("#include <boost/hana.hpp>\nint main() {}\n")
    units = {"concepts": here / "concepts.cpp", "hana": here / "hana.cpp", "hana_include": include_only}
    times = {k: [] for k in units}
    for _ in range(args.reps):
        for name, src in units.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([args.cxx, "-std=c++20", "-fsyntax-only", f"-I{root / 'include'}", f"-I{here}", str(src)],
                               capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                sys.exit(f"{name}: compile failed:\n{r.stderr}")
            times[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:14s} median {med[k]:.2f} s CPU  (runs: {', '.join(f'{t:.2f}' for t in v)})")
    print(f"hana / concepts: {med['hana'] / med['concepts']:.1f}x;  "
          f"hana minus its include: {med['hana'] - med['hana_include']:.2f} s vs concepts {med['concepts']:.2f} s")
