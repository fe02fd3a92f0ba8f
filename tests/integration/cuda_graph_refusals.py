"""The main job's --cuda-graph is refused before training, with a message naming the fix, wherever a captured
step cannot apply; each refusal is checked on its own (the other flags valid)."""
import subprocess
import sys

exe = sys.argv[1]
cases = [
    ([], "a CUDA graph captures CUDA work: add --device cuda"),
    (["--device", "cuda", "--accumulate", "2"], "takes one micro-batch: drop --accumulate"),
    (["--device", "cuda", "--nominal-batch", "128"], "takes one micro-batch"),
    (["--device", "cuda", "--tensorboard"], "drop --profile and --tensorboard"),
    (["--device", "cuda", "--profile"], "drop --profile and --tensorboard"),
    (["--device", "cuda", "--optimizer", "adamw-loop"], "use --optimizer adamw, adam or sgd"),
]
failed = 0
for extra, expect in cases:
    r = subprocess.run([exe, "--cuda-graph", "--epochs", "1", "--run-dir", "/nonexistent/never-written", *extra],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    ok = r.returncode == 1 and "fashion_mnist: error: --cuda-graph: " in out and expect in out and "Epoch" not in out
    print(("ok  " if ok else "FAIL"), extra, "->", out.strip().splitlines()[-1] if out.strip() else "(no output)")
    failed += not ok
print(f"{len(cases) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
