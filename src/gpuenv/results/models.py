"""The parts of a result record every measurement mode shares, as pydantic v2 models (schema version 2).

A mode's record model (`gpuenv.modes.<mode>.record.RECORD`) subclasses `RecordBase` and adds `case`,
`what`, `settings`, its per-process or per-seed results and `summary`. Nothing here names a mode:
modes are looked up through `gpuenv.modes`. Types are strict where it matters: no bool or str where a
number is expected (an int is a fine float), no NaN or infinity, names safe in file names and markup.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import re
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from gpuenv.modes import MODE_PACKAGES

SchemaName = Literal["gpuenv.result"]
SchemaVersion = Literal[2]
Status = Literal["ok", "failed", "interrupted"]
SCHEMA: str = get_args(SchemaName)[0]
SCHEMA_VERSION: int = get_args(SchemaVersion)[0]
STATUSES: tuple[str, ...] = get_args(Status)

# --- strict scalar types, shared by every mode's model -------------------------------------------

Int = StrictInt
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
PosInt = Annotated[int, Field(strict=True, ge=1)]
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # strict float still takes an int
NonNegFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
PosFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
Fraction = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=1)]
Str = StrictStr
Bool = StrictBool
# Safe in a file name and in rich markup: `sync[/]` or `a/b` are refused.
IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # suite, run, case and backend names: file names, never options
Identifier = Annotated[str, StringConstraints(strict=True, pattern=IDENTIFIER)]
WorkloadId = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{16}$")]
# Values that reach a command line or a file name (git, asv): what they are and nothing else, so a
# record's text can never become an option ("--output=...") or a path ("../..").
GIT_SHA = r"^[0-9a-f]{7,64}$"  # abbreviated to full; SHA-1 or SHA-256 repositories
GitSha = Annotated[str, StringConstraints(strict=True, pattern=GIT_SHA)]
PACKAGE_NAME = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$"  # PEP 508 names
PackageName = Annotated[str, StringConstraints(strict=True, pattern=PACKAGE_NAME)]
Version = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")]  # PEP 440 and local labels
EnvName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


def _aware_iso8601(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError("iso8601", "is not an ISO 8601 date and time") from None
    if parsed.tzinfo is None:
        raise PydanticCustomError("iso8601_tz", "has no timezone (write it as UTC, +00:00)")
    return value


Timestamp = Annotated[str, StringConstraints(strict=True), AfterValidator(_aware_iso8601)]


class Model(BaseModel):
    """A closed record part: unknown fields are refused, so a typo cannot pass unnoticed."""

    model_config = ConfigDict(extra="forbid")


class OpenModel(BaseModel):
    """A record part with known fields that also keeps whatever else its producer reports."""

    model_config = ConfigDict(extra="allow")


def presence(value: Any, *, needed: bool, when: str) -> Any:
    """Require `value` (not None) or its absence (None), whichever `when` calls for."""
    if needed and value is None:
        raise PydanticCustomError("needed", "is required when {when}", {"when": when})
    if not needed and value is not None:
        raise PydanticCustomError("not_allowed", "must be null when {when}", {"when": when})
    return value


# --- failures ------------------------------------------------------------------------------------


class FailureKind(str, Enum):
    """Why a case, process or seed has no result.

    - crashed: the worker raised, or exited non-zero without a result.
    - killed: the worker was killed by a signal (SIGSEGV, SIGKILL from the OOM killer ...).
    - timeout: the worker ran past its timeout_s (hung or too slow) and was killed.
    - unsupported: the backend cannot run this case faithfully (its adapter raised gpuenv.errors.Unsupported).
    - diverged: training produced non-finite values.
    - interrupted: the run was stopped by Ctrl-C, SIGTERM or SIGHUP (the reason names which).
    - oom: the worker raised MemoryError.
    - refused: the worker reported a failed precondition or bad input (a UserError).
    - internal: gpuenv could not summarise the case (a bug in gpuenv).
    - scheduler: a cluster's scheduler ended the task before the case wrote its record (cancelled,
      preempted, time limit, node failure); the reason quotes the scheduler's state.
    """

    crashed = "crashed"
    killed = "killed"
    timeout = "timeout"
    unsupported = "unsupported"
    diverged = "diverged"
    interrupted = "interrupted"
    oom = "oom"
    refused = "refused"
    internal = "internal"
    scheduler = "scheduler"


class Failure(Model):
    kind: FailureKind
    reason: Annotated[str, StringConstraints(strict=True, min_length=1)]  # one line, for people
    process: NonNegInt | None = None  # worker process index (= seed index for time-to-reward)
    stderr_tail: Str = ""


# Legacy (v1) records carry only the reason text; its kind is read from it, and only there.
_LEGACY_KINDS: tuple[tuple[tuple[str, ...], FailureKind], ...] = (
    (("interrupted",), FailureKind.interrupted),
    (("timed out",), FailureKind.timeout),
    (("killed by",), FailureKind.killed),
    (("diverged",), FailureKind.diverged),
    (("does not substitute", "older than the adapter", "not supported"), FailureKind.unsupported),
    (("could not summarise",), FailureKind.internal),
    (("MemoryError",), FailureKind.oom),
)


def legacy_failure_kind(reason: str) -> FailureKind:
    for needles, kind in _LEGACY_KINDS:
        if any(n in reason for n in needles):
            return kind
    return FailureKind.crashed


def legacy_failure(reason: Any, *, process: Any = None, stderr_tail: Any = "") -> dict:
    """A v2 failure object from a v1 reason string (anything else is left for validation to name)."""
    kind = legacy_failure_kind(reason).value if isinstance(reason, str) else FailureKind.crashed.value
    return {"kind": kind, "reason": reason, "process": process, "stderr_tail": stderr_tail}


def ordered(low: str, high: str) -> Any:
    """A field validator (assign it in a model's body) refusing `high` below `low`."""

    def check(cls: type, v: float, info: ValidationInfo) -> float:
        if low in info.data and v < info.data[low]:
            raise PydanticCustomError("ordered", "must be >= {name} ({low})", {"name": low, "low": info.data[low]})
        return v

    return field_validator(high, check_fields=False)(classmethod(check))  # type: ignore[arg-type]


# --- where it ran --------------------------------------------------------------------------------


class Gpu(OpenModel):
    name: Str
    driver: Str


class SpeedBand(Model):
    """A reference rate: the median of the repeats and the range of the middle ones (its noise)."""

    median: PosFloat
    low: PosFloat
    high: PosFloat

    _ordered = ordered("low", "high")


class Fingerprint(OpenModel):
    """How fast the machine was just before the case ran (gpuenv.measure.fingerprint)."""

    method: Str
    python_mops: SpeedBand
    memory_gbs: SpeedBand
    repeats: PosInt
    cpu_mhz: NonNegFloat | None = None
    governor: Str | None = None
    steal_pct: NonNegFloat | None = None  # CPU steal during the measurement (a VM's neighbours)
    seconds: NonNegFloat


class Machine(OpenModel):
    os: Str
    python: Str
    cpu_model: Str | None
    cpu_logical: PosInt | None
    cpu_physical: PosInt | None
    memory_gib: NonNegFloat | None
    gpus: list[Gpu]
    fingerprint: Fingerprint | None = None  # absent in records before gpuenv measured it


def _commit_or_none(value: Any) -> Any:
    """A sha that is no commit id ("unknown" from an image built outside a checkout, or anything
    else) is no commit: null, so it can never reach git."""
    return None if isinstance(value, str) and not re.fullmatch(GIT_SHA, value) else value


class Git(Model):
    sha: Annotated[GitSha | None, BeforeValidator(_commit_or_none)]
    dirty: Bool | None


class Environment(Model):
    """The interpreter environment the workers ran in (a locked version set, or the current one)."""

    name: Str
    python: Str
    lock_sha256: Str | None = None
    path: Str | None = None


class Scheduler(OpenModel):
    """The cluster allocation a record was measured in (`gpuenv dispatch`); absent when run directly."""

    scheduler: Str  # "slurm" or "local"
    job_id: Str | None = None  # array job and task: "1234_5"
    node: Str | None = None
    partition: Str | None = None
    exclusive: Bool | None = None
    container: Str | None = None  # none, docker, apptainer, pyxis
    image: Str | None = None


class Where(Model):
    machine: Machine
    packages: dict[PackageName, Version | None]  # every tracked distribution: version, or null if absent
    env: dict[EnvName, Str]  # environment variables that change speed
    git: Git
    environment: Environment | None = None
    scheduler: Scheduler | None = None


# --- intervals -----------------------------------------------------------------------------------


class Interval(Model):
    """An interval's one cross-field rule: ci_low <= ci_high. Only that: a bootstrap interval of
    medians need not contain the point median, and a correct measurement must never be refused."""

    _high_above_low = ordered("ci_low", "ci_high")


class RateInterval(Interval):
    """A rate's median over all values with its hierarchical bootstrap interval (stats.Summary)."""

    median: PosFloat
    ci_low: PosFloat
    ci_high: PosFloat
    rel_half_width: NonNegFloat
    n_values: PosInt
    n_processes: PosInt
    confidence: Fraction



class IqmInterval(Interval):
    """Interquartile mean over seeds with its percentile bootstrap interval (stats.Aggregate)."""

    iqm: Float
    ci_low: Float
    ci_high: Float
    median: Float
    n: PosInt
    confidence: Fraction



# --- the record ----------------------------------------------------------------------------------


class RecordBase(Model):
    """The header, provenance and outcome of every record. Subclasses add case, what, settings,
    their results and `summary` (required, null unless status is ok)."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: SchemaName = Field(alias="schema")
    schema_version: SchemaVersion
    run_id: Identifier
    case_key: Identifier
    created_utc: Timestamp
    suite: Identifier
    status: Status
    measurement_mode: Str
    workload_id: WorkloadId  # see workload_id()
    tags: dict[str, Any] = {}  # which version set / image / sweep produced the record
    where: Where
    failure: Failure | None  # null exactly when status is ok

    @field_validator("failure", mode="before")
    @classmethod
    def _failure_unless_ok(cls, v: Any, info: ValidationInfo) -> Any:
        status = info.data.get("status")
        return v if status is None else presence(v, needed=status != "ok", when=f"status is {status!r}")

    @field_validator("summary", mode="before", check_fields=False)
    @classmethod
    def _summary_iff_ok(cls, v: Any, info: ValidationInfo) -> Any:
        status = info.data.get("status")
        return v if status is None else presence(v, needed=status == "ok", when=f"status is {status!r}")


# --- workload identity ---------------------------------------------------------------------------

# The catalogue facts that define what is simulated (not notes, max_return or unsupported).
CATALOGUE_WORKLOAD_KEYS = (
    "env_id",
    "control_dt_s",
    "frame_skip",
    "physics_dt_s",
    "episode_steps",
    "obs_shape",
    "action_kind",
    "action_size",
)


def catalogue_workload(catalogue: dict) -> dict:
    return {k: catalogue.get(k) for k in CATALOGUE_WORKLOAD_KEYS}


def _canonical(value: Any) -> Any:
    """JSON-ready value where 3 and 3.0 are the same number, so an id does not depend on how a
    producer happened to type it."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_id(mode: str, facts: dict) -> str:
    """16 hex chars naming a workload: sha256 of the canonical JSON of {measurement_mode, **facts}.

    Records with the same id measured the same thing (on whatever machine, with whatever versions),
    so they can be compared; the facts are what the mode's `workload(record)` returns."""
    text = json.dumps(_canonical({"measurement_mode": mode, **facts}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mode_record_module(mode: str) -> Any:
    """The `record` module of a measurement mode (RECORD, workload, migrate_v1)."""
    return importlib.import_module(MODE_PACKAGES[mode] + ".record")


def record_workload_id(record: dict) -> str:
    """The workload id of a validated record dict."""
    mode = record["measurement_mode"]
    return workload_id(mode, mode_record_module(mode).workload(record))


# --- migration -----------------------------------------------------------------------------------


def migrate_v1(record: dict) -> dict:
    """A schema-version-1 record as version 2 (a new dict), workload_id still unset.

    Common part: `summary: {}` becomes null, the failure reason string becomes a failure object with
    its kind read from the text, `seed` becomes `process`; then the mode's own migrate_v1.
    gpuenv.results.schema.validate() then validates it and sets workload_id, as for a new record."""
    out = copy.deepcopy(record)
    out["schema_version"] = 2
    if out.get("summary") == {}:
        out["summary"] = None
    f = out.get("failure")
    if isinstance(f, dict) and "kind" not in f:
        out["failure"] = legacy_failure(
            f.get("reason"), process=f.get("process", f.get("seed")), stderr_tail=f.get("stderr_tail", "")
        )
    mode = out.get("measurement_mode")
    if mode in MODE_PACKAGES:  # an unknown mode is reported by validation
        out = mode_record_module(mode).migrate_v1(out)
    return out
