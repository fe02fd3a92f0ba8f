"""The seed techniques' effect tables, measured on the main job (examples/fashion_mnist).

Runs the main job over each table's configurations, reads each run's summary.json and JSONL logs, and writes
EFFECTS.md (one table per technique, with the machine, the date and the command) and PNG plots next to it.

    python3 bench/effects.py --exe build/examples/fashion_mnist --out bench [--profile full|tiny]
    python3 bench/effects.py --exe build-cuda/examples/fashion_mnist --out bench --device cuda [--profile gpu|tiny]

--device cuda runs the GPU tables instead (precision, loaders, batch and accumulation, channels_last and
cudnn.benchmark, the graph step; about 4 minutes of a GPU on the gpu profile) and rewrites only the GPU block of
EFFECTS.md, between the markers below; a CPU run keeps that block. `--run-device cpu` runs the GPU tables' logic on
the CPU (the CUDA-only flags dropped, the rows marked so): the smoke test of CI.

scripts/effects builds the main job and runs this with matplotlib from a virtual environment of its own.
The tiny profile (a few batches, one seed) only checks that the tables and plots are produced (CTest).
"""
import argparse, datetime, json, math, os, platform, shlex, statistics, subprocess, sys, time

# Per profile: micro-batches of 64 per epoch, epochs of the long tables, seeds of the accuracy tables.
PROFILES = {
    "full": dict(batches=200, short_epochs=2, schedule_epochs=5, stop_epochs=20, stop_images=3200, seeds=[0, 1],
                 timing_repeats=2, val_batches=-1),
    # --device cuda: one epoch of `batches` batches per row, the recipe's model; about 4 minutes on an H100.
    "gpu": dict(batches=150, short_epochs=1, schedule_epochs=1, stop_epochs=1, stop_images=256, seeds=[0],
                timing_repeats=1, val_batches=2),
    # evaluation in batches of 250 and 250 training images for the train-vs-validation gap: the default 1,000 and
    # 5,000 were 3.7 s of a 4.5 s run
    "tiny": dict(batches=4, short_epochs=1, schedule_epochs=2, stop_epochs=2, stop_images=256, seeds=[0],
                 timing_repeats=1, val_batches=1, extra=["--eval-batch-size", "250", "--train-eval-size", "250"]),
}
# Fixed for every run: plain progress lines; 2 intra-op threads and no export (final.pt) unless a row says otherwise.
COMMON = ["--progress-tty", "0"]


GPU_BEGIN, GPU_END = "<!-- effects:gpu:begin -->", "<!-- effects:gpu:end -->"
# Flags that only mean something on CUDA: dropped when the GPU tables run on the CPU (--run-device cpu).
CUDA_ONLY = {"--cuda-graph", "--tf32", "--cudnn-benchmark"}
# The GPU tables' base: the recipe's model (scripts/gpu-recipe) without its accuracy-only flags.
GPU_MODEL = ["--width", "64", "--conv3", "128", "--lr", "0.006"]


class Runner:
    def __init__(self, exe, runs_dir, profile, reuse=False, run_device=None):
        self.exe, self.runs_dir, self.p, self.reuse = exe, runs_dir, PROFILES[profile], reuse
        self.profile = profile
        self.run_device = run_device  # None: the rows' own flags; "cpu"/"cuda": --device added (GPU tables)
        self.commands = []
        self.summaries = []

    def run(self, name, args, epochs, seed=0, batches=None, threads=2, export=False):
        """Runs the main job once; returns its summary with the per-epoch and per-step logs attached."""
        run_dir = os.path.join(self.runs_dir, name)
        batches = self.p["batches"] if batches is None else batches
        if self.run_device is not None:
            args = gpu_args(args, self.run_device)
        cmd = [self.exe, "--run-dir", run_dir, "--epochs", str(epochs), "--seed", str(seed), "--threads", str(threads),
               "--limit-train-batches", str(batches), "--limit-val-batches", str(self.p["val_batches"])] + COMMON + ([] if export else ["--no-export"]) + (self.p.get("extra", []) if self.run_device is None else []) + args
        shown = " ".join(shlex.quote(c) for c in [os.path.basename(self.exe)] + cmd[1:])
        self.commands.append(shown)
        record = os.path.join(run_dir, "effects-run.json")
        done = json.load(open(record)) if self.reuse and os.path.exists(record) else {}
        if done.get("command") == shown and os.path.exists(os.path.join(run_dir, "summary.json")):
            seconds = done["seconds"]  # --reuse: the same command ran before; its results stand
        else:
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"effects: {name} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
            seconds = time.monotonic() - t0
            with open(record, "w") as f:
                json.dump({"command": shown, "seconds": seconds, "date": datetime.datetime.now().isoformat()}, f)
        s = json.load(open(os.path.join(run_dir, "summary.json")))
        s["process_seconds"] = seconds
        s["epochs_log"] = read_jsonl(os.path.join(run_dir, "logs", "epochs.jsonl"))
        s["steps_log"] = read_jsonl(os.path.join(run_dir, "logs", "steps.jsonl"))
        s["run_dir"] = run_dir
        self.summaries.append(s)
        print(f"effects: {name}: test {s['test_accuracy']:.4f} val {s['val_accuracy']:.4f} "
              f"{s['train_samples_per_second']:.0f} samples/s, {s['process_seconds']:.1f} s", flush=True)
        return s

    def seeds(self, name, args, epochs, **kw):
        return [self.run(f"{name}-s{seed}", args, epochs, seed=seed, **kw) for seed in self.p["seeds"]]


def gpu_args(args, device):
    """A GPU row's flags on `device`: --device added. On the CPU (the smoke test of the tables' logic) the CUDA-only
    flags are dropped, every precision runs as fp32 (this CPU's bf16 is emulated, 5x slower), the model is the
    default one (the recipe's takes minutes a run here) and the evaluation is small (batches of 100, no training-set
    accuracy): the smoke checks the tables' logic, and most of each short run was evaluation."""
    if device != "cpu":
        return ["--device", device] + GPU_MODEL + args
    out, skip = ["--device", "cpu"], False
    for a in args:
        if skip:
            out.append("fp32")
            skip = False
            continue
        if a in CUDA_ONLY:
            continue
        skip = a == "--precision"
        out.append(a)
    return out + ["--eval-batch-size", "100", "--train-eval-size", "0"]


def gpu_row(r, name, label, args):
    """One GPU table row: the run's samples/s and the peak memory it reported."""
    s = r.run("gpu-" + name, args, 1)
    peak = s.get("peak_memory", {})
    mem = (f"{peak['cuda_allocated_mib']:.0f} MiB" if peak.get("cuda_allocated_mib") else
           f"{peak['rss_mib']:.0f} MiB (RSS)" if peak.get("rss_mib") else "not logged (graph composition)")
    dropped = [a for a in args if a in CUDA_ONLY or a in ("bf16", "fp16")] if r.run_device == "cpu" else []
    return s, [label + (f" (CPU smoke: {' '.join(dropped)} dropped)" if dropped else ""), mem,
               f"{s['train_samples_per_second']:.0f}", f"{s['train_seconds']:.2f}"]


def gpu_tables(r, P):
    """The GPU effect tables: each a list of (name, label, flags) rows, one epoch of P['batches'] batches each."""
    B = ["--batch-size", "256"]
    aug = ["--augment"]
    specs = [
        ("precision", "FP32 vs TF32 vs bf16 vs fp16 (eager, 4 loader workers, batch 256)",
         [("fp32", "FP32", B + ["--precision", "fp32", "--workers", "4"]),
          ("tf32", "TF32 matmuls and convolutions", B + ["--precision", "fp32", "--tf32", "--workers", "4"]),
          ("bf16", "AMP bf16", B + ["--precision", "bf16", "--workers", "4"]),
          ("fp16", "AMP fp16 + loss scaling", B + ["--precision", "fp16", "--workers", "4"])]),
        ("loaders", "Loaders (bf16, batch 256, crop + flip augmentation unless said)",
         [("loader-none", "none: data on the device, no augmentation", B + ["--precision", "bf16", "--data-on-device"]),
          ("loader-tensor", "TensorLoader's work: gather + copy, no augmentation, no workers",
           B + ["--precision", "bf16", "--workers", "0"]),
          ("loader-prefetch0", "PrefetchLoader, 0 workers", B + ["--precision", "bf16", "--workers", "0"] + aug),
          ("loader-prefetch4", "PrefetchLoader, 4 workers", B + ["--precision", "bf16", "--workers", "4"] + aug),
          ("loader-device", "DeviceLoader (--data-on-device)", B + ["--precision", "bf16", "--data-on-device"] + aug),
          ("loader-device-graph", "DeviceLoader inside the CUDA graph",
           B + ["--precision", "bf16", "--data-on-device", "--cuda-graph"] + aug)]),
        ("batch", "Batch size and accumulation (bf16, data on the device)",
         [("b128", "batch 128", ["--batch-size", "128", "--precision", "bf16", "--data-on-device"]),
          ("b256", "batch 256", B + ["--precision", "bf16", "--data-on-device"]),
          ("b512", "batch 512", ["--batch-size", "512", "--precision", "bf16", "--data-on-device"]),
          ("b128x2", "batch 128, 2 micro-batches accumulated",
           ["--batch-size", "128", "--accumulate", "2", "--precision", "bf16", "--data-on-device"])]),
        ("layout", "channels_last and cudnn.benchmark (bf16, batch 256, data on the device)",
         [("plain", "NCHW, no autotuner", B + ["--precision", "bf16", "--data-on-device"]),
          ("cl", "channels_last", B + ["--precision", "bf16", "--data-on-device", "--channels-last"]),
          ("bench", "cudnn.benchmark", B + ["--precision", "bf16", "--data-on-device", "--cudnn-benchmark"]),
          ("cl-bench", "both", B + ["--precision", "bf16", "--data-on-device", "--channels-last", "--cudnn-benchmark"])]),
        ("graph", "The graph step (bf16, channels_last, cudnn.benchmark, batch 256, data on the device)",
         [("eager", "eager step", B + ["--precision", "bf16", "--data-on-device", "--channels-last", "--cudnn-benchmark"]),
          ("graph", "step::CudaGraph (data + step in one replay)",
           B + ["--precision", "bf16", "--data-on-device", "--channels-last", "--cudnn-benchmark", "--cuda-graph"])]),
    ]
    sections, runs = [], {}
    for key, title, rows in specs:
        table_rows, ss = [], {}
        for name, label, args in rows:
            s, row = gpu_row(r, name, label, args)
            base = ss[rows[0][1]] if ss else s
            row.append("baseline" if not ss else f"{s['train_samples_per_second'] / base['train_samples_per_second']:.2f}x")
            ss[label] = s
            table_rows.append(row)
        runs[key] = ss
        sections.append(f"## GPU: {title}\n\n" +
                        table(["configuration", "peak memory", "samples/s", "train seconds", "vs first row"], table_rows))
    return sections, runs


def plot_gpu(path, runs, device):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(runs), figsize=(4 * len(runs), 4.5))
    for ax, (key, ss) in zip(axes, runs.items()):
        labels = list(ss)
        ax.barh(range(len(labels)), [ss[l]["train_samples_per_second"] for l in labels], color=[f"C{i}" for i in range(len(labels))])
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels([l[:34] for l in labels], fontsize=7)
        ax.invert_yaxis()
        ax.set(xlabel="samples/s", title=key)
    fig.suptitle(f"The main job's throughput on {device} (one epoch per row)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------- statistics
def mean_sd(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return float("nan"), float("nan")
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def fmt_ms(xs, digits=4):
    m, sd = mean_sd(xs)
    if math.isnan(m):
        return "n/a"
    return f"{m:.{digits}f}" if len(xs) < 2 else f"{m:.{digits}f} ± {sd:.{digits}f}"


def spread(xs):
    return max(xs) - min(xs) if len(xs) > 1 else float("nan")


def versus(base, other):
    """The difference of two configurations' means, and whether it is within the seeds' noise: within noise when
    it is smaller than the larger of the two seed-to-seed spreads (max - min), or when there is one seed only."""
    d = statistics.fmean(other) - statistics.fmean(base)
    noise = max(spread(base), spread(other))
    if math.isnan(noise):
        return f"{d:+.4f} (one seed: noise not measured)"
    return f"{d:+.4f} ({'within noise' if abs(d) <= noise else 'beyond the seed spread'} {noise:.4f})"


def last_epoch_loss_sd(s):
    """Loss fluctuation: the standard deviation of the last epoch's per-step training losses."""
    if not s["steps_log"]:
        return float("nan")
    last = max(r["epoch"] for r in s["steps_log"])
    losses = [r["loss"] for r in s["steps_log"] if r["epoch"] == last]
    return statistics.stdev(losses) if len(losses) > 1 else float("nan")


def epochs_to_reach(s, threshold):
    """First epoch (1-based) whose validation accuracy reaches `threshold`; None if none does."""
    for i, r in enumerate(s["epochs_log"]):
        if r.get("val_accuracy", 0) >= threshold:
            return i + 1
    return None


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# -------------------------------------------------------------------------------------------------- tables
def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def precision_table(r, P):
    cfgs = [("FP32", ["--precision", "fp32"]), ("AMP bf16 (CPU autocast)", ["--precision", "bf16"])]
    runs = {label: r.seeds("precision-" + args[1], args, P["short_epochs"]) for label, args in cfgs}
    base = [s["test_accuracy"] for s in runs["FP32"]]
    rows = []
    for label, ss in runs.items():
        acc = [s["test_accuracy"] for s in ss]
        rows.append([label, f"{median([s['peak_memory']['rss_mib'] for s in ss]):.0f} MiB (RSS)",
                     f"{median([s['step_seconds_mean']['total'] * 1000 for s in ss]):.1f}",
                     f"{median([s['train_samples_per_second'] for s in ss]):.0f}",
                     fmt_ms(acc), "baseline" if label == "FP32" else versus(base, acc)])
    rows.append(["AMP fp16 + loss scaling (CUDA)", "not measured", "not measured", "not measured", "not measured",
                 "needs a GPU (scripts/gpu-suite)"])
    return ("## Mixed precision: FP32 vs AMP\n\n"
            f"{P['short_epochs']} epochs of {P['batches']} batches of 64, seeds {P['seeds']}; memory and time are "
            "medians over the seeds. On this CPU (AVX2, no native bf16) autocast converts in software, so bf16 costs "
            "time here; the memory column is the process's peak RSS, not a GPU's.\n\n" +
            table(["precision", "peak memory", "ms per step", "samples/s", "test accuracy", "vs FP32"], rows), runs)


def loader_table(r, P):
    rows, runs = [], {}
    for workers in (0, 1, 2):
        ss = [r.run(f"loader-w{workers}-r{k}", ["--augment", "--workers", str(workers)], 1)
              for k in range(P["timing_repeats"])]
        runs[workers] = ss
        util = [1 - s["data_wait_fraction"] for s in ss]
        epoch_s = [s["epochs_log"][0]["seconds"] for s in ss]
        rows.append([f"{workers} worker thread{'s' if workers != 1 else ''}", "off (CPU)",
                     f"{median(util) * 100:.1f} %", f"{median(epoch_s):.1f}",
                     f"{median([s['train_samples_per_second'] for s in ss]):.0f}"])
    rows.append(["2 workers", "on (CUDA)", "not measured", "not measured", "not measured"])
    return ("## Loader workers and pinned memory\n\n"
            f"One epoch of {P['batches']} batches of 64 with augmentation (random crop + flip, done by the loader), "
            f"median of {P['timing_repeats']} runs. Utilisation = 1 - the fraction of the step spent waiting for "
            "data. On 2 cores a worker thread competes with the 2 intra-op threads of the step.\n\n" +
            table(["loader", "pinned memory", "utilisation", "epoch seconds", "samples/s"], rows), runs)


def batch_table(r, P):
    b = P["batches"]
    cfgs = [("fixed 64", ["--batch-size", "64"], b),
            ("16 x accumulate 4 (global 64)", ["--batch-size", "16", "--accumulate", "4"], 4 * b),
            ("fixed 256", ["--batch-size", "256"], max(1, b // 4))]
    runs = {label: r.seeds("batch-" + str(i), args, P["short_epochs"], batches=n)
            for i, (label, args, n) in enumerate(cfgs)}
    base = [s["test_accuracy"] for s in runs["fixed 64"]]
    rows = []
    for label, ss in runs.items():
        acc = [s["test_accuracy"] for s in ss]
        rows.append([label, f"{median([s['peak_memory']['rss_mib'] for s in ss]):.0f} MiB (RSS)",
                     f"{median([s['train_samples_per_second'] for s in ss]):.0f}", fmt_ms(acc),
                     "baseline" if label == "fixed 64" else versus(base, acc)])
    rows.append(["auto batch + accumulation (CUDA)", "not measured", "not measured", "not measured",
                 "needs a GPU (--batch-size auto)"])
    return ("## Fixed batch vs accumulation vs auto batch\n\n"
            f"{P['short_epochs']} epochs of {b * 64} images each (the same images for every row), seeds "
            f"{P['seeds']}. The accumulation row has the same global batch as fixed 64.\n\n" +
            table(["batch", "peak memory", "samples/s", "test accuracy", "vs fixed 64"], rows), runs)


def ranks_table(r, P):
    rows, runs = [], {}
    for nproc in (1, 2):
        args = ["--nproc", "2"] if nproc == 2 else []
        ss = [r.run(f"ranks-{nproc}-r{k}", args, 1, threads=2 // nproc) for k in range(P["timing_repeats"])]
        runs[nproc] = ss
        rows.append([f"{nproc} process{'es' if nproc > 1 else ''} x {2 // nproc} thread{'s' if nproc == 1 else ''}",
                     f"{median([s['train_samples_per_second'] for s in ss]):.0f}",
                     f"{median([s['epochs_log'][0]['seconds'] for s in ss]):.1f}",
                     f"{median([s['test_accuracy'] for s in ss]):.4f}"])
    for g in (1, 2, 4):
        rows.append([f"{g} GPU{'s' if g > 1 else ''} (NCCL)", "not measured", "not measured", "not measured"])
    return ("## Data parallel: 1, 2, 4 devices\n\n"
            f"One epoch of {P['batches']} batches of 64 per rank (2 ranks see twice the images), Gloo on loopback, "
            f"median of {P['timing_repeats']} runs. Both rows share the machine's 2 cores, so this shows the "
            "synchronisation's cost, not a speed-up; samples/s counts every rank's samples.\n\n" +
            table(["ranks", "samples/s (all ranks)", "epoch seconds", "test accuracy"], rows), runs)


def schedule_table(r, P):
    cfgs = [("constant", ["--schedule", "constant"]), ("linear", ["--schedule", "linear"]),
            ("cosine", ["--schedule", "cosine"])]
    runs = {label: r.seeds("schedule-" + label, args + ["--warmup-epochs", "0"], P["schedule_epochs"])
            for label, args in cfgs}
    threshold = 0.88
    base = [s["test_accuracy"] for s in runs["constant"]]
    rows = []
    for label, ss in runs.items():
        acc = [s["test_accuracy"] for s in ss]
        reach = [epochs_to_reach(s, threshold) for s in ss]
        rows.append([label, ", ".join(str(x) if x else f">{P['schedule_epochs']}" for x in reach), fmt_ms(acc),
                     fmt_ms([s["val_accuracy"] for s in ss]), fmt_ms([last_epoch_loss_sd(s) for s in ss]),
                     "baseline" if label == "constant" else versus(base, acc)])
    return ("## Learning-rate schedules: constant vs linear vs cosine\n\n"
            f"AdamW, lr 3e-3, no warmup, {P['schedule_epochs']} epochs of {P['batches']} batches of 64, seeds "
            f"{P['seeds']}. Epochs to converge = the first epoch whose validation accuracy reaches {threshold} (per "
            "seed). Loss fluctuation = the standard deviation of the last epoch's per-step training losses. Curves: "
            "[schedules.png](effects/schedules.png).\n\n" +
            table(["schedule", "epochs to val acc " + str(threshold), "test accuracy", "val accuracy",
                   "loss fluctuation", "test vs constant"], rows), runs)


def stopping_table(r, P):
    n = P["stop_images"]
    common = ["--train-size", str(n), "--schedule", "constant"]
    ema = ["--ema", "--ema-decay", "0.999", "--ema-tau", "200"]
    stop = ["--patience", "2", "--monitor", "accuracy"]
    cfgs = [("no early stop, no EMA", []), ("early stop (patience 2)", stop), ("early stop + EMA", stop + ema)]
    runs = {label: r.seeds(f"stopping-{i}", common + args, P["stop_epochs"], batches=-1)
            for i, (label, args) in enumerate(cfgs)}
    base = [s["test_accuracy"] for s in runs["no early stop, no EMA"]]
    rows = []
    for label, ss in runs.items():
        acc = [s["test_accuracy"] for s in ss]
        gap = [s["train_accuracy"] - s["val_accuracy"] for s in ss]
        rows.append([label, ", ".join(str(s["epochs_run"]) for s in ss), fmt_ms([s["train_accuracy"] for s in ss]),
                     fmt_ms([s["val_accuracy"] for s in ss]), fmt_ms(gap), fmt_ms(acc),
                     "baseline" if not label.startswith("early") else versus(base, acc)])
    return ("## Early stopping and EMA\n\n"
            f"Up to {P['stop_epochs']} epochs over the same {n:,} training images (`--train-size {n}`, so that "
            f"overfitting shows within the budget), constant lr 3e-3, seeds {P['seeds']}. Early stopping watches the "
            "validation accuracy (`--patience 2`); the EMA is `--ema-decay 0.999 --ema-tau 200` (the main job's "
            "default, Ultralytics' 0.9999 with a 2,000-step ramp, barely averages in a run this short). Train "
            "accuracy: the final weights (the EMA's where on) on the first 5,000 training images; validation: the "
            "last epoch's. Curves: [stopping.png](effects/stopping.png).\n\n" +
            table(["configuration", "epochs run", "train accuracy", "val accuracy", "train - val", "test accuracy",
                   "test vs none"], rows), runs)


def checkpoint_table(r, P):
    cfgs = [("full (fp32 weights + optimizer state)", ["--save", "last"]),
            ("half weights", ["--save", "last", "--half-weights"]),
            ("half weights + bf16 optimizer moments", ["--save", "last", "--half-weights", "--half-optimizer"])]
    rows, runs = [], {}
    for i, (label, args) in enumerate(cfgs):
        s = r.run(f"checkpoint-{i}", [a for a in args], 1, batches=min(P["batches"], 20))
        runs[label] = s
        path = os.path.join(s["run_dir"], "checkpoints", "last.ckpt")
        rows.append([label, f"{os.path.getsize(path) / 2**20:.2f} MiB", "yes" if i == 0 else "no (weights rounded)"])
    # The exported weights (torch.load-able), written when --no-export is not given.
    s = r.run("checkpoint-export", ["--save", "last"], 1, batches=min(P["batches"], 20), export=True)
    final = os.path.join(s["run_dir"], "checkpoints", "final.pt")
    if not os.path.exists(final):
        sys.exit(f"effects: the export run wrote no {final}")
    rows.append(["export: final.pt (fp32 weights only, torch.load)", f"{os.path.getsize(final) / 2**20:.2f} MiB",
                 "no (no optimizer state)"])
    return ("## Checkpoint kinds: size\n\n"
            "The CNN (about 420K parameters) with AdamW's two moments per parameter.\n\n" +
            table(["checkpoint", "size", "exact resume"], rows), runs)


# --------------------------------------------------------------------------------------------------- plots
def plot_curves(path, title, runs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    for i, (label, ss) in enumerate(runs.items()):
        color = f"C{i}"
        for k, s in enumerate(ss):
            ep = list(range(1, len(s["epochs_log"]) + 1))
            kw = dict(color=color, alpha=1.0 if k == 0 else 0.45)
            ax_loss.plot(ep, [e["train_loss"] for e in s["epochs_log"]], "-", label=f"{label} train" if k == 0 else None, **kw)
            ax_loss.plot(ep, [e["val_loss"] for e in s["epochs_log"]], "--", label=f"{label} val" if k == 0 else None, **kw)
            ax_acc.plot(ep, [e["val_accuracy"] for e in s["epochs_log"]], "-o", ms=3,
                        label=label if k == 0 else None, **kw)
    ax_loss.set(xlabel="epoch", ylabel="loss", title="training (solid) and validation (dashed) loss")
    ax_acc.set(xlabel="epoch", ylabel="validation accuracy", title="validation accuracy")
    ax_loss.legend(fontsize=7)
    ax_acc.legend(fontsize=7)
    fig.suptitle(title + " (one line per seed)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True, help="the main job's executable")
    ap.add_argument("--out", required=True, help="directory of EFFECTS.md; the plots go to OUT/effects/")
    ap.add_argument("--runs", default=None, help="run directories (default: OUT/effects/runs)")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="full")
    ap.add_argument("--tables", default="precision,loader,batch,ranks,schedule,stopping,checkpoint")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the GPU tables only (profile gpu by default), written into EFFECTS.md's GPU block")
    ap.add_argument("--run-device", choices=["cpu", "cuda"], default=None,
                    help="where the GPU tables' runs go (default: --device; cpu: the CI smoke test of their logic)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the results of runs whose command line is unchanged since they ran (in --runs)")
    ap.set_defaults(profile=None)
    a = ap.parse_args()
    a.profile = a.profile or ("gpu" if a.device == "cuda" else "full")
    plots = os.path.join(a.out, "effects")
    os.makedirs(plots, exist_ok=True)
    md_path = os.path.join(a.out, "EFFECTS.md")
    old = open(md_path).read() if os.path.exists(md_path) else ""
    if a.device == "cuda":
        return gpu_main(a, plots, md_path, old)
    r = Runner(os.path.abspath(a.exe), a.runs or os.path.join(plots, "runs"), a.profile, a.reuse)
    P = r.p
    t0 = time.monotonic()
    makers = dict(precision=precision_table, loader=loader_table, batch=batch_table, ranks=ranks_table,
                  schedule=schedule_table, stopping=stopping_table, checkpoint=checkpoint_table)
    sections, results = [], {}
    for name in a.tables.split(","):
        text, runs = makers[name](r, P)
        sections.append(text)
        results[name] = runs
    if "schedule" in results:
        plot_curves(os.path.join(plots, "schedules.png"), "Learning-rate schedules", results["schedule"])
    if "stopping" in results:
        plot_curves(os.path.join(plots, "stopping.png"), "Early stopping and EMA", results["stopping"])
    minutes = sum(x["process_seconds"] for x in r.summaries) / 60
    torch_version = r.summaries[0]["torch_version"] if r.summaries else "unknown"
    head = (
        "# Effect tables, measured with policytrain\n\n"
        "Generated by `scripts/effects` (bench/effects.py); do not edit by hand. Each table is the main job "
        "(examples/fashion_mnist, the CNN on Fashion-MNIST) run over the table's configurations; accuracies are on "
        "the test set (evaluated once per run, after training), model selection on the 5,000-image validation "
        "split. Runs are shortened to fit the whole script in an hour on a 2-core machine, as each table states; "
        "a \"vs\" column marks a difference *within noise* when it is no larger than the larger seed-to-seed "
        "spread (max - min) of the two rows. GPU rows say \"not measured\" unless run on a GPU.\n\n"
        f"- Machine: {machine()}; LibTorch {torch_version} (CPU); 2 intra-op threads unless a row says otherwise\n"
        f"- Date: {datetime.date.today().isoformat()}; profile `{a.profile}`; its runs took {minutes:.1f} minutes\n"
        f"- Command: `scripts/effects{'' if a.profile == 'full' else ' --profile ' + a.profile}`; each run is "
        f"`fashion_mnist {' '.join(COMMON)} --no-export --threads T --seed S --epochs E --limit-train-batches B "
        f"--limit-val-batches {P['val_batches']}` plus the row's flags\n\n")
    gpu_block = old[old.find(GPU_BEGIN):old.find(GPU_END) + len(GPU_END)] if GPU_BEGIN in old and GPU_END in old else ""
    with open(md_path, "w") as f:
        f.write(head + "\n\n".join(sections) + "\n" + ("\n" + gpu_block + "\n" if gpu_block else ""))
    with open(os.path.join(plots, "commands.txt"), "w") as f:
        f.write("\n".join(r.commands) + "\n")
    print(f"effects: wrote {os.path.join(a.out, 'EFFECTS.md')} and the plots in {plots} ({minutes:.1f} min)")


def gpu_main(a, plots, md_path, old):
    run_device = a.run_device or a.device
    r = Runner(os.path.abspath(a.exe), a.runs or os.path.join(plots, "runs-gpu"), a.profile, a.reuse, run_device)
    t0 = time.monotonic()
    sections, runs = gpu_tables(r, r.p)
    plot_gpu(os.path.join(plots, "gpu.png"), runs, run_device)
    minutes = (time.monotonic() - t0) / 60
    gpu = "unknown GPU"
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip() or gpu
    except (OSError, subprocess.SubprocessError):
        pass
    smoke = run_device == "cpu"
    block = (
        f"{GPU_BEGIN}\n# GPU rows\n\n"
        + ("**CPU smoke run of the GPU tables' logic (CUDA-only flags dropped): these are not GPU figures.**\n\n"
           if smoke else "")
        + f"The GPU tables of `scripts/effects --device cuda` (bench/effects.py): the main job with "
        + ("the default model (the smoke run's)" if smoke else
           "the recipe's model (width 64, a third convolution of 128 channels)")
        + f", one epoch of {r.p['batches']} batches per row, one seed; "
        "samples/s is the Trainer's over the epoch (compilation, cuDNN autotuning and the graph's capture included), "
        "so rows compare within a table. Plot: effects/gpu.png.\n\n"
        f"- Device: {'the CPU (' + machine() + ')' if smoke else gpu}; LibTorch "
        f"{r.summaries[0]['torch_version'] if r.summaries else 'unknown'}\n"
        f"- Date: {datetime.date.today().isoformat()}; profile `{a.profile}`; its runs took {minutes:.1f} minutes\n"
        f"- Command: `scripts/effects --device cuda{'' if a.profile == 'gpu' else ' --profile ' + a.profile}`\n\n"
        + "\n\n".join(sections) + f"\n{GPU_END}")
    if GPU_BEGIN in old and GPU_END in old:
        text = old[:old.find(GPU_BEGIN)] + block + old[old.find(GPU_END) + len(GPU_END):]
    else:
        text = (old.rstrip("\n") + "\n\n" if old else "") + block + "\n"
    with open(md_path, "w") as f:
        f.write(text)
    with open(os.path.join(plots, "commands-gpu.txt"), "w") as f:
        f.write("\n".join(r.commands) + "\n")
    print(f"effects: wrote the GPU rows of {md_path} and {os.path.join(plots, 'gpu.png')} ({minutes:.1f} min)")


if __name__ == "__main__":
    main()
