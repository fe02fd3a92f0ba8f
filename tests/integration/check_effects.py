"""Runs bench/effects.py on its tiny profile and checks what it wrote: every table of EFFECTS.md is well formed
(as many cells in each row as in its header), each technique has its table, the numbers in the tables are the
runs' own (read back from their summary.json), the GPU rows say "not measured", and the plots are PNG images.

With a fourth argument `gpu`: runs the GPU tables' logic on the CPU (`--device cuda --run-device cpu`, tiny) over
an existing EFFECTS.md and checks that only its GPU block was written, that block's five tables, that each row's
samples/s is its run's, and the plot.

Usage: check_effects.py PYTHON_WITH_MATPLOTLIB EXE OUT_DIR [gpu]
"""
import json, os, re, shutil, subprocess, sys

python, exe, out = sys.argv[1:4]
shutil.rmtree(out, ignore_errors=True)
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpu_smoke():
    os.makedirs(out)
    before = "# Effect tables\n\n## A CPU table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    with open(os.path.join(out, "EFFECTS.md"), "w") as f:
        f.write(before)
    p = subprocess.run([python, os.path.join(root, "bench", "effects.py"), "--exe", exe, "--out", out, "--device", "cuda",
                        "--run-device", "cpu", "--profile", "tiny"], capture_output=True, text=True, timeout=2400)
    print(p.stdout[-3000:]); print(p.stderr[-3000:], file=sys.stderr)
    assert p.returncode == 0, f"effects.py --device cuda exit code {p.returncode}"
    md = open(os.path.join(out, "EFFECTS.md")).read()
    assert md.startswith(before), "the CPU tables before the GPU block changed"
    block = md[md.index("<!-- effects:gpu:begin -->"):md.index("<!-- effects:gpu:end -->")]
    assert "CPU smoke run" in block and "not GPU figures" in block, "a CPU smoke run is not marked as such"
    tables = {}
    for part in block.split("\n## ")[1:]:
        title, _, body = part.partition("\n")
        rows = [l for l in body.splitlines() if l.startswith("|")]
        header = [c.strip() for c in rows[0].strip("|").split("|")]
        tables[title] = [dict(zip(header, [c.strip() for c in r.strip("|").split("|")])) for r in rows[2:]]
        assert all(len(t) == len(header) and all(t.values()) for t in tables[title]), f"{title!r} is malformed"
    for needle in ("FP32 vs TF32 vs bf16 vs fp16", "Loaders", "Batch size and accumulation",
                   "channels_last and cudnn.benchmark", "The graph step"):
        assert any(needle in t for t in tables), f"the GPU block lacks {needle!r}: {list(tables)}"
    loaders = next(t for k, t in tables.items() if "Loaders" in k)
    assert len(loaders) == 6 and any("DeviceLoader inside the CUDA graph" in r["configuration"] for r in loaders)
    names = [l.split("--run-dir ")[1].split()[0] for l in open(os.path.join(out, "effects", "commands-gpu.txt")).read().splitlines()]
    rows = [r for t in tables.values() for r in t]
    assert len(rows) == len(names), (len(rows), len(names))
    for r, run_dir in zip(rows, names):
        s = json.load(open(os.path.join(run_dir, "summary.json")))
        assert r["samples/s"] == f"{s['train_samples_per_second']:.0f}", (r, s["train_samples_per_second"])
        assert s["device"] == "cpu", s["device"]
        want = "data::DeviceLoader" if "--data-on-device" in open(os.path.join(out, "effects", "commands-gpu.txt")).read().splitlines()[names.index(run_dir)] else "data::PrefetchLoader"
        assert s["policies"]["loader"]["name"] == want, (run_dir, s["policies"]["loader"])
    with open(os.path.join(out, "effects", "gpu.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "gpu.png is not a PNG"
    print("effects GPU smoke OK:", len(tables), "tables,", len(rows), "rows")


if len(sys.argv) > 4 and sys.argv[4] == "gpu":
    gpu_smoke()
    sys.exit(0)
p = subprocess.run([python, os.path.join(root, "bench", "effects.py"), "--exe", exe, "--out", out, "--profile", "tiny"],
                   capture_output=True, text=True, timeout=1200)
print(p.stdout[-3000:]); print(p.stderr[-3000:], file=sys.stderr)
assert p.returncode == 0, f"effects.py exit code {p.returncode}"
md = open(os.path.join(out, "EFFECTS.md")).read()

# Sections and their tables.
sections = {}
for block in md.split("\n## ")[1:]:
    title, _, body = block.partition("\n")
    rows = [l for l in body.splitlines() if l.startswith("|")]
    assert len(rows) >= 3, f"section {title!r} has no table"
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert set(rows[1].replace("|", "")) == {"-"}, f"{title!r}: no separator line under the header"
    table = []
    for r in rows[2:]:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert len(cells) == len(header), f"{title!r}: row {r!r} has {len(cells)} cells, the header {len(header)}"
        assert all(cells), f"{title!r}: empty cell in {r!r}"
        table.append(dict(zip(header, cells)))
    sections[title] = table
for needle in ("FP32 vs AMP", "Loader workers and pinned memory", "accumulation", "1, 2, 4 devices",
               "constant vs linear vs cosine", "Early stopping and EMA", "Checkpoint kinds"):
    assert any(needle in t for t in sections), f"EFFECTS.md lacks the table {needle!r}: {list(sections)}"
assert "Machine:" in md and "Date:" in md and "Command:" in md, "EFFECTS.md lacks the machine, date or command"

# The numbers are the runs' own.
runs = os.path.join(out, "effects", "runs")
def summary(name):
    return json.load(open(os.path.join(runs, name, "summary.json")))
sched = next(t for k, t in sections.items() if "cosine" in k)
for row in sched:
    s = summary(f"schedule-{row['schedule']}-s0")
    assert row["test accuracy"] == f"{s['test_accuracy']:.4f}", (row, s["test_accuracy"])
    assert s["policies"]["schedule"]["kind"] == row["schedule"], s["policies"]["schedule"]
stop = next(t for k, t in sections.items() if "Early stopping" in k)
for i, row in enumerate(stop):
    s = summary(f"stopping-{i}-s0")
    assert row["train accuracy"] == f"{s['train_accuracy']:.4f}", (row, s["train_accuracy"])
    assert row["epochs run"] == str(s["epochs_run"]), (row, s["epochs_run"])
    assert s["policies"]["ema"]["enabled"] == ("EMA" in row["configuration"] and "no EMA" not in row["configuration"])
ckpt = next(t for k, t in sections.items() if "Checkpoint" in k)
full = float(ckpt[0]["size"].split()[0]); half = float(ckpt[2]["size"].split()[0])
assert half < 0.6 * full, f"half weights + bf16 moments ({half} MiB) not about half of full ({full} MiB)"
gpu_rows = [r for t in sections.values() for r in t if re.search(r"CUDA|GPU", " ".join(r.values()))]
assert gpu_rows and all("not measured" in " ".join(r.values()) for r in gpu_rows), "a GPU row claims a figure"

# The plots.
for png in ("schedules.png", "stopping.png"):
    path = os.path.join(out, "effects", png)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert os.path.getsize(path) > 10_000, f"{path} is nearly empty"
print("effects OK:", len(sections), "tables")
