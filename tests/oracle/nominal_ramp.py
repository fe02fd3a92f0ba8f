"""accumulate::NominalBatch against Ultralytics' trainer (ultralytics/engine/trainer.py, _do_train):
    accumulate = max(round(nbs / batch_size), 1); weight_decay *= batch_size * accumulate / nbs
    for each micro-batch ni (0-based, across epochs): if ni <= nw:
        accumulate = max(1, int(np.interp(ni, [0, nw], [1, nbs / batch_size]).round()))
    ... backward ...; if ni - last_opt_step >= accumulate: optimizer_step(); last_opt_step = ni
with our documented difference: the trailing window at the end of an epoch is stepped (Ultralytics carries it into
the next epoch). Compared exactly: the ramp accumulate(ni), the micro-batches after which a step is taken, the
accumulation after the warmup and the weight-decay factor (rtol 1e-12)."""
import numpy as np

from common import check, close, finish, run_dump

d = run_dump("nominal_ramp")
n = 0
for c in d["cases"]:
    nbs, bs, nw, nb, epochs = c["nominal"], c["batch"], c["warmup"], c["nb"], c["epochs"]
    name = f"nbs {nbs} batch {bs} nw {nw} nb {nb} epochs {epochs}"
    accumulate = max(round(nbs / bs), 1)
    wd_factor = bs * accumulate / nbs
    steps, ramp, last = [], [], -1
    for epoch in range(epochs):
        for i in range(nb):
            ni = i + nb * epoch
            if nw > 0 and ni <= nw:
                accumulate = max(1, int(np.interp(ni, [0, nw], [1, nbs / bs]).round()))
            ramp.append(accumulate)
            if ni - last >= accumulate or i == nb - 1:  # or: our trailing window at the epoch's end
                steps.append(ni)
                last = ni
    check(c["accumulate_at"] == ramp, f"{name}: accumulate(ni) ours {c['accumulate_at'][:12]}.. Ultralytics {ramp[:12]}..")
    check(c["steps_at"] == steps, f"{name}: steps after micro-batches ours {c['steps_at'][:12]}.. Ultralytics {steps[:12]}..")
    check(c["accumulate"] == max(round(nbs / bs), 1), f"{name}: accumulate after the warmup")
    close(c["weight_decay_factor"], wd_factor, f"{name}: weight-decay factor", 1e-12, 0)
    close(c["weight_decay"], 5e-4 * wd_factor, f"{name}: the group's weight decay", 1e-12, 0)
    n += 5
finish("NominalBatch vs Ultralytics' nominal batch rule", n)
