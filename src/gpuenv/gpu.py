"""The GPU as gpuenv sees it: nvidia-smi's answers, and the guard that stops a GPU image from quietly
measuring on the CPU. A leaf: backends, the record's provenance and `gpuenv doctor` all use it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from gpuenv.errors import UserError

# One variable overrides a GPU image's refusal to run without a GPU (doctor's GPU check and
# GPUENV_REQUIRE_GPU=1, which the GPU images set); records then carry details.cpu_fallback.
CPU_FALLBACK_HINT = (
    "to measure on the CPU instead set GPUENV_CPU_OK=1 (docker run -e GPUENV_CPU_OK=1 ...; it lifts this "
    "image's GPUENV_REQUIRE_GPU=1 too, and records are marked cpu_fallback)"
)


def cpu_ok() -> bool:
    return os.environ.get("GPUENV_CPU_OK") == "1"


def gpu_guard(on_gpu: bool, what: str) -> dict[str, str]:
    """A backend about to run on the CPU in a GPU image (GPUENV_REQUIRE_GPU=1): UserError saying
    `what`, unless GPUENV_CPU_OK=1, then the record's cpu_fallback detail. {} on a GPU or where no
    GPU is required."""
    if on_gpu or os.environ.get("GPUENV_REQUIRE_GPU") != "1":
        return {}
    if not cpu_ok():
        raise UserError(f"{what}; {CPU_FALLBACK_HINT}; `gpuenv doctor` shows every check")
    return {"cpu_fallback": "GPUENV_CPU_OK=1: a GPU image run on the CPU"}


def nvidia_smi() -> tuple[list[dict], str | None]:
    """([{name, driver}], why there are none)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], "nvidia-smi not found"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return [], f"nvidia-smi failed: {e}"
    if out.returncode != 0:
        return [], f"nvidia-smi failed: {(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}"
    gpus = []
    for line in out.stdout.strip().splitlines():
        name, _, driver = line.rpartition(",")
        gpus.append({"name": name.strip(), "driver": driver.strip()})
    return gpus, None if gpus else "nvidia-smi lists no GPU"


def inventory() -> list[dict[str, str]]:
    """GPUs as nvidia-smi sees them; [] where there is no NVIDIA driver."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        cuda = subprocess.run([smi], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    cuda_version = ""
    for token in cuda.split("CUDA Version:")[1:2]:
        cuda_version = token.split()[0]
    rows = []
    for line in out.strip().splitlines():
        name, driver, mem = (x.strip() for x in line.split(","))
        rows.append({"name": name, "driver": driver, "memory_mib": mem, "cuda_driver_api": cuda_version})
    return rows
