#!/usr/bin/env python3
"""The main job's time-to-accuracy goal on one GPU (issue 42: >= 0.94 mean test accuracy over 10 seeds in <= 5 s of
training), chosen on the validation split only.

    python3 bench/gpu/goal.py --exe FASHION_MNIST --out DIR [--candidates FILE] [--budget SECONDS]

1. Selection: each candidate line of FILE (main-job flags without --seed; default bench/gpu/goal_candidates.txt)
   runs with the selection seeds (--select-seeds, default 0) while the selection budget lasts. The rule, fixed before
   any run: among the candidates whose mean *validation* accuracy reaches --target-val, the one with the smallest
   mean training time; if none reaches it, the one with the highest validation accuracy. The test accuracy of these
   runs is printed but never used.
2. Proof: the chosen line runs with --final-seeds (default 1..10, none of them a selection seed); every seed's
   validation and test accuracy and training time are reported, with the mean, the spread and the goal's verdict.

Writes DIR/goal.json and DIR/goal.md (appended to gpu-suite's summary). Training time is the main job's
summary.json train_seconds: the training loops only (evaluation excluded), the device synchronised at each epoch's
end. Nothing here decides on the test split.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(exe, out, name, flags, seed, timeout):
    d = os.path.join(out, f"{name}-s{seed}")
    cmd = [exe, "--progress-tty", "0", "--run-dir", d, "--save", "none", "--no-export", "--no-preemption",
           "--train-eval-size", "0"] + flags + ["--seed", str(seed)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc = p.returncode
        tail = (p.stdout + p.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        rc, tail = 124, "timeout"
    wall = time.time() - t0
    s = {}
    try:
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        pass
    r = dict(name=name, seed=seed, rc=rc, wall=wall, flags=" ".join(flags),
             val=s.get("val_accuracy"), test=s.get("test_accuracy"), train_seconds=s.get("train_seconds"),
             sps=s.get("train_samples_per_second"), epochs=s.get("epochs_run"))
    if rc != 0 or r["val"] is None:
        r["error"] = tail
    print(json.dumps({k: v for k, v in r.items() if k != "error"}), flush=True)
    if "error" in r:
        print(r["error"], file=sys.stderr, flush=True)
    return r


def num(v, spec):
    return "n/a" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exe", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", default=os.path.join(HERE, "goal_candidates.txt"))
    ap.add_argument("--select-seeds", default="0")
    ap.add_argument("--final-seeds", default="1,2,3,4,5,6,7,8,9,10")
    ap.add_argument("--target-val", type=float, default=0.9465,
                    help="validation accuracy a candidate must reach (the recipe's validation ran 0.004-0.007 above "
                         "its test accuracy on the H200, 2026-11-26)")
    ap.add_argument("--goal-seconds", type=float, default=5.0)
    ap.add_argument("--goal-test", type=float, default=0.94)
    ap.add_argument("--select-budget", type=float, default=200, help="seconds of wall time for the selection")
    ap.add_argument("--budget", type=float, default=420, help="seconds of wall time for everything")
    ap.add_argument("--run-timeout", type=float, default=90)
    ap.add_argument("--only", default="", help="skip the selection: run the final seeds of this flag line")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU smoke test of the selection and the report (CTest bench.gpu.goal_smoke): two tiny CPU "
                         "candidates, two final seeds, checks that the rule chose as documented")
    a = ap.parse_args()
    if a.smoke:
        tiny = "--device cpu --threads 1 --epochs 1 --limit-val-batches 1 --eval-batch-size 100 --limit-train-batches"
        a.candidates = os.path.join(a.out, "smoke_candidates.txt")
        os.makedirs(a.out, exist_ok=True)
        open(a.candidates, "w").write(f"# smoke\n{tiny} 6\n{tiny} 2\n")
        a.final_seeds, a.target_val, a.only = "1,2", 0.0, ""
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    sel_seeds = [int(x) for x in a.select_seeds.split(",") if x]
    fin_seeds = [int(x) for x in a.final_seeds.split(",") if x]
    assert not set(sel_seeds) & set(fin_seeds), "a selection seed is also a final seed"
    results = {"selection": [], "final": [], "rule": f"fastest mean train_seconds with mean val >= {a.target_val}; "
               "else the highest mean val", "target_val": a.target_val}
    if a.only:
        chosen = shlex.split(a.only)
        results["chosen"] = a.only
        results["why"] = "given (--only)"
    else:
        lines = [l.strip() for l in open(a.candidates) if l.strip() and not l.lstrip().startswith("#")]
        scored = []
        for i, line in enumerate(lines):
            if time.time() - t0 > a.select_budget:
                print(f"goal: selection budget spent; {len(lines) - i} candidates not run", flush=True)
                results["not_run"] = lines[i:]
                break
            rs = [run(a.exe, a.out, f"cand{i}", shlex.split(line), s, a.run_timeout) for s in sel_seeds]
            results["selection"] += rs
            ok = [r for r in rs if r["val"] is not None and r["train_seconds"] is not None]
            if len(ok) == len(rs):
                scored.append((statistics.mean(r["val"] for r in ok), statistics.mean(r["train_seconds"] for r in ok),
                               line))
        if not scored:
            print("goal: no candidate finished", flush=True)
            json.dump(results, open(os.path.join(a.out, "goal.json"), "w"), indent=1)
            return 1
        reach = [c for c in scored if c[0] >= a.target_val]
        if reach:
            best = min(reach, key=lambda c: c[1])
            results["why"] = (f"fastest of {len(reach)} reaching val {a.target_val}: val {best[0]:.4f} in "
                              f"{best[1]:.2f} s")
        else:
            best = max(scored, key=lambda c: c[0])
            results["why"] = f"none reached val {a.target_val}; the highest val {best[0]:.4f} ({best[1]:.2f} s)"
        results["chosen"] = best[2]
        chosen = shlex.split(best[2])
        print(f"goal: chosen ({results['why']}): {best[2]}", flush=True)
    for s in fin_seeds:
        if time.time() - t0 > a.budget:
            print(f"goal: budget spent before seed {s}", flush=True)
            break
        results["final"].append(run(a.exe, a.out, "final", chosen, s, a.run_timeout))
    fin = [r for r in results["final"] if r["test"] is not None]
    md = ["### The 5-second goal (bench/gpu/goal.py)", "",
          f"Rule, on validation only: {results['rule']}. Chosen: `{results['chosen']}` ({results['why']}).", ""]
    if results["selection"]:
        md += ["| candidate | seed | val | test (not used) | train s | samples/s |", "|---|---|---|---|---|---|"]
        for r in results["selection"]:
            md.append(f"| `{r['flags']}` | {r['seed']} | {num(r['val'], '.4f')} | {num(r['test'], '.4f')} | "
                      f"{num(r['train_seconds'], '.2f')} | {num(r['sps'], '.0f')} |")
        md.append("")
    if fin:
        md += ["| seed | val | test | train s | samples/s |", "|---|---|---|---|---|"]
        for r in fin:
            md.append(f"| {r['seed']} | {r['val']:.4f} | {r['test']:.4f} | {r['train_seconds']:.2f} | {r['sps']:.0f} |")
        mt = statistics.mean(r["test"] for r in fin)
        ts = [r["train_seconds"] for r in fin]
        verdict = mt >= a.goal_test and max(ts) <= a.goal_seconds
        results.update(mean_test=mt, min_test=min(r["test"] for r in fin), max_test=max(r["test"] for r in fin),
                       mean_train_seconds=statistics.mean(ts), max_train_seconds=max(ts), seeds=len(fin),
                       goal_met=verdict)
        md += ["", f"{len(fin)} seeds: mean test **{mt:.4f}** ({results['min_test']:.4f}-{results['max_test']:.4f}), "
               f"training {statistics.mean(ts):.2f} s mean, {max(ts):.2f} s max: goal (>= {a.goal_test} mean in <= "
               f"{a.goal_seconds} s) **{'met' if verdict else 'not met'}**."]
    open(os.path.join(a.out, "goal.md"), "w").write("\n".join(md) + "\n")
    json.dump(results, open(os.path.join(a.out, "goal.json"), "w"), indent=1)
    print("\n".join(md), flush=True)
    if a.smoke:
        # Every candidate reaches val 0: the rule must choose the one with the smallest training time, and the
        # final seeds must all have run it.
        timed = {r["flags"]: r["train_seconds"] for r in results["selection"]}
        fastest = min(timed, key=timed.get)
        bad = [] if results["chosen"] == fastest else [f"chose {results['chosen']!r}, the fastest was {fastest!r}"]
        bad += [f"final seed {r['seed']} failed: {r.get('error', '')[-300:]}" for r in results["final"]
                if r["test"] is None or r["flags"] != results["chosen"]]
        if len(results["final"]) != 2 or results.get("seeds") != 2:
            bad.append(f"{len(results['final'])} final runs, expected 2")
        for b in bad:
            print("goal smoke: FAIL:", b, file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
