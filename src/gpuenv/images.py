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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuenv.backends.spec import Image as ImageSpec
from gpuenv.registry import default_registry
from gpuenv.run.provenance import tracked_packages

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
LOCKS = DOCKER / "locks"
TORCH_CPU = "torch==2.13.0+cpu"  # SB3 trains on the CPU in the CPU images; the CUDA build would add GBs
TORCH_CUDA = "torch==2.13.0"  # PyPI's build (CUDA 13) in the GPU images, locked with JAX's CUDA 13 wheels
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Minimum Linux driver per CUDA major version, for the CUDA the image's libraries were built with
# (JAX installation docs: >= 525 for CUDA 12 on Linux, >= 580 for CUDA 13; CUDA 12 release notes:
# 525.60.13 is the first CUDA 12.0 GA driver). The driver lives on the host: no image can pin it.
CUDA_MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}



def tracked() -> tuple[str, ...]:
    """Packages whose versions the labels and `gpuenv images` show: what records track."""
    return tracked_packages()


@dataclass(frozen=True)
class Image:
    name: str  # gpuenv/<name>, docker/locks/<name>.txt, `make bench-<name>`
    backend: str  # the backend it runs
    spec: ImageSpec
    packages: tuple[str, ...]  # the backend's tracked packages (what `gpuenv images` shows)

    def __getattr__(self, name: str):  # description, extras, cuda, dockerfile ... from the declaration
        return getattr(self.spec, name)

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
                out[name] = Image(name, b.name, spec, b.packages)
    return out


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
    """The image a Dockerfile's first FROM names (an ARG it names resolved to the ARG's default)."""
    lines = dockerfile.read_text().splitlines()
    defaults = {ln.split()[1].split("=", 1)[0]: ln.split("=", 1)[1] for ln in lines if ln.startswith("ARG ") and "=" in ln}
    for line in lines:
        if line.strip().upper().startswith("FROM "):
            ref = line.split()[1]
            m = re.fullmatch(r"\$\{(\w+)\}", ref)
            return defaults.get(m.group(1), ref) if m else ref
    raise ValueError(f"{dockerfile} has no FROM")


def image_labels(img: Image) -> dict[str, str]:
    """The OCI and gpuenv labels of an image (the bake file and `gpuenv images build` alike)."""
    shown = tracked()
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
            "args": {"MIN_DRIVER": img.min_driver or "", "CUDA_REQUIRE": f"{img.cuda}.0" if img.cuda else ""},
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


def lock_command(image: Image, out: Path) -> list[str]:
    cmd = [
        sys.executable, "-m", "uv", "pip", "compile", str(ROOT / "pyproject.toml"),
        "--generate-hashes", "--python-version", image.python, "--python-platform", image.platform,
        "--no-header", "--quiet", "-o", str(out),
    ]
    for e in image.extras:
        cmd += ["--extra", e]
    for pkg in image.not_locked:
        cmd += ["--no-emit-package", pkg]
    return cmd


VERSION_LOCKS = LOCKS / "versions"  # generated on demand for `make image-brax BRAX_VERSION=...` (git-ignored)


def _no_deps_lock(image: Image, pins: tuple[str, ...]) -> str:
    """Hash-locked lines for exact pins, without resolving their dependencies."""
    import tempfile

    from gpuenv.errors import UserError

    with tempfile.TemporaryDirectory() as tmp:
        req, out = Path(tmp) / "nodeps.in", Path(tmp) / "nodeps.txt"
        req.write_text("".join(f"{p}\n" for p in pins))
        r = subprocess.run([sys.executable, "-m", "uv", "pip", "compile", str(req), "--no-deps", "--generate-hashes",
                            "--python-version", image.python, "--python-platform", image.platform, "--no-header", "--quiet", "-o", str(out)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise UserError(f"uv could not lock {', '.join(pins)} without dependencies: {(r.stderr or r.stdout).strip()[-200:]}")
        return "# locked without their dependencies (installed with --no-deps like everything here):\n" + out.read_text().replace(str(req), "nodeps.in")


def version_lock(image: Image, pins: list[str]) -> Path:
    return VERSION_LOCKS / f"{image.name}@{'+'.join(p.replace('==', '-') for p in pins)}.txt"


def write_locks(names: list[str] | None = None, pins: list[str] | None = None) -> list[Path]:
    """Regenerate lock files with uv (`make locks`). The CPU torch wheel is constrained explicitly.
    With pins (e.g. brax==0.13.0), write a version lock for one image instead of its main lock."""
    import tempfile

    written = []
    for img in images().values():
        if names and img.name not in names:
            continue
        out = version_lock(img, pins) if pins else img.lock
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text("".join(f"{c}\n" for c in [*img.torch_constraint, *(pins or [])]))
            cmd = lock_command(img, out) + ["-c", str(constraints)]
            if img.torch_cpu:  # the CPU wheel: from a local wheel directory where there is one, else PyTorch's index
                wheels = Path("/opt/wheels")
                cmd += ["--find-links", str(wheels)] if wheels.is_dir() else ["--extra-index-url", TORCH_CPU_INDEX]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                from gpuenv.errors import UserError

                last = (r.stderr or r.stdout).strip().splitlines()
                raise UserError(f"uv could not lock gpuenv/{img.name}: {last[-1] if last else 'no output'} (is uv installed? `make locks` installs it)")
            text = out.read_text().replace(str(constraints), "constraints")  # no temp path: a regenerated lock only differs where packages do
        if img.no_deps:  # e.g. godot-rl: its client only, its dependency pins ignored (pip runs --no-deps)
            text += _no_deps_lock(img, img.no_deps)
        head = (
            f"# gpuenv/{img.name} lock: pyproject extras {', '.join(img.extras) or '(none: base dependencies)'}, "
            f"Python {img.python}, {img.platform}{'; pinned ' + ', '.join(pins) if pins else ''}.\n"
            "# Generated by `make locks` (uv pip compile --generate-hashes); do not edit.\n"
        )
        out.write_text(head + text)
        written.append(out)
    return written


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


def is_built(image: Image) -> bool:
    return _run(["docker", "image", "inspect", f"{image.tag}:latest"]).returncode == 0


# --- building with any Docker engine -----------------------------------------------------------

BASE_TAG = "gpuenv/base:latest"
LOCAL_BASE = "gpuenv/local-base:bookworm"
LOCAL_WHEELS = Path("/opt/wheels")  # a host's local wheel directory (the CPU torch wheel), where there is one
BUILD_WHEELS = DOCKER / "wheels"  # the build context's wheel directory (RUN --mount=type=bind)
DEBIAN_MIRROR = "http://deb.debian.org/debian"


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


def envs_last(r: subprocess.CompletedProcess) -> str:
    lines = (r.stderr or r.stdout or "").strip().splitlines()
    return lines[-1][:160] if lines else f"exit {r.returncode}"


def build_local_base(docker: str) -> None:
    """Debian bookworm (minbase + python3, venv, CA certificates) with debootstrap, `docker import`ed
    as LOCAL_BASE: a stand-in for python:3.11-slim-bookworm where Docker Hub is out of reach."""
    import tempfile

    from gpuenv.errors import UserError

    if not shutil.which("debootstrap"):
        raise UserError("the pinned python base cannot be pulled and debootstrap is missing: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise UserError("the pinned python base cannot be pulled; making a local one with debootstrap needs root")
    with tempfile.TemporaryDirectory(prefix="gpuenv-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        r = _run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm", str(root), DEBIAN_MIRROR], timeout=1800)
        if r.returncode != 0:
            raise UserError(f"debootstrap of the local base failed: {envs_last(r)}")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([docker, "import", "--change", 'CMD ["/bin/bash"]', "-", LOCAL_BASE], stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise UserError(f"docker import of the local base failed: {envs_last(imp)}")


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
    bases: {pinned python base: the reference to build on} (the pinned one itself, or a local stand-in)."""
    from gpuenv import __version__
    from gpuenv.measure.system import git_sha

    wanted = [get_image(n) for n in names] if names else list(images().values())
    local_wheels = _stage_wheels()
    ca = _ca_bundle()
    common = ["--network", "host"] + (["--secret", f"id=pipcert,src={ca}"] if ca else [])
    git = git_sha(ROOT)
    sha = str(git["sha"] or "unknown")
    dirty = "" if git["dirty"] is None else ("1" if git["dirty"] else "0")  # records say so: a sha alone would not
    out: list[tuple[str, list[str]]] = []
    if any(img.base_target for img in wanted):
        base = bases.get(pinned_base(), pinned_base())
        out.append(("base", [docker, "build", "-f", "docker/base.Dockerfile", "-t", BASE_TAG, "--build-arg", f"PYTHON_BASE={base}", *common, "."]))
    for img in wanted:
        args = {"GIT_SHA": sha, "GIT_DIRTY": dirty, "GPUENV_VERSION": __version__, "MIN_DRIVER": img.min_driver or "",
                "CUDA_REQUIRE": f"{img.cuda}.0" if img.cuda else ""}
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


def image_size(docker: str, ref: str) -> int | None:
    r = _run([docker, "image", "inspect", "--format", "{{.Size}}", ref])
    return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().isdigit() else None


@dataclass(frozen=True)
class Built:
    name: str
    returncode: int
    seconds: float
    size_bytes: int | None


def build(names: list[str], pins: list[str], dry_run: bool, say: Callable[[str], None]) -> list[Built]:
    """`gpuenv images build`: plain `docker build` in dependency order, BuildKit on; the base from the
    pinned reference, or a local debootstrap one where it cannot be pulled. `say(line)` reports each
    step (plain text: the caller escapes it). With dry_run, says the commands and builds nothing.
    UserError when an image does not build (its docker output went to the terminal)."""
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
        say(f"building {name}: {shlex.join(cmd)}")
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=ROOT, env=env)
        ref = cmd[cmd.index("-t") + 1]
        out.append(Built(name, rc, time.perf_counter() - t0, image_size(docker, ref) if rc == 0 else None))
        if rc != 0:
            break  # later images build on this one, or would fail the same way
    return out
