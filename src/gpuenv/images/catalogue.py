"""The image matrix: each backend's image declaration with its name, lock, tag and minimum driver;
the bake file and the labels derived from it."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from gpuenv.backends.spec import Image as ImageSpec
from gpuenv.envs import LOCAL_WHEELS, TORCH_CPU_INDEX  # noqa: F401 - one place for torch's CPU wheel (build.py takes them from here)
from gpuenv.registry import default_registry
from gpuenv.run.provenance import tracked_packages

ROOT = Path(__file__).resolve().parents[3]  # src/gpuenv/images/catalogue.py -> the repository


DOCKER = ROOT / "docker"


LOCKS = DOCKER / "locks"


TORCH_CPU = "torch==2.13.0+cpu"  # SB3 trains on the CPU in the CPU images; the CUDA build would add GBs


TORCH_CUDA = "torch==2.13.0"  # PyPI's build (CUDA 13) in the GPU images, locked with JAX's CUDA 13 wheels


# Minimum Linux driver per CUDA major version, for the CUDA the image's libraries were built with
# (JAX installation docs: >= 525 for CUDA 12 on Linux, >= 580 for CUDA 13; CUDA 12 release notes:
# 525.60.13 is the first CUDA 12.0 GA driver). The driver lives on the host: no image can pin it.
CUDA_MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}


@dataclass(frozen=True)
class Image(ImageSpec):
    """A backend's image declaration (every field of it, typed) with what the matrix adds: its name
    (gpuenv/<name>, docker/locks/<name>.txt, `make bench-<name>`), the backend it runs and that
    backend's tracked packages (what `gpuenv images` shows)."""

    name: str = ""
    backend: str = ""
    packages: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: ImageSpec, name: str, backend: str, packages: tuple[str, ...]) -> Image:
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        return cls(**{**fields, "name": name}, backend=backend, packages=packages)

    @property
    def backends(self) -> tuple[str, ...]:
        """Every backend the image runs: its own, then those it carries."""
        return (self.backend, *self.carries)

    @property
    def lock(self) -> Path:
        return LOCKS / f"{self.name}.txt"

    @property
    def min_driver(self) -> str | None:
        if self.driver_floor:
            return self.driver_floor
        return CUDA_MIN_DRIVER[self.cuda] if self.cuda else None

    @property
    def tag(self) -> str:
        return f"gpuenv/{self.name}"

    @property
    def torch_constraint(self) -> list[str]:
        """The torch build its lock is resolved with: the CPU wheel, PyPI's CUDA 13 build beside JAX's
        CUDA 13 wheels, or none (an image whose base provides torch, Isaac Sim's)."""
        if self.torch_cpu:
            return [TORCH_CPU]
        return [TORCH_CUDA] if "cuda13" in self.extras else []


def images() -> dict[str, Image]:
    """Every backend's images by name: its main image (named after it), then any more it declares."""
    out = {}
    for b in default_registry().with_image():
        for spec in (b.image, *b.more_images):
            if spec is not None:
                name = spec.name or b.name
                out[name] = Image.of(spec, name, b.name, b.packages)
    return out


def aliases() -> dict[str, str]:
    return {a: b.name for b in default_registry().with_image() for a in b.aliases}


def get_image(name: str) -> Image:
    from gpuenv.errors import UserError

    name = aliases().get(name, name)
    known = images()
    carrier = next((img.name for img in known.values() if name in img.backends), None)
    name = name if name in known else carrier or name  # a backend another image carries: that image
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
    """The image a Dockerfile's last FROM names, the final stage's (an ARG it names resolved to the
    ARG's default): earlier stages only lend it files."""
    return froms(dockerfile)[-1]


def froms(dockerfile: Path) -> list[str]:
    """The image each FROM of a Dockerfile names, in order (ARGs resolved to their defaults)."""
    lines = dockerfile.read_text().splitlines()
    defaults = {ln.split()[1].split("=", 1)[0]: ln.split("=", 1)[1] for ln in lines if ln.startswith("ARG ") and "=" in ln}
    out = []
    for line in lines:
        if line.strip().upper().startswith("FROM "):
            ref = line.split()[1]
            m = re.fullmatch(r"\$\{(\w+)\}", ref)
            out.append(defaults.get(m.group(1), ref) if m else ref)
    if not out:
        raise ValueError(f"{dockerfile} has no FROM")
    return out


def image_labels(img: Image) -> dict[str, str]:
    """The OCI and gpuenv labels of an image (the bake file and `gpuenv images build` alike)."""
    shown = tracked_packages()  # the labels show the versions records track
    versions = locked_versions(img)
    labels = {
        "org.opencontainers.image.title": img.tag,
        "org.opencontainers.image.description": img.description,
        "org.gpuenv.backend": img.backend,
        "org.gpuenv.min-driver": img.min_driver or "none (CPU image)",
        "org.gpuenv.cuda": img.cuda or "none",
        "org.gpuenv.lock": f"docker/locks/{img.name}.txt",
    }
    labels.update({f"org.gpuenv.version.{k}": v for k, v in sorted(versions.items()) if k in shown})
    return labels


def system_args(img: Image) -> dict[str, str]:
    """The build args that carry the Debian packages its backends declare (SystemPackage): SYSTEM_PACKAGES,
    what their simulators run with (pinned where declared), and BUILD_PACKAGES, what building their Python
    environment needs (the Dockerfile removes them in the same layer); an arg only where there are any."""
    registry = default_registry()
    wanted = [p for b in img.backends for p in registry.get(b).system]
    out = {"SYSTEM_PACKAGES": " ".join(p.apt_name(pinned=True) for p in wanted if p.role == "run"),
           "BUILD_PACKAGES": " ".join(p.name for p in wanted if p.role == "build")}
    return {k: v for k, v in out.items() if v}


def bake() -> dict:
    """docker buildx bake definition (JSON form): the base, then one target per backend image."""
    targets: dict[str, dict] = {
        "base": {"context": ".", "dockerfile": "docker/base.Dockerfile", "platforms": ["linux/amd64"]},
    }
    for img in images().values():
        labels = image_labels(img)
        t: dict = {
            "context": ".",
            "dockerfile": img.dockerfile,
            "platforms": ["linux/amd64"],
            "tags": [f"{img.tag}:latest", f"${{REGISTRY}}/{img.name}:${{TAG}}"],
            "labels": labels,
            "args": {"MIN_DRIVER": img.min_driver or "", "CUDA_REQUIRE": f"{img.cuda}.0" if img.cuda else "", **system_args(img)},
        }
        if img.base_target:  # FROM ${BASE}: under bake, the base target itself
            t["contexts"] = {"base": "target:base"}
            t["args"]["BASE"] = "base"
        targets[img.name] = t
    return {
        "variable": {"REGISTRY": {"default": "ghcr.io/gpuenv"}, "TAG": {"default": "latest"}},
        "group": {"default": {"targets": list(images())}},
        "target": targets,
    }


def bake_text() -> str:
    return json.dumps(bake(), indent=2) + "\n"


BASE_TAG = "gpuenv/base:latest"


LOCAL_BASE = "gpuenv/local-base:bookworm"




BUILD_WHEELS = DOCKER / "wheels"  # the build context's wheel directory (RUN --mount=type=bind)




def pinned_base(dockerfile: Path | None = None) -> str:
    """The default of a Dockerfile's PYTHON_BASE (docker/base.Dockerfile unless named): the
    digest-pinned python base."""
    path = dockerfile or DOCKER / "base.Dockerfile"
    for line in path.read_text().splitlines():
        if line.startswith("ARG PYTHON_BASE="):
            return line.split("=", 1)[1].strip()
    raise ValueError(f"{path.relative_to(ROOT)} has no ARG PYTHON_BASE=...")


def python_base_of(img: Image) -> str | None:
    """The pinned python base an image builds on: the shared base's, its own Dockerfile's
    PYTHON_BASE, or None (a framework's own base, NVIDIA's Isaac Sim image)."""
    if img.base_target:
        return pinned_base()
    try:
        return pinned_base(ROOT / img.dockerfile)
    except ValueError:
        return None


def python_bases(names: list[str]) -> dict[str, str]:
    """{pinned python base: the Python version it carries} for the images named (all if none)."""
    wanted = [get_image(n) for n in names] if names else list(images().values())
    return {b: ("3.11" if img.base_target else img.python) for img in wanted if (b := python_base_of(img))}
