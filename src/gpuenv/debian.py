"""Debian trees made with debootstrap: the local stand-ins for base images that cannot be pulled
(bookworm with Python) and the Godot 4 runtime (sid with `godot`). Needs root and debootstrap."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gpuenv.errors import UserError

MIRROR = "http://deb.debian.org/debian"


def debootstrap(suite: str, dest: Path, include: tuple[str, ...], why: str) -> None:
    """A minimal Debian `suite` with the `include` packages at dest; one line (UserError) if it cannot.
    `why`: what the tree is for, for that line."""
    if not shutil.which("debootstrap"):
        raise UserError(f"{why} needs a Debian {suite} tree and debootstrap is missing: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise UserError(f"{why} needs a Debian {suite} tree; making it with debootstrap needs root")
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(include)}", suite, str(dest), MIRROR]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise UserError(f"debootstrap of Debian {suite} for {why} took over 30 minutes: is {MIRROR} reachable?") from None
    if r.returncode != 0:
        lines = (r.stderr or r.stdout or "").strip().splitlines()
        raise UserError(f"debootstrap of Debian {suite} for {why} failed: {lines[-1][:160] if lines else f'exit {r.returncode}'}")
