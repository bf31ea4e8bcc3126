"""Resource sampling during the timed region: CPU per core, GPU utilisation/memory where present, and
where the CPU time went, from the processes' own accounting.

The split answers "is the bottleneck CPU, GPU or the socket?": CPU seconds of the Python driver (the
worker's main thread) against the simulator (every other thread of the worker: EnvPool's pool, XLA's
and torch's threads; and every child process: SubprocVecEnv envs, Godot servers), over the timed
wall-clock. The label names the side that bounds the rate, with the numbers beside it:
GPU busy -> gpu; every core busy -> the side using more of them; the driver thread at a full core ->
driver CPU; one simulator process at a full core -> simulator CPU; the two together at about one core
-> round trip (they take turns: a socket or pipe ping-pong, each side waiting on the other's reply);
less -> IPC/wait (time goes to sockets, pipes, pacing or sleeping).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil


@dataclass
class ResourceSamples:
    interval_s: float
    gpu_method: str | None = None
    cpu_percent_per_core: list[list[float]] = field(default_factory=list)
    gpu_util_percent: list[float] = field(default_factory=list)
    gpu_mem_used_mib: list[float] = field(default_factory=list)
    cpu_split: dict | None = None  # CpuSplit.result(): driver vs simulator CPU over the timed region
    tree_pss_peak_bytes: int = 0  # the worker and all its child processes (PSS, summed), the larger of start and end
    energy: dict | None = None  # Energy.result(): joules over the timed region, where counters exist
    device: dict | None = None  # device_memory() at the end of the timed values

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
        if self.cpu_split:
            out["cpu_split"] = self.cpu_split
        out["memory"] = memory(self.tree_pss_peak_bytes, self.gpu_method, self.device)
        if self.energy is not None:
            out["energy"] = self.energy
        out["bottleneck"] = bottleneck(out)
        return out


BUSY = 0.85  # of a core, or of all cores: "saturated"
IDLE = 0.1  # of a core: a driver this idle only waits (the simulator's own threads set the pace, not a ping-pong)


def memory(tree_peak: int, gpu_method: str | None, device: dict | None = None) -> dict:
    """Host memory of the case: the process tree's PSS (tree_pss) at the start and the end of the timed
    values, the larger, and the worker's own lifetime peak RSS (getrusage; startup included); device
    memory as device_memory() found it (absent: null, never zero)."""
    import resource

    own_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    dev = device or {"device_peak_mib": None, "device_source": None, "nvml_process_mib": None}
    note = dev.get("device_source") or ("not measured" + ("" if gpu_method else ": no GPU on this machine"))
    return {
        "tree_pss_peak_mib": round(tree_peak / 2**20, 1) if tree_peak else None,
        "worker_peak_rss_mib": round(own_kib / 1024, 1),
        "device_peak_mib": dev["device_peak_mib"],
        "nvml_process_mib": dev["nvml_process_mib"],
        "device_note": note,
        "method": "PSS of the worker and its child processes, summed (psutil), at the start and end of the timed values; getrusage ru_maxrss",
    }


def device_memory(pids: list[int], nvml: tuple[Any, Any] | None = None, modules: dict | None = None) -> dict:
    """Peak device memory the backend itself allocated, from the libraries already loaded in this
    worker (never imported here): JAX's `memory_stats()["peak_bytes_in_use"]` (meaningful because JAX
    workers run with pre-allocation off, gpuenv.backends.jax_cache) and torch's
    `cuda.max_memory_allocated()`, summed where both hold memory; NVML's per-process figure for the
    worker's process tree as a cross-check (it includes the CUDA context). None where a library
    reports nothing (JAX on a CPU, no CUDA torch, no NVML)."""
    mods = sys.modules if modules is None else modules
    peak = 0
    sources = []
    jax = mods.get("jax")
    if jax is not None:
        try:
            stats = jax.devices()[0].memory_stats()
        except Exception:  # noqa: BLE001 - a backend without memory stats
            stats = None
        if stats and stats.get("peak_bytes_in_use"):
            peak += int(stats["peak_bytes_in_use"])
            prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (JAX default)")
            sources.append(f"jax memory_stats peak_bytes_in_use (XLA_PYTHON_CLIENT_PREALLOCATE={prealloc})")
    torch = mods.get("torch")
    if torch is not None:
        try:
            used = int(torch.cuda.max_memory_allocated()) if torch.cuda.is_initialized() else 0
        except Exception:  # noqa: BLE001 - a CPU build
            used = 0
        if used:
            peak += used
            sources.append("torch cuda.max_memory_allocated")
    per_process = None
    if nvml is not None:
        try:
            procs = nvml[0].nvmlDeviceGetComputeRunningProcesses(nvml[1])
            mine = [p.usedGpuMemory for p in procs if p.pid in set(pids) and p.usedGpuMemory]
            per_process = round(sum(mine) / 2**20, 1) if mine else None
        except Exception:  # noqa: BLE001 - NVML without per-process accounting (containers)
            per_process = None
    return {
        "device_peak_mib": round(peak / 2**20, 1) if peak else None,
        "device_source": " + ".join(sources) or None,
        "nvml_process_mib": per_process,
    }


RAPL = Path("/sys/class/powercap")


class Energy:
    """Energy over the timed region from the machine's own counters: the CPU packages' RAPL counters
    (powercap, where readable) and the GPU's total-energy counter (NVML). A counter that is not there
    is recorded as absent (null), never as zero."""

    def __init__(self, nvml: Any = None) -> None:
        self.files = sorted(p for p in RAPL.glob("intel-rapl:[0-9]*/energy_uj") if os.access(p, os.R_OK)) if RAPL.is_dir() else []
        self.nvml = nvml  # (pynvml module, handle) or None
        self.cpu_j: float | None = 0.0 if self.files else None
        self.gpu_j: float | None = 0.0 if nvml else None
        self._start: tuple[list[int], float | None] | None = None

    def _read(self) -> tuple[list[int], float | None]:
        cpu = []
        for f in self.files:
            try:
                cpu.append(int(f.read_text()))
            except (OSError, ValueError):
                cpu.append(-1)
        gpu = None
        if self.nvml:
            try:
                gpu = float(self.nvml[0].nvmlDeviceGetTotalEnergyConsumption(self.nvml[1])) / 1000  # mJ -> J
            except Exception:  # noqa: BLE001 - a GPU without the counter
                self.gpu_j = None
        return cpu, gpu

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> None:
        if self._start is None:
            return
        (c0, g0), (c1, g1) = self._start, self._read()
        self._start = None
        if self.cpu_j is not None:
            for f, a, b in zip(self.files, c0, c1):
                if a < 0 or b < 0:
                    self.cpu_j = None
                    break
                if b < a:  # the counter wrapped
                    try:
                        b += int((f.parent / "max_energy_range_uj").read_text())
                    except (OSError, ValueError):
                        self.cpu_j = None
                        break
                self.cpu_j += (b - a) / 1e6
        if self.gpu_j is not None and g0 is not None and g1 is not None:
            self.gpu_j += g1 - g0

    def result(self) -> dict:
        return {
            "cpu_joules": None if self.cpu_j is None else round(self.cpu_j, 3),
            "gpu_joules": None if self.gpu_j is None else round(self.gpu_j, 3),
            "cpu_source": f"RAPL ({len(self.files)} package counter(s))" if self.files else "absent: no readable RAPL counter",
            "gpu_source": "NVML total energy" if self.nvml else "absent: no NVML",
        }


def tree_pids(me: psutil.Process) -> list[int]:
    try:
        return [me.pid] + [c.pid for c in me.children(recursive=True)]
    except psutil.Error:
        return [me.pid]


def tree_pss(me: psutil.Process) -> int:
    """Memory of the worker and all its child processes: the sum of their PSS (proportional set size:
    a page shared by n processes counts 1/n in each, so forked env processes are not counted n times
    over, as summed RSS would), RSS where PSS is unreadable."""
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            try:
                total += p.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def bottleneck(s: dict) -> str:
    """The side that bounds the rate, with the numbers beside it (the raw ones are kept too)."""
    if not s.get("samples"):
        return "unknown"
    gpu = s.get("gpu_util_percent_mean")
    if gpu is not None and gpu >= 80:
        return f"gpu ({gpu:.0f}% busy)"
    c = s.get("cpu_split")
    if not c:  # no process accounting: per-core load only
        if s.get("cpu_percent_mean", 0) >= 80:
            return "cpu: all cores"
        busy = s.get("cpu_cores_busy", 0)
        return (f"cpu: {busy} core{'s' if busy > 1 else ''}") if busy else "none saturated"
    drv, sim, top, cores = c["driver_cores"], c["simulator_cores"], c["simulator_top_cores"], c["cores"]
    nums = f"simulator {sim:.2f} + driver {drv:.2f} of {cores} cores"
    if drv + sim >= BUSY * cores:
        return f"{'simulator' if sim >= drv else 'driver'} CPU: all cores busy ({nums})"
    if drv >= BUSY:
        return f"driver CPU: the Python thread at {drv:.2f} core ({nums})"
    if top >= BUSY:
        return f"simulator CPU: one simulator process/thread at {top:.2f} core ({nums})"
    if drv < IDLE and sim >= BUSY:  # one process whose compute threads work while its Python thread waits (XLA, EnvPool sync)
        return (f"simulator CPU: its threads at {sim:.2f} cores while the driver waits, and no more of the machine's cores "
                f"used ({nums})")
    if drv + sim >= BUSY:
        return f"round trip: driver and simulator take turns ({nums}; each waits on the other's reply)"
    return f"IPC/wait: no side saturated ({nums}; the rest is waiting on sockets, pipes or pacing)"


def short_bottleneck(text: str | None) -> str | None:
    """bottleneck()'s label without its numbers: 'round trip', 'simulator CPU', 'gpu', 'none saturated'."""
    if text is None:
        return None
    return text.split(":", 1)[0].split(" (", 1)[0].strip()


def _tree_times(me: psutil.Process, main_tid: int) -> dict[str, float]:
    """CPU seconds now: 'driver' (the main thread), 'sim' (other threads + children), and per unit."""
    units: dict[str, float] = {}
    driver = 0.0
    try:
        for t in me.threads():
            if t.id == main_tid:
                driver = t.user_time + t.system_time
            else:
                units[f"t{t.id}"] = t.user_time + t.system_time
    except psutil.Error:
        pass
    for child in me.children(recursive=True):
        try:
            ct = child.cpu_times()
            units[f"p{child.pid}"] = ct.user + ct.system
        except psutil.Error:
            continue
    return {"driver": driver, **units}


class CpuSplit:
    """CPU seconds of the driver thread vs the simulator (threads + child processes) between start/stop."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.main_tid = threading.get_native_id()  # built in the main thread (after a fork, main_thread() may keep the parent's id)
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (psutil.cpu_count() or 1)
        self.wall = 0.0
        self.driver = 0.0
        self.units: dict[str, float] = {}
        self._t: float | None = None
        self._snap: dict[str, float] = {}

    def start(self) -> None:
        self._snap = _tree_times(self.me, self.main_tid)
        self._t = time.perf_counter()

    def stop(self, monitor_tid: int | None) -> None:
        if self._t is None:
            return
        now = _tree_times(self.me, self.main_tid)
        self.wall += time.perf_counter() - self._t
        self._t = None
        self.driver += now["driver"] - self._snap.get("driver", 0.0)
        for k, v in now.items():
            if k != "driver" and k != f"t{monitor_tid}":  # the sampling thread is gpuenv's, not the simulator's
                self.units[k] = self.units.get(k, 0.0) + max(0.0, v - self._snap.get(k, 0.0))

    def result(self) -> dict | None:
        if self.wall <= 0:
            return None
        w = self.wall
        return {
            "wall_s": round(w, 4),
            "cores": self.cores,
            "driver_cores": round(self.driver / w, 3),
            "simulator_cores": round(sum(self.units.values()) / w, 3),
            "simulator_top_cores": round(max(self.units.values(), default=0.0) / w, 3),
            "simulator_units": len([v for v in self.units.values() if v > 0]),
            "method": "psutil CPU times of the worker's main thread vs its other threads and child processes",
        }


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

    def nvml_handle(self) -> tuple[Any, Any] | None:
        return (self._nvml, self._handle) if self.method == "nvml" else None

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
        self._split = CpuSplit()
        self._energy = Energy(self._gpu.nvml_handle())

    def set_active(self, active: bool) -> None:
        if active:
            self._sample_memory()
            psutil.cpu_percent(percpu=True)  # prime: the next call reports usage since now
            self._split.start()
            self._energy.start()
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        else:
            tid = self._thread.native_id if self._thread else None
            self._split.stop(tid)
            self._energy.stop()
            self.samples.energy = self._energy.result()
            self._sample_memory()
            self.samples.device = device_memory(tree_pids(self._split.me), self._gpu.nvml_handle())
            self.samples.cpu_split = self._split.result()
            self._stop.set()
            if self._thread:
                self._thread.join()
            self._thread = None
            # Usage since the last sample: short timed regions still get one sample covering them.
            self.samples.cpu_percent_per_core.append(psutil.cpu_percent(percpu=True))

    def _sample_memory(self) -> None:
        """Outside the timed values (reading every process's smaps costs milliseconds)."""
        self.samples.tree_pss_peak_bytes = max(self.samples.tree_pss_peak_bytes, tree_pss(self._split.me))

    def _loop(self) -> None:
        while not self._stop.wait(self.samples.interval_s):
            self.samples.cpu_percent_per_core.append(psutil.cpu_percent(percpu=True))
            g = self._gpu.sample()
            if g:
                self.samples.gpu_util_percent.append(g[0])
                self.samples.gpu_mem_used_mib.append(g[1])
