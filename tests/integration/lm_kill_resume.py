"""Exact resume of the second main job: tiny_lm is killed with SIGKILL in the middle of a validation interval (after
the first validation's last.ckpt, before the second validation), then resumed with --resume twice from copies of its
checkpoint folder: once with the same --val-every-steps, once with another. Each resumed run must end at the step
count asked (--max-steps) with weights bit-identical to an uninterrupted run's (params_sha256 of the final weights,
and the bytes of final.pt's tensors), and validate at the steps the new interval names.
Also: summary.json's options.malloc names the allocator the build linked (cmake/policytrainMalloc.cmake): the
library whose malloc the process called, read at run time.
Usage: lm_kill_resume.py TINY_LM_EXE WORK_DIR [MALLOC]   (KILL_SEED=n reproduces a run's kill step; MALLOC: tcmalloc,
jemalloc, mimalloc or system, POLICYTRAIN_EXAMPLES_MALLOC)"""
import json, os, random, re, shutil, subprocess, sys

exe, work = sys.argv[1], sys.argv[2]
malloc = sys.argv[3] if len(sys.argv) > 3 else None
STEPS, EVERY, OTHER = 60, 20, 7
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
data = os.path.join(work, "data")
os.makedirs(data)
# A small token file of skewed random bytes (a seeded generator): the job needs no corpus.
rng0 = random.Random(5)
weights = [rng0.random() ** 4 for _ in range(256)]
for name, n in (("train", 40000), ("val", 8000)):
    with open(os.path.join(data, name + ".bin"), "wb") as f:
        f.write(b"".join(int(t).to_bytes(2, "little") for t in rng0.choices(range(256), weights, k=n)))
common = [exe, "--data", data, "--max-steps", str(STEPS), "--val-batches", "2", "--batch", "4", "--block", "32",
          "--layers", "2", "--d-model", "32", "--heads", "2", "--warmup-steps", "5", "--lr", "3e-3", "--fused",
          "--accumulate", "2", "--ema", "--threads", "1", "--progress-tty", "0", "--sample-tokens", "16"]


def run(name, every, extra=()):
    d = os.path.join(work, name)
    args = common + ["--val-every-steps", str(every), "--checkpoint", os.path.join(d, "ckpt"),
                     "--summary", os.path.join(d, "summary.json")] + list(extra)
    p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600)
    assert p.returncode == 0, " ".join(args) + "\n" + p.stdout[-2000:] + p.stderr[-2000:]
    return json.load(open(os.path.join(d, "summary.json"))), p


def tensors_bytes(path):
    """final.pt's tensors as (name, dtype, shape, raw bytes), read by torch.load."""
    import torch
    return [(k, str(v.dtype), tuple(v.shape), v.numpy().tobytes()) for k, v in sorted(torch.load(path).items())]


reference, _ = run("reference", EVERY)
if malloc:
    prefix = {"tcmalloc": "libtcmalloc", "jemalloc": "libjemalloc", "mimalloc": "libmimalloc", "system": "libc.so"}[malloc]
    got = reference["options"]["malloc"]
    assert got.startswith(prefix), f"built with {malloc}, but the process called malloc from {got!r}"
    print(f"malloc: {got} ({malloc})")
assert reference["steps"] == STEPS, reference["steps"]
assert [v["step"] for v in reference["validation"]] == list(range(EVERY, STEPS + 1, EVERY)), reference["validation"]

seed = int(os.environ.get("KILL_SEED", random.randrange(1 << 30)))
kill_at = random.Random(seed).randint(EVERY + 1, 2 * EVERY - 4)
print(f"KILL_SEED={seed}: SIGKILL once a progress line shows step {kill_at} or later (validations every {EVERY})")
killed_dir = os.path.join(work, "killed")
args = common + ["--val-every-steps", str(EVERY), "--checkpoint", os.path.join(killed_dir, "ckpt")]
proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace", bufsize=1)
seen = []
for line in proc.stdout:
    if line.startswith("step ") and "/" in line:
        step = int(line.split()[1].split("/")[0]) if line.split()[1][0].isdigit() else \
            int(line.split("]")[1].split("/")[0])
        seen.append(step)
        if step >= kill_at:
            proc.kill()  # SIGKILL: no handler runs, no file is flushed
            break
proc.communicate()
print(f"killed at a progress line of step {seen[-1]} (exit {proc.returncode}); steps seen {seen}")
assert proc.returncode == -9, proc.returncode
assert EVERY < seen[-1] < 2 * EVERY, f"the kill was not in the second interval: step {seen[-1]}"

ref_final = tensors_bytes(os.path.join(work, "reference", "ckpt", "final.pt"))
for name, every in (("same_interval", EVERY), ("other_interval", OTHER)):
    shutil.copytree(killed_dir, os.path.join(work, name))
    s, p = run(name, every, ["--resume"])
    assert "resumed from" in p.stderr, p.stderr[-2000:]
    print(f"{name}: --val-every-steps {every}: " + next(l for l in p.stderr.splitlines() if "resumed from" in l))
    assert s["steps"] == STEPS, (name, s["steps"])
    assert s["params_sha256"] == reference["params_sha256"], f"{name}: the resumed run's weights differ"
    assert tensors_bytes(os.path.join(work, name, "ckpt", "final.pt")) == ref_final, f"{name}: final.pt differs"
    # The killed attempt validated up to last.ckpt's step (EVERY, unless the job ran on past the next validation
    # before the signal landed: a loaded machine); the resumed one at the new interval's multiples after it.
    # summary.json lists both, once each.
    at = int(re.search(r"resumed from .*step (\d+)\)", p.stderr).group(1))
    assert at in (EVERY, 2 * EVERY), (name, at)
    steps = [v["step"] for v in s["validation"]]
    assert steps == list(range(EVERY, at + 1, EVERY)) + [k for k in range(every, STEPS + 1, every) if k > at], \
        (name, at, steps)
print(f"lm_kill_resume: killed at step {seen[-1]}, resumed with --val-every-steps {EVERY} and {OTHER}: "
      f"{STEPS} steps, final weights bit-identical to the uninterrupted run's")
