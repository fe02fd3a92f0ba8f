"""examples/tiny_lm against the same recipe in Python, step for step. For each seed, a seeded generator draws a token
file (random bytes of a random length) and a configuration (layers, width, heads, block, batch, lr, min lr, warmup,
weight decay, beta2, clipping, fused or loop AdamW, 1 or 2 ranks, validation interval and batches); tiny_lm trains
it for 50 steps in fp32, writing its initial weights (--init-weights) and every step's loss and lr (--log-dir).
Python builds the same GPT in torch.nn (nanoGPT's names), loads those initial weights, draws the same windows
(data::TokenStream's formula, tests/differential/token_stream.py), takes AdamW with nanoGPT's decay and no-decay
groups, nanoGPT's get_lr, clip_grad_norm_ and, on 2 ranks, the mean of the ranks' gradients (DDP's all-reduce, done
by hand), and must agree at every step: the loss (rank 0's) and the lr within 1e-5 relative, the validation losses
at the steps validated likewise. With --lightning PYTHON, the same run is also made by Lightning (1 rank:
Trainer(max_steps, val_check_interval, check_val_every_n_epoch=None, limit_val_batches), ModelCheckpoint on
val_loss): the steps validated, their losses and the step of the best checkpoint must be tiny_lm's.
Usage: tiny_lm.py --binary TINY_LM_EXE --work DIR [--lightning PYTHON] (--seeds A-B | --random SECONDS --start N)"""
import json, math, os, random, shutil, subprocess, sys

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "..", "differential"))
from token_stream import window_start  # noqa: E402  (TokenStream's formula, transcribed once)
import seed_loop  # noqa: E402

STEPS = 50
TOL = 1e-5


def draw(seed):
    r = random.Random(seed)
    heads = r.choice([1, 2, 4])
    c = {"seed": seed, "tokens": r.randint(3000, 20000), "layers": r.randint(1, 2),
         "d_model": heads * r.choice([8, 16]), "heads": heads, "block": r.choice([8, 16, 32]),
         "batch": r.randint(1, 4), "lr": r.choice([3e-4, 1e-3, 3e-3]), "warmup": r.randint(0, 12),
         "weight_decay": r.choice([0.0, 0.1, 0.5]), "beta2": r.choice([0.95, 0.99]),
         "clip": r.choice([0.0, 1.0, 0.1]), "fused": r.random() < 0.5, "ranks": 1 + seed % 2,
         "val_every": r.randint(3, 20), "val_batches": r.randint(1, 3), "wseed": r.getrandbits(32)}
    c["min_lr"] = c["lr"] * r.choice([0.0, 0.1])
    return c


def tiny_lm_args(exe, c, d):
    args = [exe, "--data", d, "--corpus", os.path.join(d, "unused"), "--max-steps", str(STEPS),
            "--val-every-steps", str(c["val_every"]), "--val-batches", str(c["val_batches"]),
            "--batch", str(c["batch"]), "--block", str(c["block"]), "--layers", str(c["layers"]),
            "--d-model", str(c["d_model"]), "--heads", str(c["heads"]), "--lr", repr(c["lr"]),
            "--min-lr", repr(c["min_lr"]), "--warmup-steps", str(c["warmup"]),
            "--weight-decay", repr(c["weight_decay"]), "--beta2", repr(c["beta2"]), "--clip", repr(c["clip"]),
            "--seed", str(c["wseed"]), "--threads", "1", "--init-weights", os.path.join(d, "init.pt"),
            "--log-dir", os.path.join(d, "log"), "--checkpoint", os.path.join(d, "ckpt"),
            "--sample-tokens", "0", "--progress-tty", "0", "--summary",
            os.path.join(d, "summary.json")]
    if c["fused"]:
        args.append("--fused")
    if c["ranks"] > 1:
        args += ["--nproc", str(c["ranks"])]
    return args


def write_data(c, d):
    import numpy as np
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = np.random.default_rng(c["seed"])
    # Bytes of a skewed distribution, so that the model has something to learn in 50 steps.
    for name, n in (("train", c["tokens"]), ("val", c["tokens"] // 4 + c["block"] + 1)):
        p = rng.dirichlet(np.full(256, 0.3))
        rng.choice(256, size=n, p=p).astype(np.uint16).tofile(os.path.join(d, name + ".bin"))


def gpt(c):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(c["d_model"], 3 * c["d_model"])
            self.c_proj = nn.Linear(c["d_model"], c["d_model"])

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(x).split(d, 2)
            h = lambda z: z.view(b, t, c["heads"], d // c["heads"]).transpose(1, 2)
            y = F.scaled_dot_product_attention(h(q), h(k), h(v), is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(c["d_model"], 4 * c["d_model"])
            self.c_proj = nn.Linear(4 * c["d_model"], c["d_model"])

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(c["d_model"]), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(c["d_model"]), Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(256, c["d_model"])
            self.wpe = nn.Embedding(c["block"], c["d_model"])
            self.h = nn.ModuleList([Block() for _ in range(c["layers"])])
            self.ln_f = nn.LayerNorm(c["d_model"])

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.h:
                x = b(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied, as nanoGPT's lm_head

    return Gpt()


def batch(data, seed, index, rank, b, block):
    """TokenStream's batch `index` (epoch 0) of rank `rank`: rows rank*b .. rank*b+b-1 of the global batch."""
    import numpy as np
    import torch
    rows = [data[s:s + block + 1].astype(np.int64) for s in
            (window_start(seed, 0, index, rank * b + r, len(data), block) for r in range(b))]
    t = torch.from_numpy(np.stack(rows))
    return t[:, :-1], t[:, 1:]


def get_lr(it, c):
    """nanoGPT's train.py get_lr, with lr_decay_iters = max_iters."""
    w, lr, min_lr = c["warmup"], c["lr"], c["min_lr"]
    if it < w:
        return lr * (it + 1) / (w + 1)
    if it > STEPS:
        return min_lr
    coeff = 0.5 * (1.0 + math.cos(math.pi * (it - w) / (STEPS - w)))
    return min_lr + coeff * (lr - min_lr)


def python_run(c, d):
    """The recipe in Python: every step's (rank 0's loss, lr) and every validation's (step, loss)."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    model = gpt(c)
    model.load_state_dict(torch.load(os.path.join(d, "init.pt")))
    train = np.memmap(os.path.join(d, "train.bin"), dtype=np.uint16, mode="r")
    val = np.memmap(os.path.join(d, "val.bin"), dtype=np.uint16, mode="r")
    params = [p for _, p in model.named_parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": c["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if c["fused"] else {"foreach": False}
    opt = torch.optim.AdamW(groups, lr=c["lr"], betas=(0.9, c["beta2"]), eps=1e-8, **extra)
    b, blk, w = c["batch"], c["block"], c["ranks"]

    def validate():
        model.eval()
        with torch.no_grad():
            losses = [F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                      for i in range(c["val_batches"]) for r in range(w)
                      for x, y in [batch(val, (c["wseed"] + 1) & (2**64 - 1), i, r, b, blk)]]
        model.train()
        return sum(losses) / len(losses)  # equal batches: the mean over every rank's windows

    steps, vals = [], []
    for it in range(STEPS):
        lr = get_lr(it, c)
        for g in opt.param_groups:
            g["lr"] = lr
        grads, loss0 = None, None
        for r in range(w):  # each rank's gradient, then their mean (DDP's all-reduce)
            opt.zero_grad(set_to_none=True)
            x, y = batch(train, c["wseed"], it, r, b, blk)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            if r == 0:
                loss0 = loss.item()
            g = [p.grad.clone() for p in params]
            grads = g if grads is None else [a + q for a, q in zip(grads, g)]
        for p, g in zip(params, grads):
            p.grad = g / w if w > 1 else g
        if c["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, c["clip"])
        opt.step()
        steps.append((loss0, lr))
        if (it + 1) % c["val_every"] == 0:  # Lightning's val_check_interval: no extra validation at the end
            vals.append((it + 1, validate()))
    return steps, vals


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(c, d, ours_steps, ours_vals):
    theirs_steps, theirs_vals = python_run(c, d)
    if len(ours_steps) != STEPS:
        return f"tiny_lm logged {len(ours_steps)} steps, expected {STEPS}"
    for i, ((lo, lro), (lt, lrt)) in enumerate(zip(ours_steps, theirs_steps)):
        if rel(lro, lrt) > TOL:
            return f"step {i + 1}: lr {lro!r}, Python's get_lr {lrt!r}"
        if rel(lo, lt) > TOL:
            return f"step {i + 1}: loss {lo!r}, Python {lt!r} (relative {rel(lo, lt):.2e})"
    if [s for s, _ in ours_vals] != [s for s, _ in theirs_vals]:
        return f"steps validated {[s for s, _ in ours_vals]}, Python {[s for s, _ in theirs_vals]}"
    for (s, lo), (_, lt) in zip(ours_vals, theirs_vals):
        if rel(lo, lt) > TOL:
            return f"validation at step {s}: loss {lo!r}, Python {lt!r}"
    return None


def lightning_side(d):
    """Run by the Lightning python (this file --lightning-case DIR): the same run by Lightning's loop; prints JSON."""
    import logging, warnings
    import numpy as np
    import torch
    import torch.nn.functional as F
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    c = json.load(open(os.path.join(d, "case.json")))
    train = np.memmap(os.path.join(d, "train.bin"), dtype=np.uint16, mode="r")
    val = np.memmap(os.path.join(d, "val.bin"), dtype=np.uint16, mode="r")
    b, blk = c["batch"], c["block"]
    seen = {"steps": [], "losses": []}

    class Windows(torch.utils.data.Dataset):  # one item per batch: TokenStream's batch i
        def __init__(self, data, seed, n):
            self.data, self.seed, self.n = data, seed, n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return batch(self.data, self.seed, i, 0, b, blk)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.gpt = gpt(c)
            self.gpt.load_state_dict(torch.load(os.path.join(d, "init.pt")))

        def training_step(self, xy, i):
            x, y = xy
            return F.cross_entropy(self.gpt(x).flatten(0, 1), y.flatten())

        def on_validation_epoch_start(self):
            self.losses = []

        def validation_step(self, xy, i):
            x, y = xy
            self.losses.append(F.cross_entropy(self.gpt(x).flatten(0, 1), y.flatten()).item())

        def on_validation_epoch_end(self):
            v = sum(self.losses) / len(self.losses)
            seen["steps"].append(self.trainer.global_step)
            seen["losses"].append(v)
            self.log("val_loss", torch.tensor(v, dtype=torch.float64))

        def configure_optimizers(self):
            params = [p for _, p in self.gpt.named_parameters()]
            groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": c["weight_decay"]},
                      {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
            extra = {"fused": True} if c["fused"] else {"foreach": False}
            opt = torch.optim.AdamW(groups, lr=c["lr"], betas=(0.9, c["beta2"]), eps=1e-8, **extra)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: get_lr(it, c) / c["lr"])
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    ckpt_dir = os.path.join(d, "lightning-ckpt")
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="{step}", monitor="val_loss", mode="min", save_top_k=1)
    unbatched = dict(batch_size=None, shuffle=False)
    trainer = L.Trainer(max_steps=STEPS, val_check_interval=c["val_every"], check_val_every_n_epoch=None,
                        limit_val_batches=c["val_batches"], num_sanity_val_steps=0, enable_progress_bar=False,
                        enable_model_summary=False, logger=False, callbacks=[best], accelerator="cpu", devices=1,
                        gradient_clip_val=c["clip"] or None, gradient_clip_algorithm="norm", default_root_dir=d)
    trainer.fit(Module(), torch.utils.data.DataLoader(Windows(train, c["wseed"], STEPS), **unbatched),
                torch.utils.data.DataLoader(Windows(val, (c["wseed"] + 1) & (2**64 - 1), c["val_batches"]),
                                            **unbatched))
    best_step = int(os.path.basename(best.best_model_path)[len("step="):-len(".ckpt")])
    print(json.dumps({"validation_steps": seen["steps"], "val_losses": seen["losses"], "best_step": best_step}))


def compare_lightning(c, d, lightning_python, ours_vals, ours_best):
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(c, f)
    p = subprocess.run([lightning_python, HERE, "--lightning-case", d], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        return "Lightning's run failed: " + p.stderr[-2000:]
    t = json.loads(p.stdout.strip().splitlines()[-1])
    if t["validation_steps"] != [s for s, _ in ours_vals]:
        return f"steps validated: Lightning {t['validation_steps']}, tiny_lm {[s for s, _ in ours_vals]}"
    for s, (_, lo), lt in zip(t["validation_steps"], ours_vals, t["val_losses"]):
        if rel(lo, lt) > TOL:
            return f"validation at step {s}: tiny_lm {lo!r}, Lightning {lt!r}"
    if t["best_step"] != ours_best:
        return f"best checkpoint's step: Lightning {t['best_step']}, tiny_lm {ours_best}"
    return None


def check(exe, work, seed, lightning_python):
    c = draw(seed)
    d = os.path.join(work, f"seed{seed}")
    write_data(c, d)
    args = tiny_lm_args(exe, c, d)
    p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        return c, f"tiny_lm exited {p.returncode}: {p.stderr[-2000:]}", args
    rows = [json.loads(l) for l in open(os.path.join(d, "log", "steps.jsonl"))]
    ours_steps = [(r["loss"], r["lr"]) for r in rows]
    vrows = [json.loads(l) for l in open(os.path.join(d, "log", "validations.jsonl"))]
    ours_vals = [(r["step"], r["val_loss"]) for r in vrows]
    summary = json.load(open(os.path.join(d, "summary.json")))
    if [v["step"] for v in summary["validation"]] != [s for s, _ in ours_vals]:
        return c, f"summary.json's validations {summary['validation']} are not validations.jsonl's {ours_vals}", args
    diff = compare(c, d, ours_steps, ours_vals)
    if diff is None and lightning_python and c["ranks"] == 1:
        diff = compare_lightning(c, d, lightning_python, ours_vals, summary["best"]["step"])
    if diff is None:
        shutil.rmtree(d, ignore_errors=True)
    return c, diff, args


def check_seeds(a, seeds, totals):
    """seed_loop's check: each seed's run against Python (and Lightning); False on the first difference."""
    os.makedirs(a.work, exist_ok=True)
    for seed in seeds:
        c, diff, args = check(os.path.abspath(a.binary), a.work, seed, a.lightning)
        totals["inputs"] += 1
        totals["values"] += STEPS
        totals["lightning"] = totals.get("lightning", 0) + bool(a.lightning and c["ranks"] == 1)
        if diff:
            print(f"parity.tiny_lm: seed {seed} ({json.dumps(c)}): {diff}")
            extra = f" --lightning {a.lightning}" if a.lightning else ""
            print(f"reproduce: python3 {HERE} --binary {a.binary} --work {a.work}{extra} --seeds {seed}-{seed}   "
                  f"(tiny_lm: {' '.join(args)})")
            return False
    return True


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--lightning-case":
        return lightning_side(sys.argv[2])
    return seed_loop.drive("tiny_lm", __doc__, check_seeds, 1,
                           lambda t: f"{t['values']} steps; {t.get('lightning', 0)} also against Lightning",
                           arguments=[("--work", {"required": True, "help": "a folder for the runs"}),
                                      ("--lightning", {"help": "a python with Lightning"})],
                           kind="parity")


if __name__ == "__main__":
    sys.exit(main())
