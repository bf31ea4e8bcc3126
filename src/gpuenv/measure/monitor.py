"""Resource sampling during the timed region: CPU per core, and GPU utilisation/memory where present.

It tells where the bottleneck was: a CPU simulator pins every core while the GPU idles; a GPU
simulator should show the GPU busy and one host core (the Python driver) at most.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import psutil


@dataclass
class ResourceSamples:
    interval_s: float
    gpu_method: str | None = None
    cpu_percent_per_core: list[list[float]] = field(default_factory=list)
    gpu_util_percent: list[float] = field(default_factory=list)
    gpu_mem_used_mib: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        out: dict = {"samples": len(self.cpu_percent_per_core), "interval_s": self.interval_s, "gpu_method": self.gpu_method}
        if self.cpu_percent_per_core:
            per_core = np.asarray(self.cpu_percent_per_core).mean(axis=0)
            out["cpu_percent_mean_per_core"] = [round(float(x), 1) for x in per_core]
            out["cpu_percent_mean"] = round(float(per_core.mean()), 1)
            out["cpu_cores_busy"] = int((per_core > 80).sum())
        if self.gpu_util_percent:
            out["gpu_util_percent_mean"] = round(float(np.mean(self.gpu_util_percent)), 1)
            out["gpu_mem_used_mib_max"] = float(np.max(self.gpu_mem_used_mib))
        out["bottleneck"] = bottleneck(out)
        return out


def bottleneck(s: dict) -> str:
    """A coarse, explainable label; the raw numbers are kept beside it."""
    if not s.get("samples"):
        return "unknown"
    gpu = s.get("gpu_util_percent_mean")
    if gpu is not None and gpu >= 80:
        return "gpu"
    if s.get("cpu_percent_mean", 0) >= 80:
        return "cpu: all cores"
    busy = s.get("cpu_cores_busy", 0)
    if busy:
        return "cpu: 1 core" if busy == 1 else f"cpu: {busy} cores"
    return "none saturated"


class _Gpu:
    """GPU utilisation and memory: NVML in-process where nvidia-ml-py is installed (no fork in the
    timed region), else nvidia-smi at most every NVIDIA_SMI_INTERVAL_S; absent GPU -> no-op."""

    NVIDIA_SMI_INTERVAL_S = 2.0

    def __init__(self) -> None:
        self.method: str | None = None
        self.smi: str | None = None
        self._handle = None
        self._last_smi = -1e9
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nvml = pynvml
            self.method = "nvml"
        except Exception:  # noqa: BLE001 - no NVML, no driver or no GPU
            self.smi = shutil.which("nvidia-smi")
            self.method = "nvidia-smi" if self.smi else None

    def sample(self) -> tuple[float, float] | None:
        if self.method == "nvml":
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
                mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used / 2**20
                return float(util), float(mem)
            except Exception:  # noqa: BLE001
                return None
        if self.method != "nvidia-smi":
            return None
        now = time.monotonic()
        if now - self._last_smi < self.NVIDIA_SMI_INTERVAL_S:
            return None
        self._last_smi = now
        try:
            out = subprocess.run(
                [str(self.smi), "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip().splitlines()
            util, mem = (float(x) for x in out[0].split(","))
            return util, mem
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None


class Monitor:
    """Samples in a background thread while `active`; start/stop bracket the timed values."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self._gpu = _Gpu()
        self.samples = ResourceSamples(interval_s, gpu_method=self._gpu.method)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set_active(self, active: bool) -> None:
        if active:
            psutil.cpu_percent(percpu=True)  # prime: the next call reports usage since now
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        else:
            self._stop.set()
            if self._thread:
                self._thread.join()
            self._thread = None
            # Usage since the last sample: short timed regions still get one sample covering them.
            self.samples.cpu_percent_per_core.append(psutil.cpu_percent(percpu=True))

    def _loop(self) -> None:
        while not self._stop.wait(self.samples.interval_s):
            self.samples.cpu_percent_per_core.append(psutil.cpu_percent(percpu=True))
            g = self._gpu.sample()
            if g:
                self.samples.gpu_util_percent.append(g[0])
                self.samples.gpu_mem_used_mib.append(g[1])
