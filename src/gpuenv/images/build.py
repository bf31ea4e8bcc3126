"""Building images with plain `docker build` in dependency order, BuildKit on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuenv.backends.spec import resolve
from gpuenv.images.base import base_image
from gpuenv.images.catalogue import (
    BASE_TAG,
    BUILD_WHEELS,
    LOCAL_WHEELS,
    ROOT,
    base_of,
    get_image,
    image_labels,
    images,
    pinned_base,
    python_base_of,
    python_bases,
    system_args,
)
from gpuenv.images.engine import build_client, docker_free, docker_status, image_size, local_image_id, remove_replaced
from gpuenv.images.locks import version_lock, write_locks

# The build args whose value changes with each commit. Every Dockerfile declares them after its last RUN: an
# ARG is in the environment of each later RUN, so declared earlier, every commit would reinstall every package.
COMMIT_ARGS = ("GIT_SHA", "GIT_DIRTY", "GPUENV_VERSION")


def _stage_wheels() -> bool:
    """Copy the host's local wheels into the build context; True if there were any (then pip needs no
    extra index: PyTorch's is unreachable from some machines and pip retries it for minutes)."""
    BUILD_WHEELS.mkdir(exist_ok=True)
    found = sorted(LOCAL_WHEELS.glob("*.whl")) if LOCAL_WHEELS.is_dir() else []
    for w in found:
        target = BUILD_WHEELS / w.name
        if not target.exists():
            shutil.copy2(w, target)
    return bool(found)


def _ca_bundle() -> str | None:
    for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        path = os.environ.get(var)
        if path and Path(path).is_file():
            return path
    return None


def build_commands(names: list[str], docker: str, bases: dict[str, str], pins: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """(image, docker build argv) in dependency order: gpuenv/base first where a named image needs it.
    bases: {pinned python base: the reference to build on} (the pinned one itself, or a local stand-in).
    An image's stages (Image.stages) are made by `build` just before it builds, their build args added then."""
    from gpuenv import __version__
    from gpuenv.measure.system import git_sha

    wanted = [get_image(n) for n in names] if names else list(images().values())
    local_wheels = _stage_wheels()
    ca = _ca_bundle()
    # plain progress: the output goes through a pipe (docker_build keeps its end) and into logs
    common = ["--progress=plain", "--network", "host"] + (["--secret", f"id=pipcert,src={ca}"] if ca else [])
    git = git_sha(ROOT)
    sha = str(git["sha"] or "unknown")
    dirty = "" if git["dirty"] is None else ("1" if git["dirty"] else "0")  # records say so: a sha alone would not
    out: list[tuple[str, list[str]]] = []
    if any(img.base_target for img in wanted):
        base = bases.get(pinned_base(), pinned_base())
        out.append(("base", [docker, "build", "-f", "docker/base.Dockerfile", "-t", BASE_TAG, "--build-arg", f"PYTHON_BASE={base}", *common, "."]))
    for img in wanted:
        args = {**dict(zip(COMMIT_ARGS, (sha, dirty, __version__), strict=True)), "MIN_DRIVER": img.min_driver or "",
                "CUDA_REQUIRE": f"{img.cuda}.0" if img.cuda else "", **system_args(img)}
        tags = [f"{img.tag}:latest"]
        pinned = python_base_of(img)
        base = bases.get(pinned, pinned) if pinned else base_of(ROOT / img.dockerfile)
        if img.base_target:
            args["BASE"] = BASE_TAG
        elif pinned:  # its own python base (another Python version): the pinned one or its stand-in
            args["PYTHON_BASE"] = base
        if local_wheels or not img.torch_cpu:  # a CUDA torch comes from PyPI with its nvidia-* wheels
            args["TORCH_INDEX"] = ""
        if pins:
            args["LOCK"] = str(version_lock(img, pins).relative_to(ROOT))
            args["VERSION_SET"] = ",".join(pins)
            tags = [f"{img.tag}:{'+'.join(p.replace('==', '-') for p in pins)}"]
        cmd = [docker, "build", "-f", img.dockerfile]
        for t in tags:
            cmd += ["-t", t]
        for k, v in args.items():
            cmd += ["--build-arg", f"{k}={v}"]
        for k, v in image_labels(img).items():
            cmd += ["--label", f"{k}={v}"]
        cmd += ["--label", f"org.gpuenv.base-image={base}", "--label", f"org.gpuenv.git-sha={sha}"]
        out.append((img.name, [*cmd, *common, "."]))
    return out


def room_problem(name: str, need_gb: float | None, free: tuple[str, int] | None) -> str | None:
    """Why image `name` cannot be built in the free space Docker has (None: it can, or either is
    unknown): a build that runs out of disk fails minutes in, deep in pip's output, and may leave the
    engine too full for the next."""
    if need_gb is None or free is None or free[1] >= need_gb * 1e9:
        return None
    return (f"building {name} needs about {need_gb:g} GB free where Docker keeps its images ({free[0]}), and "
            f"{free[1] / 1e9:.1f} GB is free there: make room (`docker system prune` removes unused images and "
            "build cache) and build again")


@dataclass(frozen=True)
class Built:
    name: str
    returncode: int
    seconds: float
    size_bytes: int | None
    refused: str | None = None  # why it was not built (returncode 2): no room for it
    tail: tuple[str, ...] = ()  # a failed build's last lines of output (its cause is there, not in the summary)

    def cause(self) -> str | None:
        """The last line the failing step itself printed (BuildKit's `#N 12.3 text`), else the last line."""
        own = [ln for ln in self.tail if re.match(r"#\d+ \d+\.\d+ \S", ln)]
        lines = own or list(self.tail)
        return lines[-1] if lines else None


TAIL_LINES = 30
REBUILD_GB = 3.0  # free space a rebuild of an image already here needs (its changed layers, pip's and apt's downloads)


def docker_build(cmd: list[str], env: dict[str, str]) -> tuple[int, tuple[str, ...]]:
    """Run one `docker build`, its output passed through to this process's stdout as it comes (plain
    progress: it is a pipe), the exit code and its last TAIL_LINES lines kept: with many images
    in one log (a test's, CI's), what failed is otherwise pages above the summary."""
    import sys
    from collections import deque

    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as p:
        assert p.stdout is not None
        for line in p.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line.rstrip("\n"))
    return p.returncode, tuple(tail)


def build(names: list[str], pins: list[str], dry_run: bool, say: Callable[[str], None]) -> list[Built]:
    """`gpuenv images build`: plain `docker build` in dependency order, BuildKit on; the base from the
    pinned reference, or a local debootstrap one where it cannot be pulled. `say(line)` reports each
    step (plain text: the caller escapes it). With dry_run, says the commands and builds nothing.
    Stops at the first image that fails (its docker output went to stdout; `tail` keeps its end) or that Docker has
    no room for (not started; `refused` says why): later images build on it or would fail the same way."""
    import shlex
    import time

    from gpuenv.errors import UserError
    from gpuenv.pins import exact_pin

    for n in names:
        get_image(n)
    pins = ["==".join(exact_pin(p, f"--pin {p!r}")) for p in pins]
    if pins:
        if len(names) != 1:
            raise UserError("--pin builds one image: name it, e.g. `gpuenv images build brax --pin brax==0.13.0`")
        (lock,) = write_locks(names, pins)
        say(f"wrote {lock}")
    if dry_run:
        for _, cmd in build_commands(names, "docker", {}, pins):
            say(shlex.join(cmd))
        return []
    why = docker_status(gpu=False)
    if why:
        raise UserError(f"cannot build images here: {why}")
    docker = build_client()
    bases = {}
    for pinned, python in python_bases(names).items():
        bases[pinned], source = base_image(docker, pinned, python)
        say(f"base image: {bases[pinned]} ({source})")
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    out: list[Built] = []
    for name, cmd in build_commands(names, docker, bases, pins):
        ref = cmd[cmd.index("-t") + 1]
        img = get_image(name) if name != "base" else None
        # Before each build, as the ones before it took their space; a rebuild of an image that is
        # here mostly reuses its layers, so it is held to REBUILD_GB, not the whole figure.
        before = local_image_id(ref, docker)
        if img is not None:
            need = img.build_gb if not before or img.build_gb is None else min(img.build_gb, REBUILD_GB)
            problem = room_problem(name, need, docker_free(docker))
            if problem:
                out.append(Built(name, 2, 0.0, None, refused=problem))
                break
        try:  # the stages gpuenv makes for this image (a debootstrapped tree): only when it is built
            for arg, maker in img.stages if img is not None else ():
                made = resolve(maker)(docker)
                say(f"stage {arg}: {made}")
                cmd[-1:-1] = ["--build-arg", f"{arg}={made}"]  # before the context, the last argument
        except UserError as e:
            out.append(Built(name, 2, 0.0, None, refused=str(e)))
            break
        say(f"building {name}: {shlex.join(cmd)}")
        t0 = time.perf_counter()
        rc, tail = docker_build(cmd, env)
        out.append(Built(name, rc, time.perf_counter() - t0, image_size(docker, ref) if rc == 0 else None, tail=tail if rc else ()))
        if rc == 0 and (gone := remove_replaced(before, ref, docker)):
            say(f"removed {gone[:19]}: the image {ref} named before this build")
        if rc != 0:
            break  # later images build on this one, or would fail the same way
    return out
