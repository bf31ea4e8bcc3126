"""`gpuenv doctor`: can this machine (or container) run the GPU cases it is asked to run?

The driver is the one thing an image cannot pin. Each check gives one line; a failing check says what
to do. The minimum driver comes from gpuenv.images (the same table the images are built from).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuenv.gpu import nvidia_smi
from gpuenv.images import CUDA_MIN_DRIVER, images

IMAGES_MIN_DRIVER = CUDA_MIN_DRIVER["13"]  # what the GPU images (CUDA 13 wheels) need
TOOLKIT_FIX = (
    "on the host install the NVIDIA driver and nvidia-container-toolkit, and start the container with "
    "`docker run --gpus all ...`"
)


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "fail" | "skip"
    message: str  # what was found (the table's line)
    fix: str = ""  # what to do about a failure (its error line says it once, after the message)

    def error(self) -> str:
        return f"{self.message}: {self.fix}" if self.fix else self.message


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def min_driver() -> tuple[str, str]:
    """(minimum driver, where that number comes from)."""
    env = os.environ.get("GPUENV_MIN_DRIVER")
    image = os.environ.get("GPUENV_IMAGE")
    if env:
        return env, f"image gpuenv/{image}" if image else "GPUENV_MIN_DRIVER"
    img = images().get(image or "")
    if img is not None and img.min_driver:
        return img.min_driver, f"image gpuenv/{image}"
    cuda = "13" if importlib.util.find_spec("jax_cuda13_plugin") else "12"  # the CUDA wheels installed here
    return CUDA_MIN_DRIVER[cuda], f"JAX/torch CUDA {cuda} wheels"


def in_container() -> bool:
    return bool(os.environ.get("GPUENV_IMAGE")) or Path("/.dockerenv").exists()


def check_gpu(gpus: list[dict], why: str | None) -> Check:
    if not gpus:
        fix = TOOLKIT_FIX if in_container() else (
            f"on a machine with an NVIDIA GPU, install its driver (>= {IMAGES_MIN_DRIVER} for the gpuenv GPU images); without one, the CPU "
            "backends need none (gpuenv doctor --cpu-ok passes)")
        return Check("gpu", "fail", f"no NVIDIA GPU visible ({why})", fix)
    return Check("gpu", "ok", "; ".join(f"{g['name']} (driver {g['driver']})" for g in gpus))


def check_driver(gpus: list[dict]) -> Check:
    need, source = min_driver()
    if not gpus:
        return Check("driver", "skip", f"no GPU: minimum for {source} would be {need}")
    have = gpus[0]["driver"]
    if _version(have) < _version(need):
        return Check("driver", "fail", f"driver {have} is older than {need}, the minimum for {source}", f"upgrade the host driver to >= {need}")
    return Check("driver", "ok", f"driver {have} >= {need} ({source})")


def check_jax(gpus: list[dict]) -> Check:
    if importlib.util.find_spec("jax") is None:
        return Check("jax", "skip", "jax not installed")
    if not gpus:  # importing JAX's CUDA plugin without a GPU only prints its cuInit traceback
        return Check("jax", "skip", "no GPU: JAX not started (it would run on the CPU)")
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import jax

        backend = jax.default_backend()
    if backend != "gpu":
        hint = next((str(w.message).splitlines()[0] for w in caught if "CUDA" in str(w.message) or "GPU" in str(w.message)), "")
        return Check(
            "jax", "fail",
            f"JAX {jax.__version__} fell back to '{backend}' although a GPU is visible"
            f"{f' ({hint})' if hint else ''}: install jax[cuda12] or jax[cuda13] matching jax and the driver (or use the gpuenv image), "
            "and check the driver line above",
        )
    return Check("jax", "ok", f"JAX {jax.__version__} on {jax.devices()[0].device_kind}")


def check_torch(gpus: list[dict]) -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check("torch", "skip", "torch not installed")
    import torch

    if torch.version.cuda is None:
        return Check("torch", "skip", f"torch {torch.__version__} is a CPU build (SB3 trains on the CPU): nothing to check")
    if not gpus:
        return Check("torch", "skip", f"no GPU; torch {torch.__version__} (CUDA {torch.version.cuda})")
    if not torch.cuda.is_available():
        return Check("torch", "fail", f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device", TOOLKIT_FIX)
    return Check("torch", "ok", f"torch {torch.__version__} sees {torch.cuda.get_device_name(0)}")


VULKAN_ICDS = ("/usr/share/vulkan/icd.d/nvidia_icd.json", "/etc/vulkan/icd.d/nvidia_icd.json")


def check_vulkan(gpus: list[dict]) -> Check:
    if importlib.util.find_spec("isaacsim") is None:
        return Check("vulkan", "skip", "Isaac Sim not installed")
    if not gpus:
        return Check("vulkan", "skip", "no GPU")
    if not any(Path(p).exists() for p in VULKAN_ICDS):
        return Check(
            "vulkan", "fail",
            "no NVIDIA Vulkan ICD (nvidia_icd.json): Isaac Sim needs Vulkan even headless; run the container "
            "with NVIDIA_DRIVER_CAPABILITIES=all (the gpuenv/isaaclab image sets it) on a driver with graphics libraries",
        )
    vk = shutil.which("vulkaninfo")
    if vk:
        try:
            r = subprocess.run([vk, "--summary"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            return Check("vulkan", "fail", f"vulkaninfo failed ({e}): check NVIDIA_DRIVER_CAPABILITIES=all and the host driver")
        if r.returncode != 0 or "NVIDIA" not in r.stdout:
            return Check("vulkan", "fail", "vulkaninfo finds no NVIDIA device: check NVIDIA_DRIVER_CAPABILITIES=all and the host driver")
    return Check("vulkan", "ok", "NVIDIA Vulkan ICD present")


def run_checks() -> list[Check]:
    gpus, why = nvidia_smi()
    return [check_gpu(gpus, why), check_driver(gpus), check_jax(gpus), check_torch(gpus), check_vulkan(gpus)]


def failures(checks: list[Check], cpu_ok: bool) -> list[Check]:
    """Failing checks; with cpu_ok, a machine without a GPU is fine (the other checks then skip)."""
    return [c for c in checks if c.status == "fail" and not (cpu_ok and c.name == "gpu")]


def in_gpu_image() -> bool:
    image = os.environ.get("GPUENV_IMAGE")
    img = images().get(image or "")
    return img is not None and img.cuda is not None
