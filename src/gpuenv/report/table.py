"""Terminal and markdown tables of records: each measurement mode renders its own records."""

from __future__ import annotations

from rich.table import Table

from gpuenv.modes import all_modes


def _split(records: list[dict]):
    for mode in all_modes():
        mine = [r for r in records if r["measurement_mode"] == mode.name]
        if mine:
            yield mode, mine


def tables(records: list[dict]) -> list[Table]:
    return [t for mode, mine in _split(records) for t in mode.tables(mine)]


def footnotes(records: list[dict]) -> list[str]:
    from gpuenv.measure.fingerprint import footnotes as machine_notes

    return [*machine_notes(records), *(n for mode, mine in _split(records) for n in mode.footnotes(mine))]


def markdown(records: list[dict]) -> str:
    return "\n\n".join(mode.markdown(mine) for mode, mine in _split(records))
