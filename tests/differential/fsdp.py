"""Stage 3 (parallel::ShardedDataParallel, FullyShard units) against PyTorch's FSDP2 (`fully_shard`, Gloo, a CPU
mesh) on seeded inputs: each seed picks the data and initial weights (tests/integration/fsdp_oracle.py draws them
from it), the world size (2 or 3), the optimizer (AdamW or SGD with momentum), reshard_after_forward (on or off) and
the steps (2 to 4), and, with SGD, mixed precision (none, MixedPrecisionPolicy(param_dtype=bfloat16), or with
reduce_dtype=float32 too: bit for bit so far; AdamW's rounding, amplified by a bf16 cast, would need another
tolerance). torchrun runs the Python side, then the ranks of the test_fsdp binary (its worker mode,
POLICYTRAIN_FSDP_WORKER, started by torchrun --no-python) train the same model; every rank's whole parameters,
shards, last gradient shards, optimizer state and buffers must agree within 1e-6 (AdamW's update rounds differently
in C++ and Python: 6e-8 seen; SGD is bit for bit).

Usage: fsdp.py --binary TEST_FSDP (--seeds A-B | --random SECONDS [--start N])
On a difference: the first one, the seed and the command that reruns it; exit 1.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_loop  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "..", "integration", "fsdp_oracle.py")
TOL = 1e-6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def case(seed):
    """The seed's world size, optimizer, reshard_after_forward and steps."""
    return 2 + seed % 2, ("adamw", "sgd")[(seed // 2) % 2], (seed // 4) % 2 == 0, 2 + seed % 3


def mixed_precision(seed):
    """The seed's (param_dtype, reduce_dtype), "" for unset: SGD cases only."""
    if case(seed)[1] != "sgd":
        return "", ""
    return (("", ""), ("bf16", ""), ("bf16", "fp32"))[(seed // 8) % 3]


def torchrun(world, args, env, log):
    cmd = ["torchrun", "--nproc-per-node", str(world), "--master-addr", "127.0.0.1", "--master-port",
           str(free_port())] + args
    with open(log, "w") as f:
        r = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    return r.returncode, cmd


def load(d):
    m = json.load(open(os.path.join(d, "manifest.json")))
    return {k: np.fromfile(os.path.join(d, e["file"]), dtype=np.float32 if e["dtype"] == "float32" else np.int64)
            .reshape(e["shape"]) for k, e in m.items()}


def check(binary, seeds, totals):
    for seed in seeds:
        world, opt, reshard, steps = case(seed)
        param_dtype, reduce_dtype = mixed_precision(seed)
        mp_args = (["--param-dtype", param_dtype] if param_dtype else []) + (["--reduce-dtype", reduce_dtype] if reduce_dtype else [])
        what = f"{world} ranks, {opt}, reshard {reshard}, {steps} steps, mixed precision '{param_dtype}/{reduce_dtype}'"
        rerun = f"python3 {os.path.abspath(__file__)} --binary {binary} --seeds {seed}-{seed}"
        d = tempfile.mkdtemp(prefix=f"policytrain-differential-fsdp-{seed}-")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        rc, cmd = torchrun(world, [ORACLE, "--seed", str(seed), "--optimizer", opt, "--steps", str(steps), "--reshard",
                                   "1" if reshard else "0", "--out", d] + mp_args, env, os.path.join(d, "py.log"))
        if rc != 0:
            print(f"seed {seed}: Python's side failed ({' '.join(cmd)}); see {d}/py.log\nrerun: {rerun}")
            return False
        ours = dict(env, POLICYTRAIN_FSDP_WORKER="1", POLICYTRAIN_FSDP_DIR=d, POLICYTRAIN_FSDP_SUBDIR="cpp",
                    POLICYTRAIN_FSDP_OPTIMIZER=opt, POLICYTRAIN_FSDP_STEPS=str(steps),
                    POLICYTRAIN_FSDP_RESHARD="1" if reshard else "0", POLICYTRAIN_FSDP_PARAM_DTYPE=param_dtype,
                    POLICYTRAIN_FSDP_REDUCE_DTYPE=reduce_dtype)
        rc, cmd = torchrun(world, ["--no-python", binary], ours, os.path.join(d, "cpp.log"))
        if rc != 0:
            print(f"seed {seed}: our side failed ({' '.join(cmd)}); see {d}/cpp.log and {d}/cpp-stderr*.txt\n"
                  f"rerun: {rerun}")
            return False
        for r in range(world):
            want, got = load(os.path.join(d, "py", f"rank{r}")), load(os.path.join(d, "cpp", f"rank{r}"))
            for name, w in want.items():
                if not name.startswith(("param.", "shard.", "grad.", "state.", "buffer.")):
                    continue
                g = got.get(name)
                if g is None or g.shape != w.shape:
                    print(f"seed {seed} ({what}), rank {r}, {name}: "
                          f"ours {None if g is None else g.shape}, Python's {w.shape}\nrerun: {rerun}")
                    return False
                diff = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) if w.size else 0.0
                if diff > TOL:
                    print(f"seed {seed} ({what}), rank {r}, {name}: "
                          f"max |ours - Python's| = {diff:.3g} > {TOL}\nrerun: {rerun}")
                    return False
                totals["values"] += int(w.size)
        totals["inputs"] += 1
        shutil.rmtree(d, ignore_errors=True)
    return True


if __name__ == "__main__":
    sys.exit(seed_loop.drive("fsdp", __doc__, check, 1, lambda t: f"{t['values']} values"))
