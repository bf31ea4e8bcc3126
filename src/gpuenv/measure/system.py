"""What a result ran on: machine, GPU, env vars that change speed, git sha (gpuenv.run.provenance adds
the library versions the backends and modes declare).

Nothing here imports a simulator: library versions come from package metadata.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import psutil

from gpuenv.gpu import inventory

# Env vars that change simulator speed or numerics.
# Environment variables that change speed, recorded in every record (and so published). No "TF_":
# gpuenv runs no TensorFlow, and Terraform's TF_VAR_* / TF_TOKEN_* hold credentials. A name that
# reads like a credential is never recorded, whatever its prefix (NVIDIA_API_KEY, an NGC key).
SPEED_ENV_PREFIXES = ("XLA_", "JAX_", "CUDA_", "NVIDIA_", "OMP_", "MKL_", "OPENBLAS_", "TORCH_", "MUJOCO_")
SPEED_ENV_NAMES = ("PYTHONHASHSEED", "GPUENV_CPU_OK", "GPUENV_REQUIRE_GPU")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")


def _cgroup_limit(name: str) -> str | None:
    try:
        value = Path("/sys/fs/cgroup", name).read_text().strip()
    except OSError:
        return None
    return None if value.startswith("max") else value


def oom_kills() -> dict[str, int]:
    """The kernel's counts of processes its OOM killer ended, where readable: system-wide
    (/proc/vmstat) and in this process's memory cgroup (v2 memory.events, v1 memory.oom_control).
    A worker that died of SIGKILL while one of them rose was most likely the OOM killer's victim."""
    out: dict[str, int] = {}
    files = [Path("/proc/vmstat")]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            if controllers == "":
                files.append(Path("/sys/fs/cgroup", where.lstrip("/"), "memory.events"))
            elif "memory" in controllers.split(","):
                files.append(Path("/sys/fs/cgroup/memory", where.lstrip("/"), "memory.oom_control"))
    except (OSError, ValueError):
        pass
    for f in files:
        try:
            for line in f.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    out[str(f)] = int(value)
        except OSError:
            continue
    return out


def container() -> dict | None:
    """Which image a record was measured in (set at build time and by `docker run`), and the limits
    the container ran under (cgroup v2, where readable). None outside a gpuenv image."""
    if not os.environ.get("GPUENV_IMAGE"):
        return None
    lock = Path("/opt/gpuenv/lock.txt")
    import hashlib

    built = image_git()
    return {
        "image": os.environ.get("GPUENV_IMAGE"),
        "ref": os.environ.get("GPUENV_IMAGE_REF"),  # passed by `gpuenv bench-image`; absent for a plain docker run
        "id": os.environ.get("GPUENV_IMAGE_ID"),
        "base": os.environ.get("GPUENV_BASE_IMAGE"),
        "lock": os.environ.get("GPUENV_LOCK"),
        "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else None,
        "gpuenv_version": os.environ.get("GPUENV_PACKAGE_VERSION"),
        "git_sha": built["sha"],
        "git_dirty": built["dirty"],  # built from uncommitted changes
        "cpu_max": _cgroup_limit("cpu.max"),
        "memory_max": _cgroup_limit("memory.max"),
    }


def speed_env() -> dict[str, str]:
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if (k.startswith(SPEED_ENV_PREFIXES) or k in SPEED_ENV_NAMES) and not any(w in k.upper() for w in SECRET_WORDS)
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_sha(start: Path | None = None) -> dict[str, str | bool | None]:
    here = start or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=here,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        )
        return {"sha": sha, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return image_git()  # in an image there is no .git: the build records the commit it was built from


def image_git(env: Mapping[str, str] = os.environ) -> dict:
    """where.git of an image's records, from its environment: the commit it was built from
    (GPUENV_GIT_SHA; None where that is no commit id, "unknown" in an image built outside a checkout)
    and GPUENV_GIT_DIRTY ("1" when built from a tree with uncommitted changes)."""
    from gpuenv.results.types import GIT_SHA

    sha = env.get("GPUENV_GIT_SHA", "")
    return {"sha": sha if re.fullmatch(GIT_SHA, sha) else None, "dirty": {"1": True, "0": False}.get(env.get("GPUENV_GIT_DIRTY", ""))}


MACHINE_NAME_ENV = "GPUENV_MACHINE_NAME"


def machine_name() -> str | None:
    """The user's name for this machine (GPUENV_MACHINE_NAME); UserError when records could not carry it."""
    from gpuenv.errors import UserError
    from gpuenv.results.types import MACHINE_NAME

    name = os.environ.get(MACHINE_NAME_ENV, "").strip()
    if name and not re.fullmatch(MACHINE_NAME, name):
        raise UserError(f"machine name {name[:70]!r}: use up to 64 letters, digits, spaces and '_.+-', starting with a letter "
                        "or digit (e.g. --machine-name 'lab-h200-1')")
    return name or None


def machine() -> dict:
    """The machine as every record describes it."""
    vm = psutil.virtual_memory()
    return {
        "name": machine_name(),
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_logical": psutil.cpu_count(logical=True),
        "cpu_physical": psutil.cpu_count(logical=False),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(vm.total / 2**30, 1),
        "gpus": inventory(),
        "in_container": Path("/.dockerenv").exists(),
        "image": os.environ.get("GPUENV_IMAGE"),
        "container": container(),
    }


def scheduler() -> dict | None:
    """The cluster allocation this run is in, as `gpuenv dispatch` passed it (GPUENV_SCHEDULER)."""
    raw = os.environ.get("GPUENV_SCHEDULER")
    if not raw:
        return None
    try:
        facts = json.loads(raw)
    except ValueError:
        return {"scheduler": "unknown", "error": "GPUENV_SCHEDULER is not JSON"}
    return facts if isinstance(facts, dict) and isinstance(facts.get("scheduler"), str) else {"scheduler": "unknown"}
