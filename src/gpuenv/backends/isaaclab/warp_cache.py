"""Warp's kernel cache for Isaac Lab workers: persistent under gpuenv's cache (like JAX's compile
cache), so only the first process of a case compiles its kernels, and each record says whether its
process found them there. Imports nothing heavy (the runner calls worker_env in the main install)."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "WARP_CACHE_PATH"


def cache_dir() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuenv" / "warp"


def worker_env() -> dict[str, str]:
    if os.environ.get(ENV):
        return {}  # the user's own cache
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:  # a home this uid cannot write
        import tempfile

        d = Path(tempfile.gettempdir()) / f"gpuenv-warp-{os.getuid()}"
        d.mkdir(parents=True, exist_ok=True)
    return {ENV: str(d)}


def count() -> int:
    """Compiled kernel modules in the cache (Warp keeps one folder per module under <version>/)."""
    root = cache_dir()
    if not root.is_dir():
        return 0
    return sum(1 for version in root.iterdir() if version.is_dir() for m in version.iterdir() if m.name.startswith("wp_"))


def describe(before: int, compiled: int) -> dict:
    state = "cold" if compiled > 0 else ("warm" if before > 0 else "empty (nothing compiled)")
    return {"path": str(cache_dir()), "state": state, "modules_found": before, "modules_compiled": compiled}
