"""The env-step-throughput record: random actions, no policy, steps per second of the whole batch."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from gpuenv.results.migrate import legacy_failure
from gpuenv.results.models import CaseBase, Failure, Interval, RateInterval, RecordBase, SummaryBase, WhatBase
from gpuenv.results.types import Bool, Float, Int, Model, NonNegFloat, NonNegInt, OpenModel, PosFloat, PosInt, Str
from gpuenv.results.workload import catalogue_workload


class ThroughputCase(CaseBase):
    chunk_steps: PosInt  # steps of every env per timed call
    seed: Int
    action_pool_steps: PosInt


class Physics(Model):
    control_dt_s: PosFloat | None
    frame_skip: PosInt  # the catalogue's simulator frames (or physics substeps) per agent step
    physics_dt_s: PosFloat | None
    episode_steps: PosInt
    # physics (sub)steps the backend ran per env step, as it reported them (StepperFacts.physics_steps);
    # null: no physics timestep (Atari), the backend cannot say, or a record from before 2026-12-07,
    # whose physics_steps_per_s_median was env steps/s x the catalogue's frame_skip
    physics_steps_per_env_step: PosInt | None = None


class ThroughputWhat(WhatBase):
    physics: Physics
    obs_shape: list[NonNegInt] | None  # null when no process finished
    action_space: dict[str, Any] | None
    action_distribution: Str
    reset_mode: Str
    device: Str | None


class ThroughputSettings(Model):
    processes: PosInt
    values: PosInt
    warmups: NonNegInt
    min_time_s: PosFloat
    chunk_steps: PosInt
    timeout_s: PosFloat
    seed: Int
    memory_limit_mib: NonNegInt = 0  # RLIMIT_AS of each worker (0: none; absent in older records)
    phases: list[Str] = []  # extra phases measured apart (gpuenv.modes.throughput.phases)
    phase_ppo: dict[Str, PosInt] = {}  # sizes replacing the shared PPO definition's in the policy phases


class ProcessResult(OpenModel):
    """One worker process: its timings and rates, or why it has none (the rest is kept as written)."""

    index: NonNegInt
    failure: Failure | None = None
    env_steps_per_s: list[PosFloat] = []
    resources: dict[str, Any] = {}  # gpuenv.measure.monitor's samples; its "memory" the peaks


class Ratio(Interval):
    """A ratio of medians with its bootstrap interval (stats.ratio)."""

    median: PosFloat
    ci_low: PosFloat
    ci_high: PosFloat


class PhaseSummary(Model):
    """One phase measured apart (gpuenv.modes.throughput.phases): its rate, or why it has none."""

    env_steps_per_s: RateInterval | None = None
    vs_step_reset: Ratio | None = None  # this phase's rate / the case's own (step+reset), over the same processes
    how: Str | None = None
    chunk_steps: PosInt | None = None
    warmups: NonNegInt | None = None
    details: dict[str, Any] = {}
    absent: Str | None = None  # cannot be measured for this backend/task: why
    failed: Str | None = None  # raised: the error
    not_finished_within_s: PosFloat | None = None  # the case's timeout_s stopped the worker while this phase ran
    # step only: wall-clock microseconds each env's reset adds, amortised over the batch,
    # episode_steps x (1/step+reset rate - 1/step rate); within_noise when the two intervals overlap
    reset_cost_us: Float | None = None
    reset_cost_within_noise: Bool | None = None


class ThroughputSummary(SummaryBase):
    env_steps_per_s: RateInterval
    frames_per_s_median: PosFloat
    # env steps/s x what.physics.physics_steps_per_env_step; null where that is null (Atari, or not reported)
    physics_steps_per_s_median: PosFloat | None
    compile_s_cold: list[NonNegFloat]
    compile_s_warm: list[NonNegFloat]
    cpu_percent_mean: list[NonNegFloat | None]
    bottleneck: Str | None
    cpu_j_per_m_steps: NonNegFloat | None = None  # RAPL energy per million env steps; null: no counter here
    gpu_j_per_m_steps: NonNegFloat | None = None  # NVML energy per million env steps; null: no counter here
    phases: dict[Str, PhaseSummary] = {}  # extra phases measured apart, by name


class ThroughputRecord(RecordBase):
    measurement_mode: Literal["env-step-throughput"]
    case: ThroughputCase
    what: ThroughputWhat
    settings: ThroughputSettings
    processes: list[ProcessResult]
    summary: ThroughputSummary | None

    @field_validator("processes")
    @classmethod
    def _processes_when_ok(cls, v: list, info: ValidationInfo) -> list:
        if info.data.get("status") == "ok" and not v:
            raise PydanticCustomError("empty", "must not be empty when status is 'ok'")
        return v

    @property
    def ok_summary(self) -> ThroughputSummary:
        return self._summary_of_ok(self.summary)

    def physics_steps_per_s(self) -> float | None:
        """Physics (sub)steps/s: the median env steps/s x the physics steps the backend reported running
        per env step; None where it reported none (Atari, or a record from before it was recorded,
        whose summary figure used the catalogue's frame_skip)."""
        k = self.what.physics.physics_steps_per_env_step
        return self.ok_summary.env_steps_per_s.median * k if k and self.status == "ok" else None

    def rate_groups(self) -> list[list[float]]:
        """env steps/s values per worker process that measured any (stats.ratio's groups)."""
        return [p.env_steps_per_s for p in self.processes if p.env_steps_per_s]


RECORD = ThroughputRecord


def workload(record: dict) -> dict:
    """What was measured: the case, how long each value is timed, and the catalogue's physics."""
    return {
        "case": record["case"],
        "min_time_s": record["settings"]["min_time_s"],
        "warmups": record["settings"]["warmups"],
        "catalogue": catalogue_workload(record["what"]["catalogue"]),
    }


def migrate_v1(record: dict) -> dict:
    """v1 -> v2, after the common part: a process's failure string becomes a failure object."""
    for i, p in enumerate(record.get("processes") or []):
        if isinstance(p, dict) and isinstance(p.get("failure"), str):
            p["failure"] = legacy_failure(p["failure"], process=p.get("index", i))
    return record
