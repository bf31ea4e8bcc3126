"""The backends: gpuenv's own packages plus plug-ins, each one `Backend` declaration.

Built-in backends are listed in BUILTIN (one line each). Plug-ins come from modules named in the
GPUENV_PLUGINS environment variable (comma-separated; worker processes inherit it) and from installed
distributions' entry points in the group `gpuenv.backends`; each plug-in module defines `BACKEND` (or
`BACKENDS`, a list). Reading a declaration imports nothing heavy; availability is decided with
`importlib.util.find_spec`, so listing backends never imports a simulator.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from importlib import metadata

from gpuenv.backends.spec import Backend, NativeTask
from gpuenv.errors import UserError

BUILTIN = (
    "gpuenv.backends.gymnasium",
    "gpuenv.backends.envpool",
    "gpuenv.backends.brax",
    "gpuenv.backends.mjx",
    "gpuenv.backends.gymnax",
    "gpuenv.backends.playground",
    "gpuenv.backends.pufferlib",
    "gpuenv.backends.ocean",
    "gpuenv.backends.genesis",
    "gpuenv.backends.isaaclab",
    "gpuenv.backends.godot",
    "gpuenv.backends.godot4",
    "gpuenv.backends.own",  # hidden: the user's env under `gpuenv profile`
)


@dataclass(frozen=True)
class Unobtainable:
    """A simulator the course names that gpuenv cannot install here: listed with why and how a user
    who has it would add it, instead of silence."""

    name: str
    description: str
    why: str
    how: str


UNOBTAINABLE = (
    Unobtainable(
        "isaacgym", "Isaac Gym (legacy, Preview 4): NVIDIA's GPU simulator before Isaac Lab",
        "a manual download behind an NVIDIA developer account (IsaacGym_Preview_4_Package.tar.gz), Python 3.6-3.8 only, "
        "deprecated for Isaac Lab: no package index has it",
        "with the tarball: install its python/ folder into a Python 3.8 environment and declare a backend plug-in for it "
        "(docs/adding-a-backend.md: Environment(python='3.8', lock=...), loaded with GPUENV_PLUGINS=your_module)",
    ),
)
PLUGINS_ENV = "GPUENV_PLUGINS"
ENTRY_POINTS = "gpuenv.backends"
CORE_PACKAGES = ("gpuenv", "numpy", "pydantic")  # every record carries these versions too


def _declared(module_name: str) -> list[Backend]:
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(f"backend plug-in {module_name!r} cannot be imported ({e}); fix {PLUGINS_ENV} or install it") from None
    found = getattr(module, "BACKENDS", None) or [getattr(module, "BACKEND", None)]
    if not all(isinstance(b, Backend) for b in found):
        raise UserError(f"backend plug-in {module_name!r} defines no BACKEND = gpuenv.backends.spec.Backend(...)")
    return list(found)


def plugin_modules() -> list[str]:
    names = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    names += [ep.value.split(":")[0] for ep in metadata.entry_points(group=ENTRY_POINTS)]
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Registry:
    backends: dict[str, Backend]

    @classmethod
    def of(cls, backends: list[Backend]) -> Registry:
        out: dict[str, Backend] = {}
        for b in backends:
            if b.name in out:
                raise UserError(f"two backends are named '{b.name}'; rename the plug-in's backend")
            out[b.name] = b
        return cls(out)

    def get(self, name: str) -> Backend:
        try:
            return self.backends[name]
        except KeyError:
            known = ", ".join(b.name for b in self.visible())
            raise UserError(f"unknown backend '{name}'; known backends: {known}") from None

    def visible(self) -> list[Backend]:
        return [b for b in self.backends.values() if not b.hidden]

    def parse(self, selector: str) -> tuple[Backend, str | None]:
        """'envpool' -> (envpool, None); 'envpool:async' -> (envpool, 'async'). Validates the variant."""
        name, colon, variant = selector.partition(":")
        info = self.get(name)
        if colon and not variant:
            raise UserError(f"backend '{selector}' names no variant after ':'; write {name} or {name}:VARIANT (variants: {', '.join(info.variants)})")
        if variant and variant not in info.variants:
            raise UserError(f"unknown variant '{variant}' of backend '{name}'; variants: {', '.join(info.variants)}")
        return info, variant or None

    # --- tasks ---------------------------------------------------------------------------------

    def offers(self, task: str) -> dict[str, NativeTask]:
        """backend name -> its native env for a logical task."""
        return {b.name: b.tasks[task] for b in self.backends.values() if task in b.tasks}

    def why_not(self, task: str, backend: str) -> str | None:
        """None when the backend runs the task; else why not."""
        nt = self.get(backend).tasks.get(task)
        if nt is None:
            return "not offered by this backend"
        return nt.unsupported or None

    def native(self, task: str, backend: str) -> NativeTask:
        from gpuenv.tasks import get_task

        get_task(task)
        nt = self.get(backend).tasks.get(task)
        if nt is None:
            offered = ", ".join(sorted(b for b in self.offers(task) if not self.backends[b].hidden)) or "none"
            raise UserError(
                f"task '{task}' is not offered by backend '{backend}' (offered by: {offered}); "
                "pick another task or backend (see `gpuenv list`)"
            )
        if nt.unsupported:
            raise UserError(f"task '{task}' on backend '{backend}' is not supported: {nt.unsupported}")
        return nt

    # --- what other parts of gpuenv ask of the declarations ----------------------------------

    def baseline(self) -> tuple[str, str] | None:
        return next(((b.name, b.baseline) for b in self.backends.values() if b.baseline), None)

    def by_library(self, package: str) -> Backend | None:
        return next((b for b in self.backends.values() if b.library == package), None)

    def with_image(self) -> list[Backend]:
        return [b for b in self.backends.values() if b.image is not None]


@functools.cache
def default_registry() -> Registry:
    backends: list[Backend] = []
    for module in (*BUILTIN, *plugin_modules()):
        backends += _declared(module)
    return Registry.of(backends)
