#!/usr/bin/env python3
"""The language model on the GPU (issue 55): tiny_lm's tokens/s against the same GPT in a Python loop, eager and
under torch.compile, in one call, one table. scripts/gpu-suite's part `lm`.

    python3 bench/gpu/lm_gpu.py --out DIR [--tiny-lm EXE --data DIR] [--device cuda] [--steps 60] [--budget 120]

The model is tiny_lm's (bench/lm_tokens.py's sizes, scaled up for a GPU by --batch/--block/--layers/--d-model/
--heads): nanoGPT's GPT (tied embedding, pre-norm blocks, causal SDPA), AdamW (fused) with nanoGPT's decay groups,
warmup then cosine, clipping at 1.0. The Python loop draws its windows from a token tensor on the device (the
figures do not depend on the tokens' values); tiny_lm reads its token file (data::TokenStream). Rows:
  python eager fp32 / bf16, python compile bf16 (torch.compile(model), the compile time reported apart, not timed);
  tiny_lm fp32, bf16 (precision::Autocast), each with --fused, and with --cuda-graph where tiny_lm accepts it
  (a row that exits non-zero is reported with its message, e.g. a tiny_lm without --device cuda).
Each row: --warmup steps untimed, then --steps steps timed between device synchronisations (tiny_lm: its train_seconds
synchronises at the fit's end); tokens/s = steps x batch x block / seconds. The goal (issue 55): tiny_lm >= Python eager at the same precision; the ratio to torch.compile is
reported. tiny_lm times its whole fit, so its rows run it for --warmup and for --warmup + --steps steps and take the
difference. --device cpu (tiny sizes) runs every row on the CPU: the code has run somewhere without a GPU.
Writes DIR/lm.json and DIR/lm.md.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time


def gpt(c, device):
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
            h = lambda z: z.view(b, t, c["heads"], d // c["heads"]).transpose(1, 2)  # noqa: E731
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
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.h:
                x = b(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied, as nanoGPT's lm_head

    return Gpt().to(device)


def python_row(c, device, precision, compiled, warmup, steps):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(1337)
    model = gpt(c, device)
    params = list(model.parameters())
    fused = device == "cuda"
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95), fused=fused)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator(device=device).manual_seed(1)
    tokens = torch.randint(256, (1 << 20,), device=device, generator=g)
    total = warmup + steps

    def lr_at(it):
        w, lr, mn = 10, 2e-3, 2e-4
        return lr * (it + 1) / (w + 1) if it < w else mn + 0.5 * (1 + math.cos(math.pi * (it - w) / max(1, total - w))) * (lr - mn)

    def step(it):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(it)
        start = torch.randint(tokens.numel() - c["block"] - 1, (c["batch"], 1), device=device, generator=g)
        idx = tokens[start + torch.arange(c["block"] + 1, device=device)]
        x, y = idx[:, :-1], idx[:, 1:]
        with torch.autocast(device, torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(fwd(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    for it in range(warmup):
        loss = step(it)
    sync()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for it in range(warmup, total):
        loss = step(it)
    sync()
    s = time.perf_counter() - t0
    return {"tokens_per_second": steps * c["batch"] * c["block"] / s, "seconds": s, "warmup_seconds": warm,
            "loss": float(loss)}


def tiny_lm_row(exe, data, corpus, c, device, precision, graph, warmup, steps, work, timeout):
    # tiny_lm times its whole fit (summary.json's train_seconds), its first steps included: it runs twice, `warmup`
    # steps and `warmup + steps` steps, and the row is the difference, as the Python rows time steps after a warm-up.
    def one(n):
        summary = os.path.join(work, f"tiny_lm-{precision}-{'graph' if graph else 'eager'}-{n}.json")
        args = [exe, "--data", data] + (["--corpus", corpus] if corpus else []) + [
            "--device", device, "--max-steps", str(n), "--val-every-steps", "0", "--val-batches", "1",
            "--batch", str(c["batch"]), "--block", str(c["block"]), "--layers", str(c["layers"]),
            "--d-model", str(c["d_model"]), "--heads", str(c["heads"]), "--lr", "2e-3", "--min-lr", "2e-4",
            "--warmup-steps", "10", "--fused", "--clip", "1.0", "--precision", precision, "--sample-tokens", "0",
            "--progress-tty", "0", "--summary", summary] + (["--cuda-graph"] if graph else [])
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            out = (p.stdout + p.stderr).strip()
            raise RuntimeError(out.splitlines()[-1][:300] if out else f"exit {p.returncode}")
        return json.load(open(summary))["train_seconds"], " ".join(args)

    try:
        t_warm, _ = one(warmup)
        t_all, command = one(warmup + steps)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    except RuntimeError as e:
        return {"error": str(e)}
    s = t_all - t_warm
    if s <= 0:
        return {"error": f"no time left after the warm-up ({t_all:.3f} s - {t_warm:.3f} s)"}
    return {"tokens_per_second": steps * c["batch"] * c["block"] / s, "seconds": s, "warmup_seconds": t_warm,
            "command": command}


def report(a, c, results, t0):
    """Writes DIR/lm.json and DIR/lm.md (after every row: a part cut by its time limit keeps the rows done)."""
    ref = {p: results.get(f"py_eager_{p}", {}).get("tokens_per_second") for p in ("fp32", "bf16")}
    comp = results.get("py_compile_bf16", {}).get("tokens_per_second")
    md = [f"### tiny_lm on {a.device}: tokens/s (batch {a.batch}, block {a.block}, {a.layers} layers, d_model "
          f"{a.d_model}, {a.heads} heads; {a.steps} steps timed after {a.warmup})", "",
          "| row | tokens/s | vs Python eager (same precision) | vs torch.compile bf16 | note |", "|---|---|---|---|---|"]
    for row, r in results.items():
        t = r.get("tokens_per_second")
        p = "bf16" if "bf16" in row else "fp32"
        md.append(f"| {row} | {t:.0f} | " if t else f"| {row} | n/a | ")
        md[-1] += (f"{t / ref[p]:.2f}x | " if t and ref[p] else "n/a | ") + (f"{t / comp:.2f}x | " if t and comp else "n/a | ")
        md[-1] += (r.get("error", "") or (f"warm-up {r['warmup_seconds']:.1f} s" if "warmup_seconds" in r else "")) + " |"
    md += ["", f"lm: {len(results)} rows, {time.time() - t0:.0f} s"]
    json.dump({"config": c, "device": a.device, "rows": results}, open(os.path.join(a.out, "lm.json"), "w"), indent=1)
    open(os.path.join(a.out, "lm.md"), "w").write("\n".join(md) + "\n")
    return md


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny-lm", default="")
    ap.add_argument("--data", default="", help="tiny_lm's --data folder (train.bin, val.bin)")
    ap.add_argument("--corpus", default="", help="tiny_lm's --corpus (the GPU machine may lack its default, fortunes)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--budget", type=float, default=120, help="seconds; no row starts after it")
    ap.add_argument("--rows", default="py_eager_fp32,py_eager_bf16,lm_fp32,lm_bf16,lm_bf16_graph,py_compile_bf16",
                    help="in order; torch.compile last (its compile time may take what is left)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = {"batch": a.batch, "block": a.block, "layers": a.layers, "d_model": a.d_model, "heads": a.heads}
    t0 = time.time()
    results = {}
    for row in a.rows.split(","):
        if time.time() - t0 > a.budget:
            results[row] = {"error": "not run: budget spent"}
            continue
        # py_<eager|compile>_<fp32|bf16>, or lm_<fp32|bf16>[_graph]
        parts = row.split("_")
        try:
            if parts[0] == "py":
                r = python_row(c, a.device, parts[2], parts[1] == "compile", a.warmup, a.steps)
            else:
                precision = parts[1]
                if not a.tiny_lm:
                    r = {"error": "no --tiny-lm given"}
                else:
                    r = tiny_lm_row(a.tiny_lm, a.data, a.corpus, c, a.device, precision, row.endswith("_graph"), a.warmup,
                                    a.steps, a.out, max(10.0, a.budget - (time.time() - t0)))
        except Exception as e:  # a row that fails is reported; the others still run
            r = {"error": f"{type(e).__name__}: {e}"[:300]}
        results[row] = r
        print(json.dumps({row: r}), flush=True)
        report(a, c, results, t0)
    print("\n".join(report(a, c, results, t0)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
