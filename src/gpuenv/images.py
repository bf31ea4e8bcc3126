"""The Docker image matrix, derived from the backends' declarations (`Backend.image`).

Each backend declares its image (Dockerfile, the pyproject extras its lock file covers, the CUDA
major version); this module derives the rest: the lock path, the tag and the minimum NVIDIA driver
that goes with the CUDA version. The bake file
(docker/docker-bake.json) is generated from this module (`gpuenv images --bake`; a test keeps the
committed file in sync), `gpuenv doctor` reads the same driver table, and library versions for labels
and the README come from the hash-locked lock files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuenv.backends.spec import Image as ImageSpec
from gpuenv.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
LOCKS = DOCKER / "locks"
PYTHON = "3.11"
PLATFORM = "x86_64-manylinux_2_28"  # the wheels' platform for every image (linux/amd64)
TORCH_CPU = "torch==2.13.0+cpu"  # SB3 trains on the CPU in every image; the CUDA build would add GBs
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Minimum Linux driver per CUDA major version, for the CUDA the image's libraries were built with
# (JAX installation docs: >= 525 for CUDA 12 on Linux, >= 580 for CUDA 13; CUDA 12 release notes:
# 525.60.13 is the first CUDA 12.0 GA driver). The driver lives on the host: no image can pin it.
CUDA_MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}



def tracked() -> tuple[str, ...]:
    """Packages whose versions the labels and `gpuenv images` show: what records track."""
    return default_registry().tracked_packages()


@dataclass(frozen=True)
class Image:
    backend: str
    spec: ImageSpec
    packages: tuple[str, ...]  # the backend's tracked packages (what `gpuenv images` shows)

    def __getattr__(self, name: str):  # description, extras, cuda, dockerfile ... from the declaration
        return getattr(self.spec, name)

    @property
    def lock(self) -> Path:
        return LOCKS / f"{self.backend}.txt"

    @property
    def min_driver(self) -> str | None:
        if self.driver_floor:
            return self.driver_floor
        return CUDA_MIN_DRIVER[self.cuda] if self.cuda else None

    @property
    def tag(self) -> str:
        return f"gpuenv/{self.backend}"


def images() -> dict[str, Image]:
    return {b.name: Image(b.name, b.image, b.packages) for b in default_registry().with_image() if b.image}


def aliases() -> dict[str, str]:
    return {a: b.name for b in default_registry().with_image() for a in b.aliases}


def get_image(name: str) -> Image:
    from gpuenv.errors import UserError

    name = aliases().get(name, name)
    known = images()
    if name not in known:
        raise UserError(f"unknown image '{name}'; images: {', '.join(known)} (see `gpuenv images`)")
    return known[name]


_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", re.M)


def locked_versions(image: Image) -> dict[str, str]:
    """{normalised name: version} from the image's lock file ({} if it has none yet)."""
    if not image.lock.exists():
        return {}
    return {m.group(1).lower().replace("_", "-"): m.group(2) for m in _PIN.finditer(image.lock.read_text())}


def base_of(dockerfile: Path) -> str:
    """The image a Dockerfile's first FROM names."""
    for line in dockerfile.read_text().splitlines():
        if line.strip().upper().startswith("FROM "):
            return line.split()[1]
    raise ValueError(f"{dockerfile} has no FROM")


def bake() -> dict:
    """docker buildx bake definition (JSON form): the base, then one target per backend image."""
    targets: dict[str, dict] = {
        "base": {"context": ".", "dockerfile": "docker/base.Dockerfile", "platforms": ["linux/amd64"]},
    }
    shown = tracked()
    for img in images().values():
        versions = locked_versions(img)
        labels = {
            "org.opencontainers.image.title": img.tag,
            "org.opencontainers.image.description": img.description,
            "org.gpuenv.backend": img.backend,
            "org.gpuenv.min-driver": img.min_driver or "none (CPU image)",
            "org.gpuenv.cuda": img.cuda or "none",
            "org.gpuenv.lock": f"docker/locks/{img.backend}.txt",
        }
        labels.update({f"org.gpuenv.version.{k}": v for k, v in sorted(versions.items()) if k in shown})
        t: dict = {
            "context": ".",
            "dockerfile": img.dockerfile,
            "platforms": ["linux/amd64"],
            "tags": [f"{img.tag}:latest", f"${{REGISTRY}}/{img.backend}:${{TAG}}"],
            "labels": labels,
            "args": {"MIN_DRIVER": img.min_driver or "", "CUDA_REQUIRE": f"{img.cuda}.0" if img.cuda else ""},
        }
        if img.base_target:
            t["contexts"] = {"base": "target:base"}
        targets[img.backend] = t
    return {
        "variable": {"REGISTRY": {"default": "ghcr.io/gpuenv"}, "TAG": {"default": "latest"}},
        "group": {"default": {"targets": list(images())}},
        "target": targets,
    }


def bake_text() -> str:
    return json.dumps(bake(), indent=2) + "\n"


def lock_command(image: Image, out: Path) -> list[str]:
    cmd = [
        sys.executable, "-m", "uv", "pip", "compile", str(ROOT / "pyproject.toml"),
        "--generate-hashes", "--python-version", PYTHON, "--python-platform", PLATFORM,
        "--no-header", "--quiet", "-o", str(out),
    ]
    for e in image.extras:
        cmd += ["--extra", e]
    for pkg in image.not_locked:
        cmd += ["--no-emit-package", pkg]
    return cmd


VERSION_LOCKS = LOCKS / "versions"  # generated on demand for `make image-brax BRAX_VERSION=...` (git-ignored)


def version_lock(image: Image, pins: list[str]) -> Path:
    return VERSION_LOCKS / f"{image.backend}@{'+'.join(p.replace('==', '-') for p in pins)}.txt"


def write_locks(names: list[str] | None = None, pins: list[str] | None = None) -> list[Path]:
    """Regenerate lock files with uv (`make locks`). The CPU torch wheel is constrained explicitly.
    With pins (e.g. brax==0.13.0), write a version lock for one image instead of its main lock."""
    import tempfile

    written = []
    for img in images().values():
        if names and img.backend not in names:
            continue
        out = version_lock(img, pins) if pins else img.lock
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text("".join(f"{c}\n" for c in ([TORCH_CPU] if img.torch_cpu else []) + list(pins or [])))
            cmd = lock_command(img, out) + ["-c", str(constraints)]
            if img.torch_cpu:  # the CPU wheel: from a local wheel directory where there is one, else PyTorch's index
                wheels = Path("/opt/wheels")
                cmd += ["--find-links", str(wheels)] if wheels.is_dir() else ["--extra-index-url", TORCH_CPU_INDEX]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                from gpuenv.errors import UserError

                last = (r.stderr or r.stdout).strip().splitlines()
                raise UserError(f"uv could not lock gpuenv/{img.backend}: {last[-1] if last else 'no output'} (is uv installed? `make locks` installs it)")
        text = out.read_text()
        head = (
            f"# gpuenv/{img.backend} lock: pyproject extras {', '.join(img.extras) or '(none: base dependencies)'}, "
            f"Python {PYTHON}, {PLATFORM}{'; pinned ' + ', '.join(pins) if pins else ''}.\n"
            "# Generated by `make locks` (uv pip compile --generate-hashes); do not edit.\n"
        )
        out.write_text(head + text)
        written.append(out)
    return written


def version_build_command(image: Image, pins: list[str]) -> list[str]:
    """`docker buildx bake` for an image with pinned library versions (its own lock, its own tag, and
    GPUENV_VERSION_SET in the image so its records carry the same tags a sweep gives them)."""
    lock = version_lock(image, pins)
    label = "+".join(p.replace("==", "-") for p in pins)
    b = image.backend
    return [
        "docker", "buildx", "bake", "-f", str(DOCKER / "docker-bake.json"), b,
        "--set", f"{b}.args.LOCK={lock.relative_to(ROOT)}",
        "--set", f"{b}.args.VERSION_SET={','.join(pins)}",
        "--set", f"{b}.tags={image.tag}:{label}",
    ]


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


def docker_run_command(image: Image, suite: str, results: Path) -> list[str]:
    """The `docker run` line for an image's suite; raises UserError when Docker cannot run it here."""
    from gpuenv.errors import UserError

    why = docker_status(gpu=image.cuda is not None)
    if why:
        raise UserError(
            f"cannot run gpuenv/{image.backend} here: {why}; "
            f"`LOCAL=1 make bench-{image.backend}` runs the same suite on this machine"
        )
    found = subprocess.run(["docker", "image", "inspect", f"{image.tag}:latest"], capture_output=True)
    if found.returncode != 0:
        built = subprocess.run(["docker", "buildx", "bake", "-f", str(DOCKER / "docker-bake.json"), image.backend], cwd=ROOT)
        if built.returncode != 0:
            raise UserError(f"building gpuenv/{image.backend} failed (docker buildx bake exited {built.returncode}; its output is above)")
    results.mkdir(parents=True, exist_ok=True)
    gpu = ["--gpus", "all"] if image.cuda else []
    return [
        "docker", "run", "--rm", *gpu, "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/home/gpuenv",
        "-v", f"{results}:/home/gpuenv/results", f"{image.tag}:latest", "bench", "--suite", suite, "--out", "results/local",
    ]
