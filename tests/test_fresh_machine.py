"""The README's path on a fresh machine: a container of a minimal Debian bookworm (debootstrapped, as the
image tests' local base) holding only what the README assumes (Python 3.11 with venv, make, root), in
which `make install` runs from a copy of this checkout and then `gpuenv list`. Every backend available
on this machine must be available there: a Debian package that `make install` does not install (CI once
installed debootstrap itself and stayed green while a user's `make bench` skipped Godot 4, issue 48)
fails here. pip reads this machine's package sources read-only (its config and the folders it names). The
own environments (Genesis's 3.7 GB, Ocean's) are left out (ENVS_SUITE=): their tests build them on this machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import ROOT

from gpuenv.images.catalogue import LOCAL_BASE

FRESH = "gpuenv/local-fresh:bookworm"  # LOCAL_BASE with make: the README's machine
PIP_CONFIGS = (Path("/etc/pip.conf"), Path("/etc/xdg/pip"), Path.home() / ".config/pip", Path.home() / ".pip")


def _docker() -> str:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("no Docker engine here (.ci/run installs and starts docker.io): the fresh-machine test runs in a container")
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        pytest.skip("the fresh machine's base is debootstrapped: needs debootstrap (make install, as root) and root")
    return docker


def _fresh_image(docker: str) -> str:
    """LOCAL_BASE (bookworm minbase, python3, python3-venv, CA certificates) with make, built once."""
    from gpuenv.images.base import build_local_base
    from gpuenv.images.engine import build_client

    if subprocess.run([docker, "image", "inspect", FRESH], capture_output=True).returncode == 0:
        return FRESH
    if subprocess.run([docker, "image", "inspect", LOCAL_BASE], capture_output=True).returncode != 0:
        build_local_base(docker)
    dockerfile = (f"FROM {LOCAL_BASE}\n"
                  "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make "
                  "&& rm -rf /var/lib/apt/lists/*\n")
    r = subprocess.run([build_client(), "build", "--network", "host", "-t", FRESH, "-"], input=dockerfile, capture_output=True, text=True,
                       timeout=900, env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return FRESH


def _pip_sources() -> tuple[list[str], dict[str, str]]:
    """Read-only mounts and variables that give the container this machine's pip configuration: its config
    files and the local folders they (or PIP_* variables) name as indexes, links or constraints."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60).stdout
    values = [line.split("=", 1)[1].strip("'\"") for line in config.splitlines() if "=" in line] + list(env.values())
    paths = {p for p in PIP_CONFIGS if p.exists()}
    for value in values:
        for token in value.replace("'", " ").split():
            path = Path(token.removeprefix("file://"))
            if path.is_absolute() and path.exists():
                # a local index (.../simple) links its files relative to itself (../../files/...): its parent
                paths.add(path.parent if path.name == "simple" else path if path.is_dir() else path.parent)
    return [f"--volume={p}:{p}:ro" for p in sorted(paths)], env


def _copy_checkout(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore): what a fresh clone holds."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = ROOT / name
        if src.is_file() or src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)
    return dest


@pytest.mark.backend
def test_make_install_on_a_fresh_debian_makes_every_backend_this_machine_has_available(cli, tmp_path):
    docker = _docker()
    here = cli("list", "backends", "--json")
    assert here.returncode == 0, here.stderr
    available_here = sorted(name for name, why in json.loads(here.stdout).items() if why is None)
    image = _fresh_image(docker)
    work = _copy_checkout(tmp_path / "work")
    mounts, env = _pip_sources()
    name = f"gpuenv-fresh-{uuid.uuid4().hex[:8]}"
    script = ("set -e; cd /work; python3.11 --version; ! command -v gcc && ! command -v godot3-server && ! command -v debootstrap; "
              "make install ENVS_SUITE= > /work/install.log 2>&1 || { tail -30 /work/install.log; exit 3; }; "
              "grep -v '^WARNING: Location' /work/install.log | tail -20; .venv/bin/gpuenv list backends --json > /work/list.json")
    # SYS_ADMIN: make install debootstraps Debian sid for Godot 4, which mounts /proc in the new tree (--privileged asks
    # for capabilities this machine's own sandbox may not have)
    cmd = [docker, "run", "--rm", "--name", name, "--cap-add", "SYS_ADMIN", "--network", "host", f"--volume={work}:/work", *mounts,
           *(f"--env={k}={v}" for k, v in env.items()), image, "bash", "-c", script]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=2400)
    except subprocess.TimeoutExpired:
        subprocess.run([docker, "rm", "-f", name], capture_output=True)
        raise
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    there = json.loads((work / "list.json").read_text())
    lost = {b: there.get(b, "not listed") for b in available_here if there.get(b, "not listed") is not None}
    assert not lost, f"available here, not after make install on a fresh Debian: {lost}\n{r.stdout[-3000:]}"
    print(r.stdout[-3000:])
