"""The shipped batch script (examples/cluster/train.sbatch) under a real Slurm (scripts/slurm-up: slurmctld, slurmd,
munged on this machine), with a short run of the main job on 2 tasks, stopped the ways a cluster stops jobs; each
scenario ends with the same params_sha256 as an uninterrupted run of `--nproc 2` (the same world size, started by
our own launcher: srun's ranks train the same weights):
  usr1       `scancel --signal=USR1` mid-run: saved, requeued by the job itself, resumed; one log with both attempts
  cancel     a plain `scancel` (SIGTERM): saved, CANCELLED, not requeued; a resubmission resumes it
  timelimit  `--time=2 --signal=USR1@40` on a run longer than that: requeued before each time limit until done
  startup    SIGUSR1 once the ranks' handlers are installed (/proc/PID/status SigCgt) but before the first step
             (data loading): the first step's end stops it, nothing is lost
  kill       SIGKILL of task 1 mid-run: srun ends the job, naming the task, within the timeout; a resubmission
             resumes from the last checkpoint
  stop       SIGSTOP of task 1 mid-run (a hung rank), with --dist-timeout 15: rank 0's collective times out, it
             names rank 1 and exits 1, srun (--kill-on-bad-exit) kills the stopped task and the job ends FAILED
             within the timeout + 15 s; a resubmission resumes from the last checkpoint
No job may end FAILED because of our exit code 75 (the accounting's log, jobcomp.txt, is read).
Usage: slurm_jobs.py FASHION_MNIST_EXE SBATCH_SCRIPT SLURM_DIR WORK_DIR SCENARIO   (STOP_SEED=n reproduces the
signal times). Exits 77 (CTest's skip) with the reason when SLURM_DIR has no running cluster (scripts/slurm-up said
why slurmd cannot run here)."""
import glob, json, os, random, re, shutil, signal, subprocess, sys, time

exe, script, slurm_dir, work, scenario = sys.argv[1:6]
exe, script = os.path.abspath(exe), os.path.abspath(script)
unavailable = os.path.join(slurm_dir, "unavailable")
if os.path.exists(unavailable) or not os.path.exists(os.path.join(slurm_dir, "slurm.conf")):
    why = open(unavailable).read().strip() if os.path.exists(unavailable) else f"no cluster in {slurm_dir}"
    print(f"slurm_jobs: skipped: {why}")
    sys.exit(77)
env = dict(os.environ, SLURM_CONF=os.path.join(slurm_dir, "slurm.conf"), FASHION_MNIST=exe, OMP_NUM_THREADS="1",
           PATH="/usr/sbin:/usr/bin:" + os.environ.get("PATH", ""))
# Short, but long enough to be stopped in the middle: 2 epochs of 40 steps. timelimit: the same steps, each sleeping
# 1.5 s (--step-delay-ms: the weights are the same), so that the run lasts 120 s on any machine and the first
# attempt's USR1 (40 s before the 2-minute limit; Slurm sends it up to a minute early) comes before its end, at no
# CPU cost: it trained 8 epochs of 400 steps before (105 s on an idle AMD EPYC; 646 s and 5 attempts beside CI's other
# tests on an Intel Xeon).
epochs, batches = ("2", "40")
DELAY_MS = "1500"
flags = ["--epochs", epochs, "--limit-train-batches", batches, "--limit-val-batches", "1", "--eval-batch-size", "200",
         "--progress-tty", "0", "--width", "32", "--batch-size", "32", "--threads", "1", "--train-eval-size", "0",
         "--save", "last,steps:20"]
# stop: a collective timeout short enough to wait for (it changes no weight: the reference is the same run).
STOP_TIMEOUT = 15
if scenario == "stop":
    flags += ["--dist-timeout", str(STOP_TIMEOUT)]
seed = int(os.environ.get("STOP_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
t_start = time.time()
os.makedirs(work, exist_ok=True)
name = f"pt-{scenario}"
run_dir, log = os.path.join(work, "runs", name), os.path.join(work, f"slurm-{name}.out")
for p in (run_dir, log):
    shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))


def sh(*args, check=True):
    p = subprocess.run(list(args), env=env, capture_output=True, text=True, cwd=work)
    if check and p.returncode != 0:
        raise SystemExit(f"slurm_jobs: `{' '.join(args)}` failed ({p.returncode}): {p.stdout}{p.stderr}")
    return p.stdout


def reference():
    """The uninterrupted run (--nproc 2, our launcher), computed once per flag set and kept in WORK_DIR."""
    ref_dir = os.path.join(work, f"reference-{epochs}x{batches}")
    path = os.path.join(ref_dir, "summary.json")
    if not os.path.exists(path):
        t = time.time()
        p = subprocess.run([exe, "--nproc", "2", "--run-dir", ref_dir] + flags, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        print(f"reference (--nproc 2): {time.time() - t:.1f} s")
    return json.load(open(path))


def submit(*extra, program=()):
    args = ["sbatch", "--parsable", f"--job-name={name}", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2",
            "--cpus-per-task=1"] + list(extra) + [script] + flags + list(program)
    job = sh(*args).strip().split(";")[0]
    print(f"submitted job {job}: {' '.join(args[2:])}")
    return job


def job_info(job):
    out = sh("scontrol", "show", "job", "-o", job, check=False)
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def wait_state(job, states, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = job_info(job)
        if info.get("JobState") in states:
            return info
        time.sleep(0.5)
    raise SystemExit(f"slurm_jobs: job {job} not {'/'.join(states)} within {timeout} s: {job_info(job)}\n"
                     f"{open(log).read()[-3000:] if os.path.exists(log) else ''}")


def wait_log(pattern, timeout, count=1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = open(log).read() if os.path.exists(log) else ""
        if len(re.findall(pattern, text, re.M)) >= count:
            return text
        time.sleep(0.2)
    raise SystemExit(f"slurm_jobs: '{pattern}' (x{count}) not in {log} within {timeout} s:\n"
                     f"{open(log).read()[-3000:] if os.path.exists(log) else '(no log)'}")


def tasks(job):
    """pid -> SLURM_PROCID of the job's ranks (the main job's processes carrying its SLURM_JOB_ID)."""
    found = {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if os.path.realpath(d + "/exe") != exe:
                continue
            e = dict(kv.split("=", 1) for kv in open(d + "/environ").read().split("\0") if "=" in kv)
        except OSError:
            continue
        if e.get("SLURM_JOB_ID") == job and "SLURM_PROCID" in e:
            found[int(d[6:])] = int(e["SLURM_PROCID"])
    return found


def caught(pid, sig):
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(l for l in f if l.startswith("SigCgt:")).split()[1], 16)
    return bool(mask >> (int(sig) - 1) & 1)


def check_equal(ref, what, killed=False):
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    assert s["global_steps"] == ref["global_steps"], (what, s["global_steps"], ref["global_steps"])
    assert s["params_sha256"] == ref["params_sha256"], f"{what}: the weights differ from the uninterrupted run's"
    assert s["test_accuracy"] == ref["test_accuracy"], what
    # summary.json's history: every epoch's validation once, whichever attempt validated it, and every attempt.
    # (A SIGKILLed attempt writes nothing: its epochs' validation and the attempt itself are not in it.)
    if not killed:
        assert s["validation_history"] == ref["validation_history"], (what, s["validation_history"])
    assert s["finished"] and len(s["attempts"]) >= (1 if killed else 2) and s["attempts"][-1]["stopped_by"] is None, \
        s["attempts"]
    assert all(a["launcher"] == "slurm" and a["world_size"] == 2 for a in s["attempts"]), s["attempts"]
    return s


def no_failed(jobs):
    """The accounting's log (jobcomp/filetxt: one line per end of a job or an attempt) has no FAILED for them."""
    path = os.path.join(slurm_dir, "log", "jobcomp.txt")
    lines = [l for l in open(path).read().splitlines() if re.search(r"JobId=(%s) " % "|".join(jobs), l)] \
        if os.path.exists(path) else []
    states = [re.search(r"JobState=(\S+)", l).group(1) for l in lines]
    assert "FAILED" not in states, f"a job ended FAILED: {lines}"
    return states


def attempts(text):
    return re.findall(r"^=== \S+ job (\d+) attempt (\d+) on ", text, re.M)


def training_seconds(ref):
    """How long the uninterrupted run trains, measured by the reference's own log (metrics' train_seconds)."""
    return max(1.0, ref.get("train_seconds", 10.0))


ref = reference()
print(f"STOP_SEED={seed}; reference: {ref['global_steps']} steps, {ref['train_seconds']:.1f} s of training")
train_s = training_seconds(ref)

if scenario == "usr1":
    job = submit()
    wait_log(r"^epoch 0/", 300)
    delay = rng.uniform(0, 0.4 * train_s)
    time.sleep(delay)
    sh("scancel", "--signal=USR1", job)
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 600)
    text = open(log).read()
    print(f"USR1 {delay:.1f} s after the first epoch line: {info['JobState']}, Restarts={info['Restarts']}")
    assert info["JobState"] == "COMPLETED" and int(info["Restarts"]) >= 1, (info, text[-3000:])
    assert re.search(r"preempted at optimizer step \d+ by SIGUSR1.*requeueing the Slurm job", text), text[-3000:]
    assert re.search(rf"^requeueing: scontrol requeue {job}$", text, re.M) and "not requeued" not in text, text[-3000:]
    assert [a for _, a in attempts(text)] == ["1", "2"], attempts(text)
    assert "Classification report" in text and text.count("resumed from") == 1, text[-3000:]  # rank 0's line only
    assert "exported the final weights" not in text.split("=== ")[1], "a stop exported final.pt (mid-run weights)"
    s = check_equal(ref, "usr1")
    assert [(a["slurm_job_id"], a["slurm_restart_count"], a["stopped_by"]) for a in s["attempts"]] == \
        [(job, 0, "SIGUSR1"), (job, 1, None)], s["attempts"]
    print("states:", no_failed([job]))
elif scenario == "cancel":
    job = submit()
    wait_log(r"^epoch 0/", 300)
    delay = rng.uniform(0, 0.4 * train_s)
    time.sleep(delay)
    sh("scancel", job)
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 120)
    time.sleep(1)
    text = open(log).read()
    pre = json.load(open(os.path.join(run_dir, "preempted.json")))
    print(f"scancel {delay:.1f} s after the first epoch line: {info['JobState']}, Restarts={info['Restarts']}; {pre}")
    assert info["JobState"] == "CANCELLED" and int(info["Restarts"]) == 0, info
    assert pre["signal"] == signal.SIGTERM and not pre["requeue"], pre
    assert re.search(r"preempted at optimizer step \d+ by SIGTERM", text), text[-3000:]
    time.sleep(3)
    assert job_info(job).get("JobState") == "CANCELLED", "the cancelled job came back"
    job2 = submit()
    info2 = wait_state(job2, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 600)
    text = open(log).read()
    assert info2["JobState"] == "COMPLETED", (info2, text[-3000:])
    assert [j for j, _ in attempts(text)] == [job, job2], attempts(text)
    s = check_equal(ref, "cancel, resubmitted")
    assert s["resumed_from"], s["resumed_from"]
    assert [(a["slurm_job_id"], a["stopped_by"]) for a in s["attempts"]] == [(job, "SIGTERM"), (job2, None)], s["attempts"]
    print("states:", no_failed([job, job2]))
    # The finished run resumed once more (as a resubmission would): nothing to train, summary.json left intact.
    before = open(os.path.join(run_dir, "summary.json")).read()
    p = subprocess.run([exe, "--nproc", "2", "--run-dir", run_dir, "--resume"] + flags, env=env, capture_output=True,
                       text=True, cwd=work)
    assert p.returncode == 0 and "nothing left to train" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    assert open(os.path.join(run_dir, "summary.json")).read() == before, "a rerun of the finished run rewrote summary.json"
elif scenario == "timelimit":
    job = submit("--time=2", "--signal=USR1@40", program=("--step-delay-ms", DELAY_MS))
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 1500)
    text = open(log).read()
    print(f"time limit 2 min, USR1 40 s before: {info['JobState']}, Restarts={info['Restarts']}, attempts "
          f"{[a for _, a in attempts(text)]}")
    assert info["JobState"] == "COMPLETED" and int(info["Restarts"]) >= 1, (info, text[-3000:])
    assert "by SIGUSR1" in text and "by SIGTERM" not in text, text[-3000:]
    check_equal(ref, "timelimit")
    print("states:", no_failed([job]))
elif scenario == "startup":
    job = submit()
    deadline, sent = time.time() + 300, None
    while time.time() < deadline and sent is None:
        for pid, rank in tasks(job).items():
            try:
                if rank == 1 and caught(pid, signal.SIGUSR1):
                    sent = pid
                    break
            except (OSError, StopIteration):
                pass
        time.sleep(0.01)
    assert sent, "no rank of the job caught SIGUSR1 within 300 s"
    early = open(log).read()
    os.kill(sent, signal.SIGUSR1)  # to rank 1 alone: the ranks' agreement stops both
    print(f"SIGUSR1 to rank 1 (pid {sent}) during its start-up; 'epoch' lines so far: {early.count('epoch ')}")
    assert "epoch " not in early, "the signal came after training had started: not a start-up test"
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 600)
    text = open(log).read()
    assert info["JobState"] == "COMPLETED" and int(info["Restarts"]) == 1, (info, text[-3000:])
    m = re.search(r"preempted at optimizer step (\d+) by SIGUSR1", text)
    assert m and int(m.group(1)) <= 1, text[-3000:]
    check_equal(ref, "startup")
    print(f"stopped at step {m.group(1)}; states:", no_failed([job]))
elif scenario == "kill":
    job = submit()
    wait_log(r"^epoch 0/", 300)
    time.sleep(rng.uniform(0, 0.4 * train_s))
    victims = [pid for pid, rank in tasks(job).items() if rank == 1]
    assert victims, "rank 1 not found"
    t_kill = time.time()
    os.kill(victims[0], signal.SIGKILL)
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 120)
    ended = time.time() - t_kill
    text = open(log).read()
    print(f"SIGKILL of rank 1: the job ended {info['JobState']} {info['ExitCode']} {ended:.1f} s later")
    assert info["JobState"] == "FAILED", info
    assert re.search(r"task 1: Killed", text), text[-3000:]
    job2 = submit()
    info2 = wait_state(job2, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 600)
    text = open(log).read()
    assert info2["JobState"] == "COMPLETED", (info2, text[-3000:])
    check_equal(ref, "kill, resubmitted", killed=True)
elif scenario == "stop":
    job = submit()
    wait_log(r"^epoch 0/", 300)
    time.sleep(rng.uniform(0, 0.4 * train_s))
    victims = [pid for pid, rank in tasks(job).items() if rank == 1]
    assert victims, "rank 1 not found"
    t_stop = time.time()
    os.kill(victims[0], signal.SIGSTOP)
    info = wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, STOP_TIMEOUT + 120)
    ended = time.time() - t_stop
    text = open(log).read()
    print(f"SIGSTOP of rank 1: the job ended {info['JobState']} {info['ExitCode']} {ended:.1f} s later "
          f"(--dist-timeout {STOP_TIMEOUT})")
    still = [pid for pid in victims if os.path.exists(f"/proc/{pid}")]
    assert not still, f"the stopped rank {still} outlived its job"
    if info["JobState"] == "COMPLETED":  # the stop came after the last collective: nothing to time out
        print("  (the stop came after training's last collective)")
    else:
        assert info["JobState"] == "FAILED", info
        # Rank 0's CollectiveError: its own rank, the timeout, and rank 1 as the one that did not answer.
        assert re.search(r"rank 0 of 2: .*timed out.*rank 1 did not answer", text, re.S), text[-3000:]
        assert ended <= STOP_TIMEOUT + 15, f"the job ended {ended:.1f} s after the stop; timeout {STOP_TIMEOUT} s"
    job2 = submit()
    info2 = wait_state(job2, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 600)
    text = open(log).read()
    assert info2["JobState"] == "COMPLETED", (info2, text[-3000:])
    check_equal(ref, "stop, resubmitted", killed=True)
else:
    raise SystemExit(f"slurm_jobs: unknown scenario '{scenario}'; expected usr1, cancel, timelimit, startup, kill or "
                     f"stop")
print(f"slurm_jobs {scenario}: equal to the uninterrupted run ({ref['params_sha256'][:16]}); {time.time() - t_start:.0f} s")
