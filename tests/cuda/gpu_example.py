"""The main job of a CUDA build on the GPU: trains to the accuracy of the same run on the CPU.

Without a visible GPU it checks that --device cuda fails with a clear message, then exits 77 (CTest: skipped).
With one it runs the same short training on the CPU (fp32) and on the GPU (fp32, then fp16 with loss scaling,
channels-last, cuDNN benchmark and the pinned-memory prefetch loader) and compares the test accuracies.
"""
import json, os, subprocess, sys

exe, run_dir = sys.argv[1], sys.argv[2]
common = ["--epochs", "1", "--progress-tty", "0", "--seed", "3"]


def run(name, *extra, batches=300, expect_ok=True):
    d = os.path.join(run_dir, name)
    p = subprocess.run([exe, "--run-dir", d, *common, "--limit-train-batches", str(batches), *extra],
                       capture_output=True, text=True, timeout=900)
    print(f"--- {name}: exit {p.returncode}\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
    if not expect_ok:
        return p
    assert p.returncode == 0, f"{name}: exit code {p.returncode}"
    return json.load(open(os.path.join(d, "summary.json")))


probe = run("probe", "--device", "cuda", batches=2, expect_ok=False)
if probe.returncode != 0:
    assert "no CUDA device is visible" in probe.stderr and "--device cpu" in probe.stderr, probe.stderr
    print("policytrain-cuda: skipped (no CUDA device visible); the error names the problem and the fix")
    sys.exit(77)

cpu = run("cpu", "--device", "cpu")
gpu = run("gpu_fp32", "--device", "cuda")
amp = run("gpu_fp16", "--device", "cuda", "--precision", "fp16", "--channels-last", "--cudnn-benchmark",
          "--workers", "2")
assert gpu["device"] == "cuda:0" and amp["device"] == "cuda:0" and cpu["device"] == "cpu", (cpu["device"], gpu["device"])
for name, s in (("gpu_fp32", gpu), ("gpu_fp16", amp)):
    print(f"{name}: accuracy {s['test_accuracy']:.4f} vs cpu {cpu['test_accuracy']:.4f}; "
          f"{s['train_samples_per_second']:.0f} vs {cpu['train_samples_per_second']:.0f} samples/s")
    assert cpu["test_accuracy"] > 0.75, cpu["test_accuracy"]
    assert abs(s["test_accuracy"] - cpu["test_accuracy"]) <= 0.015, (name, s["test_accuracy"], cpu["test_accuracy"])
print("gpu example OK")
