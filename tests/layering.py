#!/usr/bin/env python3
"""core/ is the contract between the Trainer and its policies (hooks, context, state, metrics): no header under
include/policytrain/core/ may include a policytrain header outside core/ (a category's policy, a callback, the
Trainer), except the leaf infrastructure below core/ too: detail/config.hpp (the separate-compilation macros) and
detail/format.hpp (message formatting), which themselves include no policytrain header but each other.
Two more arrows: nothing below callbacks/ includes callbacks/ (or declares into policytrain::callbacks: a category
folder, core/, data/, io/, detail/ ... reach a callback only through a hook of the context), and the pieces of
checkpoint/ know no Trainer context (no `Ctx`/`ctx` in code: only checkpoint/disk.hpp, the policy, and
checkpoint/disk_save.hpp, its save steps, do).
The pieces of parallel/ (process group, Replica, Reducer and ZeRO-2 syncs, optimizer partition, rank state, metrics
reduction, the core both data-parallel policies compose) know no Trainer: no `Ctx` type, no include of the Trainer,
its context or a callback; only the policies (data_parallel.hpp, sharded_data_parallel.hpp, single.hpp) take a
context.
Usage: layering.py <project root>. Exits 1 naming every offending include."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
core = root / "include" / "policytrain" / "core"
leaves = {"detail/config.hpp", "detail/format.hpp"}
bad = []
for leaf in sorted(leaves):
    f = root / "include" / "policytrain" / leaf
    for n, line in enumerate(f.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*[<"]policytrain/([^>"]+)[>"]', line)
        if m and m.group(1) not in leaves:
            bad.append(f"{f.relative_to(root)}:{n}: a leaf below core/ includes policytrain/{m.group(1)}")
headers = sorted(core.glob("*.hpp"))
for h in headers:
    for n, line in enumerate(h.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*[<"]policytrain/([^>"]+)[>"]', line)
        if m and not m.group(1).startswith("core/") and m.group(1) not in leaves:
            bad.append(f"{h.relative_to(root)}:{n}: includes policytrain/{m.group(1)}")
parallel = root / "include" / "policytrain" / "parallel"
policies = {"data_parallel.hpp", "sharded_data_parallel.hpp", "single.hpp"}
par_pieces = sorted(h for h in parallel.glob("*.hpp") if h.name not in policies)
for h in par_pieces:
    for n, line in enumerate(h.read_text().splitlines(), 1):
        code = line.split("//")[0]
        if re.search(r"\bCtx\b", code):
            bad.append(f"{h.relative_to(root)}:{n}: a piece of parallel/ names the Trainer's context (Ctx): {line.strip()}")
        m = re.match(r'\s*#\s*include\s*[<"]policytrain/([^>"]+)[>"]', line)
        if m and (m.group(1) in ("trainer.hpp", "core/context.hpp", "core/hooks.hpp") or m.group(1).startswith("callbacks/")):
            bad.append(f"{h.relative_to(root)}:{n}: a piece of parallel/ includes policytrain/{m.group(1)}")
if not headers:
    print(f"layering.py: no headers under {core}", file=sys.stderr)
    sys.exit(1)
pt = root / "include" / "policytrain"
for h in sorted(pt.glob("*/**/*.hpp")):
    rel = h.relative_to(pt).as_posix()
    if rel.startswith("callbacks/"):
        continue
    for n, line in enumerate(h.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*[<"]policytrain/(callbacks/[^>"]+)[>"]', line)
        if m:
            bad.append(f"{h.relative_to(root)}:{n}: below callbacks/, includes policytrain/{m.group(1)}")
        if re.search(r"namespace\s+(policytrain::)?callbacks\b", line.split("//")[0]):
            bad.append(f"{h.relative_to(root)}:{n}: below callbacks/, declares into namespace callbacks")
# disk_save.hpp: the policy's own save steps that need its context (Disk's friend), split from disk.hpp for length.
pieces = [h for h in sorted((pt / "checkpoint").glob("*.hpp")) if h.name not in ("disk.hpp", "disk_save.hpp")]
for h in pieces:
    for n, line in enumerate(h.read_text().splitlines(), 1):
        if re.search(r"\b(Ctx|ctx)\b", line.split("//")[0]):
            bad.append(f"{h.relative_to(root)}:{n}: a piece of checkpoint/ names a Trainer context (only disk.hpp and disk_save.hpp may)")
if bad:
    print("layering: core/ includes only core/ (the contract the policies build on); nothing below callbacks/ "
          "includes callbacks/; the pieces of checkpoint/ and parallel/ know no Trainer context. Broken:", file=sys.stderr)
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"layering.py: {len(headers)} core headers include only core/ and {len(leaves)} leaf headers; nothing below "
      f"callbacks/ includes it; {len(pieces)} pieces of checkpoint/ and {len(par_pieces)} of parallel/ know no context")
