"""Stops the main job with SIGTERM and SIGUSR1 (what Slurm and Kubernetes send) at random moments of training, resumes
it with --resume each time, and checks that every stop exits with code 75 after saying where it stopped and writing
preempted.json, and that the final weights and metrics logs equal an uninterrupted run's (as kill_resume.py does for
SIGKILL). The signal reaches the one process, or (--nproc 2) the launcher, which forwards it to its ranks.
Usage: preempt_example.py FASHION_MNIST_EXE WORK_DIR [FLAG...]   (STOP_SEED=n reproduces a run's signal times)"""
import json, os, random, shutil, signal, subprocess, sys, time

exe, work = sys.argv[1], sys.argv[2]
common = [exe, "--epochs", "2", "--limit-train-batches", "40", "--limit-val-batches", "1", "--eval-batch-size", "200",
          "--progress-tty", "0", "--width", "8", "--batch-size", "32", "--threads", "1", "--train-eval-size", "0",
          "--save", "last"] + sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
ref_dir, run_dir = os.path.join(work, "reference"), os.path.join(work, "stopped")


def start(args):
    """Starts the job; returns it once it prints its first training progress line (the handlers are installed)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    for line in proc.stdout:
        if line.startswith("epoch "):
            break
    return proc


t0 = time.time()
proc = start(common + ["--run-dir", ref_dir])
t_train = time.time()
out, err = proc.communicate()
assert proc.returncode == 0, out[-2000:] + err[-2000:]
duration = time.time() - t_train
reference = json.load(open(os.path.join(ref_dir, "summary.json")))
assert reference["policies"]["preemption"]["enabled"] and reference["policies"]["preemption"]["exit_code"] == 75

seed = int(os.environ.get("STOP_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
print(f"uninterrupted run: {time.time() - t0:.1f} s, training {duration:.1f} s; STOP_SEED={seed}")
resume, stops, done = [], 0, 0
for attempt, sig in enumerate((signal.SIGTERM, signal.SIGUSR1, signal.SIGTERM)):
    proc = start(common + ["--run-dir", run_dir] + resume)
    # Within what is left of training (after it the handlers are gone, as they should be: a signal then acts as
    # it would without us), from the steps the last stop left.
    left = duration * (1 - done / reference["global_steps"])
    delay = rng.uniform(0.0, 0.6 * left)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    said = [l for l in err.splitlines() if "Preemption" in l]
    print(f"{sig.name} {delay:.2f} s into training: exit {proc.returncode}; {' | '.join(said)}")
    if proc.returncode == 0:  # it had finished before the signal came (a fast machine): nothing to resume
        continue
    # The progress bar prints (and flushes) "epoch E/E  loss ..." when the fit's last epoch has ended; the test
    # evaluation and the report come after it, and a signal there acts as it would without us.
    last_epoch = int(common[common.index("--epochs") + 1]) - 1
    fit_ended = f"epoch {last_epoch}/{last_epoch}  loss" in out or "Classification report" in out
    if proc.returncode in (-int(sig), 128 + int(sig)) and fit_ended:
        # The fit had ended (its last checkpoint written, the handlers restored, as they should be) and the test
        # evaluation was running: the signal acted as it does without us. The next run resumes the finished fit.
        print("  (the signal came after the fit: the default action, as expected)")
        continue
    assert proc.returncode == 75, f"exit {proc.returncode} after {sig.name}; expected 75:\n{out[-1500:]}\n{err[-1500:]}"
    assert said and f"signal {int(sig)} ({sig.name})" in said[0], err[-1500:]
    assert "preempted at optimizer step" in out, out[-1500:]
    pre = json.load(open(os.path.join(run_dir, "preempted.json")))
    assert pre["signal"] == int(sig) and pre["signals_received"] >= 1, pre
    # At most the last step (a signal during it stops the run there, before the last epoch's validation).
    assert done < pre["global_steps"] <= reference["global_steps"], (done, pre["global_steps"])
    done = pre["global_steps"]
    stops += 1
    resume = ["--resume"]
assert stops >= 1, "no run was stopped: every signal came after training"

p = subprocess.run(common + ["--run-dir", run_dir, "--resume"], capture_output=True, text=True, timeout=600)
assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
s = json.load(open(os.path.join(run_dir, "summary.json")))
assert s["global_steps"] == reference["global_steps"], (s["global_steps"], reference["global_steps"])
assert s["params_sha256"] == reference["params_sha256"], "the resumed run's weights differ from the uninterrupted run's"
assert s["test_accuracy"] == reference["test_accuracy"]


def columns(run, name, cols):
    with open(os.path.join(run, "logs", name)) as f:
        lines = f.read().splitlines()
    return [",".join(line.split(",")[c] for c in cols) for line in lines[1:]]


# steps.csv: epoch, step, batch_in_epoch, loss, lr, loss_scale, grad_norm, samples, stepped; epochs.csv: epoch,
# train_loss, val_loss, val_accuracy: every step and epoch once, with the uninterrupted run's values.
for name, cols in (("steps.csv", [0, 1, 2, 3, 4, 5, 6, 7, 14]), ("epochs.csv", [0, 1, 2, 3])):
    want, got = columns(ref_dir, name, cols), columns(run_dir, name, cols)
    assert got == want, f"{name}: {len(got)} rows after the stops and resumes, {len(want)} uninterrupted"
print(f"{stops} stop(s) by signal, exit 75 each, resumed: bit-identical ({s['params_sha256'][:16]}), logs equal")
