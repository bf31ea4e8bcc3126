"""Warp's kernel cache for Isaac Lab workers: persistent under gpuenv's cache (like JAX's compile
cache), so only the first process of a case compiles its kernels, and each record says whether its
process found them there. Imports nothing heavy (the runner calls worker_env in the main install)."""

from __future__ import annotations

import os
from pathlib import Path

from gpuenv.cache import base, writable

ENV = "WARP_CACHE_PATH"


def cache_dir() -> Path:
    """The cache this process's Warp uses: the worker's WARP_CACHE_PATH (set by worker_env), else gpuenv's."""
    return Path(os.environ[ENV]) if os.environ.get(ENV) else base() / "warp"


def worker_env() -> dict[str, str]:
    if os.environ.get(ENV):
        return {}  # the user's own cache
    return {ENV: str(writable("warp"))}


def count() -> int:
    """Compiled kernel modules in the cache (Warp keeps one folder per module under <version>/)."""
    root = cache_dir()
    if not root.is_dir():
        return 0
    return sum(1 for version in root.iterdir() if version.is_dir() for m in version.iterdir() if m.name.startswith("wp_"))


def describe(before: int, compiled: int) -> dict:
    state = "cold" if compiled > 0 else ("warm" if before > 0 else "empty (nothing compiled)")
    return {"path": str(cache_dir()), "state": state, "modules_found": before, "modules_compiled": compiled}
