#!/usr/bin/env python3
"""NVML sidecar of bench/gpu/run_all.sh: samples the GPU's utilization while the benchmarks run, until SIGTERM
or SIGINT, then writes JSON to OUT:

- "poll": [unix_seconds, gpu_util_percent] from nvmlDeviceGetUtilizationRates every INTERVAL seconds (5 ms). NVML
  defines the value as the percent of time, over the driver's last sample period, during which one or more
  kernels was executing on the GPU.
- "samples": [unix_seconds, gpu_util_percent] from nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES): the
  driver's own utilization samples with their timestamps (fetched every 0.25 s, so none is lost).

report.py turns them into an idle fraction, 1 - mean(util) / 100, over each benchmark's timed window.
Usage: nvml_sampler.py OUT [INTERVAL_SECONDS] [NVML_INDEX]
"""
import json
import signal
import sys
import time

import pynvml


def main():
    out = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.005
    index = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = pynvml.nvmlDeviceGetName(h)
    name = name.decode() if isinstance(name, bytes) else name
    driver = pynvml.nvmlSystemGetDriverVersion()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    poll, samples, errors = [], [], []
    last_seen = 0
    next_fetch = 0.0

    def fetch():
        nonlocal last_seen
        try:
            _, got = pynvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, last_seen)
        except pynvml.NVMLError as e:  # NVML_ERROR_NOT_FOUND: no new sample since last_seen
            if getattr(e, "value", None) != pynvml.NVML_ERROR_NOT_FOUND and len(errors) < 20:
                errors.append(f"nvmlDeviceGetSamples: {e}")
            return
        for s in got:
            if s.timeStamp > last_seen:
                samples.append([s.timeStamp / 1e6, int(s.sampleValue.uiVal)])
                last_seen = s.timeStamp

    while not stop:
        now = time.time()
        try:
            poll.append([now, int(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)])
        except pynvml.NVMLError as e:
            if len(errors) < 20:
                errors.append(f"nvmlDeviceGetUtilizationRates: {e}")
        if now >= next_fetch:
            fetch()
            next_fetch = now + 0.25
        time.sleep(interval)
    fetch()
    with open(out, "w") as f:
        json.dump({"device_name": name, "driver": driver, "interval": interval, "poll": poll,
                   "samples": sorted(samples), "errors": errors}, f)
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
