#!/usr/bin/env python3
"""Merges the raw results of bench/gpu/run_all.sh into OUTDIR/gpu-bench.json and OUTDIR/gpu-bench.md (a section
ready to paste into bench/RESULTS.md). GPU idle fraction of a timed window = 1 - mean(NVML GPU utilization)/100
over the driver's utilization samples that fall inside the window (nvmlDeviceGetSamples), or, when there are
fewer than 3 of those, over the 5 ms polls of nvmlDeviceGetUtilizationRates inside it.

Usage: report.py RAW_DIR OUTDIR [--smoke]
With --smoke (CPU runs with the fake NVML of fake_nvml/), the results are also checked: every benchmark row is
present, times are positive, the idle fractions equal the fake's known 50% utilization, and AutoBatch's batch on
the CPU equals the one its nominal memory model implies. Exit status 1 when a check fails.
"""
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys

import torch


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def idle_fraction(nvml, window):
    """{"idle": fraction, "method": ..., "n": samples} over the window, or None."""
    if not nvml or not window or window[0] is None or window[1] is None:
        return None
    t0, t1 = window
    samples, poll = nvml.get("samples", []), nvml.get("poll", [])
    # Driver timestamps should be Unix time like the polls; use them only if they are.
    if samples and poll and abs(statistics.median(s[0] for s in samples) - statistics.median(p[0] for p in poll)) < 3600:
        ts = [s[0] for s in samples]
        period = statistics.median(b - a for a, b in zip(ts, ts[1:])) if len(ts) > 1 else 0.0
        # A sample covers the period before its stamp: keep those whose whole period lies in the window.
        inside = [v for t, v in samples if t0 + period <= t <= t1]
        if len(inside) >= 3:
            return {"idle": 1 - statistics.fmean(inside) / 100, "method": "nvml-samples", "n": len(inside),
                    "sample_period_s": period}
    inside = [v for t, v in poll if t0 <= t <= t1]
    if len(inside) >= 3:
        return {"idle": 1 - statistics.fmean(inside) / 100, "method": "nvml-poll", "n": len(inside)}
    return None


def fmt_idle(r):
    i = r.get("gpu_idle")
    return "n/a" if i is None else f"{i['idle']:.2f}"


def env_info(smoke, raw):
    cuda = torch.cuda.is_available() and not smoke
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0) if cuda else ("none (CPU smoke run)" if smoke else "none (CPU run)"),
        "torch_python": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    if cuda:
        p = torch.cuda.get_device_properties(0)
        info["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
    for name in ("amp", "loops_cpp", "data", "autobatch"):
        r = load(os.path.join(raw, f"{name}.json"))
        if r:
            info["libtorch"] = r.get("libtorch")
            info["libtorch_with_cuda"] = r.get("with_cuda")
            break
    try:  # the installed version, without importing Lightning (slow)
        info["lightning"] = importlib.metadata.version("lightning")
    except importlib.metadata.PackageNotFoundError:
        info["lightning"] = None
    return info


def main():
    raw, out = sys.argv[1], sys.argv[2]
    smoke = "--smoke" in sys.argv[3:]
    nvml = load(os.path.join(raw, "nvml.json"))
    env = env_info(smoke, raw)
    if nvml:
        env["nvml_device"] = nvml.get("device_name")
        env["driver"] = nvml.get("driver")
    status = []
    if os.path.exists(os.path.join(raw, "status.txt")):
        with open(os.path.join(raw, "status.txt")) as f:
            status = [line.split() for line in f if line.strip()]
    res = {name: load(os.path.join(raw, f"{name}.json")) for name in ("amp", "loops_cpp", "loops_py", "data", "autobatch")}
    for name in ("amp", "loops_cpp", "loops_py", "data"):
        for row in (res[name] or {}).get("rows", []):
            if "window" in row:
                row["gpu_idle"] = idle_fraction(nvml, row["window"])

    md = []
    title = "GPU benchmarks (bench/gpu/run_all.sh)" + (" — CPU SMOKE RUN, not a measurement" if smoke else "")
    md.append(f"## {title}\n")
    md.append(f"Machine: **{env['gpu']}**" + (f" ({env.get('gpu_memory_gib')} GiB)" if env.get("gpu_memory_gib") else "")
              + f", driver {env.get('driver', 'n/a')}, {env['cpu_count']} CPU cores; PyTorch {env['torch_python']} "
              f"(CUDA {env['cuda']}, cuDNN {env['cudnn']}), LibTorch {env.get('libtorch')} "
              f"({'CUDA' if env.get('libtorch_with_cuda') else 'CPU'} build), Lightning {env['lightning']}; "
              f"{env['date_utc']}. One run of `bench/gpu/run_all.sh`; every figure is a median of timed "
              "repetitions after warm-up, each repetition ending with a device synchronize. GPU idle fraction: "
              "1 - mean NVML GPU utilization (the share of time a kernel was running) over the timed window, from "
              "the driver's utilization samples (nvmlDeviceGetSamples, read by a Python sidecar) or, failing those, "
              "5 ms polls of nvmlDeviceGetUtilizationRates; NVML's sample period is coarse (order 100 ms), so "
              "read it to about ±0.05.\n")
    failed = [s for s in status if len(s) >= 2 and s[1] != "0"]
    if failed:
        md.append("**Failed steps:** " + ", ".join(f"`{s[0]}` (exit {s[1]})" for s in failed) + "\n")

    amp = res["amp"]
    if amp:
        rn, gp = amp.get("resnet18", {}), amp.get("gpt", {})
        md.append("### AMP: step time by precision\n")
        md.append(f"Trainer<Task, precision::Autocast, callbacks::PerfKnobs>, optim::FusedAdamW, cuDNN benchmark on; "
                  f"fp32 = TF32 off for matmuls and convolutions, tf32 = TF32 on; bf16/fp16 = autocast (fp16 with "
                  f"dynamic loss scaling, its inf flag handed to FusedAdamW's kernel: no host read per step; "
                  f"fp16-sync = the same with the flag read on the host every step, `device_skip = false`). ResNet-18 (torchvision layout, "
                  f"{rn.get('classes')} classes): batch {rn.get('batch')}, images {rn.get('image')}. GPT-2-small-class: "
                  f"{gp.get('layers')} pre-norm blocks, d_model {gp.get('d_model')}, {gp.get('heads')} heads, causal "
                  f"scaled_dot_product_attention, vocab {gp.get('vocab')}, sequence {gp.get('seq')}, batch "
                  f"{gp.get('batch')}. Synthetic data on the device.\n")
        md.append("| model | channels-last | precision | ms/step | speed-up vs fp32 | skipped steps | peak GiB |")
        md.append("|---|---|---|---|---|---|---|")
        base = {(r["model"], r["channels_last"]): r["step_seconds"] for r in amp["rows"]
                if r["precision"] == "fp32" and "error" not in r}
        for r in amp["rows"]:
            if "error" in r:
                md.append(f"| {r['model']} | {'on' if r['channels_last'] else 'off'} | {r['precision']} | "
                          f"failed: {r['error'][:100]} | | | |")
                continue
            b = base.get((r["model"], r["channels_last"]))
            r["speedup_vs_fp32"] = b / r["step_seconds"] if b else None
            peak = r.get("peak_allocated_bytes")
            md.append(f"| {r['model']} | {'on' if r['channels_last'] else 'off'} | {r['precision']} | "
                      f"{1e3 * r['step_seconds']:.2f} | "
                      f"{'%.2fx' % r['speedup_vs_fp32'] if r['speedup_vs_fp32'] else 'n/a'} | "
                      f"{r['skipped_steps']} of {r['steps']} | {'%.1f' % (peak / 2**30) if peak else 'n/a'} |")
        md.append("")

    rows = (res["loops_cpp"] or {}).get("rows", []) + (res["loops_py"] or {}).get("rows", [])
    if rows:
        lc = res["loops_cpp"] or {}
        m = lc.get("mlp", {})
        md.append("### Training loops: Trainer vs hand-written LibTorch vs Python eager vs Lightning\n")
        md.append(f"Same model, same synthetic batches already on the device (8 distinct, cycled), fp32, AdamW "
                  f"fused kernel on every side (optim::FusedAdamW / torch.optim.AdamW(fused=True)), lr 1e-3. "
                  f"fmnist: the Fashion-MNIST CNN of examples/fashion_mnist/model.hpp, batch "
                  f"{lc.get('fmnist', {}).get('batch')}; mlp: {m.get('in')}-{m.get('hidden')}x{m.get('depth')}-"
                  f"{m.get('out')} ReLU MLP, batch {m.get('batch')} (launch-bound). `trainer`: Trainer<Task, "
                  f"precision::Fp32> with NonFinite::ignore; `trainer_checked`: Trainer<Task> with every default, which "
                  f"reads the loss each step to check it is finite (one device sync per step); `trainer_graph`: `trainer` "
                  f"with step::CudaGraph, the whole step (forward, backward, fused AdamW) one CUDA graph replayed per "
                  f"batch (on the CPU, smoke runs only: its emulation); `python_graph`: PyTorch's whole-network capture "
                  f"(torch.cuda.graph, AdamW(fused=True, capturable=True)); `libtorch_loop`: a "
                  f"hand-written loop; `lightning`: L.Trainer(precision='32-true', logger=False, "
                  f"enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False).\n")
        md.append("| model | loop | steps/s | samples/s | relative to `trainer` | GPU idle fraction | cv |")
        md.append("|---|---|---|---|---|---|---|")
        order = ["trainer", "trainer_graph", "libtorch_loop", "python_eager", "python_graph", "lightning", "trainer_checked"]
        verdicts = []
        for model in ("fmnist", "mlp"):
            mrows = sorted((r for r in rows if r["model"] == model),
                           key=lambda r: order.index(r["variant"]) if r["variant"] in order else 99)
            ref = next((r["steps_per_second"] for r in mrows if r["variant"] == "trainer" and "error" not in r), None)
            for r in mrows:
                if "error" in r:
                    md.append(f"| {model} | {r['variant']} | failed: {r['error'][:80]} | | | | |")
                    continue
                r["relative_to_trainer"] = r["steps_per_second"] / ref if ref else None
                md.append(f"| {model} | {r['variant']} | {r['steps_per_second']:.1f} | {r['samples_per_second']:.0f} | "
                          f"{'%.2f' % r['relative_to_trainer'] if ref else 'n/a'} | {fmt_idle(r)} | {r['cv']:.3f} |")
            others = [r for r in mrows if "error" not in r and r["variant"] not in ("trainer", "trainer_checked", "trainer_graph", "python_graph")]
            graph = next((r for r in mrows if r["variant"] == "trainer_graph" and "error" not in r), None)
            if ref and graph:
                pyg = next((r for r in mrows if r["variant"] == "python_graph" and "error" not in r), None)
                verdicts.append(f"{model}: `trainer_graph` runs at {graph['steps_per_second'] / ref:.2f}x the steps/s "
                                f"of eager `trainer`" + (f" and {graph['steps_per_second'] / pyg['steps_per_second']:.2f}x "
                                                         f"Python's whole-network capture" if pyg else ""))
            if ref and others:
                best = max(others, key=lambda r: r["steps_per_second"])
                verdicts.append(f"{model}: `trainer` runs at {ref / best['steps_per_second']:.2f}x the steps/s of the "
                                f"fastest other loop (`{best['variant']}`, cv {best['cv']:.3f})")
        md.append("")
        if verdicts:
            md.append("Trainer against the fastest other loop: " + "; ".join(verdicts) + ".\n")

    data = res["data"]
    if data:
        md.append("### Data path: host data to the GPU, with and without PrefetchLoader\n")
        md.append(f"Fashion-MNIST CNN through Trainer<Task, precision::Fp32> (NonFinite::ignore), {data['samples']} "
                  f"host images of Fashion-MNIST's shape (1x28x28 float), batch {data['batch']}, shuffled; one "
                  f"repetition = one epoch. `tensor_loader`: data::TensorLoader, the Trainer copies each batch from "
                  f"pageable memory; `prefetch_w0` / `prefetch_wN`: data::PrefetchLoader with 0 / {data['workers']} "
                  f"worker threads (on CUDA: a ring of pinned buffers, the next batch copied on a side stream by the "
                  f"training thread); `augment_w0` / `augment_wN`: the same with random crop (padding 4) and "
                  f"flip per sample, w0 being augmentation on the training thread (no prefetch); `_nosidestream`: each batch "
                  f"copied on the training stream when read; `_pageable`: host buffers not pinned; `tensor_loader_1thread`: "
                  f"tensor_loader with LibTorch's intra-op pool at one thread.\n")
        md.append("| loader | samples/s | epoch seconds | GPU idle fraction | cv | loader alone, us per batch |")
        md.append("|---|---|---|---|---|---|")
        for r in data["rows"]:
            if "error" in r:
                md.append(f"| {r['variant']} | failed: {r['error'][:100]} | | | | |")
                continue
            md.append(f"| {r['variant']} | {r['samples_per_second']:.0f} | {r['step_seconds'] * r['steps_per_rep']:.3f} | "
                      f"{fmt_idle(r)} | {r['cv']:.3f} | {r.get('loader_only_us_per_batch', float('nan')):.0f} |")
        rate = {r["variant"]: r.get("samples_per_second") for r in data["rows"] if "error" not in r}
        ratios = []
        for a, b in (("prefetch_w0", "tensor_loader"), ("prefetch_wN", "tensor_loader"), ("augment_wN", "augment_w0"),
                     ("augment_wN", "tensor_loader"), ("prefetch_wN_nosidestream", "tensor_loader"),
                     ("prefetch_wN_pageable", "tensor_loader"), ("tensor_loader_1thread", "tensor_loader"),
                     ("prefetch_wN", "tensor_loader_1thread")):
            if rate.get(a) and rate.get(b):
                ratios.append(f"{a} / {b} = {rate[a] / rate[b]:.2f}x")
        if ratios:
            md.append("Ratios (same run): " + "; ".join(ratios) + ".\n")
        md.append("")

    ab = res["autobatch"]
    if ab:
        md.append("### Auto batch size: accumulate::AutoBatch's search\n")
        md.append("A probe is one real fp32 training step (forward, backward, FusedAdamW) at that micro-batch; "
                  "on CUDA its peak is the caching allocator's peak reserved bytes (accumulate::cuda_peak_bytes) "
                  "against the device's total memory (accumulate::cuda_memory_budget). Doubling from micro-batch 2, then "
                  "binary search." + ("" if any(r.get("measured_memory") for r in ab["rows"]) else
                                      " CPU run: nominal bytes per sample, no memory measured.") + "\n")
        md.append("| model | input | batch found | limited by | peak GiB | fraction of memory (target) | next batch up | probes | search seconds |")
        md.append("|---|---|---|---|---|---|---|---|---|")
        for r in ab["rows"]:
            if "error" in r:
                md.append(f"| {r['model']} | {'x'.join(map(str, r['image']))} | failed: {r['error'][:100]} | | | | | | |")
                continue
            nxt = r.get("next_peak_bytes", -2)
            nxt_s = ("out of memory" if nxt == -1 else "not probed" if nxt == -2 else
                     f"{nxt / r['budget_bytes']:.3f} of memory")
            md.append(f"| {r['model']} | {'x'.join(map(str, r['image']))} | {r['batch_found']} | "
                      f"{r.get('limited_by', '?')} (max {r['max_batch']}) | "
                      f"{r['peak_bytes'] / 2**30:.2f} | {r['memory_fraction_used']:.3f} ({r['memory_fraction_target']}) | "
                      f"{nxt_s} | {len(r['probes'])} | {r['search_seconds']:.1f} |")
        md.append("")

    for name in ("amp", "loops_cpp", "loops_py", "data", "autobatch"):
        if res[name] is None:
            md.append(f"{name}: not measured (no result file; see the failed steps above).\n")

    merged = {"env": env, "status": status, **{k: v for k, v in res.items()}}
    with open(os.path.join(out, "gpu-bench.json"), "w") as f:
        json.dump(merged, f, indent=2)
    with open(os.path.join(out, "gpu-bench.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))

    if smoke:
        problems = smoke_checks(res, nvml, status)
        if problems:
            print("SMOKE CHECK FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
            sys.exit(1)
        print("smoke checks passed", file=sys.stderr)
    if failed:
        sys.exit(1)


def smoke_checks(res, nvml, status):
    p = []
    for name, r in res.items():
        if r is None:
            p.append(f"{name}: no result file")
    if p:
        return p
    amp = res["amp"]
    precisions = {r["precision"] for r in amp["rows"]}
    want = 2 * len(precisions) + len(precisions)
    if len(amp["rows"]) != want:
        p.append(f"amp: {len(amp['rows'])} rows, expected {want}")
    loops = res["loops_cpp"]["rows"] + res["loops_py"]["rows"]
    for r in loops + amp["rows"] + res["data"]["rows"]:
        if "error" in r or not (r.get("step_seconds", 0) > 0 and math.isfinite(r["step_seconds"])):
            p.append(f"row without a positive time: {r.get('model')} {r.get('variant', r.get('precision'))}")
        if nvml is not None:
            i = r.get("gpu_idle")
            if i is None or abs(i["idle"] - 0.5) > 0.1:
                p.append(f"idle fraction {i} of {r.get('model')} {r.get('variant', r.get('precision'))}; the fake "
                         "NVML reports 50% utilization, so expected 0.5 +- 0.1")
    variants = {(r["model"], r["variant"]) for r in loops}
    for m in ("fmnist", "mlp"):
        for v in ("trainer", "libtorch_loop", "trainer_checked", "trainer_graph", "python_eager"):
            if (m, v) not in variants:
                p.append(f"loops: no row for {m} {v}")
    if {r["variant"] for r in res["data"]["rows"]} != {"tensor_loader", "prefetch_w0", "prefetch_wN",
                                                     "augment_w0", "augment_wN", "prefetch_wN_nosidestream",
                                                     "prefetch_wN_pageable", "tensor_loader_1thread"}:
        p.append("data: a loader variant is missing")
    # --profile-dir: each variant's Kineto trace of its profiled steps, a Chrome trace with the training's operators.
    for r in res["data"]["rows"]:
        trace = r.get("profile")
        if not trace or not os.path.exists(trace):
            p.append(f"data: {r['variant']}: no profile trace ({trace})")
            continue
        with open(trace) as f:
            events = json.load(f).get("traceEvents", [])
        if not any("convolution" in e.get("name", "") for e in events):
            p.append(f"data: {r['variant']}: the trace {trace} holds no convolution")
    # AutoBatch on the CPU: peak = batch * bytes_per_sample, fits when <= fraction * budget; the largest such
    # batch, capped at max_batch, is floor(fraction * budget / bytes_per_sample).
    for r in res["autobatch"]["rows"]:
        if "error" in r:
            p.append(f"autobatch {r['model']}: {r['error']}")
            continue
        fits = [q for q in r["probes"] if q["fits"]]
        if not fits:
            p.append(f"autobatch {r['model']}: no probe fit")
            continue
        bps = fits[0]["peak_bytes"] // fits[0]["batch"]
        expect = min(r["max_batch"], int(r["memory_fraction_target"] * r["budget_bytes"] // bps))
        if r["batch_found"] != expect:
            p.append(f"autobatch {r['model']}: found {r['batch_found']}, expected {expect}")
        limit = "max_batch" if expect == r["max_batch"] else "memory"
        if r.get("limited_by") != limit:
            p.append(f"autobatch {r['model']}: limited by {r.get('limited_by')}, expected {limit}")
    for s in status:
        if len(s) >= 2 and s[1] != "0":
            p.append(f"step {s[0]} exited with {s[1]}")
    return p


if __name__ == "__main__":
    main()
