"""Worker environment for JAX backends: JAX's persistent compilation cache on, so only the first
process of a case compiles (unless the user configured the cache), and GPU memory pre-allocation
off (JAX takes 75% of the GPU at start by default; with it off, `memory_stats()` peaks are what the
backend used, the figure gpuenv records). Imports nothing heavy."""

from __future__ import annotations

import os

from gpuenv.cache import writable

# The XLA flag MuJoCo's own benchmark sets (mjx.benchmark, mjx-testspeed) and MJX's docs recommend on
# GPUs (Triton for every GEMM); a GPU-only flag the CPU compiler ignores. Recorded (jax_xla_flags).
MJX_XLA_FLAGS = "--xla_gpu_triton_gemm_any=True"


def worker_env() -> dict[str, str]:
    memory = {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")}
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_triton_gemm_any" not in flags:  # the user's own setting wins
        memory["XLA_FLAGS"] = f"{flags} {MJX_XLA_FLAGS}".strip()
    if os.environ.get("GPUENV_CPU_OK") == "1" and "JAX_PLATFORMS" not in os.environ and not _gpu_visible():
        memory["JAX_PLATFORMS"] = "cpu"  # CPU fallback asked for: JAX's CUDA plugin is not even tried
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return memory
    d = writable("jax")
    return {
        **memory,
        "JAX_COMPILATION_CACHE_DIR": str(d),
        # Only compiles that matter: caching every tiny eager op costs more disk I/O than it saves.
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5"),
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": os.environ.get("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0"),
    }


def _gpu_visible() -> bool:
    """The same test `gpuenv doctor` makes: nvidia-smi lists a GPU."""
    from gpuenv.gpu import nvidia_smi

    return bool(nvidia_smi()[0])
