"""The main job's --elastic (docs/parallel.md, "Elastic restarts"): a run of 2 ranks stopped mid-epoch by SIGTERM
(the preemption stop: exit 75, a mid-epoch last.ckpt) resumes on 1 and on 3 ranks, and on 2 again.

What a resume on another world size promises, checked against the uninterrupted 2-rank run of the same flags:
- the same optimizer steps: every global step once, each in the epoch and at the position in the epoch of the
  uninterrupted run (steps.csv's epoch, step, batch_in_epoch), with the same learning rate (the schedule counts
  optimizer steps, and the global batch is kept);
- the same samples per epoch: the per-rank samples of every step times the world size of the attempt that trained
  it add up to the epoch's training set, in both epochs (the identity of the samples, each exactly once, is
  test_parallel.cpp's "elastic restart mid-epoch on another world size");
- a final test accuracy near the uninterrupted run's (not equal: batch norm normalises each rank's share, and the
  sums run in another order);
- on 2 ranks again: bit-identical (params_sha256) to the uninterrupted run;
- without --elastic, a run of 2 ranks resumed on 1 is refused, naming both world sizes; a --batch-size the world
  size does not divide is refused, naming both; --data-on-device, which cannot re-shard the epoch's rest, is refused.

Usage: elastic_example.py FASHION_MNIST_EXE WORK_DIR
"""
import json, os, shutil, signal, subprocess, sys, time

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
TRAIN, BATCH, EPOCHS = 960, 48, 2  # 20 steps per epoch; 48 is divisible by 1, 2 and 3 ranks, 960 by 2 and 3
STEPS_PER_EPOCH = TRAIN // BATCH
common = [exe, "--epochs", str(EPOCHS), "--train-size", str(TRAIN), "--batch-size", str(BATCH),
          "--limit-val-batches", "1", "--eval-batch-size", "200", "--progress-tty", "0", "--width", "8",
          "--threads", "1", "--train-eval-size", "0"]


def run(run_dir, extra, expect=0):
    r = subprocess.run(common + ["--run-dir", run_dir] + extra, capture_output=True, text=True, timeout=600)
    assert r.returncode == expect, f"exit {r.returncode}, expected {expect}: {extra}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def rows(run_dir):
    with open(os.path.join(run_dir, "logs", "steps.csv")) as f:
        lines = f.read().splitlines()
    head = lines[0].split(",")
    return [dict(zip(head, l.split(","))) for l in lines[1:]]


t0 = time.time()
ref_dir = os.path.join(work, "reference")
run(ref_dir, ["--nproc", "2", "--elastic"])
reference = json.load(open(os.path.join(ref_dir, "summary.json")))
assert reference["global_steps"] == EPOCHS * STEPS_PER_EPOCH, reference["global_steps"]
assert reference["policies"]["parallel"]["elastic"] is True, reference["policies"]["parallel"]

# The stop: SIGTERM to the launcher once the step checkpoint of step 2 is on disk (a mid-epoch point of epoch 0).
stopped = os.path.join(work, "stopped")
proc = subprocess.Popen(common + ["--run-dir", stopped, "--nproc", "2", "--elastic", "--save", "last,steps:2"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
marker = os.path.join(stopped, "checkpoints", "step-00000002.ckpt")
while not os.path.exists(marker) and proc.poll() is None:
    time.sleep(0.01)
proc.send_signal(signal.SIGTERM)
out, err = proc.communicate(timeout=300)
assert proc.returncode == 75, f"exit {proc.returncode} after SIGTERM; expected 75\n{out[-1500:]}\n{err[-1500:]}"
stop_step = json.load(open(os.path.join(stopped, "preempted.json")))["global_steps"]
assert 2 <= stop_step < STEPS_PER_EPOCH, f"stopped at step {stop_step}: not mid-epoch of epoch 0 (machine too slow?)"
print(f"uninterrupted 2-rank run and the stopped one: {time.time() - t0:.1f} s; stopped after step {stop_step} "
      f"of {STEPS_PER_EPOCH} in epoch 0")

# Without --elastic the world size is part of the run: a 2-rank run's checkpoint is refused on 1 rank.
plain = os.path.join(work, "plain")
p = subprocess.Popen(common + ["--run-dir", plain, "--nproc", "2", "--save", "last,steps:2"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
while not os.path.exists(os.path.join(plain, "checkpoints", "step-00000002.ckpt")) and p.poll() is None:
    time.sleep(0.01)
p.send_signal(signal.SIGTERM)
p.communicate(timeout=300)
assert p.returncode == 75, p.returncode
r = run(plain, ["--resume"], expect=1)
assert "world size: 2 in the checkpoint, 1 in this run" in r.stderr, r.stderr[-2000:]
# --elastic: the world size must divide the global batch.
r = run(os.path.join(work, "indivisible"), ["--nproc", "2", "--elastic", "--batch-size", "49"], expect=1)
assert "--batch-size 49 is the global micro-batch, and the world size 2 does not divide it" in r.stderr + r.stdout, \
    r.stderr[-2000:]

# --data-on-device (DeviceLoader) does not re-shard an epoch's rest: that resume is refused by name.
dod = os.path.join(work, "data_on_device")
shutil.copytree(stopped, dod)
r = run(dod, ["--nproc", "3", "--elastic", "--resume", "--data-on-device"], expect=1)
assert "--data-on-device: a checkpoint taken mid-epoch at another world size cannot resume with it" in r.stderr, \
    r.stderr[-2000:]

want = rows(ref_dir)
for nproc in (1, 3, 2):
    d = os.path.join(work, f"resumed_on_{nproc}")
    shutil.copytree(stopped, d)
    t = time.time()
    r = run(d, (["--nproc", str(nproc)] if nproc > 1 else []) + ["--elastic", "--resume", "--save", "last"])
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["resumed_from"], s["resumed_from"]
    assert s["global_steps"] == reference["global_steps"], (nproc, s["global_steps"], reference["global_steps"])
    got = rows(d)
    key = ("epoch", "step", "batch_in_epoch", "lr")
    assert [tuple(g[k] for k in key) for g in got] == [tuple(w[k] for k in key) for w in want], \
        f"on {nproc} rank(s): the steps (epoch, step, position, lr) differ from the uninterrupted run's"
    for epoch in range(EPOCHS):
        seen = sum(int(g["samples"]) * (2 if int(g["step"]) <= stop_step else nproc)
                   for g in got if int(g["epoch"]) == epoch)
        assert seen == TRAIN, f"on {nproc} rank(s): {seen} samples trained in epoch {epoch}, expected {TRAIN}"
    if nproc == 2:
        assert s["params_sha256"] == reference["params_sha256"], "resumed on the same world size: not bit-identical"
    else:
        assert abs(s["test_accuracy"] - reference["test_accuracy"]) <= 0.1, (nproc, s["test_accuracy"],
                                                                            reference["test_accuracy"])
    print(f"resumed on {nproc} rank(s): {time.time() - t:.1f} s, {s['global_steps']} steps, test accuracy "
          f"{s['test_accuracy']:.4f} (uninterrupted on 2: {reference['test_accuracy']:.4f})"
          + (", bit-identical" if nproc == 2 else ""))
print(f"elastic: a 2-rank run stopped mid-epoch resumed on 1, 3 and 2 ranks; {time.time() - t0:.1f} s")
