"""A gpuenv image as one side of `gpuenv ab`: what a local image holds (its backend, commit, id) and
how a worker process of a case runs in it (`docker run ... REF worker SPEC OUT`), so a case's
processes alternate between an image and this checkout, or between two tags of an image.

Each worker is its own container: offline (--network none), as this user (the files it writes are
the runner's), the case's scratch folder and the records folder mounted at the same paths, the
speed-relevant environment variables passed in. A worker that does not end cleanly (a timeout,
Ctrl-C, a crash) has its container removed by name: killing the docker client does not stop it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.images.catalogue import Image, images
from gpuenv.images.engine import _run, docker_status
from gpuenv.run.runner import Launcher

PREFIX = "gpuenv-ab-"  # + the runner's pid + a hash of the worker's spec path: the container's name


@dataclass(frozen=True)
class LocalImage:
    ref: str  # as the user named it: gpuenv/envpool:latest, gpuenv/envpool@sha256:...
    id: str  # the engine's image id (sha256:...)
    image: Image  # gpuenv's declaration of it (which backend, CUDA or not)
    env: dict[str, str]  # its ENV: GPUENV_GIT_SHA, GPUENV_GIT_DIRTY, GPUENV_LOCK ...

    @property
    def git(self) -> dict:
        """where.git of its records: the commit it was built from, as the image says."""
        from gpuenv.measure.system import image_git

        return image_git(self.env)


def local_image(ref: str, what: str) -> LocalImage:
    """The image `ref` in this machine's Docker engine; UserError (naming `what`) where there is no
    engine, no such image, or an image gpuenv did not build."""
    why = docker_status(gpu=False)
    if why:
        raise UserError(f"{what}: {why}; an image side needs the Docker engine that holds the image")
    r = _run(["docker", "image", "inspect", "--format", "{{json .Id}} {{json .Config.Env}}", ref])
    if r.returncode != 0:
        raise UserError(f"{what}: no image {ref!r} in this Docker engine (build one: gpuenv images build NAME, "
                        "then docker tag gpuenv/NAME:latest gpuenv/NAME:mytag to keep it)")
    image_id, _, env_json = r.stdout.strip().partition(" ")
    env = dict(item.partition("=")[::2] for item in (json.loads(env_json) or []))
    name = env.get("GPUENV_IMAGE", "")
    known = images()
    if name not in known:
        raise UserError(f"{what}: {ref!r} is not a gpuenv image (its environment names no gpuenv backend image: "
                        f"GPUENV_IMAGE={name!r}); gpuenv's images are built with `gpuenv images build NAME`")
    return LocalImage(ref, json.loads(image_id), known[name], env)


@dataclass
class ImageLauncher(Launcher):
    """Workers run in a container of the image (Launcher.command), one container per process."""

    image: LocalImage | None = None
    mounts: tuple[str, ...] = ()  # host folders the worker writes to besides its scratch folder

    def container(self, spec_path: Path) -> str:
        return f"{PREFIX}{os.getpid()}-{hashlib.sha256(str(spec_path).encode()).hexdigest()[:12]}"

    def command(self, spec_path: Path, out_path: Path) -> list[str]:
        from gpuenv.measure.system import speed_env

        assert self.image is not None
        img = self.image
        gpu = ["--gpus", "all"] if img.image.cuda and docker_status(gpu=True) is None else []
        env = {**speed_env(), **self.env, "HOME": "/home/gpuenv", "GPUENV_IMAGE_REF": img.ref, "GPUENV_IMAGE_ID": img.id}
        volumes = sorted({str(spec_path.parent), str(out_path.parent), *self.mounts})
        return ["docker", "run", "--rm", "--name", self.container(spec_path), "--network", "none", *gpu,
                "--user", f"{os.getuid()}:{os.getgid()}",
                *[a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")],
                *[a for v in volumes for a in ("-v", f"{v}:{v}")],
                img.ref, "worker", str(spec_path), str(out_path)]

    def cleanup(self, spec_path: Path) -> None:
        subprocess.run(["docker", "rm", "-f", self.container(spec_path)], capture_output=True, timeout=60, check=False)


def image_launcher(img: LocalImage, env: dict[str, str], mounts: tuple[str, ...]) -> ImageLauncher:
    environment = {"name": f"image {img.ref}", "python": "", "path": img.id}
    return ImageLauncher(env=env, environment=environment, image=img, mounts=mounts)
