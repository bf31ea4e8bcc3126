"""Godot 4 on this machine: Debian sid's `godot` package (4.6), which needs sid's libc.

`make install` (as root) debootstraps a minimal Debian sid with `godot` into RUNTIME and writes the
launcher PROGRAM on PATH: it runs sid's Godot through sid's own dynamic loader and libraries, so
no chroot and no root are needed to run it (and a killed launcher is the Godot process itself: no
wrapper is left to outlive it). The gpuenv/godot image carries the same tree at the same path. Any
other Godot 4.4+ build (an official download, an export template's editor) works too: put it on
PATH as `godot4`.

    python -m gpuenv.backends.godot4.install    # install where it can, else say how (never fails)
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

PROGRAM = "godot4"
RUNTIME = Path("/opt/gpuenv-godot4")
LAUNCHER = Path("/usr/local/bin") / PROGRAM
SUITE = "sid"  # Debian unstable: the only suite that carries Godot 4 (4.6) today
PACKAGES = ("godot",)  # what debootstrap adds to the minimal sid
LIBS = "usr/lib/x86_64-linux-gnu"  # merged /usr: every library and the loader itself (sid has no other lib dir)
LIBRARY_DIRS = (LIBS, f"{LIBS}/pulseaudio")
INSTALL = ("make install as root (debootstraps Debian sid's godot 4.6 into /opt/gpuenv-godot4 and writes "
           "/usr/local/bin/godot4), or put a Godot 4.4+ binary on PATH as godot4")


def launcher_text(root: Path = RUNTIME) -> str:
    path = ":".join(f"{root}/{d}" for d in LIBRARY_DIRS)
    return ("#!/bin/sh\n"
            "# gpuenv: Debian sid's Godot 4 through sid's own loader and libraries (no chroot, no root)\n"
            f'exec "{root}/{LIBS}/ld-linux-x86-64.so.2" --library-path "{path}" "{root}/usr/bin/godot" "$@"\n')


def write_launcher(root: Path = RUNTIME, to: Path = LAUNCHER) -> None:
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(launcher_text(root))
    to.chmod(0o755)


def dangling(found: str | None, root: Path = RUNTIME) -> bool:
    """`found` is gpuenv's own launcher for `root` while the tree it runs is gone (removed by hand, a
    half-cleaned machine): running it exits 127, so it is no Godot 4."""
    if found is None or (root / "usr/bin/godot").is_file():
        return False
    try:
        return Path(found).read_text(errors="replace") == launcher_text(root)
    except OSError:
        return False


def install(root: Path = RUNTIME) -> str:
    """Make the runtime and its launcher where this user can; a line saying what happened."""
    from gpuenv.debian import debootstrap
    from gpuenv.errors import UserError

    found = shutil.which(PROGRAM)
    if found and not dangling(found, root):
        return f"{PROGRAM}: {found} (already there)"
    if (root / "usr/bin/godot").is_file():
        write_launcher(root)
        return f"{PROGRAM}: launcher written for {root}"
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="gpuenv-godot4-", dir=root.parent) as tmp:
            new = Path(tmp) / "root"
            debootstrap(SUITE, new, PACKAGES, "the godot4 backend")
            for junk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt/archives", "var/lib/apt/lists"):
                shutil.rmtree(new / junk, ignore_errors=True)
            new.rename(root)
        write_launcher(root)
    except (UserError, OSError) as e:
        return f"{PROGRAM} not installed, the godot4 backend is listed as unavailable: {e} ({INSTALL})"
    return f"{PROGRAM}: Debian {SUITE}'s Godot installed in {root}, launcher {LAUNCHER}"
