"""gpuenv's cache folders: ~/.cache/gpuenv/<name> (XDG_CACHE_HOME honoured): environments, JAX's and
Warp's compile caches, Isaac Lab's substitute assets. Imports nothing heavy."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def base() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "gpuenv"


def writable(name: str) -> Path:
    """base()/name, made if missing; a per-user temp folder where the home cannot be written (a uid
    without a passwd entry gets HOME=/ in a container)."""
    d = base() / name
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        d = Path(tempfile.gettempdir()) / f"gpuenv-{name}-{os.getuid()}"
        d.mkdir(parents=True, exist_ok=True)
    return d
