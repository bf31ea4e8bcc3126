"""Base images: the pinned one where it can be pulled, else a local stand-in (debootstrap bookworm,
with this machine's Python where an image wants another version)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpuenv.images.catalogue import LOCAL_BASE, pinned_base
from gpuenv.images.engine import _run, envs_last


def base_image(docker: str, pinned: str | None = None, python: str = "3.11", *, allow_local: bool = True) -> tuple[str, str]:
    """(image reference for PYTHON_BASE, where it came from). The pinned base if it is here or can be
    pulled; else a local stand-in: Debian bookworm made with debootstrap (its own Python 3.11), with
    this machine's build of another Python version on top where the image wants one (built once,
    then reused)."""
    from gpuenv.errors import UserError

    pinned = pinned or pinned_base()
    if _run([docker, "image", "inspect", pinned]).returncode == 0:
        return pinned, "pinned base (already present)"
    pulled = _run([docker, "pull", pinned], timeout=600)
    if pulled.returncode == 0:
        return pinned, "pinned base (pulled)"
    if not allow_local:
        raise UserError(f"cannot pull {pinned} ({envs_last(pulled)}); the local base is not allowed here")
    if _run([docker, "image", "inspect", LOCAL_BASE]).returncode != 0:
        build_local_base(docker)
    why = f"{pinned.split('@')[0]} could not be pulled ({envs_last(pulled)})"
    if python == "3.11":  # bookworm's own python3
        return LOCAL_BASE, f"local Debian bookworm via debootstrap: {why}"
    local = f"{LOCAL_BASE}-py{python}"
    if _run([docker, "image", "inspect", local]).returncode != 0:
        build_local_python_base(docker, python, local)
    return local, f"local Debian bookworm via debootstrap with this machine's Python {python}: {why}"


def build_local_python_base(docker: str, python: str, tag: str) -> None:
    """LOCAL_BASE with this machine's build of Python `python` copied in at its own prefix (a pyenv
    build is not relocatable) and linked as /usr/local/bin/python3: a stand-in for
    python:<python>-slim-bookworm. Bookworm's python3 package already brought the libraries it links
    (libssl3, libffi8, libsqlite3, liblzma, libbz2)."""
    from gpuenv.envs import find_python
    from gpuenv.errors import UserError

    exe = find_python(python)
    if not Path(exe).is_file():
        raise UserError(f"the pinned python:{python} base cannot be pulled and no Python {python} is on this machine "
                        f"to stand in for it: install one (pyenv install {python})")
    prefix = _run([exe, "-c", "import sys; print(sys.base_prefix)"]).stdout.strip()  # a venv's interpreter: its base
    if not prefix or prefix in ("/", "/usr", "/usr/local") or len(Path(prefix).parts) < 4:
        raise UserError(f"the pinned python:{python} base cannot be pulled, and the Python {python} here ({exe}, prefix "
                        f"{prefix or '?'}) is not a self-contained build to copy into a stand-in: install one with "
                        f"pyenv (pyenv install {python})")
    dockerfile = (
        f"FROM {LOCAL_BASE}\n"
        f"COPY . {prefix}/\n"
        f"RUN chmod 0755 {' '.join(str(p) for p in Path(prefix).parents if str(p) != '/')} 2>/dev/null; "
        f"ln -sf {prefix}/bin/python{python} /usr/local/bin/python3 && ln -sf {prefix}/bin/python{python} /usr/local/bin/python "
        f"&& /usr/local/bin/python3 -m venv --help >/dev/null\n"
        'ENV PATH=/usr/local/bin:$PATH\n'
    )
    r = subprocess.run([docker, "build", "-t", tag, "-f", "-", prefix], input=dockerfile, capture_output=True, text=True,
                       env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if r.returncode != 0:
        raise UserError(f"building the local Python {python} base failed: {envs_last(r)}")


def build_local_base(docker: str) -> None:
    """Debian bookworm (minbase + python3, venv, CA certificates) with debootstrap, `docker import`ed
    as LOCAL_BASE: a stand-in for python:3.11-slim-bookworm where Docker Hub is out of reach."""
    import_debootstrapped(docker, "bookworm", ("python3", "python3-venv", "ca-certificates"), LOCAL_BASE, "the local python base")


def import_debootstrapped(docker: str, suite: str, include: tuple[str, ...], tag: str, why: str) -> None:
    """A minimal Debian `suite` with `include`, made with debootstrap in a temporary folder and
    `docker import`ed as `tag`."""
    import tempfile

    from gpuenv.debian import debootstrap

    with tempfile.TemporaryDirectory(prefix="gpuenv-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        debootstrap(suite, root, include, why)
        import_tree(docker, root, tag)


def import_tree(docker: str, root: Path, tag: str) -> None:
    """`docker import` a directory tree as image `tag` (its shell the default command)."""
    from gpuenv.errors import UserError

    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run([docker, "import", "--change", 'CMD ["/bin/bash"]', "-", tag], stdin=tar.stdout, capture_output=True, text=True)
    tar.wait()
    if imp.returncode != 0 or tar.returncode != 0:
        raise UserError(f"docker import of {tag} failed: {envs_last(imp)}")


LOCAL_SID_GODOT = "gpuenv/local-sid-godot4:latest"


def sid_godot(docker: str) -> str:
    """The godot image's Godot 4 stage: Debian sid with `godot` (4.6; no stable suite has it, and sid
    moves daily, so there is no digest worth pinning: the records carry the Godot version that ran).
    This machine's runtime tree where it has one (`make install`), else a fresh debootstrap; imported
    once as LOCAL_SID_GODOT and reused until removed."""
    from gpuenv.backends.godot4.runtime import PACKAGES, RUNTIME, SUITE

    if _run([docker, "image", "inspect", LOCAL_SID_GODOT]).returncode == 0:
        return LOCAL_SID_GODOT
    if (RUNTIME / "usr/bin/godot").is_file():
        import_tree(docker, RUNTIME, LOCAL_SID_GODOT)
    else:
        import_debootstrapped(docker, SUITE, PACKAGES, LOCAL_SID_GODOT, "the Godot 4 stage of its image")
    return LOCAL_SID_GODOT
