"""parallel::Environment against Lightning's SLURMEnvironment (lightning.fabric, from PyPI) on seeded Slurm
environments, both kinds: a batch script's (the job's variables only) and an srun step's (srun sets SLURM_NODELIST,
SLURM_STEP_NODELIST, SLURM_NTASKS and SLURM_STEP_NUM_TASKS to the step's, SLURM_JOB_NODELIST stays the job's).
Compared: the rank, world size, local rank and store port with Lightning's (global_rank, world_size, local_rank,
main_port), and the store host with Lightning's main_address and with the first host Slurm itself expands the
list to (`scontrol show hostnames`, when scontrol is installed). MASTER_ADDR / MASTER_PORT are set in some inputs
(both honour them).
Departures from the reference, kept on purpose (docs/parallel.md, "Slurm host lists"): a host name with two
bracket groups ("r[1-2]-g[3-4]") is r1-g3 for Slurm and for us, "r1" for Lightning's regular expression; the
driver checks such names against Slurm's expansion only.
Usage: slurm_environment.py PYTHON_WITH_LIGHTNING PROBE (--seeds A-B | --random SECONDS --start N)"""
import itertools, json, os, random, shutil, subprocess, sys, time

python, probe = sys.argv[1], sys.argv[2]
mode = sys.argv[3:]
scontrol = shutil.which("scontrol") or (os.path.exists("/usr/bin/scontrol") and "/usr/bin/scontrol")

LIGHTNING = r"""
import json, os, sys, warnings
warnings.filterwarnings("ignore")
from lightning.fabric.plugins.environments import SLURMEnvironment
out = []
for env in json.load(sys.stdin):
    os.environ.clear(); os.environ.update(env)
    e = SLURMEnvironment()
    out.append([e.global_rank(), e.world_size(), e.local_rank(), e.main_address, e.main_port])
print(json.dumps(out))
"""


def host_list(rng):
    """A Slurm host list: 1 to 3 items, each a prefix, 0 to 2 bracket groups of ranges (zero-padded or not), and
    sometimes a suffix; returns (list, whether Lightning reads its first item as Slurm does)."""
    items, simple_first = [], True
    for i in range(rng.randint(1, 3)):
        name = rng.choice(["node", "gpu", "dev", "a", "rack-", "n", "cn-", "x"])
        groups = rng.choice([0, 1, 1, 1, 2])
        for g in range(groups):
            width = rng.choice([0, 0, 2, 3])
            parts = []
            lo = rng.randint(0, 20)
            for _ in range(rng.randint(1, 3)):
                hi = lo + rng.choice([0, rng.randint(1, 12)])
                f = (lambda v: str(v).zfill(width))
                parts.append(f(lo) if hi == lo else f"{f(lo)}-{f(hi)}")
                lo = hi + rng.randint(1, 5)
            if len(parts) == 1 and "-" not in parts[0]:
                parts.append(f(int(parts[0]) + rng.randint(1, 9)))  # Slurm writes one host without brackets
            name += "[" + ",".join(parts) + "]"
            if g == 0 and groups == 2:
                name += rng.choice(["-g", "s", "-"])
        if groups == 0:
            name += str(rng.randint(0, 99))
        if i == 0 and groups == 2:
            simple_first = False
        items.append(name)
    return ",".join(items), simple_first


def make_input(rng):
    job_list, simple_job = host_list(rng)
    step = rng.random() < 0.5
    ntasks = rng.randint(1, 64)
    env = {"SLURM_PROCID": str(rng.randrange(ntasks)), "SLURM_NTASKS": str(ntasks),
           "SLURM_LOCALID": str(rng.randrange(8)), "SLURM_JOB_ID": str(rng.randint(1, 99999999)),
           "SLURM_JOB_NODELIST": job_list, "SLURM_NODELIST": job_list, "SLURM_JOB_NAME": "train",
           "SLURM_NTASKS_PER_NODE": str(ntasks)}  # Lightning refuses a job without it
    simple = simple_job
    if step:  # srun: the step's nodes and tasks
        step_list, simple = host_list(rng)
        env.update(SLURM_STEP_NODELIST=step_list, SLURM_NODELIST=step_list, SLURM_STEP_NUM_TASKS=str(ntasks))
    if rng.random() < 0.15:
        env["MASTER_ADDR"] = rng.choice(["10.0.0.7", "head-node"])
    if rng.random() < 0.15:
        env["MASTER_PORT"] = str(rng.randint(1024, 65535))
    return env, simple or "MASTER_ADDR" in env


def ours(env):
    p = subprocess.run([probe], env=env, capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


# scontrol reads a configuration before it expands anything (no daemon is asked): a minimal one of our own, unless
# the caller gives one (SLURM_CONF).
scontrol_env = dict(os.environ)
if scontrol and not os.environ.get("SLURM_CONF"):
    import tempfile
    conf = os.path.join(tempfile.mkdtemp(prefix="slurm_environment."), "slurm.conf")
    with open(conf, "w") as f:
        f.write("ClusterName=probe\nSlurmctldHost=localhost\nNodeName=localhost\nPartitionName=p Nodes=localhost\n")
    scontrol_env["SLURM_CONF"] = conf


def first_host(lst):
    if not scontrol:
        return None
    p = subprocess.run([scontrol, "show", "hostnames", lst], capture_output=True, text=True, timeout=30,
                       env=scontrol_env)
    if p.returncode != 0:
        raise SystemExit(f"slurm_environment: `scontrol show hostnames {lst}` failed: {p.stderr[-1000:]}")
    return p.stdout.split()[0] if p.stdout.split() else None


def compare(seed):
    rng = random.Random(seed)
    inputs = [make_input(rng) for _ in range(20)]
    p = subprocess.run([python, "-c", LIGHTNING], input=json.dumps([e for e, _ in inputs]), capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"slurm_environment: Lightning failed: {p.stderr[-2000:]}")
    for i, ((env, simple), ref) in enumerate(zip(inputs, json.loads(p.stdout))):
        got = ours(env)
        fields = got.split()
        want_host = env.get("MASTER_ADDR") or first_host(env["SLURM_NODELIST"])
        problems = []
        if got.startswith("error:") or len(fields) != 6:
            problems.append(f"ours: {got}")
        else:
            source, rank, world, local, addr, port = fields
            if int(ref[1]) > 1 and source != "slurm":
                problems.append(f"source {source}")
            if [int(rank), int(world), int(local)] != [ref[0], ref[1], ref[2]]:
                problems.append(f"rank/world/local {rank}/{world}/{local}, Lightning {ref[0]}/{ref[1]}/{ref[2]}")
            if int(ref[1]) > 1:  # one task: no store (ours keeps its defaults)
                if int(port) != int(ref[4]):
                    problems.append(f"port {port}, Lightning {ref[4]}")
                if simple and addr != ref[3]:
                    problems.append(f"host {addr}, Lightning {ref[3]}")
                if want_host and addr != want_host:
                    problems.append(f"host {addr}, Slurm's first host {want_host}")
        if problems:
            print(f"slurm_environment: seed {seed}, input {i}: {'; '.join(problems)}\n  env: {json.dumps(env)}\n"
                  f"  reproduce: {sys.executable} {' '.join(sys.argv[:3])} --seeds {seed}-{seed}")
            return None
    return len(inputs)


compared, t0 = 0, time.time()
if mode[:1] == ["--seeds"]:
    a, b = map(int, mode[1].split("-"))
    seeds = range(a, b + 1)
elif mode[:1] == ["--random"]:
    deadline, start = time.time() + float(mode[1]), int(mode[3]) if len(mode) > 3 else 0
    # takewhile, not a filter: a filter would walk the whole range once the deadline passed
    seeds = itertools.takewhile(lambda s: time.time() < deadline, range(start, 1 << 62))
else:
    raise SystemExit("usage: slurm_environment.py PYTHON PROBE (--seeds A-B | --random SECONDS --start N)")
for seed in seeds:
    n = compare(seed)
    if n is None:
        sys.exit(1)
    compared += n
print(f"differential.slurm_environment: {compared} inputs compared, 0 differences ({time.time() - t0:.1f} s; "
      f"Slurm's own expansion {'checked' if scontrol else 'not installed: not checked'})")
