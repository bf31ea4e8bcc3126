"""Append-only record store: one file per case, written atomically, never overwritten."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from gpuenv.errors import NoSpace, UserError
from gpuenv.results import schema


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def checked_run_id(run_id: str) -> str:
    """A run id given by hand (--run-id): it names a folder and goes into every record."""
    import re

    from gpuenv.results.types import IDENTIFIER

    if not re.fullmatch(IDENTIFIER, run_id):
        raise UserError(f"--run-id {run_id!r}: use letters, digits, '_', '.' or '-' (it names a directory and goes into every record)")
    return run_id


# A record is 5-10 KB (a failed one carries up to 2 KB of stderr): a run needs room for a few of them.
MIN_FREE_BYTES = 64 * 1024
_FULL = (errno.ENOSPC, errno.EDQUOT)


def free_text(directory: Path) -> str:
    try:
        return f"{shutil.disk_usage(directory).free / 1024:,.0f} KiB free"
    except OSError:
        return "free space unknown"


def prepare_dir(path: Path) -> Path:
    """Create the output directory and prove it is writable, with room for records, before any case runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as e:
        if e.errno in _FULL:
            raise NoSpace(f"no space left for results in {path} ({free_text(path)}); free some space or pass another --out DIR") from None
        raise UserError(f"cannot write results to {path}: {e.strerror or e}; pass a writable --out DIR") from None
    free = shutil.disk_usage(path).free
    if free < MIN_FREE_BYTES:  # the probe above passes on a full disk (an empty file takes no blocks)
        raise NoSpace(
            f"no room for results in {path}: {free / 1024:,.0f} KiB free, a run needs at least "
            f"{MIN_FREE_BYTES // 1024} KiB; free some space or pass another --out DIR"
        )
    return path


def write_atomic_new(directory: Path, stem: str, data: dict) -> Path:
    """Write `data` as JSON to directory/stem.json (or stem-2.json ... if taken) atomically.

    The file appears complete or not at all (temp file + fsync + link), and an existing file is never
    replaced: os.link fails instead of overwriting.
    """
    payload = json.dumps(data, indent=1, sort_keys=False, allow_nan=False).encode()
    try:
        directory.mkdir(parents=True, exist_ok=True)  # a run's folder appears with its first record
        return _write_new(directory, stem, payload)
    except OSError as e:
        if e.errno in _FULL:
            raise NoSpace(f"no space left in {directory} ({free_text(directory)}) writing {stem}.json") from None
        raise UserError(f"cannot write {stem}.json in {directory}: {e.strerror or e}") from None


def _write_new(directory: Path, stem: str, payload: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; records are for sharing
            os.fsync(f.fileno())
        for i in range(1, 1000):
            target = directory / (f"{stem}.json" if i == 1 else f"{stem}-{i}.json")
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            _fsync_dir(directory)
            return target
        raise UserError(f"too many records named {stem} in {directory}")
    finally:
        os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    """Make the new directory entry durable too, not only the file's bytes."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def record_digest(record: schema.Record) -> str:
    """What makes two loaded records the same record: their whole validated content. A copy of a
    record (a site's, a shared folder's) is one record; two runs of a case are two. Computed once per
    loaded record (loading dedups by it, the report site names pages by it)."""
    import hashlib

    def compute(r: schema.Record) -> str:
        return hashlib.sha256(json.dumps(schema.as_dict(r), sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    return record.digest_once(compute)


def write_record(directory: Path, record: dict) -> Path:
    """Seal the record (workload_id, validation: never write what we could not read back) and write
    the normalised dict it gives."""
    sealed = schema.seal(record)
    return write_atomic_new(directory, sealed["case_key"], sealed)


# A folder gpuenv writes derived files into (the report site, with its copies of records) holds this
# file: readers never load what is under it, so a record is never read back from gpuenv's own output.
OUTPUT_MARK = ".gpuenv-output"


def mark_output(directory: Path, what: str) -> None:
    """Say that `directory` holds gpuenv's output (`what`), not records to read."""
    (directory / OUTPUT_MARK).write_text(f"{what}, written by gpuenv: readers skip this folder (its records are copies)\n")


def record_files(directory: Path, problems: list[str]) -> list[Path]:
    """The *.json files under `directory`, in a stable order: symbolic links to folders are not
    followed, folders gpuenv marked as its own output are skipped, unreadable folders are named."""
    found: list[Path] = []

    def unreadable(e: OSError) -> None:
        problems.append(f"{e.filename}: cannot read this folder ({e.strerror or e})")

    for root, dirs, files in os.walk(directory, onerror=unreadable):
        if OUTPUT_MARK in files:  # said, not silent: a mark planted in a run folder would hide its records
            problems.append(f"{root}: gpuenv's own output ({OUTPUT_MARK}: a report site and its copies of records), not read")
            dirs[:] = []
            continue
        dirs.sort()
        # a folder named *.json is named too (its load says it is no record file), and walked into
        found += [Path(root) / f for f in sorted(files + [d for d in dirs if d.endswith(".json")]) if f.endswith(".json")]
    return found


def load_dir(directory: Path) -> tuple[list[schema.Record], list[str]]:
    """All valid records under a directory (recursively), as their modes' models, and one message
    per file skipped."""
    records: list[schema.Record] = []
    problems: list[str] = []
    for p in record_files(Path(directory), problems):
        try:
            records.append(schema.read(p))
        except UserError as e:
            problems.append(str(e))
    return records, problems
