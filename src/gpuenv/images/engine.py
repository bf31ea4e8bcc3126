"""The Docker engine here: whether it runs, which client builds with BuildKit, what images it has,
the `docker run` line of an image's suite."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gpuenv.images.catalogue import Image


def docker_status(gpu: bool) -> str | None:
    """Why this machine cannot run the image (None: it can)."""
    docker = shutil.which("docker")
    if not docker:
        return "no docker command here"
    try:
        r = subprocess.run([docker, "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"docker info failed ({e})"
    if r.returncode != 0:
        last = (r.stderr or r.stdout).strip().splitlines()
        return f"no Docker engine reachable ({last[-1] if last else 'docker info failed'})"
    if gpu and "nvidia" not in r.stdout:
        return "Docker has no NVIDIA runtime (install nvidia-container-toolkit and restart Docker)"
    return None


def runnable_here(image: Image) -> None:
    """UserError when Docker cannot run the image here (no engine; no NVIDIA runtime for a GPU image)."""
    from gpuenv.errors import UserError

    why = docker_status(gpu=image.cuda is not None)
    if why:
        raise UserError(
            f"cannot run gpuenv/{image.name} here: {why}; "
            f"`LOCAL=1 make bench-{image.name}` runs the same suite on this machine"
        )


def docker_run_command(image: Image, suite: str, results: Path) -> list[str]:
    """The `docker run` line for an image's suite; raises UserError when Docker cannot run it here."""
    runnable_here(image)
    results.mkdir(parents=True, exist_ok=True)
    gpu = ["--gpus", "all"] if image.cuda else []
    ref = f"{image.tag}:latest"
    image_id = local_image_id(ref) or ""
    return [
        "docker", "run", "--rm", *gpu, "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/home/gpuenv",
        "-e", f"GPUENV_IMAGE_REF={ref}", "-e", f"GPUENV_IMAGE_ID={image_id}",
        "-v", f"{results}:/home/gpuenv/results", ref, "bench", "--suite", suite, "--out", "results/local",
    ]


def local_image_id(ref: str, docker: str = "docker") -> str | None:
    """The id of an image in this engine (what records carry as container.id); None if absent."""
    return _run([docker, "image", "inspect", "--format", "{{.Id}}", ref]).stdout.strip() or None


def remove_replaced(old: str | None, ref: str, docker: str = "docker") -> str | None:
    """After a build tagged `ref` anew: remove the image `old` that `ref` named before, where nothing else
    holds it (no other tag, no container: plain `docker image rm`, never forced). Each rebuild otherwise
    leaves its predecessor untagged, and CI's repeated builds filled a machine's disk with them. The id
    removed, or None (nothing replaced, or the engine kept it)."""
    new = local_image_id(ref, docker)
    if not old or not new or old == new:
        return None
    return old if _run([docker, "image", "rm", old]).returncode == 0 else None


def docker_free(docker: str = "docker") -> tuple[str, int] | None:
    """(the directory where this machine's engine keeps images, bytes free there); None where that
    cannot be read from here (a remote engine, a root this user cannot see)."""
    root = _run([docker, "info", "--format", "{{.DockerRootDir}}"]).stdout.strip()
    try:
        return (root, shutil.disk_usage(root).free) if root and Path(root).is_dir() else None
    except OSError:
        return None


def is_built(image: Image) -> bool:
    return _run(["docker", "image", "inspect", f"{image.tag}:latest"]).returncode == 0


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return subprocess.CompletedProcess(cmd, 1, "", str(e))


def build_client() -> str:
    """A docker client that builds with BuildKit on this engine: one with the buildx plugin, or a
    pre-23 client (Debian's docker.io), whose `docker build` has BuildKit built in."""
    from gpuenv.errors import UserError

    seen = []
    for cand in dict.fromkeys(filter(None, [shutil.which("docker"), "/usr/bin/docker"])):
        if not Path(cand).exists():
            continue
        seen.append(cand)
        if _run([cand, "buildx", "version"]).returncode == 0:
            return cand
        v = _run([cand, "version", "--format", "{{.Client.Version}}"]).stdout.strip()
        if v and v.split(".")[0].isdigit() and int(v.split(".")[0]) < 23:
            return cand
    raise UserError(
        f"no docker client here can build with BuildKit (tried {', '.join(seen) or 'none'}): install the buildx "
        "plugin (docker-buildx-plugin) or Debian's docker.io, whose client builds with DOCKER_BUILDKIT=1"
    )


def envs_last(r: subprocess.CompletedProcess) -> str:
    lines = (r.stderr or r.stdout or "").strip().splitlines()
    return lines[-1][:160] if lines else f"exit {r.returncode}"


def image_size(docker: str, ref: str) -> int | None:
    r = _run([docker, "image", "inspect", "--format", "{{.Size}}", ref])
    return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().isdigit() else None
