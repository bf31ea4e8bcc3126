"""Python environments built from a lock file with uv, cached by the lock's hash.

Used twice: a backend that declares its own environment (`Backend.environment`: a Python version and
the lock its image installs) has its workers started with that environment's interpreter, and
`gpuenv sweep` builds one environment per library version. An environment lives under
~/.cache/gpuenv/envs/<first 16 hex of sha256(python + lock [+ its build step and the step's source hash]
+ this checkout's path)>, is reused while those are the same (one process builds it at a time), and gets gpuenv itself from this checkout (editable, no dependencies), so every
environment runs the same harness as the command that starts it. A half-built environment is removed; `.gpuenv-ready` marks a complete one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError, first_line

ROOT = Path(__file__).resolve().parents[2]
READY = ".gpuenv-ready"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
LOCAL_WHEELS = Path("/opt/wheels")  # a host's local wheel directory (the CPU torch wheel), where there is one


def torch_cpu_source() -> list[str]:
    """uv arguments that find torch's CPU wheel (a local version, +cpu, that PyPI does not carry):
    the host's wheel directory where there is one, else PyTorch's CPU index."""
    return ["--find-links", str(LOCAL_WHEELS)] if LOCAL_WHEELS.is_dir() else ["--extra-index-url", TORCH_CPU_INDEX]


def cache_root() -> Path:
    from gpuenv.cache import base

    return base() / "envs"


def uv() -> list[str]:
    if shutil.which("uv"):
        return ["uv"]
    try:
        import uv as _uv  # noqa: F401

        return [sys.executable, "-m", "uv"]
    except ImportError:
        raise UserError("building an environment needs uv: pip install uv (or `make install`)") from None


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def find_python(version: str) -> str:
    """An interpreter of this version on this machine (PATH, then pyenv), else the version itself
    (uv then looks for one, or fetches a managed build where it may)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for candidate in sorted(root.glob(f"{version}.*"), reverse=True):
        exe = candidate / "bin" / f"python{version}"
        if exe.is_file():
            return str(exe)
    found = shutil.which(f"python{version}")
    if found and "/shims/" not in found:  # a pyenv shim fails unless that version is selected
        return found
    return version


def env_key(lock: str, python: str, source: Path = ROOT) -> str:
    """The environment's name: its Python, its lock, and the checkout whose gpuenv it installs
    (editable): an environment built for another clone runs that clone's harness, or none once the
    clone is gone, so each checkout gets its own."""
    return hashlib.sha256(f"python {python}\n{lock}\ngpuenv {source}".encode()).hexdigest()[:16]


@dataclass
class Built:
    path: Path
    python: str  # the version asked for ("3.12")
    lock_sha256: str
    reused: bool
    build_step: str | None = None  # step_identity of what was built after the lock

    @property
    def interpreter(self) -> Path:
        return self.path / "bin" / "python"

    def describe(self, name: str) -> dict:
        out = {"name": name, "python": self.python, "lock_sha256": self.lock_sha256, "path": str(self.path)}
        return {**out, "build_step": self.build_step} if self.build_step else out


def location(lock: str, python: str, build_step: str | None = None) -> Path:
    return cache_root() / env_key(identity(lock, build_step), python)


def step_identity(build_step: str) -> str:
    """A build step's name and its module's source (hashed): "module:function <sha256, 16 hex>"."""
    import importlib.util

    spec = importlib.util.find_spec(build_step.split(":")[0])
    source = Path(spec.origin).read_bytes() if spec and spec.origin else b""
    return f"{build_step} {hashlib.sha256(source).hexdigest()[:16]}"


def identity(lock: str, build_step: str | None) -> str:
    """What an environment is built from: its lock, and its build step's identity."""
    return _identity(lock, step_identity(build_step) if build_step else None)


def _identity(lock: str, step: str | None) -> str:
    return lock if step is None else f"{lock}\n# then {step}\n"


def is_built(lock: str, python: str, build_step: str | None = None) -> bool:
    return (location(lock, python, build_step) / READY).exists()


def _run_build_step(build_step: str, exe: str, env: Path) -> None:
    """The environment's build step, in a scratch folder inside it (removed after)."""
    import importlib

    module, _, function = build_step.partition(":")
    work = env / ".gpuenv-build"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        getattr(importlib.import_module(module), function)(exe, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build(lock: str, python: str, label: str, build_step: str | None = None) -> Built:
    """The environment for this lock and build step (built now, or reused); UserError naming the failed step.
    One process builds it at a time (flock): another that asks meanwhile waits, then reuses it."""
    import fcntl

    step = step_identity(build_step) if build_step else None  # its module's source read and hashed once
    env = cache_root() / env_key(_identity(lock, step), python)
    sha = hashlib.sha256(lock.encode()).hexdigest()
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.parent / f"{env.name}.building", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if (env / READY).exists():
            return Built(env, python, sha, reused=True, build_step=step)
        _build(env, lock, python, label, build_step)
    return Built(env, python, sha, reused=False, build_step=step)


def _build(env: Path, lock: str, python: str, label: str, build_step: str | None) -> None:
    shutil.rmtree(env, ignore_errors=True)
    lock_file = env.parent / f"{env.name}.lock.txt"
    lock_file.write_text(lock)
    exe = str(env / "bin" / "python")
    steps = [
        ("create the venv", [*uv(), "venv", "--quiet", "--python", find_python(python), str(env)]),
        ("install the lock", [*uv(), "pip", "install", "--quiet", "--python", exe, "-r", str(lock_file),
                              *(torch_cpu_source() if "+cpu " in lock else [])]),
        ("install gpuenv", [*uv(), "pip", "install", "--quiet", "--python", exe, "--no-deps", "-e", str(ROOT)]),
    ]
    for what, cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            shutil.rmtree(env, ignore_errors=True)
            raise UserError(f"environment {label} (Python {python}): could not {what}: {last_line(r.stderr or r.stdout)}")
        if what == "install the lock" and build_step:
            try:
                _run_build_step(build_step, exe, env)
            except Exception as e:  # noqa: BLE001 - any failure of the step: the half-built environment goes, one line says why
                shutil.rmtree(env, ignore_errors=True)
                raise UserError(f"environment {label} (Python {python}): could not run its build step {build_step}: {first_line(e)}") from None
    (env / "gpuenv-lock.txt").write_text(lock)
    (env / READY).write_text(label + "\n")


def status(backend: Any) -> tuple[str, bool]:
    """(which Python environment a backend's workers use and whether it is built, whether that is fine)."""
    e = backend.environment
    if e is None:
        return "main install", True
    if backend.in_own_image():
        return f"own: Python {e.python}, this interpreter (its image, or a Python with its libraries)", True
    lock = e.lock_path(ROOT)
    if not lock.is_file():
        return f"own (Python {e.python}): lock {e.lock} missing", False
    state = "built" if is_built(lock.read_text(), e.python, e.build_step) else "not built yet (built on first use)"
    step = f", then {e.build_step}" if e.build_step else ""
    return f"own: Python {e.python}, {e.lock}{step}; {state}", True
