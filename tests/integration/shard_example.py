"""The main job with --zero 1 --shard-checkpoints (issue 41): sharded checkpoints, verified and consolidated.

- a run stopped after its first epoch and resumed from its sharded checkpoint (each rank its own shard) ends
  bit-identical (params_sha256) to the uninterrupted run with consolidated checkpoints;
- each checkpoint is a folder with manifest.json, common part and one shard per rank; `policytrain-ckpt verify`
  accepts it and refuses it (exit 1, naming the file) once a byte of a shard is flipped;
- `policytrain-ckpt consolidate` writes the single file and an export that Python's torch.load reads, equal to the
  run's final.pt (the weights the checkpoint holds, no EMA).

Usage: shard_example.py FASHION_MNIST_BINARY POLICYTRAIN_CKPT_BINARY RUN_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import torch

binary, tool, run_dir = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(run_dir, ignore_errors=True)


def run(name, extra):
    d = os.path.join(run_dir, name)
    cmd = [binary, "--epochs", "1", "--limit-train-batches", "12", "--limit-val-batches", "2", "--eval-batch-size", "200",
           "--run-dir", d, "--progress-tty", "0", "--train-eval-size", "0", "--nproc", "2", "--zero", "1",
           "--schedule", "constant"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return json.load(open(os.path.join(d, "summary.json")))


whole = run("whole", ["--epochs", "2"])
run("part", ["--shard-checkpoints"])
ckpt = os.path.join(run_dir, "part", "checkpoints", "last.ckpt")
man = json.load(open(os.path.join(ckpt, "manifest.json")))
assert man["sharded"]["world_size"] == 2 and len(man["sharded"]["shards"]) == 2, man["sharded"]
assert sorted(os.listdir(ckpt)) == sorted(["manifest.json", man["sharded"]["common"]["file"]] +
                                          [s["file"] for s in man["sharded"]["shards"]]), os.listdir(ckpt)
shutil.copytree(ckpt, os.path.join(run_dir, "epoch1.ckpt"))
final1 = torch.load(os.path.join(run_dir, "part", "checkpoints", "final.pt"))

r = subprocess.run([tool, "verify", ckpt], capture_output=True, text=True)
assert r.returncode == 0 and "every SHA-256 matches" in r.stdout, (r.returncode, r.stdout, r.stderr)
one, pt = os.path.join(run_dir, "one.ckpt"), os.path.join(run_dir, "one.pt")
r = subprocess.run([tool, "consolidate", ckpt, one, pt], capture_output=True, text=True)
assert r.returncode == 0, (r.stdout, r.stderr)
exported = torch.load(pt)
assert sorted(exported) == sorted(final1) and all(torch.equal(exported[k], final1[k]) for k in final1), \
    "the consolidated export differs from the run's final.pt"

resumed = run("part", ["--epochs", "2", "--resume", "--shard-checkpoints"])
assert resumed["resumed_from"], resumed["resumed_from"]
assert resumed["params_sha256"] == whole["params_sha256"], "the run resumed from a sharded checkpoint differs"

bad = os.path.join(run_dir, "epoch1.ckpt")
shard = os.path.join(bad, man["sharded"]["shards"][1]["file"])
with open(shard, "r+b") as f:
    f.seek(64)
    b = f.read(1)
    f.seek(64)
    f.write(bytes([b[0] ^ 1]))
r = subprocess.run([tool, "verify", bad], capture_output=True, text=True)
assert r.returncode == 1 and shard in r.stdout, (r.returncode, r.stdout, r.stderr)
print(f"--zero 1 --shard-checkpoints on 2 ranks: resumed bit-identical ({whole['params_sha256'][:16]}...), "
      f"consolidated export equals final.pt, a flipped byte refused by policytrain-ckpt verify")
