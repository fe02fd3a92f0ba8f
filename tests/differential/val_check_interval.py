"""Training by steps against Lightning: for each seed, a linear classifier trained by SGD for max_steps over a loader
of a few batches (passed over as many times as the steps take), validated every N steps on the first L validation
batches, with the best checkpoint by validation loss and, for some seeds, early stopping, is run by Lightning
(Trainer(max_steps=M, val_check_interval=N, check_val_every_n_epoch=None, limit_val_batches=L), ModelCheckpoint,
EarlyStopping) and by policytrain (FitOptions{.max_steps = M, .limit_val_batches = L, .val_every_steps = N},
checkpoint::Disk best, callbacks::EarlyStopping) from the same initial weights and data; the steps validated, the
validation losses (1e-5 relative), the steps trained, the step whose validation stopped the run (early stopping),
and the step of the best checkpoint must agree.
Usage: val_check_interval.py LIGHTNING_PYTHON DIFFERENTIAL_STEPS_EXE WORK_DIR (--seeds A-B | --random SECONDS --start N)
The seeds draw: batches per epoch 1-6, max_steps 1-30, val_every_steps 1-8, limit_val_batches 1-3, patience 0
(no early stopping) or 1-3."""
import argparse, json, os, random, shutil, subprocess, sys, time

HERE = os.path.abspath(__file__)
INPUTS, CLASSES, BATCH = 5, 3, 4


def draw(seed):
    r = random.Random(seed)
    return {"seed": seed, "inputs": INPUTS, "classes": CLASSES, "batch_size": BATCH,
            "train_samples": BATCH * r.randint(1, 6), "val_samples": BATCH * 3,
            "max_steps": r.randint(1, 30), "val_every_steps": r.randint(1, 8),
            "limit_val_batches": r.randint(1, 3), "patience": r.choice([0, 0, 1, 2, 3]),
            "lr": r.choice([0.05, 0.2, 0.8])}


def write_case(case, d):
    import torch
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(case["seed"])
    n, nv = case["train_samples"], case["val_samples"]
    x = torch.randn(n, INPUTS, generator=g)
    y = (x[:, :CLASSES] + torch.randn(n, CLASSES, generator=g)).argmax(1)
    vx = torch.randn(nv, INPUTS, generator=g)
    vy = (vx[:, :CLASSES] + torch.randn(nv, CLASSES, generator=g)).argmax(1)
    w = torch.randn(CLASSES, INPUTS, generator=g) * 0.5
    b = torch.randn(CLASSES, generator=g) * 0.1
    for name, t in [("x", x), ("y", y), ("vx", vx), ("vy", vy), ("weight", w), ("bias", b)]:
        t.contiguous().numpy().tofile(os.path.join(d, name + ".bin"))
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f)
    return x, y, vx, vy, w, b


def lightning_side(dirs):
    """Run by the Lightning python (this file with --lightning DIR...): prints, per case, the C++ side's JSON."""
    import logging, warnings
    import torch
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    for d in dirs:
        print(json.dumps(lightning_case(d)), flush=True)


def lightning_case(d):
    import numpy
    import torch
    import lightning as L
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
    case = json.load(open(os.path.join(d, "case.json")))
    n, nv = case["train_samples"], case["val_samples"]
    def rd(name, dtype, shape):
        return torch.from_numpy(numpy.fromfile(os.path.join(d, name + ".bin"), dtype=dtype).reshape(shape).copy())
    x, y = rd("x", "float32", (n, INPUTS)), rd("y", "int64", (n,))
    vx, vy = rd("vx", "float32", (nv, INPUTS)), rd("vy", "int64", (nv,))
    seen = {"steps": [], "losses": []}

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(INPUTS, CLASSES)
            with torch.no_grad():
                self.lin.weight.copy_(rd("weight", "float32", (CLASSES, INPUTS)))
                self.lin.bias.copy_(rd("bias", "float32", (CLASSES,)))

        def training_step(self, batch, i):
            return torch.nn.functional.cross_entropy(self.lin(batch[0]), batch[1])

        def on_validation_epoch_start(self):
            self.sum, self.count = 0.0, 0

        def validation_step(self, batch, i):
            loss = torch.nn.functional.cross_entropy(self.lin(batch[0]), batch[1])
            self.sum += loss.item() * len(batch[1])
            self.count += len(batch[1])

        def on_validation_epoch_end(self):
            v = self.sum / self.count
            seen["steps"].append(self.trainer.global_step)
            seen["losses"].append(v)
            self.log("val_loss", torch.tensor(v, dtype=torch.float64))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=case["lr"])

    ckpt_dir = os.path.join(d, "lightning-ckpt")
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # a rerun in the same directory: no "-v1" names
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="{step}", monitor="val_loss", mode="min", save_top_k=1)
    class Stopping(EarlyStopping):  # records the global step of the validation that stops the run
        stop_step = None

        def _run_early_stopping_check(self, trainer):
            super()._run_early_stopping_check(trainer)
            if trainer.should_stop and self.stop_step is None:
                self.stop_step = trainer.global_step

    callbacks = [best]
    if case["patience"] > 0:
        callbacks.append(Stopping(monitor="val_loss", mode="min", patience=case["patience"],
                                  check_on_train_epoch_end=False))
    tds = torch.utils.data.TensorDataset(x, y)
    vds = torch.utils.data.TensorDataset(vx, vy)
    trainer = L.Trainer(max_steps=case["max_steps"], val_check_interval=case["val_every_steps"],
                        check_val_every_n_epoch=None, limit_val_batches=case["limit_val_batches"],
                        num_sanity_val_steps=0, enable_progress_bar=False, enable_model_summary=False, logger=False,
                        callbacks=callbacks, accelerator="cpu", devices=1, deterministic=True, default_root_dir=d)
    trainer.fit(Model(), torch.utils.data.DataLoader(tds, batch_size=BATCH, shuffle=False),
                torch.utils.data.DataLoader(vds, batch_size=BATCH, shuffle=False))
    best_step = None
    if best.best_model_path:
        best_step = int(os.path.basename(best.best_model_path)[len("step="):-len(".ckpt")])
    stop_step = callbacks[1].stop_step if case["patience"] > 0 else None
    return {"validation_steps": seen["steps"], "val_losses": seen["losses"], "global_steps": trainer.global_step,
            "stop_step": stop_step, "best_step": best_step}


def compare(a, b):
    """The first difference between Lightning's result `a` and ours `b` (None: they agree)."""
    for k in ("validation_steps", "global_steps", "stop_step", "best_step"):
        if a[k] != b[k]:
            return f"{k}: Lightning {a[k]}, policytrain {b[k]}"
    for i, (p, q) in enumerate(zip(a["val_losses"], b["val_losses"])):
        if abs(p - q) > 1e-5 * max(abs(p), 1e-12):
            return f"val_losses[{i}] (step {a['validation_steps'][i]}): Lightning {p!r}, policytrain {q!r}"
    return None


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--lightning":
        return lightning_side(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("lightning_python")
    ap.add_argument("cpp")
    ap.add_argument("work")
    ap.add_argument("--seeds")
    ap.add_argument("--random", type=float)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    if args.seeds:
        lo, hi = map(int, args.seeds.split("-"))
        seeds = iter(range(lo, hi + 1))
        deadline = None
    else:
        seeds = iter(range(args.start, 1 << 62))
        deadline = time.time() + args.random
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0, compared = time.time(), 0
    while not deadline or time.time() < deadline:
        # Lightning's import costs seconds: one Lightning process per chunk of seeds.
        chunk = [s for _, s in zip(range(25), seeds)]
        if not chunk:
            break
        cases = {s: draw(s) for s in chunk}
        dirs = {s: os.path.join(args.work, f"seed{s}") for s in chunk}
        for s in chunk:
            write_case(cases[s], dirs[s])
        p = subprocess.run([args.lightning_python, HERE, "--lightning"] + [dirs[s] for s in chunk],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            print(p.stderr[-3000:])
            return 1
        theirs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        for s, t in zip(chunk, theirs):
            ours = json.loads(subprocess.run([args.cpp, "val-check-interval", dirs[s]], capture_output=True, text=True, check=True,
                                             env=env).stdout)
            diff = compare(t, ours)
            compared += 1
            if diff:
                print(f"differential.val_check_interval: seed {s} ({json.dumps(cases[s])}): {diff}")
                print(f"reproduce: python3 {HERE} {args.lightning_python} {args.cpp} {args.work} --seeds {s}-{s}")
                return 1
    print(f"differential.val_check_interval: {compared} inputs compared, 0 differences ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
