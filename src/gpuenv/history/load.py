"""Load records from files and result directories, saying what was skipped and why."""

from __future__ import annotations

from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.results.schema import load
from gpuenv.results.store import load_dir


def load_records(paths: list[Path], what: str = "records") -> tuple[list[dict], list[str]]:
    """(valid records, one message per skipped file). A path that does not exist or holds no valid
    record is an error; a corrupt file among good ones is skipped and named."""
    records: list[dict] = []
    problems: list[str] = []
    for p in paths:
        if p.is_dir():
            recs, probs = load_dir(p)
            if not recs and not probs:
                raise UserError(f"{p}: no result records in this directory (run `gpuenv bench --out {p}` first)")
            records += recs
            problems += probs
        elif p.exists():
            try:
                records.append(load(p))
            except UserError as e:
                problems.append(str(e))
        else:
            raise UserError(f"{p}: no such file or directory")
    if not records:
        raise UserError(f"no valid {what} in {', '.join(map(str, paths))}" + (f" ({problems[0]})" if problems else ""))
    return records, problems
