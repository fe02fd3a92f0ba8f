#!/usr/bin/env python3
"""Where the GPU idles in a Kineto trace of `gpu_bench data --profile-dir` (one variant's trace.json).

For each profiled step (ProfilerStep#N on the training thread): the compute stream's busy and idle time, the
gaps between its kernels, and for every gap what the CPU threads were doing (the runtime call that launched the
op after the gap, and the CPU ops running on each thread during the gap). Also: the H2D copies (stream, bytes,
duration), cudaStreamWaitEvent calls, synchronising runtime calls, pinned-memory (de)allocations.

usage: trace_gaps.py TRACE.json [TRACE.json ...] [--gap-us 5] [--top 8] [--verbose]
"""
import argparse
import collections
import json
import os
import sys

SYNC_CALLS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
              "cudaHostAlloc", "cudaFreeHost", "cudaMallocHost", "cudaHostRegister", "cudaHostUnregister",
              "cudaMalloc", "cudaFree", "cudaStreamWaitEvent", "cudaEventQuery", "cudaEventRecord",
              "cudaEventRecordWithFlags", "cudaMemcpyAsync")


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d["traceEvents"]


def union_len(iv):
    iv = sorted(iv)
    tot, cs, ce = 0.0, None, None
    for s, e in iv:
        if cs is None or s > ce:
            if cs is not None:
                tot += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    if cs is not None:
        tot += ce - cs
    return tot


def analyse(path, gap_us, top, verbose):
    ev = load(path)
    name = os.path.basename(os.path.dirname(path)) or path
    X = [e for e in ev if e.get("ph") == "X"]
    steps = sorted([e for e in X if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")],
                   key=lambda e: e["ts"])
    main_tid = steps[0]["tid"]
    gpu = [e for e in X if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    streams = collections.Counter(e["args"]["stream"] for e in gpu if e.get("cat") == "kernel")
    compute = streams.most_common(1)[0][0]
    rt = [e for e in X if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    rt_by_corr = {e["args"].get("correlation"): e for e in rt}
    cpu_ops = [e for e in X if e.get("cat") in ("cpu_op", "user_annotation")]
    threads = sorted({e["tid"] for e in cpu_ops + rt if isinstance(e["tid"], int)})
    t0 = steps[0]["ts"]

    print(f"=== {name}: {len(steps)} steps, training thread {main_tid}, compute stream {compute}, "
          f"kernels per stream {dict(streams)}")

    # Copies to the device.
    for e in sorted([g for g in gpu if g.get("cat") == "gpu_memcpy"], key=lambda g: g["ts"]):
        r = rt_by_corr.get(e["args"].get("correlation"))
        lat = f"issued {r['ts'] - t0:9.1f} by tid {r['tid']} ({r['name']} {r['dur']:.1f} us), start-issue " \
              f"{e['ts'] - r['ts']:6.1f}" if r else "no runtime call"
        print(f"  memcpy {e['name']:34s} stream {e['args']['stream']:3d} {e['args'].get('bytes', 0):8d} B "
              f"at {e['ts'] - t0:9.1f} dur {e['dur']:6.1f}  {lat}")

    # Runtime calls that synchronise or touch memory/events, by thread.
    calls = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in rt:
        k = (e["tid"], e["name"])
        calls[k][0] += 1
        calls[k][1] += e["dur"]
        calls[k][2] = max(calls[k][2], e["dur"])
    print("  runtime calls (thread, name): count, total us, max us")
    for (tid, n), (c, tot, mx) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
        print(f"    {tid:>6} {n:32s} {c:5d} {tot:9.1f} {mx:8.1f}")

    # Stream waits: the compute stream made to wait on the side stream's copy event. The copy it waits for is the
    # last side-stream copy issued before the wait call; "slack" is how long before the wait call that copy ended
    # (positive: the wait costs the compute stream nothing).
    side_copies = sorted([g for g in gpu if g.get("cat") == "gpu_memcpy" and g["args"]["stream"] != compute],
                         key=lambda g: g["ts"])
    for e in sorted([r for r in rt if r["name"] == "cudaStreamWaitEvent"], key=lambda r: r["ts"]):
        before = [g for g in side_copies if (rt_by_corr.get(g["args"].get("correlation")) or {}).get("ts", 1e30) < e["ts"]]
        if before:
            g = before[-1]
            print(f"  cudaStreamWaitEvent at {e['ts'] - t0:9.1f} ({e['dur']:.1f} us): the copy it waits for ended "
                  f"{e['ts'] - (g['ts'] + g['dur']):.1f} us before the call")
        else:
            print(f"  cudaStreamWaitEvent at {e['ts'] - t0:9.1f} ({e['dur']:.1f} us): its copy is before the trace")

    # The hand-offs of loss.backward(): the training thread queues the root on LibTorch's autograd device thread
    # and waits; that thread runs the backward ops and wakes the training thread. head: from the start of the
    # "backward" annotation to the device thread's first op; tail: from its last op to the annotation's end.
    others = [e for e in cpu_ops if e["tid"] != main_tid]
    for s in steps:
        bw = [e for e in cpu_ops if e["name"] == "backward" and e["tid"] == main_tid and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        if not bw:
            continue
        bw = bw[0]
        inside = [e for e in others if bw["ts"] <= e["ts"] < bw["ts"] + bw["dur"]]
        if not inside:
            continue
        first = min(e["ts"] for e in inside)
        last = max(e["ts"] + e["dur"] for e in inside)
        work = [(e["ts"], e["ts"] + e["dur"]) for e in cpu_ops + rt if e["tid"] == main_tid and bw["ts"] < e["ts"] < first]
        main_busy = max((b for _, b in work), default=bw["ts"]) - bw["ts"]
        print(f"  {s['name']} backward {bw['dur']:7.1f} us: head {first - bw['ts']:6.1f} us (training thread's own "
              f"ops {main_busy:5.1f}, then nothing recorded on any thread), autograd thread ops "
              f"{last - first:7.1f}, tail {bw['ts'] + bw['dur'] - last:6.1f} us")

    tot_step = tot_busy = 0.0
    why = collections.Counter()
    for si, s in enumerate(steps):
        a, b = s["ts"], s["ts"] + s["dur"]
        # GPU ops launched from this step's CPU window (by their runtime call), on the compute stream.
        ops = []
        for g in gpu:
            if g["args"]["stream"] != compute:
                continue
            r = rt_by_corr.get(g["args"].get("correlation"))
            if r is not None and a <= r["ts"] < b:
                ops.append((g, r))
        ops.sort(key=lambda gr: gr[0]["ts"])
        if not ops:
            continue
        g_first, g_last = ops[0][0]["ts"], max(g["ts"] + g["dur"] for g, _ in ops)
        busy = union_len([(g["ts"], g["ts"] + g["dur"]) for g, _ in ops])
        span = g_last - g_first
        tot_step += s["dur"]
        tot_busy += busy
        # Step-level annotations on the training thread.
        ann = {e["name"]: e["dur"] for e in X if e.get("cat") == "user_annotation" and e["tid"] == main_tid
               and a <= e["ts"] < b and not e["name"].startswith("ProfilerStep")}
        print(f"  {s['name']}: CPU {s['dur']:8.1f} us  (" + ", ".join(f"{k} {v:.0f}" for k, v in ann.items())
              + f")  GPU span {span:8.1f} busy {busy:8.1f} ({busy / s['dur']:.2f} of the step)  ops {len(ops)}")
        gaps = []
        end = ops[0][0]["ts"] + ops[0][0]["dur"]
        for g, r in ops[1:]:
            if g["ts"] - end > gap_us:
                gaps.append((end, g["ts"], g, r))
            end = max(end, g["ts"] + g["dur"])
        gsum = sum(ge - gs for gs, ge, _, _ in gaps)
        print(f"    gaps > {gap_us} us: {len(gaps)}, {gsum:.1f} us in all")
        for gs, ge, g, r in sorted(gaps, key=lambda x: -(x[1] - x[0]))[:top]:
            issue_late = r["ts"] + r["dur"] >= gs  # the launch returned after the stream ran dry: CPU-bound
            kind = "launch late (CPU-bound)" if issue_late else "launched early: waited on something on the GPU"
            why[kind] += ge - gs
            print(f"    gap {ge - gs:7.1f} us at {gs - t0:9.1f}: next {g['name'][:60]!r} launched by tid {r['tid']} "
                  f"{r['name']} at {r['ts'] - t0:9.1f} -> {kind}")
            for tid in threads:
                # Innermost CPU ops of this thread overlapping the gap, by overlap.
                ov = collections.Counter()
                for e in cpu_ops + rt:
                    if e["tid"] != tid:
                        continue
                    o = min(ge, e["ts"] + e["dur"]) - max(gs, e["ts"])
                    if o > 0:
                        ov[e["name"][:50]] += o
                if ov:
                    print(f"      tid {tid}: " + "; ".join(f"{n} {o:.0f}" for n, o in ov.most_common(6)))
    print(f"  profiled steps: CPU {tot_step:.0f} us, compute stream busy {tot_busy:.0f} us, "
          f"idle fraction {1 - tot_busy / tot_step:.2f}")
    print(f"  largest gaps by kind: " + ", ".join(f"{k}: {v:.0f} us" for k, v in why.items()))

    # Per-op CPU cost on each thread (top-level cpu_ops), to compare loaders.
    if verbose:
        agg = collections.defaultdict(lambda: [0, 0.0])
        for e in cpu_ops:
            agg[(e["tid"], e["name"])][0] += 1
            agg[(e["tid"], e["name"])][1] += e["dur"]
        print("  CPU ops (thread, name): count, total us")
        for (tid, n), (c, tot) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:40]:
            print(f"    {tid:>6} {n[:60]:60s} {c:5d} {tot:9.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+")
    p.add_argument("--gap-us", type=float, default=5.0)
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    for t in a.traces:
        analyse(t, a.gap_us, a.top, a.verbose)


if __name__ == "__main__":
    sys.exit(main())
