"""--augment's transforms come from --crop-padding and --flip: with neither, the augmentation is the identity and
training ends with the weights of a run without --augment; with a crop it ends elsewhere."""
import json, os, subprocess, sys

exe, run_dir = sys.argv[1], sys.argv[2]


def run(name, *flags):
    d = os.path.join(run_dir, name)
    cmd = [exe, "--epochs", "1", "--limit-train-batches", "10", "--limit-val-batches", "1", "--eval-batch-size", "200", "--train-eval-size", "0",
           "--run-dir", d, "--progress-tty", "0", "--threads", "2", "--save", "none", "--no-export", *flags]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{cmd}: exit code {p.returncode}\n{p.stderr[-2000:]}"
    return json.load(open(os.path.join(d, "summary.json")))


plain = run("plain")
identity = run("identity", "--augment", "--crop-padding", "0", "--flip", "0")
crop = run("crop", "--augment", "--crop-padding", "2", "--flip", "0")
flip = run("flip", "--augment", "--crop-padding", "0", "--flip", "1")
assert identity["policies"]["loader"] == dict(identity["policies"]["loader"], augment=True, crop_padding=0, flip=False)
assert crop["policies"]["loader"]["crop_padding"] == 2 and flip["policies"]["loader"]["flip"] is True
assert identity["params_sha256"] == plain["params_sha256"], "no crop and no flip should change nothing"
assert crop["params_sha256"] != plain["params_sha256"], "--crop-padding 2 did not reach the loader"
assert flip["params_sha256"] not in (plain["params_sha256"], crop["params_sha256"]), "--flip 1 did not reach the loader"
print("augment flags OK")
