"""PufferAI's `pufferlib` 3.0.0 (the Ocean C environments and its trainer's torch extension) built into a
Python environment, on a machine without GitHub: the ocean backend's build step (`Environment.build_step`,
run after its lock, which holds torch's CPU wheel), and its image's (this file run as a script: `python
build.py DOWNLOADS`, pip instead of uv).

PyPI has it as an sdist only. The sdist ships Raylib 5.5's Linux build, but its setup.py downloads
Raylib's WebAssembly build and Box2D from GitHub whenever their folders are missing. So: the
hash-checked sdist is unpacked, the two folders are made empty (nothing on Linux reads them), and
impulse_wars (Box2D's one user) is left out. Its setup.py builds `pufferlib._C` (the advantage kernel
pufferl calls) as a CUDA extension whenever `nvcc` is on PATH, which needs a CUDA toolkit to match
torch; torch here is the CPU wheel, so the build sees a PATH without `nvcc` and builds the C++ (CPU)
kernel. The sdist itself is not modified. Standard library only: it runs before gpuenv is
installed there."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

VERSION = "3.0.0"
SDIST_URL = ("https://files.pythonhosted.org/packages/7c/e1/5292f9b69c6263707b40ba04a87e6b9bcc177281d31092f77afd90c412f1/"
             f"pufferlib-{VERSION}.tar.gz")
SDIST_SHA256 = "7df3a3e3f5f894d78d2a1f5374097890aec01473183e748abefe4f3faa10eaa9"
EMPTY = ("raylib-5.5_webassembly", "box2d-web", "box2d-linux-amd64/include", "box2d-linux-amd64/src")
TRIES = 4  # downloads of the sdist before the build gives up
LEFT_OUT = ("impulse_wars",)  # links Box2D's libbox2d.a, a GitHub download


def fetch(dest: Path) -> Path:
    """The sdist, downloaded once and checked against its sha256 before it takes its name (a download
    that fails or differs leaves nothing behind)."""
    path = dest / f"pufferlib-{VERSION}.tar.gz"
    if path.exists() and _sha256(path) == SDIST_SHA256:
        return path
    tmp = path.with_name(f"{path.name}.{os.getpid()}.part")  # two builds at once each write their own
    try:
        for attempt in range(TRIES):  # a dropped connection is tried again; a wrong hash is not
            try:
                with urllib.request.urlopen(SDIST_URL, timeout=120) as r, open(tmp, "wb") as f:
                    shutil.copyfileobj(r, f)
                break
            except OSError as e:  # URLError, timeouts, resets
                if attempt == TRIES - 1:
                    raise RuntimeError(f"downloading {SDIST_URL} failed {TRIES} times: {e}") from e
                print(f"downloading {SDIST_URL}: {e}; trying again", file=sys.stderr)
                time.sleep(2 ** attempt)
        digest = _sha256(tmp)
        if digest != SDIST_SHA256:
            raise RuntimeError(f"{SDIST_URL}: sha256 {digest}, expected {SDIST_SHA256}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare(sdist: Path, work: Path) -> Path:
    """The source folder, ready to build."""
    src = work / "src"
    shutil.rmtree(work, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(sdist) as t:
        top = t.getnames()[0].split("/")[0]
        # the "data" filter where this Python has it (3.11.4 on; Debian bookworm's is 3.11.2): the sdist is hash-checked
        t.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # type: ignore[arg-type]
    (work / top).rename(src) if (work / top) != src else None
    for d in EMPTY:
        (src / d).mkdir(parents=True, exist_ok=True)
    for name in LEFT_OUT:
        (src / "pufferlib" / "ocean" / name / "binding.c").unlink(missing_ok=True)
    return src


def without_nvcc(path: str, work: Path) -> str:
    """PATH as it is, but where a folder holds an `nvcc` (pufferlib's setup.py builds its CUDA kernel when
    it finds one, and this build is against torch's CPU wheel), a folder in `work` with links to all its
    other entries (gcc and g++ may live beside nvcc: /usr/bin, a conda env's bin) takes its place."""
    out = []
    for i, p in enumerate(path.split(os.pathsep)):
        folder = Path(p)
        if p and (folder / "nvcc").exists():
            links = work / f"path-{i}"
            links.mkdir(parents=True, exist_ok=True)
            for entry in folder.iterdir():
                if entry.name != "nvcc" and not (links / entry.name).exists():
                    (links / entry.name).symlink_to(entry)
            p = str(links)
        out.append(p)
    return os.pathsep.join(out)


def install(python: str, work: Path, installer: list[str] | None = None, downloads: Path | None = None) -> None:
    """Build and install pufferlib into the environment whose interpreter is `python` (it needs numpy,
    torch, setuptools and wheel already: the build runs without isolation). `installer`: the install command
    up to its arguments (default: uv pip install into `python`); `downloads`: where the sdist is kept
    (default: gpuenv's cache)."""
    if installer is None:
        from gpuenv.envs import uv

        installer = [*uv(), "pip", "install", "--quiet", "--python", python]
    if downloads is None:
        from gpuenv.cache import base

        downloads = base() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    src = prepare(fetch(downloads), work)
    env = {**os.environ, "PATH": without_nvcc(os.environ.get("PATH", os.defpath), work / "bin")}
    r = subprocess.run([*installer, "--no-build-isolation", "--no-deps", str(src)], env=env, cwd=src, capture_output=True, text=True)
    if r.returncode != 0:
        log = downloads / f"pufferlib-{VERSION}-build.log"
        log.write_text(r.stdout + r.stderr)
        lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error:" in ln.lower()), lines[-1] if lines else "no output")
        raise RuntimeError(f"building pufferlib {VERSION} failed: {first[:300]} (the whole output: {log})")


if __name__ == "__main__":  # the image: python build.py DOWNLOADS (pip into this interpreter)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        install(sys.executable, Path(tmp), [sys.executable, "-m", "pip", "install", "--no-cache-dir"], Path(sys.argv[1]))
