#!/usr/bin/env python3
"""The main job with --tensorboard --profile, read by the real tools: TensorBoard's EventAccumulator reads the
event files (the loss every --tensorboard-every steps, equal to the steps.csv the run wrote; one validation point
per epoch; the settings text), and the Kineto trace is checked by check_profiler.py (aten:: operators with
shapes, memory events, our phases inside ProfilerStep#4..#6). The run is done in two: one epoch, then --resume
into the same run directory for the second: TensorBoard must show one continuous curve (every step once).
Run it with the python of the TensorBoard venv (tests/integration/py_venv.sh).
Usage: observe_example.py FASHION_MNIST_EXE RUN_DIR"""
import csv, json, math, os, shutil, subprocess, sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea_mod

exe, run_dir = sys.argv[1], sys.argv[2]
shutil.rmtree(run_dir, ignore_errors=True)
every = 5
common = [exe, "--limit-train-batches", "20", "--limit-val-batches", "3", "--eval-batch-size", "200", "--run-dir", run_dir, "--progress-tty", "0",
          "--threads", "2", "--tensorboard", "--tensorboard-every", str(every), "--save", "last"]
profile = ["--profile", "--profile-wait", "2", "--profile-warmup", "1", "--profile-active", "3"]
for cmd in (common + ["--epochs", "1"] + profile, common + ["--epochs", "2", "--resume"]):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(p.stdout[-3000:]); print(p.stderr[-3000:], file=sys.stderr)
    assert p.returncode == 0, f"exit code {p.returncode}"
    if "--resume" in cmd:
        assert "resumed from" in p.stdout + p.stderr, "the second run did not resume"
        key_table = p0_stdout
    p0_stdout = p.stdout
errors = []

ea = ea_mod.EventAccumulator(os.path.join(run_dir, "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
ea.Reload()
tags = ea.Tags()
with open(os.path.join(run_dir, "logs", "steps.csv")) as f:
    logged = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(f)}
loss = ea.Scalars("train/loss") if "train/loss" in tags["scalars"] else []
want_steps = list(range(every, 41, every))
if [e.step for e in loss] != want_steps:
    errors.append(f"train/loss steps {[e.step for e in loss]}, expected {want_steps}")
for e in loss:
    want = float(np.float32(logged.get(e.step, math.nan)))
    if not math.isclose(e.value, want, rel_tol=1e-5):  # steps.csv prints 6 significant digits
        errors.append(f"train/loss step {e.step}: {e.value} in TensorBoard, {want} in steps.csv")
for tag in ("train/lr/group0", "train/samples_per_s", "train/data_wait_fraction"):
    if tag not in tags["scalars"]:
        errors.append(f"scalar tag {tag} missing (have {sorted(tags['scalars'])})")
summary = json.load(open(os.path.join(run_dir, "summary.json")))
val = ea.Scalars("val/accuracy") if "val/accuracy" in tags["scalars"] else []
if [e.step for e in val] != [20, 40]:
    errors.append(f"val/accuracy at steps {[e.step for e in val]}, expected [20, 40] (one point per epoch)")
elif val[-1].value != float(np.float32(summary["val_accuracy"])):
    errors.append(f"val/accuracy {val[-1].value} at the end, summary.json's val_accuracy {summary['val_accuracy']}")
if "settings" not in str(tags.get("tensors", [])):
    errors.append(f"no settings text (tensor tags {tags.get('tensors')})")

trace = os.path.join(run_dir, "profile", "trace.json")
here = os.path.dirname(os.path.abspath(__file__))
if subprocess.run([sys.executable, os.path.join(here, "check_profiler.py"), "trace", trace, "4", "6"]).returncode:
    errors.append("check_profiler.py trace failed (above)")
if "Self CPU" not in key_table and "self" not in open(os.path.join(run_dir, "profile", "key_averages.txt")).read().lower():
    errors.append("no key-averages table")

for e in errors:
    print("MISMATCH:", e)
sys.exit(1 if errors else 0)
