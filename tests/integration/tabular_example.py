"""examples/tabular_regression, end to end: (1) trains on one rank and on two (data parallelism: the summaries
agree on the steps, and two ranks train to a low validation error too); (2) a run stopped by --max-steps mid-epoch
and resumed, and (3) a run killed with SIGKILL at random moments mid-epoch and resumed each time, both end with the
uninterrupted run's weights bit for bit (params_sha256) and its step count.
Usage: tabular_example.py EXE WORK_DIR   (KILL_SEED=n reproduces a run's kill times)"""
import json, os, random, shutil, subprocess, sys, time

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
common = ["--rows", "3000", "--epochs", "3", "--batch-size", "16", "--workers", "2", "--every-steps", "7"]

def run(name, *extra, check=True):
    d = os.path.join(work, name)
    p = subprocess.run([exe, "--run-dir", d, "--csv", csv] + common + list(extra), capture_output=True, text=True,
                       timeout=600)
    if check:
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return d, p

def summary(d):
    return json.load(open(os.path.join(d, "summary.json")))

# The table, written by a first short run (it writes RUN_DIR/data.csv when --csv is left out).
gen = os.path.join(work, "gen")
p = subprocess.run([exe, "--run-dir", gen, "--rows", "3000", "--epochs", "1", "--max-steps", "1"], capture_output=True,
                   text=True, timeout=600)
assert p.returncode == 0, p.stderr[-2000:]
csv = os.path.join(gen, "data.csv")
with open(csv) as f:
    assert f.readline().strip() == "f0,f1,f2,f3,f4,f5,f6,f7,target"

# (1) One rank, uninterrupted: the reference.
t0 = time.time()
ref_dir, p = run("reference")
duration = time.time() - t0
ref = summary(ref_dir)
steps_per_epoch = (2400 + 15) // 16
assert ref["global_steps"] == 3 * steps_per_epoch, ref
assert ref["val_loss"] < 0.2, ref  # the target's variance is about 1.5: the model learnt it
assert ref["val_samples"] == 600, ref
print(f"one rank: {ref['global_steps']} steps, validation mse {ref['val_loss']:.4f}, {duration:.1f} s")

# Two ranks: each a disjoint half of every epoch, so half the steps; the validation covers the 600 samples once.
two_dir, p = run("two_ranks", "--nproc", "2")
two = summary(two_dir)
assert two["world_size"] == 2 and two["global_steps"] == 3 * ((1200 + 15) // 16), two
assert two["val_samples"] == 600, two
assert two["val_loss"] < 0.3, two
print(f"two ranks: {two['global_steps']} steps, validation mse {two['val_loss']:.4f}")

# (2) A stop by --max-steps mid-epoch (epoch 1, batch 30), then a resume: the uninterrupted weights.
cut_dir, p = run("max_steps", "--max-steps", str(steps_per_epoch + 30))
s = summary(cut_dir)
assert (s["epoch"], s["batch_in_epoch"]) == (1, 30), s
_, p = run("max_steps", "--resume")
assert "resumed from" in p.stderr and "(epoch 1, batch 30," in p.stderr, p.stderr[-2000:]
s = summary(cut_dir)
assert s["global_steps"] == ref["global_steps"], (s, ref)
assert s["params_sha256"] == ref["params_sha256"], "the run resumed after --max-steps differs from the uninterrupted one"
print("max-steps stop mid-epoch, resumed: bit-identical")

# (3) SIGKILL at random moments, resumed each time.
seed = int(os.environ.get("KILL_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
kill_dir = os.path.join(work, "killed")
resume = []
said = []
for attempt in range(3):
    proc = subprocess.Popen([exe, "--run-dir", kill_dir, "--csv", csv] + common + resume, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(rng.uniform(0.3, max(0.5, duration * 0.8)))
    proc.kill()
    _, err = proc.communicate()
    said += [l for l in err.splitlines() if "resumed from" in l]
    resume = ["--resume"]
_, p = run("killed", "--resume")
said += [l for l in p.stderr.splitlines() if "resumed from" in l]
print(f"KILL_SEED={seed}:", " | ".join(said))
s = summary(kill_dir)
assert s["global_steps"] == ref["global_steps"], (s, ref)
assert s["params_sha256"] == ref["params_sha256"], "the killed and resumed run's weights differ from the uninterrupted run's"
print("killed and resumed: bit-identical")
