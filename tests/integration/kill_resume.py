"""Kills the main job with SIGKILL at random moments, resumes it with --resume each time, and checks that the
final weights are bit-identical to an uninterrupted run's (params_sha256 in summary.json), and that its metrics
logs (logs/steps.csv, logs/epochs.csv) hold every step and epoch once, with the uninterrupted run's values.
Usage: kill_resume.py FASHION_MNIST_EXE WORK_DIR [FLAG...]   (KILL_SEED=n reproduces a run's kill times; FLAGs are
added to every run, e.g. --async-checkpoint; KILL_RESUME_EMA=0 leaves --ema out). With
--nproc, every rank is killed at once (the job's process group)."""
import json, os, random, shutil, signal, subprocess, sys, time

exe, work = sys.argv[1], sys.argv[2]
common = [exe, "--epochs", "2", "--limit-train-batches", "30", "--limit-val-batches", "1", "--eval-batch-size", "200", "--progress-tty", "0",
          "--width", "8", "--batch-size", "32",
          "--threads", "1", "--save", "last,steps:3", "--keep", "2"] + \
         (["--ema", "--ema-tau", "20"] if os.environ.get("KILL_RESUME_EMA", "1") != "0" else []) + sys.argv[3:]
ranks = "--nproc" in sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
ref_dir, run_dir = os.path.join(work, "reference"), os.path.join(work, "killed")

def start(args):
    """Starts the job; returns it once it prints its first training progress line (or ends)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                            start_new_session=ranks)
    for line in proc.stdout:
        if line.startswith("epoch "):
            break
    return proc

# The uninterrupted run, timing its training phase (from the first progress line to the report).
t0 = time.time()
proc = start(common + ["--run-dir", ref_dir])
t_train = time.time()
out, _ = proc.communicate()
assert proc.returncode == 0, out[-2000:]
duration = time.time() - t_train
reference = json.load(open(os.path.join(ref_dir, "summary.json")))

seed = int(os.environ.get("KILL_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
print(f"uninterrupted run: {time.time() - t0:.1f} s, training {duration:.1f} s; KILL_SEED={seed}")
resume = []
for attempt in range(3):
    proc = start(common + ["--run-dir", run_dir] + resume)
    delay = rng.uniform(0.0, duration)
    time.sleep(delay)
    # SIGKILL: no handler, no flush, possibly in the middle of a checkpoint write (every rank's, with --nproc).
    if ranks:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()
    _, err = proc.communicate()
    said = [l for l in err.splitlines() if "resumed from" in l or "starting from scratch" in l or "falling back" in l]
    print(f"kill {attempt + 1} {delay:.2f} s into training (exit {proc.returncode}); {' | '.join(said)}")
    resume = ["--resume"]

p = subprocess.run(common + ["--run-dir", run_dir, "--resume"], capture_output=True, text=True, timeout=600)
print(p.stderr[-2000:])
assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
s = json.load(open(os.path.join(run_dir, "summary.json")))
ckpts = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
print("resumed from:", s["resumed_from"] or "(nothing: started from scratch)", "; files:", ckpts)
assert not [f for f in ckpts if ".tmp-" in f], ckpts
assert s["global_steps"] == reference["global_steps"], (s["global_steps"], reference["global_steps"])
assert s["params_sha256"] == reference["params_sha256"], "the resumed run's weights differ from the uninterrupted run's"
assert s["test_accuracy"] == reference["test_accuracy"]

def columns(run, name, cols):
    """The rows of a CSV log (header dropped), cut to the columns that do not depend on timing."""
    with open(os.path.join(run, "logs", name)) as f:
        lines = f.read().splitlines()
    return [",".join(line.split(",")[c] for c in cols) for line in lines[1:]]

# steps.csv: epoch, step, batch_in_epoch, loss, lr, loss_scale, grad_norm, samples, stepped;
# epochs.csv: epoch, train_loss, val_loss, val_accuracy.
for name, cols in (("steps.csv", [0, 1, 2, 3, 4, 5, 6, 7, 14]), ("epochs.csv", [0, 1, 2, 3])):
    want, got = columns(ref_dir, name, cols), columns(run_dir, name, cols)
    first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    assert got == want, (f"{name}: {len(got)} rows after kill and resume, {len(want)} uninterrupted; first "
                         f"difference at row {first}: {got[first:first + 2]} vs {want[first:first + 2]}")
print(f"logs: {len(columns(run_dir, 'steps.csv', [1]))} step rows, every step once, equal to the uninterrupted run's")
print("kill -9 and resume OK:", s["params_sha256"][:16])
