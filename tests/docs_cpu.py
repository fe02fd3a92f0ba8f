#!/usr/bin/env python3
"""Checks that every CPU figure in README.md and docs/*.md names the CPU it comes from.

Machines of this kind differ by far more than noise (bf16 autocast is 4-6x slower than fp32 on an AVX2-only CPU and
1.5x faster on one with AVX512-BF16 and AMX), so a time or a throughput without its CPU misleads. Two rules:
  * A paragraph that quotes a time or a throughput (samples/s, minutes, seconds of a run, a speed ratio) and speaks
    of a CPU or of cores names the machine (AMD EPYC, Intel Xeon, or a GPU for GPU figures). bench/RESULTS.md and
    bench/EFFECTS.md name the machine of each section and are not checked paragraph by paragraph.
  * Nothing says this project's AMD EPYC has AVX512-BF16 or AMX: it has AVX2 only (lscpu; LibTorch reports AVX2).
Exits 1 naming each file, line and paragraph.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
figure = re.compile(r"samples/s|\b\d[\d.,]*\s*(minutes|min)\b|\b\d[\d.]*\s*s (each|of|wall|to|for|on)\b|"
                    r"\b\d[\d.]*x (fp32|faster|slower|the|plain)\b")
cpu = re.compile(r"\bCPU\b|\bcores?\b")
machine = re.compile(r"EPYC|Xeon|H100|H200|\bGPU\b")
wrong = re.compile(r"EPYC[^.]{0,60}(with|has) (AVX512|AMX)|(AVX512-BF16|AMX)[^.]{0,40}\(the project's")
problems = []
for f in files:
    text = f.read_text()
    line = 1
    for para in re.split(r"(\n\s*\n)", text):
        if not para.strip():
            line += para.count("\n")
            continue
        if "```" not in para and figure.search(para) and cpu.search(para) and not machine.search(para):
            problems.append(f"{f.relative_to(root)}:{line}: a CPU figure without its CPU: {para.strip()[:150]!r}")
        if m := wrong.search(para):
            problems.append(f"{f.relative_to(root)}:{line}: says the EPYC has AVX512-BF16 or AMX: {m.group(0)!r}")
        line += para.count("\n")
for p in problems:
    print(p)
print(f"docs_cpu: {len(problems)} problem(s) in {len(files)} files")
sys.exit(1 if problems else 0)
