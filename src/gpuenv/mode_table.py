"""The mode table: measurement modes are plug-ins, looked up by the `measurement_mode` string records
carry. A leaf (it imports no gpuenv module; modes are imported by name when asked for), so the
record layer can look a mode's record model up without importing the modes. Each mode is a package under
gpuenv.modes: its `record` module defines the typed record model (`RECORD`, `workload`,
`migrate_v1`) and its package defines `MODE`, a `gpuenv.modes.base.Mode` (suite section, worker
entry, record building, tables, headline). The runner, the readers and the history tools ask the
mode instead of branching on it. A new mode is one package and one line in MODE_PACKAGES.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

# measurement_mode string -> the package that implements it.
MODE_PACKAGES: dict[str, str] = {
    "env-step-throughput": "gpuenv.modes.throughput",
    "time-to-reward": "gpuenv.modes.ttr",
}


def _unknown(what: str, name: object, known: list[str]) -> Exception:
    from gpuenv.errors import UserError

    return UserError(f"unknown {what} {name!r} (known: {', '.join(known)})")


def default_mode() -> Any:
    """The mode of a suite file without `kind`: the first of MODE_PACKAGES (env-step throughput)."""
    return get_mode(next(iter(MODE_PACKAGES)))


def known_modes() -> list[str]:
    return list(MODE_PACKAGES)


def get_mode(name: str) -> Any:
    """The mode's `MODE` (a gpuenv.modes.base.Mode)."""
    pkg = MODE_PACKAGES.get(name)
    if pkg is None:
        raise _unknown("measurement mode", name, list(MODE_PACKAGES))
    return importlib.import_module(pkg).MODE


def all_modes() -> list[Any]:
    return [get_mode(n) for n in MODE_PACKAGES]


def mode_for_kind(kind: str) -> Any:
    for m in all_modes():
        if m.suite_kind == kind:
            return m
    raise _unknown("suite kind", kind, [m.suite_kind for m in all_modes()])


def of(record: Any) -> Any:
    """The mode of a validated record (gpuenv.results.schema.Record)."""
    return get_mode(record.measurement_mode)


def by_mode(records: list[Any]) -> Iterator[tuple[Any, list[Any]]]:
    """(mode, its records) for each mode that has any, in the table's order."""
    for mode in all_modes():
        mine = [r for r in records if r.measurement_mode == mode.name]
        if mine:
            yield mode, mine


def record_model(mode: str) -> Any:
    """The pydantic model of a mode's records (imports only that mode's record module)."""
    return record_module(mode).RECORD


def record_module(mode: str) -> Any:
    """A mode's `record` module (RECORD, workload, migrate_v1)."""
    if mode not in MODE_PACKAGES:
        raise _unknown("measurement mode", mode, list(MODE_PACKAGES))
    return importlib.import_module(MODE_PACKAGES[mode] + ".record")
