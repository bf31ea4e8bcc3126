"""What a backend declares: one `Backend` per backend package, read by everything that lists backends.

A backend is a package `gpuenv.backends.<name>` (or any importable plug-in module) whose top level
defines `BACKEND = Backend(...)` and imports nothing heavy. Its adapter module (imported only in a
worker that runs it) implements the stepper contract in gpuenv.backends.base. The registry, the
suites, the modes, the images, provenance, the report and the sweep read these declarations; no other
module names a backend.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuenv.errors import BackendUnavailable


@dataclass(frozen=True)
class NativeTask:
    """How one backend provides a logical task (see gpuenv.tasks), and the facts that change speed."""

    env_id: str
    control_dt_s: float | None  # seconds of simulated time per agent step
    frame_skip: int  # simulator frames (or physics substeps) per agent step
    physics_dt_s: float | None  # one physics step
    episode_steps: int  # time limit in agent steps
    obs_shape: tuple[int, ...]
    action_kind: str  # "discrete" or "box"
    action_size: int  # number of discrete actions, or dimensions of the box
    notes: str = ""
    unsupported: str = ""  # non-empty: the backend has the env but gpuenv cannot run it faithfully
    max_return: float | None = None  # largest possible episode return, where known (checks PPO thresholds)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["obs_shape"] = list(self.obs_shape)
        return d


# Where a library's soname is looked for (Debian's multiarch folders first), where ldconfig's cache does not list it
_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
                 "/usr/lib64", "/lib64", "/usr/lib", "/lib")
ROLES = ("run", "build", "install")
# The case's scratch folder, set by the runner for each worker it starts: what a backend copies for one
# process (Godot's private project) goes there, removed with the case however the worker ends.
WORKER_SCRATCH_ENV = "GPUENV_WORKER_SCRATCH"


def worker_scratch() -> str | None:
    """The runner's scratch folder for this worker where it exists here (not inside a container), else None."""
    import os

    folder = os.environ.get(WORKER_SCRATCH_ENV, "")
    return folder if folder and os.path.isdir(folder) else None


@dataclass(frozen=True)
class Peer:
    """The framework's own benchmark that `gpuenv peers` (gpuenv.run.peers) sets this backend's physics
    steps/s beside: `module` defines peer(variant, env_id, num_envs) and name()."""

    module: str
    variants: tuple[str, ...]  # the rows `gpuenv peers` runs by default
    gpu_check: tuple[str, ...]  # the rows `make gpu-check` runs on a GPU
    cpu_check: tuple[str, ...]  # and on the CPU (GPUENV_CPU_OK=1: a test of its step)


@dataclass(frozen=True)
class SystemPackage:
    """A Debian package a backend needs beyond its Python packages, declared beside them: `make install`
    (`gpuenv system --install`), `gpuenv list`, `.ci/run` and the backend's image all read this one line.

    provides: how to tell it is there without asking dpkg (a user may have it from elsewhere):
      "command:NAME" an executable on PATH; "library:SONAME" a shared library the loader finds;
      "python-headers" Python.h of this interpreter (C extensions built against it).
    role: "run", its simulator needs it whenever it runs (its image installs it); "build", building its Python
      environment needs it (its image installs it in the build layer only, and an image that is the environment
      needs it no more); "install", `make install`'s own step for the backend needs it (the image gets what that
      step makes from a build stage instead: Godot 4's runtime tree, debootstrapped)."""

    name: str  # the Debian package
    provides: str
    why: str  # what the backend needs it for, said where it is missing
    role: str = "run"
    image_version: str = ""  # the Debian version its image pins (the version its records were measured with); "" any

    def __post_init__(self) -> None:
        kind, _, what = self.provides.partition(":")
        if self.role not in ROLES or kind not in ("command", "library", "python-headers") or (kind != "python-headers") != bool(what):
            raise ValueError(f"SystemPackage {self.name}: role one of {ROLES}, provides 'command:NAME', 'library:SONAME' "
                             f"or 'python-headers' (got role {self.role!r}, provides {self.provides!r})")

    def present(self) -> bool:
        kind, _, what = self.provides.partition(":")
        if kind == "command":
            return shutil.which(what) is not None
        if kind == "library":
            return what in _ldconfig_sonames() or any(Path(d, what).exists() for d in _LIBRARY_DIRS)
        import sysconfig

        return Path(sysconfig.get_paths()["include"], "Python.h").is_file()

    def apt_name(self, pinned: bool = False) -> str:
        return f"{self.name}={self.image_version}" if pinned and self.image_version else self.name


def apt_phrase(packages: list[SystemPackage] | tuple[SystemPackage, ...]) -> str:
    """"Debian's NAME (why); ...: apt-get install NAME ...": what is missing and the command, in every line that says so."""
    whys = "; ".join(f"{p.name} ({p.why})" for p in packages)
    return f"Debian's {whys}: apt-get install {' '.join(p.name for p in packages)}"


def forget_libraries() -> None:
    """Read ldconfig's cache again at the next look (a library installed since)."""
    _ldconfig_sonames.cache_clear()


@functools.cache
def _ldconfig_sonames() -> frozenset[str]:
    """The sonames ldconfig's cache lists (read once per process; empty where there is no ldconfig)."""
    import subprocess

    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
    if exe is None:
        return frozenset()
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(line.split()[0] for line in out.splitlines()[1:] if line.strip())


@dataclass(frozen=True)
class Image:
    """The backend's Docker image (gpuenv.images builds the matrix from these)."""

    description: str
    extras: tuple[str, ...]  # pyproject extras the image's lock file covers
    cuda: str | None  # CUDA major the image's GPU libraries need (None: CPU image)
    dockerfile: str
    base_target: bool = True  # builds on docker/base.Dockerfile (the shared, digest-pinned Python base)
    torch_cpu: bool = True  # torch from the CPU wheel (SB3 only)
    driver_floor: str | None = None  # a stricter minimum driver than the CUDA table's
    not_locked: tuple[str, ...] = ()  # dependencies the base image already provides, left untouched
    no_deps: tuple[str, ...] = ()  # exact pins locked (with hashes) without their dependencies (their pins conflict)
    name: str | None = None  # the image's name (gpuenv/<name>, docker/locks/<name>.txt); None: the backend's
    python: str = "3.11"  # the Python its lock is resolved for
    platform: str = "x86_64-manylinux_2_28"  # the wheels' platform its lock is resolved for (linux/amd64)
    verified: bool = True  # False: never built or run by this project (said wherever it is listed)
    suite: str | None = None  # the suite `make bench-<name>` runs in it (None: the backend's)
    # Disk its build needs free where Docker keeps images (GB): the image and, while pip installs, the
    # downloaded wheels, measured on this project's machines (docs/images.md); None: never measured.
    build_gb: float | None = None
    # Build stages whose base gpuenv makes before the build: (build arg, "module:function"(docker) -> image
    # reference), e.g. a debootstrapped Debian tree no registry has (the godot image's Godot 4 stage).
    stages: tuple[tuple[str, str], ...] = ()
    carries: tuple[str, ...] = ()  # other backends the image runs too (gpuenv/godot: godot4's image carries godot, Godot 3.2)


@dataclass(frozen=True)
class Environment:
    """A backend that runs in its own Python environment (built with uv on first use, cached by the
    hash of its lock): its libraries conflict with the main install's."""

    python: str  # "3.12"
    lock: str  # lock file, relative to the repository root (the same lock its image installs)
    # A step after the lock, for what no index has as a wheel: "module:function"(python, work) builds it into the
    # environment whose interpreter is `python` (work: an empty scratch folder); it raises on failure. Its module's
    # source is part of the environment's identity, so a changed build step builds a new environment.
    build_step: str | None = None

    def lock_path(self, root: Path) -> Path:
        return root / self.lock

    def pins(self, package: str, root: Path) -> bool:
        """Its lock installs this package (a distribution name as the lock spells it)."""
        path = self.lock_path(root)
        return path.is_file() and any(line.startswith(f"{package}==") for line in path.read_text().splitlines())

    def is_current_python(self) -> bool:
        """This interpreter is of that environment's Python version."""
        import sys

        return f"{sys.version_info[0]}.{sys.version_info[1]}" == self.python


@dataclass(frozen=True)
class PpoEnv:
    """The backend's batched env for the shared SB3 PPO trainer."""

    factory: str  # "module:function"(variant, native, num_envs, seed) -> (SB3 VecEnv, details dict)
    variants: tuple[str, ...] | None = None  # variants it trains on (None: all)
    eval_variant: str | None = None  # variant of the eval envs (None: the trained variant)
    jit_compiled: bool = False  # the env step is jit-compiled on first use: its compile is counted apart


@dataclass(frozen=True)
class Trainer:
    """A PPO trainer: the shared one (time-to-reward mode) or a backend's native one."""

    name: str
    description: str
    keys: frozenset[str]  # accepted hyperparameter keys
    run: str  # "module:function"(case, progress) -> details dict
    needs: tuple[str, ...] = ()  # modules the trainer imports
    extra: str = "ppo"
    variants: tuple[str, ...] | None = None  # for a native trainer: the variants it trains on (None: all)
    check: str | None = None  # "module:function"(hyperparams, where) raising UserError on bad values

    def unavailable_reason(self) -> str | None:
        missing = [m for m in self.needs if importlib.util.find_spec(m) is None]
        if missing:
            return f"trainer {self.name} is not installed ({', '.join(missing)} missing): pip install 'gpuenv[{self.extra}]'"
        return None


def resolve(path: str) -> Callable[..., Any]:
    """'package.module:function' -> the function (imports the module)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Backend:
    name: str
    adapter: str  # adapter module, imported only when the backend runs
    requires: tuple[str, ...]  # top-level modules that must be importable
    extra: str  # pip extra that installs them
    variants: tuple[str, ...]  # the first one is the default
    description: str
    tasks: dict[str, NativeTask]  # logical task name -> the backend's native env
    packages: tuple[str, ...] = ()  # distributions whose versions every record carries
    library: str | None = None  # the distribution its history is drawn against (and `gpuenv sweep` swaps)
    device: str = "cpu"  # "cpu" or "gpu": where its simulator steps on a GPU machine
    hidden: bool = False  # test-only backends: runnable by name, never listed or auto-selected
    variant_notes: dict[str, str] = field(default_factory=dict)
    # variant -> why no trainer steps this way (a publisher's benchmark protocol: one action reused): measured,
    # shown and set beside claims, never a decision's answer
    benchmark_only: dict[str, str] = field(default_factory=dict)
    min_envs: dict[str, int] = field(default_factory=dict)  # variant -> smallest num_envs it can run
    install_hint: str = ""  # how to get it, where a pip extra is not the way
    baseline: str | None = None  # this variant is the baseline that speedups are quoted against
    image: Image | None = None
    more_images: tuple[Image, ...] = ()  # further images of the same backend (another base, another stack)
    aliases: tuple[str, ...] = ()  # other names for its image (`make bench-isaac`)
    environment: Environment | None = None  # None: runs in the main install
    ppo_env: PpoEnv | None = None
    trainers: tuple[Trainer, ...] = ()  # native trainers
    worker_env: str | None = None  # "module:function"() -> env vars its workers need (a compile cache ...)
    programs: tuple[str, ...] = ()  # executables it starts, found on PATH (a simulator server binary)
    system: tuple[SystemPackage, ...] = ()  # Debian packages it needs (SystemPackage: make install, list, .ci/run, its image)
    suite: str = "quick"  # the suite `make bench-<name>` runs
    peer: Peer | None = None  # the framework's own benchmark beside gpuenv's (gpuenv peers)
    decision_row: str = ""  # the row of the course's decision table that names it (gpuenv.decide.ROWS): "course", "configs"

    def in_own_image(self) -> bool:
        """This interpreter is the backend's environment already: one of its images (GPUENV_IMAGE),
        or the same Python with its modules importable."""
        import os

        names = {self.name, *(i.name for i in self.more_images if i.name)}
        if os.environ.get("GPUENV_IMAGE") in names:
            return True
        return self.environment is not None and self.environment.is_current_python() and not self.missing()

    def missing(self) -> list[str]:
        return [m for m in self.requires if not _findable(m)] + [
            p for p in self.programs if shutil.which(p) is None
        ]

    def worker_environ(self) -> dict[str, str]:
        """The env vars its workers need (Backend.worker_env, called here: a compile cache, XLA flags); {} where none."""
        return resolve(self.worker_env)() if self.worker_env else {}

    def system_needed(self, roles: tuple[str, ...] = ("run", "build")) -> tuple[SystemPackage, ...]:
        """Its Debian packages of those roles; "build" ones not where this interpreter is its environment already
        (its image: built, and the compiler purged)."""
        own = "build" in roles and self.environment is not None and self.in_own_image()
        return tuple(p for p in self.system if p.role in roles and not (own and p.role == "build"))

    def missing_system(self) -> list[SystemPackage]:
        """The Debian packages it needs to run here (run and build roles) that are not here."""
        return [p for p in self.system_needed() if not p.present()]

    def system_line(self, missing: list[SystemPackage]) -> str:
        """'<backend> needs Debian packages ... : apt-get install ...', for those missing."""
        return f"{self.name} needs {apt_phrase(missing)} (`make install` installs them as root)"

    def unavailable_reason(self) -> str | None:
        system = self.missing_system()
        if self.environment is not None:
            import os

            image = os.environ.get("GPUENV_IMAGE")
            if image and not self.in_own_image():
                return f"{self.name} runs in its own environment, not in this image (gpuenv/{image}): use its image (make bench-{self.name})"
            # its libraries live in its own environment (this interpreter's, or built on first use); the system's are this machine's
            return self.system_line(system) if system else None
        missing = self.missing()
        if missing:
            how = self.install_hint or f"pip install 'gpuenv[{self.extra}]'"
            also = f"; and {self.system_line(system)}" if system else ""
            return f"{self.name} is not installed ({', '.join(missing)} missing): {how}{also}"
        return self.system_line(system) if system else None

    def load(self) -> Any:
        """Import the adapter module; it exposes `open(case, native) -> Stepper`."""
        missing = self.missing()
        if missing:
            how = self.install_hint or f"pip install 'gpuenv[{self.extra}]'"
            raise BackendUnavailable(f"{self.name} is not installed ({', '.join(missing)} missing): {how}")
        system = self.missing_system()
        if system:
            raise BackendUnavailable(self.system_line(system))
        return importlib.import_module(self.adapter)

    def selector(self, variant: str | None = None) -> str:
        return f"{self.name}:{variant or self.variants[0]}"


def _findable(module: str) -> bool:
    """The module can be imported here, found without importing anything: a dotted name (pufferlib.ocean)
    is looked for on disk under its top-level package, whose __init__ may be heavy (Metta's pufferlib
    imports torch) and would run under find_spec."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not rest:
        return spec is not None
    *parents, last = rest.split(".")
    for root in spec.submodule_search_locations or ():
        folder = Path(root, *parents)
        if (folder / last).is_dir() or any(folder.glob(f"{last}.*py")) or any(folder.glob(f"{last}.*.so")):
            return True
    return False
