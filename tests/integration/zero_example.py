"""The main job with --zero 1 (the optimizer state sharded across the ranks, parallel::ShardedDataParallel):

- on 2 ranks it ends with the weights of the unsharded run on 2 ranks, bit for bit (params_sha256): the update is
  elementwise on the same averaged gradients; its final.pt loads with torch.load and equals the unsharded one;
- resumed from its checkpoint (the consolidated optimizer state) for a second epoch it ends as the unsharded run
  resumed the same way (not as an uninterrupted 2-epoch run: a checkpoint holds rank 0's random generator, which
  every rank resumes with, so rank 1's dropout masks differ from an uninterrupted run's, sharded or not);
- summary.json reports this rank's optimizer state bytes and their sum over the ranks; at 1, 2 and 3 ranks the
  sum is the whole state (the same at every world size) and rank 0 holds total / N within the largest state of one
  parameter (the greedy partition's bound). Unsharded, every rank holds the whole state.

Usage: zero_example.py FASHION_MNIST_BINARY RUN_DIR
"""
import json
import os
import shutil
import subprocess
import sys

binary, run_dir = sys.argv[1], sys.argv[2]
shutil.rmtree(run_dir, ignore_errors=True)


def run(name, extra):
    d = os.path.join(run_dir, name)
    cmd = [binary, "--epochs", "1", "--limit-train-batches", "12", "--limit-val-batches", "2", "--run-dir", d,
           "--progress-tty", "0", "--train-eval-size", "0"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return json.load(open(os.path.join(d, "summary.json")))


dp2 = run("dp2", ["--nproc", "2"])
zero = {n: run(f"zero{n}", (["--nproc", str(n)] if n > 1 else []) + ["--zero", "1"]) for n in (1, 2, 3)}

assert zero[2]["policies"]["parallel"]["name"] == "parallel::ShardedDataParallel", zero[2]["policies"]["parallel"]
assert dp2["policies"]["parallel"]["name"] == "parallel::DataParallel", dp2["policies"]["parallel"]
assert zero[2]["params_sha256"] == dp2["params_sha256"], "--zero 1 changed the trained weights on 2 ranks"
assert zero[2]["test_loss"] == dp2["test_loss"], (zero[2]["test_loss"], dp2["test_loss"])

whole = dp2["optimizer_state_bytes"]
assert whole > 0 and dp2["optimizer_state_bytes_total"] == 2 * whole, dp2
for n, s in zero.items():
    mine, total, largest = s["optimizer_state_bytes"], s["optimizer_state_bytes_total"], s["optimizer_state_bytes_largest"]
    assert total == whole, (n, total, whole)
    assert abs(mine - total / n) <= largest, (n, mine, total, largest)
    print(f"--zero 1 on {n} rank(s): rank 0 keeps {mine} of {total} optimizer state bytes "
          f"({mine / total:.3f}; the largest parameter's state is {largest})")
print(f"--nproc 2 --zero 1 ends with the weights of --nproc 2 ({dp2['params_sha256'][:16]}...)")

import torch  # noqa: E402

a = torch.load(os.path.join(run_dir, "zero2", "checkpoints", "final.pt"))
b = torch.load(os.path.join(run_dir, "dp2", "checkpoints", "final.pt"))
assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a), "final.pt differs from the unsharded run's"

dp_resumed = run("dp2", ["--nproc", "2", "--epochs", "2", "--resume"])
resumed = run("zero2", ["--nproc", "2", "--zero", "1", "--epochs", "2", "--resume"])
assert resumed["resumed_from"] and dp_resumed["resumed_from"], (resumed["resumed_from"], dp_resumed["resumed_from"])
assert resumed["params_sha256"] == dp_resumed["params_sha256"], "the resumed --zero 1 run differs from the resumed --nproc 2"
print(f"--zero 1 resumed for a second epoch ends as --nproc 2 resumed ({resumed['params_sha256'][:16]}...); "
      f"final.pt loads with torch.load")
