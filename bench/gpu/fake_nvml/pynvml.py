"""A stand-in for nvidia-ml-py's pynvml, for the CPU smoke test of bench/gpu only (run_all.sh --smoke puts this
directory first on PYTHONPATH; on a GPU machine the real module is used). It has exactly the calls
nvml_sampler.py makes, with the real module's signatures and types, and reports a known utilization so that the
smoke test can check report.py's idle fraction against it: every poll reads 50%, and the driver-style samples
(one per 50 ms, stamped in microseconds of Unix time) alternate 40% and 60% (mean 50%, idle fraction 0.5).
"""
import time

NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_ERROR_NOT_FOUND = 6
NVML_VALUE_TYPE_UNSIGNED_INT = 1
_PERIOD_US = 50_000


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return "Not Found" if self.value == NVML_ERROR_NOT_FOUND else f"NVML Error with code {self.value}"


class _Utilization:
    def __init__(self, gpu, memory):
        self.gpu, self.memory = gpu, memory


class _Value:
    def __init__(self, v):
        self.uiVal = v


class _Sample:
    def __init__(self, ts, v):
        self.timeStamp, self.sampleValue = ts, _Value(v)


_start_us = None


def nvmlInit():
    global _start_us
    _start_us = int(time.time() * 1e6) // _PERIOD_US * _PERIOD_US


def nvmlShutdown():
    pass


def nvmlDeviceGetHandleByIndex(index):
    return ("fake-nvml-device", index)


def nvmlDeviceGetName(handle):
    return "fake NVML device (CPU smoke test)"


def nvmlSystemGetDriverVersion():
    return "fake"


def nvmlDeviceGetUtilizationRates(handle):
    return _Utilization(50, 0)


def nvmlDeviceGetSamples(handle, sampling_type, last_seen):
    now_us = int(time.time() * 1e6)
    first = max(_start_us, (last_seen // _PERIOD_US + 1) * _PERIOD_US)
    out = [_Sample(t, 40 if (t // _PERIOD_US) % 2 == 0 else 60) for t in range(first, now_us + 1, _PERIOD_US)]
    if not out:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return (NVML_VALUE_TYPE_UNSIGNED_INT, out)
