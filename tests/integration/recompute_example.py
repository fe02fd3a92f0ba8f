"""The main job with --recompute ends with the weights of the same run without it, bit for bit (fp32, batch norm,
dropout, fused AdamW, one-cycle schedule), and summary.json reports the peak memory of a step.

Usage: recompute_example.py FASHION_MNIST_BINARY RUN_DIR
"""
import json
import os
import shutil
import subprocess
import sys

binary, run_dir = sys.argv[1], sys.argv[2]
shutil.rmtree(run_dir, ignore_errors=True)
summaries = {}
for name, extra in (("plain", []), ("recompute", ["--recompute"])):
    d = os.path.join(run_dir, name)
    cmd = [binary, "--epochs", "1", "--limit-train-batches", "12", "--limit-val-batches", "2", "--eval-batch-size", "200", "--run-dir", d,
           "--progress-tty", "0"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    assert " mem " in r.stdout, "the progress lines lack the peak memory"
    summaries[name] = json.load(open(os.path.join(d, "summary.json")))
a, b = summaries["plain"], summaries["recompute"]
assert b["policies"]["recompute"] is True and a["policies"]["recompute"] is False
assert a["params_sha256"] == b["params_sha256"], "--recompute changed the trained weights"
assert a["test_loss"] == b["test_loss"], (a["test_loss"], b["test_loss"])
for s in (a, b):
    pm = s["peak_memory"]
    assert pm["rss_mib"] is not None and pm["rss_mib"] > 0, pm
    assert "VmHWM" in pm["rss_source"], pm
print(f"same weights with and without --recompute; peak RSS of a step {a['peak_memory']['rss_mib']:.0f} / "
      f"{b['peak_memory']['rss_mib']:.0f} MiB")
