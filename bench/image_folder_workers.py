"""The worker table on an image-folder task: samples/s decoding, resizing (shorter side, bilinear, antialiased),
centre-cropping and normalising a generated folder of PNG and JPEG files (tests/integration/make_images.py), with 0,
1 and 2 workers, ours (bench/image_folder_workers.cpp: data::PrefetchLoader over data::ImageFolder, and LibTorch's
DataLoader over it, what data::from_torch wraps) against torchvision's ImageFolder + DataLoader (Pillow decode,
Resize, CenterCrop, ToTensor, Normalize), side by side in one run, one intra-op thread each (OMP_NUM_THREADS=1).
Pinned memory: DataLoader(pin_memory=True) where an accelerator is present (PrefetchLoader pins only for a CUDA
device); on a CPU-only machine the pinned rows are not run, and the table says so.
Usage: <venv with torch and torchvision>/bin/python bench/image_folder_workers.py BUILD_DIR [--per-class N]
       [--size S] [--batch B] [--reps R]   (BUILD_DIR holds bench/image_folder_workers)"""
import json, os, platform, statistics, subprocess, sys, tempfile, time

def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default

build = sys.argv[1]
per_class, size, batch, reps = arg("--per-class", 150), arg("--size", 64), arg("--batch", 32), arg("--reps", 3)
here = os.path.dirname(os.path.abspath(__file__))
os.environ["OMP_NUM_THREADS"] = "1"

import torch, torchvision
from torchvision import datasets, transforms
torch.set_num_threads(1)

def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()

with tempfile.TemporaryDirectory() as tmp:
    # Images of about 1.5 x the output size, so every one is decoded and resized.
    subprocess.run([sys.executable, os.path.join(here, "..", "tests", "integration", "make_images.py"), tmp,
                    "--per-class", str(per_class), "--size", str(size * 3 // 2)], check=True, stdout=subprocess.DEVNULL)
    tree = os.path.join(tmp, "tree")
    rows = []
    ours = subprocess.run([os.path.join(build, "bench", "image_folder_workers"), tree, "--size", str(size),
                           "--batch", str(batch), "--reps", str(reps)], check=True, capture_output=True, text=True)
    rows += [json.loads(l) for l in ours.stdout.splitlines() if l.startswith("{")]

    tf = transforms.Compose([transforms.Resize(size, antialias=True), transforms.CenterCrop(size), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(tree, transform=tf)
    pin_ok = torch.cuda.is_available()
    for workers in (0, 1, 2):
        for pin in ((False, True) if pin_ok else (False,)):
            dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=pin,
                                             persistent_workers=workers > 0)
            rates = []
            for r in range(reps + 1):  # the first epoch starts the workers: not counted, as on our side
                t0 = time.perf_counter()
                n = sum(x.shape[0] for x, _ in dl)
                if r > 0:
                    rates.append(n / (time.perf_counter() - t0))
            rows.append({"impl": "torchvision ImageFolder + DataLoader" + (" (pin_memory)" if pin else ""),
                         "workers": workers, "samples_per_s": round(statistics.median(rates), 1)})
            del dl

base = {r["workers"]: r["samples_per_s"] for r in rows if r["impl"] == "torchvision ImageFolder + DataLoader"}
print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; torch {torch.__version__}, torchvision {torchvision.__version__}; "
      f"{len(ds)} images ({per_class} per class, about {size * 3 // 2}px, PNG and JPEG) -> {size}x{size}, batch {batch}, "
      f"median of {reps} epochs; pinned memory: {'measured' if pin_ok else 'not run (no accelerator)'}")
print("| loader | workers | samples/s | vs torchvision, same workers |")
print("|---|---:|---:|---:|")
for r in sorted(rows, key=lambda r: (r["workers"], r["impl"])):
    print(f"| {r['impl']} | {r['workers']} | {r['samples_per_s']:.0f} | {r['samples_per_s'] / base[r['workers']]:.2f}x |")
