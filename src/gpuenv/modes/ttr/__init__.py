"""PPO time-to-reward: wall-clock and env steps until a deterministic evaluation reaches a return
threshold, one worker process per seed, IQM and 95% interval over seeds. Imports stay inside the
methods: loading a record module imports this package, and that must stay cheap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.modes.base import Headline, Mode, Plan

if TYPE_CHECKING:
    from gpuenv.modes.ttr.record import TtrRecord


class TimeToReward(Mode["TtrRecord"]):
    name = "time-to-reward"
    suite_kind = "time-to-reward"
    process_word = "seed"
    stop_after_failure = False  # one seed failing says nothing about the others
    packages = ("stable-baselines3", "torch", "tensorboardx")

    def load_suite(self, path: Path, data: dict, registry: Any, *, seeds: int | None) -> Any:
        from gpuenv.modes.ttr.suite import load_ppo_suite

        return load_ppo_suite(path, data, registry, seeds=seeds)

    def plan(self, suite: Any, registry: Any, *, backends: list[str] | None, tasks: list[str] | None,
             num_envs: list[int] | None) -> Plan:
        from gpuenv.modes.ttr.suite import plan

        return plan(suite, registry, backends=backends, tasks=tasks, num_envs=num_envs)

    def unavailable(self, item: Any, registry: Any) -> str | None:
        from gpuenv.modes.ttr.suite import trainers

        trainer, owner = trainers(registry)[item.case.trainer]
        if owner is not None and registry.get(owner).environment is not None:
            return None  # a native trainer of a backend in its own environment: that environment's lock holds what it needs
        return trainer.unavailable_reason()

    def serves_env(self, item: Any) -> bool:
        from gpuenv.modes.ttr.suite import SB3

        return item.case.trainer == SB3.name

    def with_measure(self, item: Any, settings: dict[str, Any], where: str) -> Any:
        from dataclasses import replace

        from gpuenv.errors import UserError

        other = sorted(set(settings) - {"processes"})
        if other:
            raise UserError(f"{where}: {', '.join(other)} apply to throughput suites; a time-to-reward suite's processes are its "
                            "seeds (--processes or --seeds)")
        return replace(item, run=item.run.with_seeds(settings["processes"], where))

    def describe(self, item: Any) -> str:
        c = item.case
        need = (f"{item.run.pass_min_seeds} must reach {c.threshold:g}" if item.run.pass_min_seeds else
                f"a fixed step budget: none must reach {c.threshold:g}")
        return (f"{item.run.seeds} seeds ({need}), budget {c.max_env_steps:,} steps "
                f"or {c.max_time_s:g} s, evaluated every {c.eval_every_steps:,} steps")

    def process_spec(self, item: Any, index: int, out_dir: Path) -> dict:
        tb = out_dir / "tensorboard" / item.case.key / f"seed{index}"
        return {"mode": self.name, "case": item.case.to_dict(), "seed": index, "tb_dir": str(tb)}

    def worker(self, spec: dict, keep: Callable[[dict], None] = lambda result: None) -> dict:  # keep: each seed is its own worker
        from gpuenv.modes.ttr.train import run_training

        return run_training(spec)

    def build_record(self, item: Any, outcomes: list, ctx: Any) -> dict:
        from gpuenv.modes.ttr.build import build_record

        return build_record(item, outcomes, ctx)

    def training_rates(self, record: TtrRecord) -> list[float]:
        return record.training_rates()

    def trained_learner(self, record: TtrRecord) -> str | None:
        from gpuenv.modes.throughput.phases import learner_key

        details = record.what.details or {}
        threads = details.get("torch_threads")
        if threads is None:
            return None
        return learner_key(record.case.task, record.case.hyperparams, details.get("policy_device") or "cpu", int(threads))

    def training_fixed_s(self, record: TtrRecord) -> float:
        from statistics import median

        fixed = [float((x.model_extra or {}).get("startup_s") or 0.0) + float((x.model_extra or {}).get("compile_s") or 0.0)
                 for x in record.runs if x.status != "failed"]
        return median(fixed) if fixed else 0.0

    def trainer_text(self, record: TtrRecord) -> str:
        return record.what.trainer

    def trained_runs(self, record: TtrRecord) -> tuple[str | None, list[tuple[float, float, bool]]]:
        return record.case.trainer, record.trained_runs()

    def page_rows(self, record: TtrRecord) -> list[tuple[str, Any]]:
        return [("trainer", record.what.trainer), ("protocol", record.what.protocol)]

    def training_line(self, record: TtrRecord) -> str:
        c, s = record.case, record.ok_summary
        if not s.reached:
            return (f"PPO ({c.trainer}, {record.case_key}) did not reach return {c.threshold:g} within its budget "
                    f"({c.max_env_steps:,} env steps or {c.max_time_s:g} s), 0/{s.seeds} seeds")
        return (f"PPO ({c.trainer}, {record.case_key}) reached return {c.threshold:g} in "
                f"{s.time_to_threshold_s.median:.0f} s median, {s.reached}/{s.seeds} seeds")

    def headline(self, record: TtrRecord) -> Headline:
        t = record.ok_summary.time_to_threshold_s
        return Headline(t.iqm, t.ci_low, t.ci_high, "s to reward", higher_is_better=False)

    def process_values(self, record: TtrRecord) -> dict[int, float]:
        # a censored seed only bounds its time from below: no value to pair
        return {i: r.time_to_threshold_s for i, r in enumerate(record.runs) if r.status == "reached" and r.time_to_threshold_s}

    def ratio(self, new: TtrRecord, old: TtrRecord) -> tuple[float, float, float]:
        from gpuenv.modes.ttr.report import iqm_ratio

        return iqm_ratio(new, old)

    def progress_line(self, record: TtrRecord) -> str:
        from gpuenv.format import fmt_s

        sm = record.ok_summary
        return (f"{sm.reached}/{sm.seeds} reached {record.case.threshold:g}; "
                f"wall s IQM {fmt_s(sm.time_to_threshold_s.iqm)}")

    def missed(self, record: TtrRecord) -> bool:
        return record.status == "ok" and record.ok_summary.passed is False

    def worker_memories(self, record: TtrRecord) -> list[dict]:
        return [r.memory for r in record.runs]

    def asv_benchmark(self, record: TtrRecord) -> str:
        return f"gpuenv_records.ppo_{record.case.task}.track_seconds_to_reward"


    def asv_param(self, record: TtrRecord) -> str:
        c = record.case
        return f"{c.label}/{c.trainer}@{c.num_envs}"


MODE = TimeToReward()
