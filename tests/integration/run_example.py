"""Runs the main job briefly and checks what it printed and the summary.json it wrote."""
import json, os, subprocess, sys

exe, run_dir = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
cmd = [exe, "--epochs", "2", "--limit-train-batches", "40", "--limit-val-batches", "3", "--eval-batch-size", "200",
       "--run-dir", run_dir, "--progress-tty", "0", "--threads", "2"] + extra
p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
print(p.stdout[-4000:]); print(p.stderr[-4000:], file=sys.stderr)
assert p.returncode == 0, f"exit code {p.returncode}"
for needle in ("precision", "recall", "f1-score", "support", "macro avg", "weighted avg", "Ankle boot", "epoch 1/1"):  # the last epoch line: index 1 of 0..1
    assert needle in p.stdout, f"output lacks {needle!r}"
s = json.load(open(os.path.join(run_dir, "summary.json")))
for key in ("test_accuracy", "test_loss", "epochs_run", "global_steps", "train_samples_per_second", "wall_seconds",
            "stopped_early", "params_sha256", "torch_version", "policies"):
    assert key in s, f"summary.json lacks {key}"
assert s["epochs_run"] == 2, s["epochs_run"]
assert s["global_steps"] == 80, s["global_steps"]
assert 0.3 < s["test_accuracy"] <= 1.0, s["test_accuracy"]   # 80 steps of AdamW: far above chance (0.1)
assert len(s["params_sha256"]) == 64
# Model selection on the validation split, the test set evaluated exactly once, after training.
assert s["split"]["train"] + s["split"]["val"] == 60000 and s["split"]["test"] == 10000, s["split"]
# Once; twice with --tta (the same weights without the test-time augmentation, reported beside it).
assert s["test_evaluations"] == (2 if s.get("test_accuracy_without_tta") is not None else 1), s["test_evaluations"]
assert 0.3 < s["val_accuracy"] <= 1.0, s["val_accuracy"]
assert len(s["validation_history"]) == 2, s["validation_history"]
assert s["validation_history"][-1]["accuracy"] == s["val_accuracy"]
assert 0.0 <= s["data_wait_fraction"] <= 1.0 and "forward" in s["step_seconds"], "summary lacks the time summary"
# The training images' accuracy (--train-eval-size, default 5000): each rank evaluates its shard of them, at most
# --limit-val-batches 3 batches of --eval-batch-size 200, and the counts are summed across ranks.
world = int(extra[extra.index("--nproc") + 1]) if "--nproc" in extra else 1
expected = world * min(5000 // world, 3 * 200)
assert 0.3 < s["train_accuracy"] <= 1.0, s["train_accuracy"]
assert s["train_eval_samples"] == expected, (s["train_eval_samples"], expected)
# A flag given twice takes its last value (scripts/demo passes its recipe first, a user's flags after it), and the
# summary reports what the run used.
def last(flag, default):
    at = [i for i, a in enumerate(extra) if a == flag]
    return extra[at[-1] + 1] if at else default
assert s["policies"]["block"] == last("--block", "conv-bn-relu-pool"), s["policies"]["block"]
assert s["policies"]["label_smoothing"] == float(last("--label-smoothing", "0")), s["policies"]["label_smoothing"]
assert s["policies"]["conv3"] == int(last("--conv3", "0")), s["policies"]["conv3"]
# --tta: validation and test average each image's and its flip's logits; the test accuracy without it is reported
# beside it (the same weights), and the two differ in what they evaluated, not in the training.
if "--tta" in extra:
    assert 0.3 < s["test_accuracy_without_tta"] <= 1.0, s["test_accuracy_without_tta"]
else:
    assert s["test_accuracy_without_tta"] is None, s["test_accuracy_without_tta"]
print("example OK:", s["test_accuracy"])
if world > 1:
    # Checkpoint lines come from rank 0 only (--log-every-rank for every rank's): the final export's line once.
    exported = (p.stdout + p.stderr).count("exported the final weights")
    assert exported == 1, (exported, world)
    par = s["policies"]["parallel"]
    assert par["name"] == "parallel::DataParallel" and par["world_size"] == world, par
    assert par["engine"] == "c10d::Reducer", par
    # The flags reach the Reducer's options; one all-reduce in the first step, then one per rebuilt bucket.
    assert par["gradient_as_bucket_view"] == ("--grad-as-bucket-view" in extra), par
    assert par["allreduce_calls"] == 1 + par["buckets"] * (s["global_steps"] - 1), par
