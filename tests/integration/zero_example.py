"""The main job with --zero 1 (the optimizer state sharded across the ranks) and --zero 2 (the gradients too),
parallel::ShardedDataParallel:

- on 2 ranks both end with the weights of the unsharded run on 2 ranks, bit for bit (params_sha256): the update is
  elementwise on the same averaged gradients (ZeRO-2's reduce-scatter adds the same two terms as the all-reduce);
  their final.pt loads with torch.load and equals the unsharded one;
- a run stopped after its first epoch and resumed from its checkpoint (the consolidated optimizer state, and every
  rank's own random generator state) ends bit-identical to the uninterrupted run, unsharded, --zero 1 and --zero 2
  (constant lr, so that the first run's schedule is the uninterrupted run's);
- summary.json reports this rank's optimizer state bytes and their sum over the ranks; at 1, 2 and 3 ranks the
  sum is the whole state (the same at every world size) and rank 0 holds total / N within the largest state of one
  parameter (the greedy partition's bound). Unsharded, every rank holds the whole state. With --zero 2 rank 0 keeps
  gradient_bytes = the model's gradient bytes / N within the largest parameter; with --zero 1 the whole.

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
    cmd = [binary, "--epochs", "1", "--limit-train-batches", "12", "--limit-val-batches", "2", "--eval-batch-size", "200", "--run-dir", d,
           "--progress-tty", "0", "--train-eval-size", "0"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return json.load(open(os.path.join(d, "summary.json")))


CONST = ["--schedule", "constant"]
dp2 = run("dp2", ["--nproc", "2"] + CONST)
zero = {n: run(f"zero{n}", (["--nproc", str(n)] if n > 1 else []) + ["--zero", "1"] + CONST) for n in (1, 2, 3)}
zero2 = {n: run(f"zerob{n}", ["--nproc", str(n), "--zero", "2"] + CONST) for n in (2, 3)}

assert zero[2]["policies"]["parallel"]["name"] == "parallel::ShardedDataParallel", zero[2]["policies"]["parallel"]
assert zero2[2]["policies"]["parallel"]["engine"] == "reduce_scatter (ZeRO-2)", zero2[2]["policies"]["parallel"]
assert dp2["policies"]["parallel"]["name"] == "parallel::DataParallel", dp2["policies"]["parallel"]
for name, s in (("--zero 1", zero[2]), ("--zero 2", zero2[2])):
    assert s["params_sha256"] == dp2["params_sha256"], f"{name} changed the trained weights on 2 ranks"
    assert s["test_loss"] == dp2["test_loss"], (name, s["test_loss"], dp2["test_loss"])

whole = dp2["optimizer_state_bytes"]
assert whole > 0 and dp2["optimizer_state_bytes_total"] == 2 * whole, dp2
for n, s in list(zero.items()) + [(n + 10, s) for n, s in zero2.items()]:
    k = n % 10
    mine, total, largest = s["optimizer_state_bytes"], s["optimizer_state_bytes_total"], s["optimizer_state_bytes_largest"]
    assert total == whole, (n, total, whole)
    assert abs(mine - total / k) <= largest, (n, mine, total, largest)
    print(f"--zero {1 if n < 10 else 2} on {k} rank(s): rank 0 keeps {mine} of {total} optimizer state bytes "
          f"({mine / total:.3f}; the largest parameter's state is {largest})")
grads = dp2["gradient_bytes"]  # unsharded: every parameter's gradient (AdamW's state is twice that)
assert grads * 2 == whole, (grads, whole)
assert zero[2]["gradient_bytes"] == grads, zero[2]["gradient_bytes"]
for n, s in zero2.items():
    g = s["gradient_bytes"]
    assert abs(g - grads / n) <= s["optimizer_state_bytes_largest"] / 2, (n, g, grads)
    assert s["policies"]["parallel"]["reduce_scatter_calls"] > 0, s["policies"]["parallel"]
    print(f"--zero 2 on {n} ranks: rank 0 keeps {g} of {grads} gradient bytes after each backward ({g / grads:.3f})")
print(f"--nproc 2 --zero 1 and --zero 2 end with the weights of --nproc 2 ({dp2['params_sha256'][:16]}...)")

import torch  # noqa: E402

b = torch.load(os.path.join(run_dir, "dp2", "checkpoints", "final.pt"))
for d in ("zero2", "zerob2"):
    a = torch.load(os.path.join(run_dir, d, "checkpoints", "final.pt"))
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a), f"{d}'s final.pt differs from the unsharded run's"

# Resume: 2 epochs uninterrupted against 1 epoch, then resumed for the second.
for name, extra in (("dp", []), ("zero", ["--zero", "1"]), ("zerob", ["--zero", "2"])):
    whole_run = run(f"{name}-2ep", ["--nproc", "2", "--epochs", "2"] + extra + CONST)
    run(f"{name}-part", ["--nproc", "2"] + extra + CONST)
    resumed = run(f"{name}-part", ["--nproc", "2", "--epochs", "2", "--resume"] + extra + CONST)
    assert resumed["resumed_from"], resumed["resumed_from"]
    assert resumed["params_sha256"] == whole_run["params_sha256"], f"{name}: the resumed run differs from the uninterrupted one"
    assert resumed["test_loss"] == whole_run["test_loss"], (name, resumed["test_loss"], whole_run["test_loss"])
    print(f"{name}: stopped after epoch 1 and resumed, it ends bit-identical to the uninterrupted run "
          f"({resumed['params_sha256'][:16]}...)")
print("final.pt loads with torch.load")
