"""Shared by the parity scripts: run the C++ side, read its JSON, compare with stated tolerances."""
import json
import math
import subprocess
import sys

import torch

FAILURES = []


def run_dump(case):
    """argv: <oracle_dump binary> <out.json>; runs the C++ case and returns its JSON."""
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} <oracle_dump> <out.json>")
    exe, out = sys.argv[1], sys.argv[2]
    subprocess.run([exe, case, out], check=True)
    with open(out) as f:
        return json.load(f)


def _num(v):
    return float(v) if not isinstance(v, str) else float(v.replace("inf", "inf"))


def tensor(j, dtype=torch.float32):
    """A tensor from the {"shape", "values"} the C++ side writes (non-finite values as strings)."""
    vals = [_num(v) for v in j["values"]]
    return torch.tensor(vals, dtype=torch.float64).reshape(j["shape"]).to(dtype)


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("MISMATCH:", what)


def close(a, b, what, rtol, atol):
    """Tensors (or numbers) equal within rtol/atol, NaN equal to NaN."""
    ta = torch.as_tensor(a, dtype=torch.float64)
    tb = torch.as_tensor(b, dtype=torch.float64)
    ok = ta.shape == tb.shape and torch.allclose(ta, tb, rtol=rtol, atol=atol, equal_nan=True)
    if not ok:
        diff = (ta - tb).abs().max().item() if ta.shape == tb.shape else "shape"
        what = f"{what}: ours {ta.flatten()[:6].tolist()} reference {tb.flatten()[:6].tolist()} (max diff {diff})"
    check(ok, what)


def finish(name, compared):
    if not compared:
        print(f"{name}: nothing was compared against the reference (an empty case list?)")
        sys.exit(1)
    if FAILURES:
        print(f"{name}: {len(FAILURES)} mismatches against the reference")
        sys.exit(1)
    print(f"{name}: {compared} quantities equal to the reference")
