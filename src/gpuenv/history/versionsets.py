"""Version sets: one library at one version (with the pins beside it) resolved by uv into an explicit
lock and built into its own cached environment (gpuenv.envs, the same code that builds a backend's
own environment). `gpuenv sweep` runs a suite under several of them; `gpuenv ab` takes one as a
side. Nothing here runs a suite."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv import envs
from gpuenv.errors import UserError
from gpuenv.pins import package_name, version

ROOT = envs.ROOT


def parse_spec(spec: str) -> tuple[str, list[str]]:
    """PACKAGE==V1,V2,...: a plain package name and at least two PEP 440 versions, nothing else."""
    what = f"sweep spec {spec!r}"
    name, sep, rest = spec.strip().partition("==")
    if not sep or not name or not rest:
        raise UserError(f"{what}: write it as PACKAGE==V1,V2,... (e.g. brax==0.12.1,0.13.0,0.14.2)")
    package = package_name(name, what)
    versions = [version(v, what) for v in rest.split(",")]
    if len(set(versions)) < 2:
        raise UserError(f"{what}: give at least two different versions")
    return package, versions


def requirements(package: str, version: str, pins: list[str], backend: str) -> list[str]:
    """gpuenv's dependencies and the backend's extra, the swept package at this version (its own
    requirement in the extra, e.g. isaaclab==3.0.0, gives way), and the extra pins."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"].get(backend, []))
    swept = canonicalize_name(package)
    reqs = [r for r in reqs if not r.startswith("gpuenv[") and canonicalize_name(Requirement(r).name) != swept]
    return [*reqs, f"{package}=={version}", *pins]


def swept_backend(package: str, backend: str | None) -> str:
    """The backend a sweep of `package` runs: --backend where given, else the backend whose library
    it is; UserError where neither says."""
    from gpuenv.registry import default_registry

    registry = default_registry()
    owner = registry.by_library(package)
    name = backend or (owner.name if owner else None)
    if name is None:
        raise UserError(f"which backend does {package} belong to? pass --backend (one of: {', '.join(b.name for b in registry.visible())})")
    registry.parse(name)
    env = registry.get(name.split(":")[0]).environment
    if env is not None and env.build_step:
        raise UserError(f"{name} cannot be swept: its environment builds {package} with a build step ({env.build_step}) that no "
                        "version set runs; measure the version it pins with gpuenv bench")
    return name


def version_set(package: str, version: str, pins: list[str], backend: str) -> VersionSet:
    """One set of a sweep, for the Python the backend runs on (its own environment's, e.g. Isaac
    Lab's 3.12, or the main install's)."""
    from gpuenv.registry import default_registry

    env = default_registry().get(backend).environment
    python = env.python if env else f"{sys.version_info[0]}.{sys.version_info[1]}"
    return VersionSet(f"{package}=={version}", requirements(package, version, pins, backend), python=python)


@dataclass
class VersionSet:
    label: str  # "brax==0.13.0"
    requirements: list[str]
    python: str = "3.11"  # the Python its environment is built for
    env_dir: Path | None = None
    lock: str = ""
    status: str = "pending"  # ready | unresolvable | install failed | ran | failed
    reason: str = ""
    setup_s: float = 0.0
    reused: bool = False
    run_dir: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)


def prepare(vs: VersionSet) -> VersionSet:
    """Resolve (lock) and build the environment, or reuse the cached one with the same lock."""
    python = vs.python
    t0 = time.perf_counter()
    tmp = envs.cache_root() / "locks"
    tmp.mkdir(parents=True, exist_ok=True)
    req = tmp / f"{hashlib.sha256(vs.label.encode() + repr(vs.requirements).encode()).hexdigest()[:12]}.in"
    req.write_text("\n".join(vs.requirements) + "\n")
    lock = req.with_suffix(".txt")
    r = subprocess.run([*envs.uv(), "pip", "compile", str(req), "--python-version", python, "--no-header", "--quiet", "-o", str(lock)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        vs.status, vs.reason = "unresolvable", envs.last_line(r.stderr or r.stdout)
        vs.setup_s = time.perf_counter() - t0
        return vs
    vs.lock = lock.read_text()
    try:
        built = envs.build(vs.lock, python, vs.label)
    except UserError as e:
        vs.status, vs.reason = "install failed", str(e)
        vs.setup_s = time.perf_counter() - t0
        return vs
    vs.env_dir, vs.reused = built.path, built.reused
    vs.versions = {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", vs.lock, re.M)}
    vs.status = "ready"
    vs.setup_s = time.perf_counter() - t0
    return vs


def not_ready_line(vs: VersionSet) -> str:
    """A version set that could not be built, as `sweep` and `dispatch --sweep` say it (uv's words escaped)."""
    from gpuenv.escape import markup

    return f"[red]{markup(vs.label)}: {vs.status}[/]: {markup(vs.reason)} (the other versions still run)"


def tags_of(vs: VersionSet, sweep_id: str) -> dict:
    """What every record of this version set carries as `tags` (TAGS_ENV)."""
    package = vs.label.split("==")[0]
    return {
        "sweep": sweep_id,
        "version_set": vs.label,
        "requirements": vs.requirements,
        "swept": {package: vs.versions.get(package)},
        "lock_sha256": hashlib.sha256(vs.lock.encode()).hexdigest(),
    }
