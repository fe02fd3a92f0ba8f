"""A fresh run of the main job into the run directory of an older, longer run, then --resume: the older run's
checkpoints are moved to checkpoints/previous-<run id>/ (nothing lost, nothing mixed), the resume continues the
new run (its step 20, not the older run's step 60), and the logs hold the new run's steps once.
Usage: run_identity.py FASHION_MNIST_EXE WORK_DIR"""
import json, os, shutil, subprocess, sys

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
run = os.path.join(work, "run")
common = [exe, "--limit-train-batches", "20", "--limit-val-batches", "1", "--eval-batch-size", "200", "--progress-tty", "0", "--width", "8",
          "--batch-size", "32", "--threads", "1", "--save", "last,steps:5", "--run-dir", run]

def train(*args):
    p = subprocess.run(common + list(args), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stderr, json.load(open(os.path.join(run, "summary.json")))

_, older = train("--epochs", "3")  # 60 steps: step-00000005 ... step-00000060
assert older["global_steps"] == 60, older["global_steps"]
ckpt = os.path.join(run, "checkpoints")
older_files = sorted(f for f in os.listdir(ckpt) if f.endswith(".ckpt"))
err, fresh = train("--epochs", "1")  # a fresh run into the same directory: 20 steps
assert fresh["global_steps"] == 20, fresh["global_steps"]
moved = [l for l in err.splitlines() if "moved them to" in l]
assert moved, err[-2000:]
print(moved[0])
previous = [d for d in os.listdir(ckpt) if d.startswith("previous-")]
assert len(previous) == 1, os.listdir(ckpt)
assert sorted(f for f in os.listdir(os.path.join(ckpt, previous[0])) if f.endswith(".ckpt")) == older_files
assert not [f for f in os.listdir(ckpt) if f.startswith("step-") and int(f[5:13]) > 20], os.listdir(ckpt)
err, resumed = train("--epochs", "2", "--resume")
said = [l for l in err.splitlines() if "resumed from" in l]
print(said)
assert said and "step 20)" in said[0], err[-2000:]
assert resumed["global_steps"] == 40, resumed["global_steps"]
with open(os.path.join(run, "logs", "steps.csv")) as f:
    steps = [int(l.split(",")[1]) for l in f.read().splitlines()[1:]]
assert steps == list(range(1, 41)), steps
print("run identity OK: the older run set aside in", previous[0], "; the new run continued to step 40")
