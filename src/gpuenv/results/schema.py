"""Result schema v1: one JSON record per case. Documented in docs/results-schema.md.

Records are validated on read; a record of another schema version is refused with a clear message
(a later version adds migrations here, keyed by version, as asv does with api_version).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError

SCHEMA = "gpuenv.result"
SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "interrupted")
THROUGHPUT = "env-step-throughput"
TIME_TO_REWARD = "time-to-reward"
MEASUREMENT_MODES = (THROUGHPUT, TIME_TO_REWARD)

# path -> required type(s). "a.b" means record["a"]["b"].
_COMMON: dict[str, type | tuple[type, ...]] = {
    "schema": str,
    "schema_version": int,
    "run_id": str,
    "case_key": str,
    "created_utc": str,
    "suite": str,
    "status": str,
    "measurement_mode": str,
    "case": dict,
    "case.backend": str,
    "case.variant": str,
    "case.task": str,
    "case.num_envs": int,
    "what": dict,
    "what.native_env_id": str,
    "where": dict,
    "where.machine": dict,
    "where.packages": dict,
    "where.env": dict,
    "where.git": dict,
    "settings": dict,
    "summary": dict,
    "failure": (dict, type(None)),
}
_BY_MODE: dict[str, dict[str, type | tuple[type, ...]]] = {
    THROUGHPUT: {
        "case.chunk_steps": int,
        "case.seed": int,
        "what.physics": dict,
        "what.action_distribution": str,
        "what.reset_mode": str,
        "processes": list,
    },
    TIME_TO_REWARD: {
        "case.trainer": str,
        "case.threshold": (int, float),
        "case.max_env_steps": int,
        "case.max_time_s": (int, float),
        "settings.seeds": int,
        "runs": list,
    },
}
_RUN_STATUSES = ("reached", "censored", "failed")


def header(*, run_id: str, case_key: str, suite: str, status: str, mode: str) -> dict:
    """The fields every record starts with, whatever it measured."""
    from datetime import datetime, timezone

    import os

    out = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "case_key": case_key,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "suite": suite,
        "status": status,
        "measurement_mode": mode,
    }
    tags = os.environ.get(TAGS_ENV)  # set by `gpuenv sweep`: which version set produced the record
    if tags:
        out["tags"] = json.loads(tags)
    elif os.environ.get("GPUENV_VERSION_SET"):  # an image built with pinned versions
        out["tags"] = {"version_set": os.environ["GPUENV_VERSION_SET"], "image": os.environ.get("GPUENV_IMAGE")}
    return out


TAGS_ENV = "GPUENV_RECORD_TAGS"


def _get(record: dict, path: str) -> Any:
    cur: Any = record
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise KeyError(path)
        cur = cur[part]
    return cur


def validate(record: Any, source: str = "record") -> dict:
    """Return the record if it is a valid v1 record, else raise UserError naming what is wrong."""
    if not isinstance(record, dict):
        raise UserError(f"{source}: not a gpuenv result record (top level is not an object)")
    if record.get("schema") != SCHEMA:
        raise UserError(f"{source}: not a gpuenv result record (schema is {record.get('schema')!r})")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UserError(
            f"{source}: result schema version {version!r} is not supported by this gpuenv "
            f"(reads version {SCHEMA_VERSION}); use the gpuenv release that wrote it, or upgrade gpuenv"
        )
    if not isinstance(record.get("tags", {}), dict):
        raise UserError(f"{source}: invalid result record: field 'tags' must be an object")
    mode = record.get("measurement_mode")
    if mode not in MEASUREMENT_MODES:
        raise UserError(f"{source}: invalid result record: unknown measurement_mode {mode!r}")
    for path, typ in {**_COMMON, **_BY_MODE[mode]}.items():
        try:
            value = _get(record, path)
        except KeyError:
            raise UserError(f"{source}: invalid result record: missing field '{path}'") from None
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise UserError(f"{source}: invalid result record: field '{path}' has the wrong type")
    if record["status"] not in STATUSES:
        raise UserError(f"{source}: invalid result record: status {record['status']!r} not in {STATUSES}")
    if mode == TIME_TO_REWARD:
        return _validate_ttr(record, source)
    if record["status"] == "ok":
        s = record["summary"].get("env_steps_per_s")
        fields_ok = isinstance(s, dict) and all(
            _positive(s.get(k)) for k in ("median", "ci_low", "ci_high")
        )
        if not fields_ok:
            raise UserError(
                f"{source}: invalid result record: an ok record needs summary.env_steps_per_s "
                "with positive median, ci_low, ci_high"
            )
    else:
        _check_failure(record, source)
    for i, p in enumerate(record["processes"]):
        if not isinstance(p, dict) or not isinstance(p.get("env_steps_per_s", []), list):
            raise UserError(f"{source}: invalid result record: processes[{i}] is malformed")
        if not all(_positive(v) for v in p.get("env_steps_per_s", [])):
            raise UserError(f"{source}: invalid result record: processes[{i}].env_steps_per_s has a non-positive value")
    return record


def _validate_ttr(record: dict, source: str) -> dict:
    for i, r in enumerate(record["runs"]):
        if not isinstance(r, dict) or r.get("status") not in _RUN_STATUSES or not isinstance(r.get("seed"), int):
            raise UserError(f"{source}: invalid result record: runs[{i}] needs a seed and a status in {_RUN_STATUSES}")
        if r["status"] == "failed" and not isinstance(r.get("failure"), str):
            raise UserError(f"{source}: invalid result record: runs[{i}] is failed without a reason")
        if r["status"] != "failed" and not all(
            _number(r.get(k)) for k in ("time_to_threshold_s", "train_time_to_threshold_s", "env_steps_to_threshold")
        ):
            raise UserError(f"{source}: invalid result record: runs[{i}] lacks its time/steps to threshold")
    if record["status"] == "ok":
        s = record["summary"]
        for key in ("time_to_threshold_s", "train_time_to_threshold_s", "env_steps_to_threshold"):
            t = s.get(key)
            if not (isinstance(t, dict) and all(_number(t.get(k)) for k in ("iqm", "ci_low", "ci_high"))):
                raise UserError(
                    f"{source}: invalid result record: an ok time-to-reward record needs summary.{key} "
                    "with iqm, ci_low, ci_high"
                )
        for key in ("seeds", "reached", "pass_min_seeds", "startup_s_median", "compile_s_median"):
            if not _number(s.get(key)):
                raise UserError(f"{source}: invalid result record: summary.{key} is missing or not a number")
        if not isinstance(s.get("passed"), bool):
            raise UserError(f"{source}: invalid result record: summary.passed must be true or false")
    else:
        _check_failure(record, source)
    return record


def _check_failure(record: dict, source: str) -> None:
    f = record["failure"]
    if not isinstance(f, dict) or not isinstance(f.get("reason"), str):
        raise UserError(f"{source}: invalid result record: a {record['status']} record needs failure.reason")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _no_nan(token: str) -> float:
    raise ValueError(f"non-finite number {token}")


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(), parse_constant=_no_nan)
    except FileNotFoundError:
        raise UserError(f"{path}: no such result file") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise UserError(f"{path}: corrupt result file (not valid JSON: {e})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read result file: {e.strerror or e}") from None
    return validate(data, str(path))
