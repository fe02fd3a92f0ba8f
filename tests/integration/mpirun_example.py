"""The main job under Open MPI's mpirun (2 ranks, PMIx variables: OMPI_COMM_WORLD_RANK, ...) against `--nproc 2`
(our launcher): the same params_sha256 and test accuracy, and a log a scheduler can keep: mpirun gives rank 0's
output a pseudo-terminal, yet no progress-bar redraw (a carriage return or an escape sequence) reaches it, and the
per-step lines come from rank 0 only. The ranks of `--nproc 2` show in ps under the binary's name.
A killed rank: SIGKILL of rank 1 after its first step checkpoint; mpirun ends rank 0 and exits non-zero within the
collective timeout (--dist-timeout 15), naming rank 1 and its signal, and leaves no rank behind; `mpirun ... --resume`
then ends with the uninterrupted run's weights.
Usage: mpirun_example.py FASHION_MNIST_EXE WORK_DIR   (exits 77, CTest's skip, when mpirun is not installed)"""
import json, os, shutil, socket, subprocess, sys, time

exe, work = sys.argv[1], sys.argv[2]
mpirun = shutil.which("mpirun")
if not mpirun:
    print("mpirun_example: skipped: mpirun is not on PATH (Debian: apt-get install openmpi-bin)")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
flags = ["--epochs", "2", "--limit-train-batches", "30", "--limit-val-batches", "1", "--eval-batch-size", "200",
         "--width", "8", "--batch-size", "32", "--threads", "1", "--train-eval-size", "0", "--save", "last"]
env = dict(os.environ, OMP_NUM_THREADS="1")
# Root (a CI container) needs Open MPI's consent; both variables, as its error message asks.
env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

t = time.time()
ref_dir = os.path.join(work, "nproc2")
launcher = subprocess.Popen([exe, "--nproc", "2", "--run-dir", ref_dir] + flags, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
# The ranks --nproc starts are named after the binary in ps (before: "exe", from /proc/self/exe), so that looking
# for a job's processes, or its orphans, by name finds them.
names = set()
while launcher.poll() is None and len(names) < 2:
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == str(launcher.pid):
                names.add((d, open(f"/proc/{d}/comm").read().strip()))
        except (OSError, IndexError):
            pass
    time.sleep(0.05)
out, err = launcher.communicate()
assert launcher.returncode == 0, out[-2000:] + err[-2000:]
t_ref = time.time() - t
want = os.path.basename(os.path.realpath(exe))[:15]
assert names and all(n == want for _, n in names), f"--nproc's ranks are named {names}; expected {want}"

with socket.socket() as s:  # a free port for the store
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
t = time.time()
mpi_dir = os.path.join(work, "mpirun")
# No --progress-tty: the detection must see that mpirun's pseudo-terminal is not a user's.
cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "MASTER_ADDR=127.0.0.1", "-x",
       f"MASTER_PORT={port}", "-x", "OMP_NUM_THREADS", exe, "--run-dir", mpi_dir] + flags
p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
t_mpi = time.time() - t
out = p.stdout + p.stderr
assert p.returncode == 0, out[-3000:]
ref, got = (json.load(open(os.path.join(d, "summary.json"))) for d in (ref_dir, mpi_dir))
assert got["params_sha256"] == ref["params_sha256"], "mpirun's weights differ from --nproc 2's"
assert got["test_accuracy"] == ref["test_accuracy"] and got["global_steps"] == ref["global_steps"]
assert "\r" not in p.stdout and "\x1b[" not in p.stdout, f"progress-bar redraws in mpirun's output: {p.stdout[:500]!r}"
epoch_lines = [l for l in p.stdout.splitlines() if l.startswith("epoch ")]
assert epoch_lines and len(epoch_lines) == len(set(epoch_lines)), "progress lines repeated (more than rank 0 prints)"
print(f"mpirun -np 2: {t_mpi:.1f} s, --nproc 2: {t_ref:.1f} s; equal weights ({got['params_sha256'][:16]}), "
      f"{len(epoch_lines)} plain progress lines, no redraws")


# A killed rank. The step checkpoint of step 5 on disk, rank 1 (found by its OMPI_COMM_WORLD_RANK) gets SIGKILL.
def ranks():
    """pid -> OMPI_COMM_WORLD_RANK of the main job's processes started by mpirun."""
    found = {}
    for d in os.listdir("/proc"):
        try:
            if not d.isdigit() or os.path.realpath(f"/proc/{d}/exe") != os.path.realpath(exe):
                continue
            e = dict(kv.split("=", 1) for kv in open(f"/proc/{d}/environ").read().split("\0") if "=" in kv)
        except OSError:
            continue
        if "OMPI_COMM_WORLD_RANK" in e and e.get("MASTER_PORT") == str(port):
            found[int(d)] = int(e["OMPI_COMM_WORLD_RANK"])
    return found


TIMEOUT = 15
kill_dir = os.path.join(work, "mpirun-killed")
kill_flags = flags[:flags.index("--save")] + ["--save", "last,steps:5", "--dist-timeout", str(TIMEOUT)]
cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "MASTER_ADDR=127.0.0.1", "-x",
       f"MASTER_PORT={port}", "-x", "OMP_NUM_THREADS", exe, "--run-dir", kill_dir] + kill_flags
p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
marker = os.path.join(kill_dir, "checkpoints", "step-00000005.ckpt")
while not os.path.exists(marker) and p.poll() is None:
    time.sleep(0.01)
victims = [pid for pid, rank in ranks().items() if rank == 1]
assert p.poll() is None and victims, f"rank 1 not found (mpirun exit {p.poll()})"
t_kill = time.time()
os.kill(victims[0], 9)
out, _ = p.communicate(timeout=TIMEOUT + 60)
ended = time.time() - t_kill
assert p.returncode != 0, f"mpirun exited 0 after a rank was killed:\n{out[-3000:]}"
assert "process rank 1" in out and "signal 9" in out, out[-3000:]
assert ended <= TIMEOUT + 10, f"mpirun ended {ended:.1f} s after the kill; --dist-timeout {TIMEOUT}"
assert not ranks(), f"ranks left after mpirun ended: {ranks()}"
print(f"SIGKILL of rank 1: mpirun exited {p.returncode} {ended:.1f} s later, naming rank 1")
t = time.time()
r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
got = json.load(open(os.path.join(kill_dir, "summary.json")))
assert got["resumed_from"], got["resumed_from"]
assert got["params_sha256"] == ref["params_sha256"], "resumed after the killed rank: the weights differ"
print(f"mpirun --resume: {time.time() - t:.1f} s, equal to the uninterrupted run ({got['params_sha256'][:16]})")
