#!/usr/bin/env python3
"""Reads two run directories' TensorBoard event files with TensorBoard's own EventAccumulator and compares them: every
histogram (weights/..., grads/...) field by field (min, max, num, sum, sum_squares, bucket limits and counts) and the
scalars named on the command line, at every step, bit for bit. Used by tests/unit/test_fsdp.cpp: a run of stage 3
against DataParallel's on the same model and inputs.
Usage: same_tensorboard.py REFERENCE_DIR OTHER_DIR [SCALAR_TAG ...]
Prints the first difference and exits 1; otherwise prints how many values were compared and exits 0."""
import math
import sys

from tensorboard.backend.event_processing import event_accumulator as ea_mod


def load(logdir):
    ea = ea_mod.EventAccumulator(logdir, size_guidance={"scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


ref_dir, other_dir, scalar_tags = sys.argv[1], sys.argv[2], sys.argv[3:]
ref, other = load(ref_dir), load(other_dir)
compared = 0


def fail(what):
    print(f"same_tensorboard: {what} ({ref_dir} against {other_dir})")
    sys.exit(1)


hist_tags = sorted(ref.Tags()["histograms"])
if not hist_tags:
    fail("the reference has no histograms")
if hist_tags != sorted(other.Tags()["histograms"]):
    fail(f"histogram tags {sorted(other.Tags()['histograms'])}, expected {hist_tags}")
for tag in hist_tags:
    want, got = ref.Histograms(tag), other.Histograms(tag)
    if [e.step for e in got] != [e.step for e in want]:
        fail(f"{tag}: steps {[e.step for e in got]}, expected {[e.step for e in want]}")
    for w, g in zip(want, got):
        hw, hg = w.histogram_value, g.histogram_value
        for field in ("min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket"):
            a, b = getattr(hw, field), getattr(hg, field)
            a, b = (list(a), list(b)) if field.startswith("bucket") else (a, b)
            if not (same(a, b) if not isinstance(a, list) else len(a) == len(b) and all(map(same, a, b))):
                fail(f"{tag} step {w.step}: {field} {b!r}, expected {a!r}")
            compared += 1
for tag in scalar_tags:
    if tag not in ref.Tags()["scalars"] or tag not in other.Tags()["scalars"]:
        fail(f"scalar tag {tag} missing")
    want, got = ref.Scalars(tag), other.Scalars(tag)
    if [e.step for e in got] != [e.step for e in want]:
        fail(f"{tag}: steps {[e.step for e in got]}, expected {[e.step for e in want]}")
    for w, g in zip(want, got):
        if not same(w.value, g.value):
            fail(f"{tag} step {w.step}: {g.value!r}, expected {w.value!r}")
        compared += 1
print(f"same_tensorboard: {len(hist_tags)} histogram tags, {compared} values compared, 0 differences")
