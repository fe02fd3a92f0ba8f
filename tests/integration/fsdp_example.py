"""The main job with --zero 3 (fully sharded parameters: each layer a parallel::FullyShard unit, as PyTorch's FSDP2):

- on 2 ranks it ends with the weights of the unsharded run on 2 ranks (--nproc 2, DataParallel) bit for bit with
  LibTorch's AdamW (--optimizer adamw-loop, the runs below unless said): the
  order of the gradient sums is the only difference that could show (DataParallel's Reducer halves each rank's
  gradient and all-reduces the halves; stage 3 reduce-scatters with ReduceOp::AVG, as FSDP2, summing then halving),
  and with 2 ranks both are exact (a + b is commutative, halving exact); with the main job's default fused AdamW
  (ATen's _fused_adamw_) within FUSED_TOL only: that kernel rounds an element in its vectorized body otherwise than
  in its scalar remainder, and a shard moves elements from one to the other (docs/parallel.md, "Fused optimizers on
  shards"; 3.7e-9 after 12 steps on an Intel Xeon with AVX512, 0 on the AMD EPYC where this test was written); its final.pt has the same names and
  shapes, and summary.json reports the reduce-scatters (6 units per step) and this rank's parameter shard bytes
  (about half the model's); the same with --precision bf16 (autocast over the gathered fp32 parameters);
- a run stopped after its first epoch and resumed from its checkpoint (consolidated: the format of an unsharded
  run's) ends bit-identical to the uninterrupted run;
- a checkpoint written by 3 ranks (--elastic) resumes on 2 ranks with --zero 3 and with --zero 1 (whole parameters,
  DataParallel's averaged gradients; its checkpoints are the same policy's) to the same weights within TOL (the
  checkpoint has no layout of its own; the two runs sum the same gradients in another order);
- with --ema and with --recompute, --zero 3 ends with the weights and final.pt (the EMA's average, with --ema) of
  --nproc 2 with the same flag, bit for bit (--shard-checkpoints: kill_resume.py).

Usage: fsdp_example.py FASHION_MNIST_BINARY RUN_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import torch

binary, run_dir = sys.argv[1], sys.argv[2]
shutil.rmtree(run_dir, ignore_errors=True)
FUSED_TOL = 1e-6  # a last-bit difference in a few elements of the fused kernel's output, 12 steps of lr 1e-3 later
TOL = 1e-4  # AdamW: a last-bit difference in an averaged gradient can move a weight by up to ~lr (1e-3) per step


def run(name, extra, ok=True):
    d = os.path.join(run_dir, name)
    cmd = [binary, "--epochs", "1", "--limit-train-batches", "12", "--limit-val-batches", "2", "--eval-batch-size",
           "200", "--run-dir", d, "--progress-tty", "0", "--train-eval-size", "0", "--schedule", "constant"] + extra
    if "--optimizer" not in extra:
        cmd += ["--optimizer", "adamw-loop"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if not ok:
        assert r.returncode != 0, f"{' '.join(cmd)} should have been refused"
        return r.stderr
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return json.load(open(os.path.join(d, "summary.json")))


def weights(name):
    return torch.load(os.path.join(run_dir, name, "checkpoints", "final.pt"))


def max_diff(a, b):
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for k in a:
        assert a[k].shape == b[k].shape, (k, a[k].shape, b[k].shape)
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a if a[k].is_floating_point())


dp2 = run("dp2", ["--nproc", "2"])
z3 = run("zero3", ["--nproc", "2", "--zero", "3"])
par = z3["policies"]["parallel"]
assert par["engine"] == "fully sharded (stage 3)", par
assert par["reduce_scatter_calls"] == 12 * 6, par  # conv1, bn1, conv2, bn2, fc1, fc2 every step (the root holds none)
d = max_diff(weights("zero3"), weights("dp2"))
print(f"--nproc 2 --zero 3 against --nproc 2: max |difference| of the final weights {d:.3g}")
assert d == 0, d
assert z3["params_sha256"] == dp2["params_sha256"], (z3["params_sha256"], dp2["params_sha256"])
whole = sum(t.numel() * 4 for t in weights("dp2").values() if t.is_floating_point() and t.dim() > 0)
print(f"rank 0 keeps {par['parameter_shard_bytes']} parameter bytes of the model's {whole} (with buffers)")
assert par["parameter_shard_bytes"] < 0.6 * whole, (par, whole)

# The main job's default optimizer, policytrain's fused AdamW (ATen's _fused_adamw_), on the shards: within FUSED_TOL.
run("fused-dp2", ["--nproc", "2", "--optimizer", "adamw"])
run("fused-zero3", ["--nproc", "2", "--zero", "3", "--optimizer", "adamw"])
d = max_diff(weights("fused-zero3"), weights("fused-dp2"))
print(f"--optimizer adamw (fused): --nproc 2 --zero 3 against --nproc 2, max |difference| {d:.3g}")
assert d <= FUSED_TOL, d

# With bf16 autocast (precision::Autocast casts the gathered fp32 parameters per op; the gradients and shards stay
# fp32): the same weights as DataParallel's under the same precision, bit for bit.
bf_dp = run("bf16-dp2", ["--nproc", "2", "--precision", "bf16"])
bf_z3 = run("bf16-zero3", ["--nproc", "2", "--zero", "3", "--precision", "bf16"])
assert bf_z3["params_sha256"] == bf_dp["params_sha256"], "--zero 3 --precision bf16 changed the trained weights"
print("--nproc 2 --zero 3 --precision bf16 ends with the weights of --nproc 2 --precision bf16, bit for bit")

# Resume on the same world size: bit-identical.
whole_run = run("z3-2ep", ["--nproc", "2", "--zero", "3", "--epochs", "2"])
run("z3-part", ["--nproc", "2", "--zero", "3"])
resumed = run("z3-part", ["--nproc", "2", "--zero", "3", "--epochs", "2", "--resume"])
assert resumed["resumed_from"], resumed
assert resumed["params_sha256"] == whole_run["params_sha256"], "--zero 3: the resumed run differs from the uninterrupted one"
print("--zero 3 on 2 ranks: 1 epoch + resume = 2 epochs, bit for bit")

# The finished run resumed once more (summary.json removed, as when a signal came after the fit's end and before the
# summary): a fit with no step left, which begins no epoch. Its weights and final.pt are the finished run's. Before,
# the shards took the checkpoint's weights at the first epoch's begin only: final.pt was rewritten with the weights
# the model was built with, and summary.json's params_sha256 was theirs.
finished = weights("z3-part")
os.remove(os.path.join(run_dir, "z3-part", "summary.json"))
again = run("z3-part", ["--nproc", "2", "--zero", "3", "--epochs", "2", "--resume"])
assert again["global_steps"] == whole_run["global_steps"] and again["optimizer_steps"] == 0, again
assert again["params_sha256"] == whole_run["params_sha256"], "--zero 3: resuming the finished run changed its weights"
assert max_diff(weights("z3-part"), finished) == 0, "--zero 3: resuming the finished run rewrote final.pt otherwise"
print("--zero 3: the finished run resumed with no step left keeps its weights and final.pt")

# A checkpoint of 3 ranks resumed on 2, by stage 3 and by DataParallel.
ELASTIC = ["--elastic", "--batch-size", "96"]  # a global batch of 96 (32 or 48 per rank) may change world size
run("z3-from3", ["--nproc", "3", "--zero", "3"] + ELASTIC)
shutil.copytree(os.path.join(run_dir, "z3-from3"), os.path.join(run_dir, "dp-from3"))
a = run("z3-from3", ["--nproc", "2", "--zero", "3", "--epochs", "2", "--resume"] + ELASTIC)
b = run("dp-from3", ["--nproc", "2", "--zero", "1", "--epochs", "2", "--resume"] + ELASTIC)
assert a["resumed_from"] and b["resumed_from"], (a["resumed_from"], b["resumed_from"])
d = max_diff(weights("z3-from3"), weights("dp-from3"))
print(f"a --zero 3 checkpoint of 3 ranks resumed on 2: --zero 3 against --zero 1, max |difference| {d:.3g}")
assert d <= TOL, d

# --ema (each rank averages its shards; the validation gathers the average, final.pt holds it whole) and --recompute
# (a unit gathered again in the recomputed forward): the weights and final.pt of DataParallel with the same flag.
for flag in (["--ema"], ["--recompute"]):
    name = flag[0].lstrip("-")
    dp = run(f"{name}-dp2", ["--nproc", "2"] + flag)
    z3 = run(f"{name}-zero3", ["--nproc", "2", "--zero", "3"] + flag)
    d = max_diff(weights(f"{name}-zero3"), weights(f"{name}-dp2"))
    print(f"--nproc 2 --zero 3 {flag[0]} against --nproc 2 {flag[0]}: max |difference| of final.pt {d:.3g}")
    assert d == 0, d
    assert z3["params_sha256"] == dp["params_sha256"], (flag, z3["params_sha256"], dp["params_sha256"])
    # Validated and tested (after fit) with the average swapped in under --ema.
    for key in ("val_loss", "val_accuracy", "test_loss", "test_accuracy"):
        assert z3[key] == dp[key], (flag, key, z3[key], dp[key])
ema_final = weights("ema-zero3")
assert any(not torch.equal(ema_final[k], weights("zero3")[k]) for k in ema_final if ema_final[k].is_floating_point())
