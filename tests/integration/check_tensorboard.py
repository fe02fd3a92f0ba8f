#!/usr/bin/env python3
"""Reads a run directory's TensorBoard event files with TensorBoard's own EventAccumulator and compares them
with what the run logged (expected.json, written by tests/unit/test_tensorboard.cpp):
  scalars:    {tag: [[step, value], ...]}  the tag's steps exactly (none twice, none missing), values as float32
  histograms: {tag: [[step, numel], ...]}  the steps, and bucket counts summing to the tensor's size
  hparams:    {name: value}                the session start info holds them; metrics: the experiment's metric tags
  text:       {tag: text}                  the text plugin's tensor
  also_tags:  [tag, ...]                   further scalar tags that must be present
Exit status 0 when everything matches; every mismatch is printed."""
import json
import math
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea_mod
from tensorboard.plugins.hparams import plugin_data_pb2

logdir, expected_path = sys.argv[1], sys.argv[2]
exp = json.load(open(expected_path))
ea = ea_mod.EventAccumulator(logdir, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
ea.Reload()
errors = []
tags = ea.Tags()

for tag, rows in exp.get("scalars", {}).items():
    if tag not in tags["scalars"]:
        errors.append(f"scalar tag {tag} missing (have {sorted(tags['scalars'])})")
        continue
    got = ea.Scalars(tag)
    steps = [e.step for e in got]
    want_steps = [r[0] for r in rows]
    if steps != want_steps:
        errors.append(f"{tag}: steps {steps}, expected {want_steps}")
        continue
    for e, (s, v) in zip(got, rows):
        want = float(np.float32(v)) if v is not None and math.isfinite(v) else v
        if not (e.value == want or (isinstance(want, float) and math.isnan(want) and math.isnan(e.value))):
            errors.append(f"{tag} step {s}: {e.value!r}, expected {want!r}")
for tag in exp.get("also_tags", []):
    if tag not in tags["scalars"]:
        errors.append(f"scalar tag {tag} missing")
    elif any(not math.isfinite(e.value) or e.value < 0 for e in ea.Scalars(tag)):
        errors.append(f"{tag}: a value is negative or not finite")

for tag, rows in exp.get("histograms", {}).items():
    if tag not in tags["histograms"]:
        errors.append(f"histogram tag {tag} missing (have {sorted(tags['histograms'])})")
        continue
    got = ea.Histograms(tag)
    if [e.step for e in got] != [r[0] for r in rows]:
        errors.append(f"{tag}: steps {[e.step for e in got]}, expected {[r[0] for r in rows]}")
    for e, (s, n) in zip(got, rows):
        h = e.histogram_value
        if sum(h.bucket) != n or h.num != n or len(h.bucket) != len(h.bucket_limit):
            errors.append(f"{tag} step {s}: bucket sum {sum(h.bucket)}, num {h.num}, expected {n}")
        if not (h.min <= h.max and list(h.bucket_limit) == sorted(h.bucket_limit) and h.bucket_limit[-1] == h.max):
            errors.append(f"{tag} step {s}: limits not increasing to max")

if "hparams" in exp:
    content = ea.PluginTagToContent("hparams")
    for t in ("_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"):
        if t not in content:
            errors.append(f"hparams: {t} missing (have {sorted(content)})")
    if "_hparams_/session_start_info" in content:
        d = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
        for k, v in exp["hparams"].items():
            hv = d.session_start_info.hparams[k]
            got = (hv.bool_value if isinstance(v, bool) else hv.number_value if isinstance(v, (int, float))
                   else hv.string_value)
            if got != v:
                errors.append(f"hparam {k}: {got!r}, expected {v!r}")
    if "_hparams_/experiment" in content:
        d = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
        names = sorted(i.name for i in d.experiment.hparam_infos)
        if names != sorted(exp["hparams"]):
            errors.append(f"experiment hparam_infos {names}, expected {sorted(exp['hparams'])}")
        metrics = [m.name.tag for m in d.experiment.metric_infos]
        if metrics != exp.get("metrics", metrics):
            errors.append(f"experiment metrics {metrics}, expected {exp['metrics']}")
        for m in metrics:
            if m not in tags["scalars"]:
                errors.append(f"metric {m} has no scalar values")
    if "_hparams_/session_end_info" in content:
        d = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"])
        if d.session_end_info.status != 1:
            errors.append(f"session end status {d.session_end_info.status}, expected STATUS_SUCCESS (1)")

for tag, text in exp.get("text", {}).items():
    t = tag + "/text_summary"
    if t not in tags["tensors"]:
        errors.append(f"text {t} missing (have {sorted(tags['tensors'])})")
        continue
    got = ea.Tensors(t)[0].tensor_proto.string_val[0].decode()
    if got != text:
        errors.append(f"text {t}: {got!r}, expected {text!r}")

for e in errors:
    print("check_tensorboard:", e)
print(f"check_tensorboard: {len(errors)} mismatches in {logdir}")
sys.exit(1 if errors else 0)
