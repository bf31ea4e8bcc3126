"""Provenance of a record: the machine, the speed-relevant environment, the commit (gpuenv.measure.system)
and the versions of every distribution a backend or a measurement mode declares. It asks the
registry and the modes which distributions those are, so it sits with the runner, above both.
"""

from __future__ import annotations

from importlib import metadata

from gpuenv.measure.system import git_sha, machine, scheduler, speed_env
from gpuenv.modes import all_modes
from gpuenv.registry import CORE_PACKAGES, default_registry


def tracked_packages() -> tuple[str, ...]:
    """Every distribution whose version records carry: gpuenv's core, each backend's and each mode's."""
    names = list(CORE_PACKAGES)
    for b in default_registry().backends.values():
        names += b.packages
    for m in all_modes():
        names += m.packages
    return tuple(dict.fromkeys(names))


def package_versions() -> dict[str, str | None]:
    """Versions of the tracked distributions (absent ones are None)."""
    out: dict[str, str | None] = {}
    for name in tracked_packages():
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out.get("gpuenv") is None:  # run from a source tree (the images do): the package's own version
        from gpuenv import __version__

        out["gpuenv"] = __version__
    return out


def provenance() -> dict:
    """`where` of a record, less the fingerprint and environment the runner adds per case."""
    out = {
        "machine": machine(),
        "packages": package_versions(),
        "env": speed_env(),
        "git": git_sha(),
    }
    sched = scheduler()
    if sched is not None:
        out["scheduler"] = sched
    return out


def runtime() -> dict:
    """JAX devices and torch threads, when those libraries are installed (imported only here: `gpuenv info`)."""
    import importlib.util

    out: dict = {}
    if importlib.util.find_spec("jax"):
        try:
            import jax

            out["jax devices"] = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
        except Exception as e:  # noqa: BLE001 - report, do not crash `info`
            out["jax devices"] = f"error: {e}"
    if importlib.util.find_spec("torch"):
        import torch

        out["torch threads"] = torch.get_num_threads()
        out["torch cuda"] = torch.cuda.is_available()
    return out
