"""data::TokenStream against its formula, transcribed here from docs/your-data.md: for each seed, a token file in
nanoGPT's layout (uint16 or uint32 ids, no header) of a random length, read here with numpy.memmap as nanoGPT's
get_batch reads it; for every epoch, batch index and rank of a random world size, row r of rank k's batch i must be
the block_size + 1 tokens at window_start(seed, epoch, i, k * batch_size + r) (x the first block_size, y the last), and
the ranks' rows of a batch are distinct draws of one global batch.
Usage: token_stream.py DIFFERENTIAL_STEPS_EXE WORK_DIR (--seeds A-B | --random SECONDS --start N)"""
import argparse, json, os, random, subprocess, sys, time

import numpy as np

HERE = os.path.abspath(__file__)
M64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def window_start(seed, epoch, index, row, tokens, block):
    h = splitmix64(seed)
    for v in (epoch, index, row):
        h = splitmix64(h ^ v)
    return h % (tokens - block)


def draw(seed):
    r = random.Random(seed)
    block = r.randint(1, 12)
    return {"seed64": r.getrandbits(64), "type": r.choice(["uint16", "uint32"]), "tokens": r.randint(block + 1, 4000),
            "block": block, "batch": r.randint(1, 4), "world": r.randint(1, 3), "epochs": r.randint(1, 3),
            "batches": r.randint(1, 6)}


def check(exe, work, seed):
    c = draw(seed)
    rng = np.random.default_rng(seed)
    hi = 65536 if c["type"] == "uint16" else 1 << 32
    path = os.path.join(work, f"tokens{seed}.bin")
    rng.integers(0, hi, size=c["tokens"], dtype=np.uint64).astype(c["type"]).tofile(path)
    args = [exe, "token-stream", path, c["type"], str(c["seed64"]), str(c["block"]), str(c["batch"]), str(c["world"]),
            str(c["epochs"]), str(c["batches"])]
    rows = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    data = np.memmap(path, dtype=c["type"], mode="r")
    want_rows = c["world"] * c["epochs"] * c["batches"]
    if len(rows) != want_rows:
        return c, f"{len(rows)} batches, expected {want_rows}", args
    b, blk = c["batch"], c["block"]
    for epoch, index, rank, x, y in rows:
        for r in range(b):
            s = window_start(c["seed64"], epoch, index, rank * b + r, c["tokens"], blk)
            want = data[s:s + blk + 1].astype(np.int64)
            got_x, got_y = x[r * blk:(r + 1) * blk], y[r * blk:(r + 1) * blk]
            if got_x != want[:-1].tolist() or got_y != want[1:].tolist():
                return c, (f"epoch {epoch} batch {index} rank {rank} row {r}: x {got_x[:6]}..., y {got_y[:6]}...; "
                           f"expected the tokens at {s}: {want[:7].tolist()}..."), args
    os.remove(path)
    return c, None, args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("work")
    ap.add_argument("--seeds")
    ap.add_argument("--random", type=float)
    ap.add_argument("--start", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.seeds:
        lo, hi = map(int, a.seeds.split("-"))
        seeds, deadline = range(lo, hi + 1), None
    else:
        seeds, deadline = range(a.start, 1 << 62), time.time() + a.random
    t0, n, windows = time.time(), 0, 0
    for seed in seeds:
        if deadline and time.time() > deadline:
            break
        c, diff, args = check(os.path.abspath(a.exe), a.work, seed)
        n += 1
        windows += c["world"] * c["epochs"] * c["batches"] * c["batch"]
        if diff:
            print(f"differential.token_stream: seed {seed} ({json.dumps(c)}): {diff}")
            print(f"reproduce: python3 {HERE} {a.exe} {a.work} --seeds {seed}-{seed}   (the C++ side: {' '.join(args)})")
            return 1
    print(f"differential.token_stream: {n} inputs compared ({windows} windows), 0 differences ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
