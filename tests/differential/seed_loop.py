"""The seed loop that metrics.py and samplers.py share: --seeds A-B (a fixed set) or --random SECONDS --start N
(fresh seeds, in chunks, for a bounded time), a summary line, and the exit code (1 on the first difference)."""
import argparse
import time


def drive(name, doc, check, chunk, describe, arguments=(), kind="differential"):
    """check(binary, seeds, totals) -> bool (False on a difference, which it has printed); describe(totals) -> the
    summary's words for what was compared. `arguments`: further (flag, argparse keywords) pairs of the driver; with
    them check gets the parsed arguments in place of the binary. `kind`: the summary line's prefix (the CTest name's)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--binary", required=True, help="the program under test")
    ap.add_argument("--seeds", help="A-B: the seeds A to B")
    ap.add_argument("--random", type=float, help="seconds of fresh seeds")
    ap.add_argument("--start", type=int, default=1, help="the first fresh seed")
    for flag, keywords in arguments:
        ap.add_argument(flag, **keywords)
    a = ap.parse_args()
    if arguments:
        check = (lambda inner: lambda binary, seeds, totals: inner(a, seeds, totals))(check)
    totals = {"inputs": 0, "values": 0}
    start = time.monotonic()
    ok = True
    if a.seeds:
        lo, hi = (int(x) for x in a.seeds.split("-"))
        ok = check(a.binary, list(range(lo, hi + 1)), totals)
    elif a.random:
        seed = a.start
        while ok and time.monotonic() - start < a.random:
            ok = check(a.binary, list(range(seed, seed + chunk)), totals)
            seed += chunk
        print(f"{kind}.{name}: seeds {a.start} to {seed - 1}")
    else:
        ap.error("give --seeds A-B or --random SECONDS")
    print(f"{kind}.{name}: {totals['inputs']} inputs compared ({describe(totals)}), {0 if ok else 1} "
          f"differences, {time.monotonic() - start:.1f} s")
    return 0 if ok else 1
