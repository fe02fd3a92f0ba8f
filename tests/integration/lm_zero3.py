"""The second main job with --zero 3 (fully sharded parameters, each transformer block a parallel::FullyShard unit,
the embeddings, ln_f and the tied head in the root): on 2 ranks it ends with --nproc 2's (DataParallel's) final.pt
bit for bit (the same names, shapes and bytes), the same params_sha256 and every validation loss of summary.json bit
for bit. Exact, not within a tolerance: the order of the gradient sums is the only difference that could show
(DataParallel's Reducer halves each rank's gradient and all-reduces the halves; stage 3 reduce-scatters with
ReduceOp::AVG, summing then halving), and with 2 ranks both are exact (a + b is commutative, halving exact). The
blocks are really units: every step reduce-scatters once per block and once for the root, and rank 0 keeps its rows
of the blocks' parameters only (about half their bytes). The same bit for bit with --ema and with --precision bf16,
and resumed across --zero 1 (no units) and --zero 3 from each other's checkpoints.
These runs leave clipping out (--clip 0); with tiny_lm's default --clip 1 the global norm is summed in another order,
and the weights agree within TOL (below).
Usage: lm_zero3.py TINY_LM_EXE WORK_DIR   (SEED=n: another seed of the data, the weights and the windows)"""
import json, os, random, shutil, subprocess, sys

import torch

exe, work = sys.argv[1], sys.argv[2]
SEED = int(os.environ.get("SEED", "11"))
STEPS, EVERY, LAYERS = 24, 8, 3
shutil.rmtree(work, ignore_errors=True)
data = os.path.join(work, "data")
os.makedirs(data)
# A small token file of skewed random bytes (a seeded generator): the job needs no corpus.
rng = random.Random(SEED)
weights = [rng.random() ** 4 for _ in range(256)]
for name, n in (("train", 30000), ("val", 6000)):
    with open(os.path.join(data, name + ".bin"), "wb") as f:
        f.write(b"".join(int(t).to_bytes(2, "little") for t in rng.choices(range(256), weights, k=n)))
common = [exe, "--data", data, "--max-steps", str(STEPS), "--val-every-steps", str(EVERY), "--val-batches", "2",
          "--batch", "4", "--block", "32", "--layers", str(LAYERS), "--d-model", "32", "--heads", "2",
          "--warmup-steps", "4", "--lr", "3e-3", "--threads", "1", "--progress-tty", "0", "--sample-tokens", "8",
          "--seed", str(SEED), "--nproc", "2"]


def run(name, extra=()):
    d = os.path.join(work, name)
    args = common + ["--checkpoint", os.path.join(d, "ckpt"), "--summary", os.path.join(d, "summary.json")] + list(extra)
    p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600)
    assert p.returncode == 0, " ".join(args) + "\n" + p.stdout[-2000:] + p.stderr[-2000:]
    return json.load(open(os.path.join(d, "summary.json"))), torch.load(os.path.join(d, "ckpt", "final.pt"))


dp, dp_final = run("dp2", ["--clip", "0"])
z3, z3_final = run("zero3", ["--clip", "0", "--zero", "3"])
cmd = " ".join(common + ["--clip", "0", "--zero", "3"])
assert sorted(z3_final) == sorted(dp_final), f"final.pt's names differ ({cmd}):\n{sorted(z3_final)}\n{sorted(dp_final)}"
for k in dp_final:
    a, b = z3_final[k], dp_final[k]
    assert a.dtype == b.dtype and a.shape == b.shape, (k, a.dtype, a.shape, b.dtype, b.shape)
    if not torch.equal(a, b):
        d = (a.double() - b.double()).abs().max().item()
        sys.exit(f"SEED={SEED}: final.pt's {k} differs from --nproc 2's by up to {d:.3g}; reproduce: {cmd}")
assert z3["params_sha256"] == dp["params_sha256"], (z3["params_sha256"], dp["params_sha256"])
assert [v["step"] for v in dp["validation"]] == list(range(EVERY, STEPS + 1, EVERY)), dp["validation"]
for a, b in zip(z3["validation"], dp["validation"], strict=True):
    assert a["step"] == b["step"] and a["loss"] == b["loss"], f"SEED={SEED}: validation {a} against {b}; {cmd}"
print(f"--nproc 2 --zero 3 --clip 0 against --nproc 2 --clip 0: final.pt ({len(dp_final)} tensors) and "
      f"{len(dp['validation'])} validation losses bit for bit")

par = z3["parallel"]
assert par["engine"] == "fully sharded (stage 3)", par
assert par["units"] == LAYERS, f"{par['units']} FullyShard units, expected one per block ({LAYERS})"
# One reduce-scatter per unit and step, and one for the root (wte, wpe, ln_f): with the blocks in the root, one.
assert par["reduce_scatter_calls"] == STEPS * (LAYERS + 1), \
    f"{par['reduce_scatter_calls']} reduce-scatters in {STEPS} steps, expected {STEPS * (LAYERS + 1)} ({LAYERS} units + the root)"
# Rank 0's rows of each block parameter: ceil(rows / 2) of them, so about half the blocks' bytes.
blocks = sum(t.numel() * t.element_size() for k, t in dp_final.items() if k.startswith("h."))
assert par["block_bytes"] == blocks, (par["block_bytes"], blocks)
assert par["block_shard_bytes"] * 2 <= blocks * 1.01, (par["block_shard_bytes"], blocks)
print(f"rank 0 keeps {par['block_shard_bytes']} of the blocks' {blocks} parameter bytes; "
      f"{par['reduce_scatter_calls']} reduce-scatters, {par['all_gather_calls']} all-gathers in {STEPS} steps")

# --ema (each rank averages its shards; the validations and final.pt use the average, gathered) and --precision bf16
# (autocast over the gathered fp32 parameters; the gradients and shards stay fp32): bit for bit as well.
for flag in (["--ema"], ["--precision", "bf16"]):
    name = flag[0].lstrip("-")
    a, a_final = run(f"{name}-dp2", ["--clip", "0"] + flag)
    b, b_final = run(f"{name}-zero3", ["--clip", "0", "--zero", "3"] + flag)
    assert sorted(a_final) == sorted(b_final) and all(torch.equal(a_final[k], b_final[k]) for k in a_final), \
        f"SEED={SEED}: {' '.join(flag)}: final.pt differs from --nproc 2's; reproduce: {cmd} {' '.join(flag)}"
    assert [v["loss"] for v in a["validation"]] == [v["loss"] for v in b["validation"]], (flag, a["validation"], b["validation"])
    assert b["params_sha256"] == a["params_sha256"], flag
    print(f"--nproc 2 --zero 3 {' '.join(flag)}: final.pt and the validation losses of --nproc 2 {' '.join(flag)}, bit for bit")

# The checkpoints are those of a model without units: --zero 1's step-16 checkpoint (whole blocks) resumes under
# --zero 3 and --zero 3's under --zero 1, each ending with --nproc 2's final.pt bit for bit.
SAVE = ["--clip", "0", "--save-every-steps", str(EVERY)]
run("zero1", SAVE + ["--zero", "1"])
run("zero3-save", SAVE + ["--zero", "3"])
step = os.path.join("ckpt", f"step-{2 * EVERY:08d}.ckpt")
for name, zero, source in (("zero3-from-zero1", "3", "zero1"), ("zero1-from-zero3", "1", "zero3-save")):
    s, f = run(name, SAVE + ["--zero", zero, "--resume", os.path.join(work, source, step)])
    assert s["resumed_from"], (name, s["resumed_from"])
    assert sorted(f) == sorted(dp_final) and all(torch.equal(f[k], dp_final[k]) for k in dp_final), \
        f"SEED={SEED}: --zero {zero} resumed from {source}'s checkpoint ends with other weights than --nproc 2"
    assert s["validation"][-1] == dp["validation"][-1], (name, s["validation"], dp["validation"])
print("a --zero 1 checkpoint resumed with --zero 3, and a --zero 3 one with --zero 1: --nproc 2's final.pt, bit for bit")

# With clipping (tiny_lm's default --clip 1): the global norm is summed in another order (each rank's squares of its
# shards, then all-reduced, where DataParallel sums the whole gradients' squares), so the clip factor may differ in
# its last bit; AdamW's update of a weight whose second moment is near zero turns a last-bit difference of its
# gradient into up to ~lr (3e-3) of a step, so the weights agree within TOL (measured: 2.6e-6 to 4.8e-6 over seeds
# 1-5 and 11), the validation losses within TOL relative.
TOL = 1e-4
dp_c, dp_c_final = run("dp2-clip", ["--clip", "1"])
z3_c, z3_c_final = run("zero3-clip", ["--clip", "1", "--zero", "3"])
assert sorted(z3_c_final) == sorted(dp_c_final)
d = max((z3_c_final[k].double() - dp_c_final[k].double()).abs().max().item() for k in dp_c_final)
assert d <= TOL, f"SEED={SEED}: --clip 1: final.pt differs from --nproc 2's by up to {d:.3g} (TOL {TOL})"
for a, b in zip(z3_c["validation"], dp_c["validation"], strict=True):
    assert a["step"] == b["step"] and abs(a["loss"] - b["loss"]) <= TOL * abs(b["loss"]), (SEED, a, b)
print(f"--nproc 2 --zero 3 --clip 1 against --nproc 2 --clip 1: final.pt within {d:.3g}, validation losses within "
      f"{max(abs(a['loss'] - b['loss']) for a, b in zip(z3_c['validation'], dp_c['validation'])):.3g}")
