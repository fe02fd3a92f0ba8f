"""examples/image_folder, end to end, on a folder of PNG and JPEG images that make_images.py writes with Pillow:
the classes are torchvision's ImageFolder order; it trains with 2 decoding workers on one rank and on two (data
parallelism: the validation covers every image once); a run stopped by --max-steps mid-epoch and resumed ends with
the uninterrupted run's weights bit for bit.
Usage: image_example.py PILLOW_PYTHON EXE WORK_DIR"""
import json, os, shutil, subprocess, sys

py, exe, work = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([py, os.path.join(here, "make_images.py"), os.path.join(work, "images"), "--per-class", "16"], check=True)
data = os.path.join(work, "images", "tree")
expected = json.load(open(os.path.join(work, "images", "expected.json")))
common = ["--data", data, "--epochs", "3", "--batch-size", "8", "--workers", "2", "--every-steps", "5"]

def run(name, *extra):
    d = os.path.join(work, name)
    p = subprocess.run([exe, "--run-dir", d] + common + list(extra), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return json.load(open(os.path.join(d, "summary.json"))), p

ref, _ = run("reference")
assert ref["classes"] == expected["classes"], (ref["classes"], expected["classes"])
assert ref["images"] == 64 and ref["val_samples"] == 64, ref
assert ref["global_steps"] == 3 * 8, ref
assert ref["accuracy"] > 0.5, ref  # four classes, each its own tint: learnt
print(f"one rank: {ref['global_steps']} steps, accuracy {ref['accuracy']:.3f}")

two, _ = run("two_ranks", "--nproc", "2")
assert two["world_size"] == 2 and two["global_steps"] == 3 * 4 and two["val_samples"] == 64, two
print(f"two ranks: {two['global_steps']} steps, accuracy {two['accuracy']:.3f}")

cut, _ = run("cut", "--max-steps", "11")  # epoch 1, batch 3 of 8
assert (cut["epoch"], cut["batch_in_epoch"]) == (1, 3), cut
resumed, p = run("cut", "--resume")
assert "(epoch 1, batch 3," in p.stderr, p.stderr[-2000:]
assert resumed["global_steps"] == ref["global_steps"], (resumed, ref)
assert resumed["params_sha256"] == ref["params_sha256"], "the resumed run's weights differ from the uninterrupted run's"
print("max-steps stop mid-epoch, resumed: bit-identical")
