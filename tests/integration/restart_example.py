"""Kills one rank of the main job with SIGKILL at a random moment after its first step checkpoint, under a launcher
that restarts the group (the main job's own `--nproc 2 --max-restarts 1`, or `torchrun --max-restarts 1
--no-python`), and checks that the launch still ends with code 0, that the launcher said it restarted, and that the
final weights, step count and test accuracy equal an uninterrupted run's: every rank continued from the newest
complete checkpoint (`--resume`, the same command line for every attempt).
Usage: restart_example.py FASHION_MNIST_EXE WORK_DIR {local|torchrun}   (KILL_SEED=n reproduces a run's kill time)"""
import glob, json, os, random, shutil, signal, subprocess, sys, time, uuid

exe, work, launcher = sys.argv[1], sys.argv[2], sys.argv[3]
common = ["--epochs", "2", "--limit-train-batches", "60", "--limit-val-batches", "1", "--eval-batch-size", "200",
          "--progress-tty", "0", "--width", "8", "--batch-size", "32", "--threads", "1", "--train-eval-size", "0",
          "--no-export", "--save", "last", "steps:4", "--resume"]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def command(run_dir):
    args = common + ["--run-dir", run_dir]
    if launcher == "local":
        return [exe, "--nproc", "2", "--max-restarts", "1"] + args
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
            "--monitor-interval", "0.2", "--no-python", exe] + args


def ranks(tag):
    """pid -> (RANK, TORCHELASTIC_RESTART_COUNT) of the processes carrying this test's tag and a RANK."""
    found = {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            env = dict(kv.split("=", 1) for kv in open(d + "/environ").read().split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("PT_RESTART_TAG") == tag and "RANK" in env:
            found[int(d[6:])] = (int(env["RANK"]), int(env.get("TORCHELASTIC_RESTART_COUNT", "-1")))
    return found


def run(run_dir, kill_after=None):
    tag = uuid.uuid4().hex
    env = dict(os.environ, PT_RESTART_TAG=tag)
    with open(os.path.join(work, os.path.basename(run_dir) + ".out"), "w") as out, \
            open(os.path.join(work, os.path.basename(run_dir) + ".err"), "w") as err:
        p = subprocess.Popen(command(run_dir), stdout=out, stderr=err, env=env)
        killed = None
        if kill_after is not None:
            # Once the first step checkpoint exists (a complete one to continue from), wait the drawn delay, then
            # SIGKILL rank 1 of the first attempt.
            deadline = time.time() + 300
            while not glob.glob(os.path.join(run_dir, "checkpoints", "step-*.ckpt")) and p.poll() is None:
                assert time.time() < deadline, "no step checkpoint within 300 s"
                time.sleep(0.05)
            time.sleep(kill_after)
            for pid, (rank, attempt) in ranks(tag).items():
                if rank == 1 and attempt == 0:
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
        rc = p.wait(timeout=600)
    text = open(os.path.join(work, os.path.basename(run_dir) + ".err")).read()
    return rc, killed, text


t0 = time.time()
rc, _, err = run(os.path.join(work, "reference"))
assert rc == 0, err[-3000:]
reference = json.load(open(os.path.join(work, "reference", "summary.json")))
print(f"uninterrupted run ({launcher}): {time.time() - t0:.1f} s, {reference['global_steps']} steps")

seed = int(os.environ.get("KILL_SEED", random.randrange(1 << 30)))
# Within half a second of the first step checkpoint (step 4 of 120): a later kill could meet a rank that had finished
# the run (a restarted group then has nothing left to train; seen once on an idle machine, 60 steps in 2.9 s).
delay = random.Random(seed).uniform(0.0, 0.5)
rc, killed, err = run(os.path.join(work, "killed"), delay)
print(f"KILL_SEED={seed}: rank 1 (pid {killed}) SIGKILLed {delay:.2f} s after the first step checkpoint; exit {rc}")
assert killed is not None, "rank 1 of the first attempt was gone before the kill (the run ended too soon?)"
assert rc == 0, err[-3000:]
# The launcher saw the killed rank (ours says it restarts; torchrun logs the worker's exit code -9 before it restarts
# the group at INFO level, which it does not print by default) and a second attempt resumed.
said = "restarting every rank (restart 1 of 1" if launcher == "local" else "(exitcode: -9) local_rank: 1"
assert said in err, f"the launcher did not report the killed rank:\n{err[-3000:]}"
# Rank 0 says it (checkpoint::Disk's lines come from the main rank; every rank resumes from the same file).
assert err.count("policytrain::checkpoint: resumed from") >= 1, f"the ranks did not resume:\n{err[-3000:]}"
s = json.load(open(os.path.join(work, "killed", "summary.json")))
assert s["resumed_from"], "the restarted group did not resume from a checkpoint"
assert s["global_steps"] == reference["global_steps"], (s["global_steps"], reference["global_steps"])
assert s["params_sha256"] == reference["params_sha256"], "the restarted run's weights differ from the uninterrupted run's"
assert s["test_accuracy"] == reference["test_accuracy"]
print(f"restarted by {launcher}, resumed from {os.path.basename(s['resumed_from'])}: bit-identical "
      f"({s['params_sha256'][:16]})")
