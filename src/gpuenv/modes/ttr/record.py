"""The time-to-reward record: PPO to a return threshold, one run per seed, IQM over seeds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from gpuenv.results.migrate import legacy_failure
from gpuenv.results.models import CaseBase, Failure, IqmInterval, RecordBase, SummaryBase, WhatBase
from gpuenv.results.types import Bool, Float, Fraction, Identifier, Model, NonNegFloat, NonNegInt, OpenModel, PosFloat, PosInt, Str, presence
from gpuenv.results.workload import catalogue_workload

VALUE_KEYS = ("time_to_threshold_s", "train_time_to_threshold_s", "env_steps_to_threshold")


class TtrCase(CaseBase):
    trainer: Identifier
    threshold: Float  # evaluation return to reach
    max_env_steps: PosInt
    max_time_s: PosFloat
    eval_every_steps: PosInt
    eval_episodes: PosInt
    hyperparams: dict[str, Any]


class TtrWhat(WhatBase):
    trainer: Str  # what the trainer is, in words
    protocol: Str  # how the clock and the evaluations work, in one sentence


class TtrSettings(Model):
    seeds: PosInt
    pass_min_seeds: NonNegInt  # 0: a fixed step budget, no pass criterion
    timeout_s: PosFloat


class TtrRun(OpenModel):
    """One seed: reached the threshold, censored at its budget (values = what it spent), or failed."""

    seed: NonNegInt
    status: Literal["reached", "censored", "failed"]
    failure: Failure | None = Field(None, validate_default=True)  # required exactly when failed
    time_to_threshold_s: NonNegFloat | None = Field(None, validate_default=True)
    train_time_to_threshold_s: NonNegFloat | None = Field(None, validate_default=True)
    env_steps_to_threshold: NonNegFloat | None = Field(None, validate_default=True)
    curve: list[dict[str, Any]] = []
    memory: dict[str, Any] = {}  # gpuenv.measure.monitor.memory: the seed's peaks

    @field_validator("failure", mode="before")
    @classmethod
    def _failure_iff_failed(cls, v: Any, info: ValidationInfo) -> Any:
        status = info.data.get("status")
        return v if status is None else presence(v, needed=status == "failed", when=f"status is {status!r}")

    @field_validator(*VALUE_KEYS, mode="before")
    @classmethod
    def _values_unless_failed(cls, v: Any, info: ValidationInfo) -> Any:
        status = info.data.get("status")
        return v if status in (None, "failed") else presence(v, needed=True, when=f"status is {status!r}")


class TtrSummary(SummaryBase):
    seeds: NonNegInt
    reached: NonNegInt
    censored: NonNegInt
    failed: NonNegInt
    success_rate: Fraction
    pass_min_seeds: NonNegInt
    passed: Bool
    time_to_threshold_s: IqmInterval
    train_time_to_threshold_s: IqmInterval
    env_steps_to_threshold: IqmInterval
    eval_s_median: NonNegFloat


class TtrRecord(RecordBase):
    measurement_mode: Literal["time-to-reward"]
    case: TtrCase
    what: TtrWhat
    settings: TtrSettings
    runs: list[TtrRun]
    summary: TtrSummary | None

    @field_validator("runs")
    @classmethod
    def _a_finished_run_when_ok(cls, v: list[TtrRun], info: ValidationInfo) -> list[TtrRun]:
        if info.data.get("status") == "ok" and all(r.status == "failed" for r in v):
            raise PydanticCustomError("no_run", "needs a reached or censored run when status is 'ok'")
        return v

    @property
    def ok_summary(self) -> TtrSummary:
        return self._summary_of_ok(self.summary)

    def trained_runs(self) -> list[tuple[float, float, bool]]:
        """(env steps trained, training seconds, reached the threshold) per seed that trained: to the
        threshold, or censored at its budget (what it spent); training seconds exclude startup, compile and
        evaluation; none for a record that is not ok, nor for a failed seed."""
        if self.status != "ok":
            return []
        return [(x.env_steps_to_threshold, x.train_time_to_threshold_s, x.status == "reached") for x in self.runs
                if x.status != "failed" and x.env_steps_to_threshold and x.train_time_to_threshold_s]

    def training_rates(self) -> list[float]:
        """Env steps per second of training, one per seed that trained (trained_runs), sorted."""
        return sorted(steps / secs for steps, secs, _ in self.trained_runs())


RECORD = TtrRecord


def workload(record: dict) -> dict:
    """What was measured: the whole case (trainer, budget, hyperparameters) and the catalogue's physics;
    a policy trained on a GPU is a workload of its own (records before that choice existed trained
    on the CPU, and keep their workload id)."""
    out = {"case": record["case"], "catalogue": catalogue_workload(record["what"]["catalogue"])}
    device = (record["what"].get("details") or {}).get("policy_device")
    if device not in (None, "cpu"):
        out["policy_device"] = device
    return out


def migrate_v1(record: dict) -> dict:
    """v1 -> v2, after the common part: a run's failure string and stderr_tail become a failure object."""
    for r in record.get("runs") or []:
        if not isinstance(r, dict):
            continue
        tail = r.pop("stderr_tail", "")
        if isinstance(r.get("failure"), str):
            r["failure"] = legacy_failure(r["failure"], process=r.get("seed"), stderr_tail=tail)
    return record
