"""The parts of a result record every measurement mode shares, as pydantic v2 models (schema version 2).

A mode's record model (`gpuenv.modes.<mode>.record.RECORD`) subclasses `RecordBase` and adds `case`,
`what`, `settings`, its per-process or per-seed results and `summary`. Nothing here names a mode,
and nothing here imports gpuenv beyond its own scalar types (gpuenv.results.types); the workload
identity is gpuenv.results.workload, the v1 migration gpuenv.results.migrate.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from gpuenv.results.types import (
    GIT_SHA,
    Bool,
    EnvName,
    Float,
    Fraction,
    GitSha,
    Identifier,
    MachineName,
    Model,
    NonNegFloat,
    NonNegInt,
    OpenModel,
    PackageName,
    PosFloat,
    PosInt,
    Str,
    StringConstraints,
    Timestamp,
    Version,
    WorkloadId,
    ordered,
    presence,
)

_S = TypeVar("_S")
SchemaName = Literal["gpuenv.result"]
SchemaVersion = Literal[2]
Status = Literal["ok", "failed", "interrupted"]
SCHEMA: str = get_args(SchemaName)[0]
SCHEMA_VERSION: int = get_args(SchemaVersion)[0]
STATUSES: tuple[str, ...] = get_args(Status)

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


class Container(OpenModel):
    """The gpuenv image a record was measured in (gpuenv.measure.system.container)."""

    image: Str | None = None
    ref: Str | None = None  # the reference `gpuenv bench-image` ran; absent for a plain docker run
    id: Str | None = None
    base: Str | None = None
    lock_sha256: Str | None = None


class Machine(OpenModel):
    os: Str
    python: Str
    cpu_model: Str | None
    cpu_logical: PosInt | None
    cpu_physical: PosInt | None
    memory_gib: NonNegFloat | None
    gpus: list[Gpu]
    fingerprint: Fingerprint | None = None  # absent in records before gpuenv measured it
    container: Container | None = None  # the gpuenv image it ran in; absent outside one
    name: MachineName | None = None  # the user's name for it (GPUENV_MACHINE_NAME, bench --machine-name); absent: unnamed


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
    build_step: Str | None = None  # what its build step built after the lock: "module:function <its source's sha256, 16 hex>"
    served: Str | None = None  # its env was served from here to a trainer in the main install (gpuenv.backends.served)
    packages: dict[PackageName, Version | None] | None = None  # served: this environment's versions (where.packages: the trainer's)


class Scheduler(OpenModel):
    """The cluster allocation a record was measured in (`gpuenv dispatch`); absent when run directly."""

    scheduler: Str  # "slurm" or "local"
    job_id: Str | None = None  # array job and task: "1234_5"
    node: Str | None = None
    partition: Str | None = None
    exclusive: Bool | None = None
    container: Str | None = None  # none, docker, apptainer, pyxis
    image: Str | None = None
    task: Str | None = None  # the dispatch task's token: which task wrote the record


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



# --- what every mode's what and summary say ------------------------------------------------------


class WhatBase(Model):
    """What ran, in every mode (a mode's model adds its own fields)."""

    native_env_id: Str
    catalogue: dict[str, Any]  # the task catalogue's entry, as declared
    details: dict[str, Any]  # backend facts that change speed


class SummaryBase(Model):
    """The costs every mode's summary states beside its headline."""

    startup_s_median: NonNegFloat
    compile_s_median: NonNegFloat
    host_memory_mib: PosFloat | None = None  # median over workers of the process tree's peak (absent before it was measured)
    host_memory_mib_per_env: PosFloat | None = None
    device_peak_mib: PosFloat | None = None  # device memory the backend (and policy) used; null: not measured
    device_peak_mib_per_env: PosFloat | None = None
    warnings: list[Str]

    def host_memory_cell(self) -> str:
        """"MiB (MiB per env)", "-" where it was not measured."""
        if self.host_memory_mib is None:
            return "-"
        return f"{self.host_memory_mib:,.0f} ({self.host_memory_mib_per_env or 0:,.1f})"


# --- the record ----------------------------------------------------------------------------------


class CaseBase(Model):
    """What every mode's case names (a mode's case model subclasses it and adds its own fields)."""

    backend: Identifier
    variant: Identifier
    task: Identifier
    num_envs: PosInt

    @property
    def label(self) -> str:
        """backend:variant, as tables, plots and selectors name it."""
        return f"{self.backend}:{self.variant}"


class Invocation(Model):
    """The `gpuenv bench` command that wrote a record: when it started and how many cases its plan
    had. A run holding fewer records of one invocation than its cases was stopped half-way (killed
    before it wrote the rest): `gpuenv decide` refuses such a run unless asked (--partial)."""

    started_utc: Timestamp
    cases: PosInt


class RecordBase(Model):
    """The header, provenance and outcome of every record. Subclasses narrow `case` and add what,
    settings, their results and `summary` (required, null unless status is ok; `ok_summary` is it
    for a reader that asks only ok records)."""

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
    case: CaseBase  # the mode's own case model
    what: WhatBase  # the mode's own
    summary: SummaryBase | None  # the mode's own; null unless status is ok
    tags: dict[str, Any] = {}  # which version set / image / sweep produced the record
    where: Where
    failure: Failure | None  # null exactly when status is ok
    invocation: Invocation | None = None  # absent in records written before 2026-12-04, and by ab and dispatch
    _digest: str | None = PrivateAttr(default=None)  # results.store.record_digest once computed: derived, never measured

    def __eq__(self, other: object) -> bool:
        """Equal by content: a digest computed on one and not yet on the other is no difference."""
        if not isinstance(other, RecordBase):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__ and self.__pydantic_extra__ == other.__pydantic_extra__

    __hash__ = None  # type: ignore[assignment]  # as pydantic's models: mutable, so unhashable

    def digest_once(self, compute: Callable[[RecordBase], str]) -> str:
        """`compute(self)` the first time, the same string after (a loaded record is never changed)."""
        if self._digest is None:
            self._digest = compute(self)
        return self._digest

    def _summary_of_ok(self, summary: _S | None) -> _S:
        """A subclass's `ok_summary`: its summary, which only an ok record has."""
        if summary is None:
            raise ValueError(f"{self.case_key}: a {self.status} record has no summary")
        return summary

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


