"""Terminal and markdown tables of records: each measurement mode renders its own records."""

from __future__ import annotations

from rich.table import Table

from gpuenv.modes import by_mode
from gpuenv.results.schema import Record


def tables(records: list[Record], details: bool = False) -> list[Table]:
    return [t for mode, mine in by_mode(records) for t in mode.tables(mine, details=details)]


def footnotes(records: list[Record]) -> list[str]:
    from gpuenv.measure.fingerprint import footnotes as machine_notes

    return [*machine_notes(records), *(n for mode, mine in by_mode(records) for n in mode.footnotes(mine))]


def markdown(records: list[Record]) -> str:
    return "\n\n".join(mode.markdown(mine) for mode, mine in by_mode(records))
