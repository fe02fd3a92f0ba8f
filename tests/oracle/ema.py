"""callbacks::Ema against Ultralytics' ModelEMA formula (ultralytics/utils/torch_utils.py, ModelEMA.update):
    updates += 1; d = decay * (1 - exp(-updates / tau))
    for every state_dict entry v with v.dtype.is_floating_point: v = d * v + (1 - d) * live
starting from a copy of the model at the first fit, applied to the live state the C++ run recorded after every
step that was taken (a skipped step is not averaged). A batch-norm model: its running mean and variance are
floating-point buffers and are averaged; num_batches_tracked (integer) is not, and evaluation uses the live one.
Also checked: evaluation saw the EMA parameters and buffers, and the live state is back after it.
Tolerance: rtol 1e-5, atol 1e-6 (float32 arithmetic in a different order)."""
import math

import torch

from common import check, close, finish, run_dump, tensor

d = run_dump("ema")
decay, tau = d["decay"], d["tau"]
ema = {k: tensor(v) for k, v in d["initial"].items()}
kinds = {k: ("int" if k.endswith("num_batches_tracked") else "float") for k in ema}
updates = 0
for live in d["live"]:
    updates += 1
    dd = decay * (1 - math.exp(-updates / tau))
    for k, v in ema.items():
        if kinds[k] == "float":  # ModelEMA: if v.dtype.is_floating_point
            ema[k] = v * dd + (1 - dd) * tensor(live[k])
n = 0
check(d["skipped"] >= 1, "the run has a skipped step")
check(d["updates"] == updates, f"updates: ours {d['updates']}, steps taken {updates}")
avg = d["average"]
for k, v in ema.items():
    if kinds[k] != "float":
        check(f"buffer/{k}" not in avg, f"integer buffer {k} is not averaged")
        continue
    key = ("buffer/" if ("running_" in k) else "average/") + k
    check(key in avg, f"{key} in the EMA state")
    if key in avg:
        close(tensor(avg[key]), v, f"EMA of {k} after {updates} updates", 1e-5, 1e-6)
        n += 1
last_live = d["live"][-1]
for k, v in d["eval_state"].items():
    expected = ema[k] if kinds[k] == "float" else tensor(d["live_after_eval"][k])
    close(tensor(v), expected, f"evaluation's {k}", 1e-5, 1e-6)
    close(tensor(d["live_after_eval"][k]), tensor(last_live[k]), f"live {k} restored after evaluation", 0, 0)
    n += 2
finish("Ema vs Ultralytics ModelEMA", n)
