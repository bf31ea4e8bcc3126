"""Load records from files and result directories, saying what was skipped and why."""

from __future__ import annotations

from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.results.schema import Record, read
from gpuenv.results.store import load_dir, record_digest


def checked_paths(values: list[str] | list[Path]) -> list[Path]:
    """Paths as the readers take them: an empty one is refused (it would quietly mean the current
    directory and read everything under it)."""
    out = []
    for v in values:
        if not str(v).strip():
            raise UserError("an empty path was given; name a record file or a result directory, e.g. results/local")
        out.append(Path(v))
    return out


def not_a_record(path: Path) -> str:
    """Why a named file that is no .json file is not read as a record."""
    toml = "; a .toml file is a suite (bench --suite FILE) or the claims register (GPUENV_CLAIMS=FILE)" \
        if path.suffix.lower() == ".toml" else ""
    return f"{path}: not a result record (records are the .json files `gpuenv bench` writes, e.g. results/local/RUN/CASE.json){toml}"


def load_records(paths: list[str] | list[Path], what: str = "records") -> tuple[list[Record], list[str]]:
    """(valid records, each once, as their modes' models; one message per skipped file). A path that
    does not exist or holds no valid record is an error; a corrupt file among good ones is skipped
    and named."""
    records: list[Record] = []
    problems: list[str] = []
    for p in checked_paths(paths):
        try:
            is_dir, exists = p.is_dir(), p.exists()
        except OSError as e:
            raise UserError(f"{str(p)[:200]}: cannot read it ({e.strerror or e})") from None
        if is_dir:
            recs, probs = load_dir(p)
            if not recs and not probs:
                raise UserError(f"{p}: no result records in this directory (run `gpuenv bench --out {p}` first)")
            records += recs
            problems += probs
        elif exists and p.suffix.lower() != ".json":
            problems.append(not_a_record(p))
        elif exists:
            try:
                records.append(read(p))
            except UserError as e:
                problems.append(str(e))
        else:
            raise UserError(f"{p}: no such file or directory")
    if not records:
        raise UserError(f"no valid {what} in {', '.join(map(str, paths))}" + (f" ({problems[0]})" if problems else ""))
    seen: set[str] = set()
    unique: list[Record] = []
    for r in records:
        key = record_digest(r)
        if key not in seen:
            seen.add(key)
            unique.append(r)
    if len(unique) < len(records):
        problems.append(f"{len(records) - len(unique)} duplicate record file(s): the same record in several files is read once")
    return unique, problems
