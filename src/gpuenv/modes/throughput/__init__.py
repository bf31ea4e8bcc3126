"""Env-step throughput: env steps/s of random actions over a num_envs sweep (no policy, auto-reset
inside the timed region), median and 95% interval over worker processes. Imports stay inside the
methods: loading a record module imports this package, and that must stay cheap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuenv.modes.base import Headline, Mode, Plan, StepRate


class Throughput(Mode):
    name = "env-step-throughput"
    suite_kind = "throughput"
    process_word = "process"
    stop_after_failure = True

    def load_suite(self, path: Path, data: dict, registry: Any, *, seeds: int | None) -> Any:
        from gpuenv.errors import UserError
        from gpuenv.modes.throughput.suite import load_suite

        if seeds is not None:
            raise UserError(f"--seeds applies to time-to-reward suites only; '{path.stem}' is a throughput suite")
        return load_suite(path, data, registry)

    def plan(self, suite: Any, registry: Any, *, backends: list[str] | None, tasks: list[str] | None,
             num_envs: list[int] | None) -> Plan:
        from gpuenv.modes.throughput.suite import plan

        return plan(suite, registry, backends=backends, tasks=tasks, num_envs=num_envs)

    def process_spec(self, item: Any, index: int, out_dir: Path) -> dict:
        from gpuenv.modes.throughput.phases import spec_for

        m = item.measure
        return {
            "mode": self.name,
            "case": item.case.to_dict(),
            "settings": {"min_time_s": m.min_time_s, "values": m.values, "warmups": m.warmups},
            "memory_limit_mib": m.memory_limit_mib,
            "phases": spec_for(item.case, m.phases, m.phase_ppo),
        }

    def worker(self, spec: dict, keep: Callable[[dict], None] = lambda result: None) -> dict:
        from gpuenv.modes.throughput.worker import measure_case

        return measure_case(spec, keep=keep)

    def build_record(self, item: Any, outcomes: list, ctx: Any) -> dict:
        from gpuenv.modes.throughput.build import build_record

        return build_record(item, outcomes, ctx)

    def step_rate(self, record: dict) -> StepRate | None:
        if record["status"] != "ok":
            return None
        s = record["summary"]
        e = s["env_steps_per_s"]
        return StepRate(e["median"], e["ci_low"], e["ci_high"], record["case"]["num_envs"],
                        float(s.get("startup_s_median") or 0) + float(s.get("compile_s_median") or 0))

    def phase_rows(self, record: dict) -> list[list[str]]:
        from gpuenv.modes.throughput.report import case_phase_rows

        return case_phase_rows(record)

    def reproduce_args(self, record: dict) -> list[str]:
        return [*super().reproduce_args(record), "--num-envs", str(record["case"]["num_envs"])]

    def headline(self, record: dict) -> Headline:
        s = record["summary"]["env_steps_per_s"]
        return Headline(s["median"], s["ci_low"], s["ci_high"], "env steps/s", higher_is_better=True)

    def ratio(self, new: dict, old: dict) -> tuple[float, float, float]:
        from gpuenv.measure import stats
        from gpuenv.modes.throughput.report import _groups

        s = stats.ratio(_groups(new), _groups(old))
        return s.median, s.ci_low, s.ci_high

    def progress_line(self, record: dict) -> str:
        from gpuenv.format import fmt_rate

        return f"{fmt_rate(record['summary']['env_steps_per_s']['median'])} env steps/s"

    def worker_memories(self, record: dict) -> list[dict]:
        return [(p.get("resources") or {}).get("memory") or {} for p in record.get("processes") or []]

    def asv_benchmark(self, record: dict) -> str:
        return f"gpuenv_records.throughput_{record['case']['task']}.track_seconds_per_million_env_steps"

    def asv_value(self, record: dict) -> float:
        return 1e6 / record["summary"]["env_steps_per_s"]["median"]


MODE = Throughput()
