"""tiny_lm's training throughput (tokens/s) against the same recipe in a Python loop (eager) and in a plain LibTorch
loop (bench/lm_plain.cpp), one run, interleaved: for each repetition, each thread count and each precision, the three
programs one after another, so that a change of the machine's load hits all three alike. Each program trains the
same GPT for --steps steps (AdamW with decay groups, warmup + cosine, clipping at 1.0; bf16: CPU autocast) and
reports tokens / the training loop's wall time. Prints a Markdown table of medians (bench/RESULTS.md, "tiny_lm"),
then the ratios of each repetition's back-to-back runs (median, min, max).
Usage: lm_tokens.py TINY_LM_EXE LM_PLAIN_EXE DATA_DIR [--reps 5] [--steps 20] [--threads 1,2] [--precisions fp32,bf16]
       lm_tokens.py --python-loop DATA_DIR STEPS BATCH BLOCK LAYERS D_MODEL HEADS THREADS PRECISION   (one Python run)"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.abspath(__file__)
MODEL = {"batch": 16, "block": 128, "layers": 4, "d_model": 128, "heads": 4}


def python_loop(data, steps, batch, block, layers, d_model, heads, threads, precision):
    """The recipe in Python, eager (nanoGPT's train.py loop without its extras); prints one JSON line."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "..", "tests", "parity"))
    import numpy as np
    import torch
    import torch.nn.functional as F
    from tiny_lm import batch as window_batch, gpt
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    model = gpt({"d_model": d_model, "heads": heads, "block": block, "layers": layers})
    train = np.memmap(os.path.join(data, "train.bin"), dtype=np.uint16, mode="r")
    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95), fused=True)
    lr, min_lr, warmup = 2e-3, 2e-4, 10
    t0 = time.perf_counter()
    for it in range(steps):
        step_lr = lr * (it + 1) / (warmup + 1) if it < warmup else \
            min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (steps - warmup))) * (lr - min_lr)
        for g in opt.param_groups:
            g["lr"] = step_lr
        x, y = window_batch(train, 1337, it, 0, batch, block)
        with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    s = time.perf_counter() - t0
    print(json.dumps({"steps": steps, "tokens": steps * batch * block, "seconds": s,
                      "tokens_per_second": steps * batch * block / s}))


def run(args, **env):
    p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1", **env))
    if p.returncode != 0:
        sys.exit(f"lm_tokens: {' '.join(args)} failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
    return p.stdout


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--python-loop":
        a = sys.argv[2:]
        return python_loop(a[0], *map(int, a[1:8]), a[8])
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_lm")
    ap.add_argument("lm_plain")
    ap.add_argument("data")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--preload", default="",
                    help="an allocator's shared library (tcmalloc's, say): the Python loop and the plain loop run once "
                         "more each with it in LD_PRELOAD, columns of their own (what tiny_lm's linked allocator "
                         "would give them)")
    a = ap.parse_args()
    m, steps = MODEL, str(a.steps)
    sizes = [str(m[k]) for k in ("batch", "block", "layers", "d_model", "heads")]
    results = {}
    work = tempfile.mkdtemp(prefix="lm_tokens")
    t0 = time.time()
    for rep in range(a.reps):
        for threads in a.threads.split(","):
            for precision in a.precisions.split(","):
                summary = os.path.join(work, "summary.json")
                run([a.tiny_lm, "--data", a.data, "--max-steps", steps, "--val-every-steps", "0", "--val-batches", "1",
                     "--batch", sizes[0], "--block", sizes[1], "--layers", sizes[2], "--d-model", sizes[3],
                     "--heads", sizes[4], "--lr", "2e-3", "--min-lr", "2e-4", "--warmup-steps", "10", "--fused",
                     "--precision", precision, "--threads", threads, "--sample-tokens", "0", "--progress-tty", "0",
                     "--summary", summary])
                got = {"tiny_lm": json.load(open(summary))["tokens_per_second"]}
                got["python"] = json.loads(run([sys.executable, HERE, "--python-loop", a.data, steps] + sizes +
                                               [threads, precision]).strip().splitlines()[-1])["tokens_per_second"]
                got["plain"] = json.loads(run([a.lm_plain, a.data, steps] + sizes + [threads, precision])
                                          .strip().splitlines()[-1])["tokens_per_second"]
                if a.preload:
                    got["python+preload"] = json.loads(run([sys.executable, HERE, "--python-loop", a.data, steps] +
                                                           sizes + [threads, precision], LD_PRELOAD=a.preload)
                                                       .strip().splitlines()[-1])["tokens_per_second"]
                    got["plain+preload"] = json.loads(run([a.lm_plain, a.data, steps] + sizes + [threads, precision],
                                                          LD_PRELOAD=a.preload)
                                                      .strip().splitlines()[-1])["tokens_per_second"]
                for k, v in got.items():
                    results.setdefault((threads, precision, k), []).append(v)
                print(f"rep {rep + 1} threads {threads} {precision}: " +
                      ", ".join(f"{k} {v:.0f}" for k, v in got.items()), flush=True)
    print(f"\n{a.reps} repetitions, {steps} steps each, {time.time() - t0:.0f} s; model {json.dumps(m)}\n")
    extra = ["python+preload", "plain+preload"] if a.preload else []
    print("| threads | precision | tiny_lm tokens/s | Python eager | plain LibTorch | tiny_lm / Python | tiny_lm / plain |" +
          "".join(f" {k} | tiny_lm / {k} |" for k in extra))
    print("|---|---|---|---|---|---|---|" + "---|---|" * len(extra))
    for threads in a.threads.split(","):
        for precision in a.precisions.split(","):
            med = {k: statistics.median(results[(threads, precision, k)]) for k in ["tiny_lm", "python", "plain"] + extra}
            print(f"| {threads} | {precision} | {med['tiny_lm']:.0f} | {med['python']:.0f} | {med['plain']:.0f} | "
                  f"{med['tiny_lm'] / med['python']:.2f}x | {med['tiny_lm'] / med['plain']:.2f}x |" +
                  "".join(f" {med[k]:.0f} | {med['tiny_lm'] / med[k]:.2f}x |" for k in extra))
    # The same ratios per repetition: the programs of one repetition ran one after another, so a change of the
    # machine's load between repetitions (another tenant's job) cancels out of each one; their median and range
    # say how far one run's ratio of medians can be trusted.
    print("\nPer repetition (each ratio of the three programs run back to back), median [min, max]:\n")
    print("| threads | precision | tiny_lm / Python | tiny_lm / plain |" + "".join(f" tiny_lm / {k} |" for k in extra))
    print("|---|---|---|---|" + "---|" * len(extra))
    for threads in a.threads.split(","):
        for precision in a.precisions.split(","):
            r = {k: results[(threads, precision, k)] for k in ["tiny_lm", "python", "plain"] + extra}
            cells = []
            for k in ["python", "plain"] + extra:
                q = [t / o for t, o in zip(r["tiny_lm"], r[k])]
                cells.append(f"{statistics.median(q):.2f}x [{min(q):.2f}, {max(q):.2f}]")
            print(f"| {threads} | {precision} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
