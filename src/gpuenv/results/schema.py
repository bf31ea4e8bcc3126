"""Result schema v2: one JSON record per case, a typed pydantic model per measurement mode.

Documented in docs/results-schema.md; the JSON Schema is docs/results-schema.json, regenerated with
`python -m gpuenv.results.schema --write docs/results-schema.json`. Records are validated on read and
before they are written. A version-1 record is migrated on read (as asv does with api_version); a
record of a later version is refused with a message that says what to do.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from gpuenv.errors import UserError
from gpuenv.inputs import read_regular
from gpuenv.mode_table import known_modes, record_model
from gpuenv.results.migrate import migrate_v1
from gpuenv.results.models import SCHEMA, SCHEMA_VERSION, STATUSES, RecordBase
from gpuenv.results.workload import record_workload_id

__all__ = ["SCHEMA", "SCHEMA_VERSION", "STATUSES", "TAGS_ENV", "Record", "header", "validate", "seal", "load", "read", "typed",
           "as_dict", "json_schema"]

READS_VERSIONS = (1, SCHEMA_VERSION)
TAGS_ENV = "GPUENV_RECORD_TAGS"
_UNSET_ID = "0" * 16  # stands in for workload_id until the record is known to be well formed
# A record is 5-10 KB; a reader never takes in more than this from one file, nor nesting deeper.
MAX_RECORD_BYTES = 4 * 2**20
MAX_DEPTH = 32
QUOTE_CHARS = 40


def quote(value: Any) -> str:
    """A value as an error message may show it: repr, at most QUOTE_CHARS characters."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 3] + "..."


def utc_now() -> str:
    """Now, as records' created_utc says it (UTC, whole seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def header(*, run_id: str, case_key: str, suite: str, status: str, mode: str, tags: dict | None = None,
           invocation: dict | None = None) -> dict:
    """The fields every record starts with, whatever it measured (workload_id is set by seal()).
    `tags` (the run's own, `gpuenv ab`'s side) join GPUENV_RECORD_TAGS's; `invocation`: the bench
    command's start and case count (models.Invocation)."""
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "case_key": case_key,
        "created_utc": utc_now(),
        "suite": suite,
        "status": status,
        "measurement_mode": mode,
    }
    given = record_tags()  # GPUENV_RECORD_TAGS: set by `gpuenv sweep` (the version set)
    if not given and os.environ.get("GPUENV_VERSION_SET"):  # an image built with pinned versions
        given = {"version_set": os.environ["GPUENV_VERSION_SET"], "image": os.environ.get("GPUENV_IMAGE")}
    merged = {**(given or {}), **(tags or {})}
    if merged:
        out["tags"] = merged
    if invocation is not None:
        out["invocation"] = invocation
    return out


def record_tags() -> dict | None:
    """GPUENV_RECORD_TAGS (a JSON object every record of the run carries), checked: `gpuenv bench`
    asks before any case runs, so a bad value is one line then, not a lost record after a case."""
    raw = os.environ.get(TAGS_ENV)
    if not raw:
        return None
    fix = f"unset {TAGS_ENV} or set a JSON object, e.g. '{{\"version_set\": \"brax==0.13.0\"}}'"
    if len(raw) > 65536:
        raise UserError(f"{TAGS_ENV} is {len(raw):,} characters (at most 65,536); {fix}")
    try:
        tags = json.loads(raw, parse_constant=_no_nan)
    except RecursionError:
        raise UserError(f"{TAGS_ENV}: nested too deep; {fix}") from None
    except ValueError as e:
        raise UserError(f"{TAGS_ENV} is not JSON ({str(e)[:80]}); {fix}") from None
    if not isinstance(tags, dict) or _depth(tags) > 8:
        raise UserError(f"{TAGS_ENV} must be a JSON object nested at most 8 levels; {fix}")
    return tags


def validate(record: Any, source: str = "record") -> dict:
    """The record as a plain, normalised v2 dict (a v1 record migrated), else UserError naming what is wrong."""
    return _validated(record, source)[1]


def _validated(record: Any, source: str) -> tuple[RecordBase, dict]:
    """The record as its mode's model and as the normalised dict of it, validated once."""
    if not isinstance(record, dict):
        raise UserError(f"{source}: not a gpuenv result record (top level is not an object)")
    if record.get("schema") != SCHEMA:
        raise UserError(f"{source}: not a gpuenv result record (schema is {quote(record.get('schema'))})")
    version = record.get("schema_version")
    if type(version) is int and version == 1:
        return _seal(migrate_v1(record), source)
    if type(version) is not int or version != SCHEMA_VERSION:
        raise UserError(
            f"{source}: result schema version {quote(version)} is not supported by this gpuenv "
            f"(reads versions {', '.join(map(str, READS_VERSIONS))}); "
            "use the gpuenv release that wrote it, or upgrade gpuenv"
        )
    model = _checked(record, source)
    out = as_dict(model)
    # workload_id is derived: recomputed from what the record describes, never taken on trust (a
    # forged id would pair records of different workloads in `compare`)
    derived = record_workload_id(out)
    if out["workload_id"] != derived:
        raise UserError(f"{source}: workload_id {out['workload_id']} does not match what the record describes "
                        f"({derived}): the record was edited or forged; not read")
    return model, out


def seal(record: dict) -> dict:
    """Set the record's workload_id and validate it: the normalised dict that gets written."""
    return _seal(record, "new record")[1]


def _seal(record: dict, source: str) -> tuple[RecordBase, dict]:
    model = _checked({**record, "workload_id": _UNSET_ID}, source)
    out = as_dict(model)
    out["workload_id"] = record_workload_id(out)
    return model.model_copy(update={"workload_id": out["workload_id"]}), out


def _checked(record: dict, source: str) -> RecordBase:
    mode = record.get("measurement_mode")
    if mode not in known_modes():
        raise UserError(
            f"{source}: invalid result record: unknown measurement_mode {quote(mode)} (known: {', '.join(known_modes())})"
        )
    try:
        model = record_model(mode).model_validate(record)
    except ValidationError as e:
        raise UserError(f"{source}: invalid result record: {_first_error(e)}") from None
    out: RecordBase = model
    return out


def _first_error(e: ValidationError) -> str:
    err = e.errors(include_url=False)[0]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    if err["type"] == "missing":
        return f"field '{path}' is missing"
    got = quote(err.get("input"))
    return f"field '{path}' {err['msg'][:1].lower()}{err['msg'][1:]} (got {got})"


def _no_nan(token: str) -> float:
    raise ValueError(f"non-finite number {token}")


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (only containers go on the stack: a record's
    long lists of numbers are looked at, never pushed)."""
    containers = (dict, list)
    deepest, stack = 0, [(value, 1)] if isinstance(value, containers) else []
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if d <= MAX_DEPTH:
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v) if isinstance(c, containers))
    return deepest


def _read(path: Path) -> bytes:
    """The file's bytes, refusing what no record is: not a regular file, or larger than MAX_RECORD_BYTES."""
    return read_regular(path, str(path), MAX_RECORD_BYTES, "a result record")


def load(path: Path) -> dict:
    """A record file as the normalised dict of it (for tools that rewrite records)."""
    return _validated(_parsed(path), str(path))[1]


def read(path: Path) -> Record:
    """A record file as its mode's model (what readers take), validated once."""
    return _validated(_parsed(path), str(path))[0]


def _parsed(path: Path) -> Any:
    """The file's JSON, refusing what no record file is (not JSON, too large, nested too deep)."""
    try:
        data = json.loads(_read(Path(path)), parse_constant=_no_nan)
    except FileNotFoundError:
        raise UserError(f"{path}: no such result file") from None
    except RecursionError:
        raise UserError(f"{path}: corrupt result file (nested too deep to be a record)") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise UserError(f"{path}: corrupt result file (not valid JSON: {str(e)[:80]})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read result file: {e.strerror or e}") from None
    if _depth(data) > MAX_DEPTH:
        raise UserError(f"{path}: corrupt result file (nested more than {MAX_DEPTH} levels deep; a record never is)")
    return data


# What readers take: a validated record of its mode's model (gpuenv.modes.<mode>.record.RECORD, a
# RecordBase subclass); they read its fields, never index a dict.
Record = RecordBase


def typed(record: dict) -> Record:
    """A normalised record dict (what validate() returns) as its mode's model."""
    out: Record = record_model(record["measurement_mode"]).model_validate(record)
    return out


def as_dict(record: Record) -> dict:
    """The record as it is written (JSON types, `schema` by its name): for digests and copies."""
    out: dict = record.model_dump(mode="json", by_alias=True)
    return out


def json_schema() -> dict:
    """The JSON Schema of a record of any known measurement mode (a union on measurement_mode)."""
    union = Union[tuple(record_model(m) for m in known_modes())]  # type: ignore[valid-type]  # noqa: UP007 - built at run time
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[union, Field(discriminator="measurement_mode")])  # type: ignore[arg-type]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:gpuenv:result:{SCHEMA_VERSION}",
        "title": f"gpuenv result record (schema {SCHEMA!r}, schema_version {SCHEMA_VERSION})",
        "description": (
            "One JSON record per benchmark case; see docs/results-schema.md. Generated from the pydantic "
            "models: python -m gpuenv.results.schema --write docs/results-schema.json"
        ),
        **adapter.json_schema(by_alias=True),
    }


def write_json_schema(path: Path) -> Path:
    Path(path).write_text(json.dumps(json_schema(), indent=2) + "\n")
    return Path(path)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--write":
        sys.exit("usage: python -m gpuenv.results.schema --write docs/results-schema.json")
    print(write_json_schema(Path(sys.argv[2])))
