"""Env-step throughput: env steps/s of random actions over a num_envs sweep (no policy, auto-reset
inside the timed region), median and 95% interval over worker processes. Imports stay inside the
methods: loading a record module imports this package, and that must stay cheap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.modes.base import Headline, Mode, PhaseRate, Plan, StepRate

if TYPE_CHECKING:
    from gpuenv.modes.throughput.record import ThroughputRecord


class Throughput(Mode["ThroughputRecord"]):
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

    def with_measure(self, item: Any, settings: dict[str, Any], where: str) -> Any:
        from dataclasses import replace

        return replace(item, measure=replace(item.measure, **settings).check(where))

    def describe(self, item: Any) -> str:
        m = item.measure
        phases = f"; phases {', '.join(m.phases)}" if m.phases else ""
        return (f"{m.processes} processes x {m.values} values of at least {m.min_time_s:g} s, {m.warmups} warmup(s), "
                f"timeout {m.timeout_s:g} s{phases}")

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

    def step_rate(self, record: ThroughputRecord) -> StepRate | None:
        if record.status != "ok":
            return None
        s = record.ok_summary
        e = s.env_steps_per_s
        return StepRate(e.median, e.ci_low, e.ci_high, record.case.num_envs, s.startup_s_median + s.compile_s_median,
                        record.what.physics.physics_steps_per_env_step)

    def phase_rows(self, record: ThroughputRecord) -> list[list[str]]:
        from gpuenv.modes.throughput.report import case_phase_rows

        return case_phase_rows(record)

    def phase_ratios(self, record: ThroughputRecord) -> dict[str, tuple[float, float, float]]:
        phases = record.summary.phases if record.summary else {}
        return {name: (r.median, r.ci_low, r.ci_high) for name, p in phases.items() if (r := p.vs_step_reset)}

    def phase_rates(self, record: ThroughputRecord) -> dict[str, PhaseRate]:
        phases = record.summary.phases if record.status == "ok" and record.summary else {}
        return {name: PhaseRate(e.median, e.ci_low, e.ci_high, record.case.num_envs, str(p.details.get("definition", "")),
                                str(p.details.get("learner", "")))
                for name, p in phases.items() if (e := p.env_steps_per_s)}

    def device(self, record: ThroughputRecord) -> str | None:
        return record.what.device

    def process_rows(self, record: ThroughputRecord) -> list[list[str]]:
        from gpuenv.format import fmt_rate

        rows = []
        for p in record.processes:
            startup = (p.model_extra or {}).get("startup_s")
            rows.append([str(p.index), ", ".join(fmt_rate(v) for v in p.env_steps_per_s) or "-",
                         f"{startup:.1f}" if isinstance(startup, int | float) else "-",
                         p.failure.reason if p.failure else "ok"])
        return rows

    def page_rows(self, record: ThroughputRecord) -> list[tuple[str, Any]]:
        import json

        w = record.what
        return [("device", w.device), ("reset mode", w.reset_mode), ("physics", json.dumps(w.physics.model_dump()))]

    def reproduce_args(self, record: ThroughputRecord) -> list[str]:
        return [*super().reproduce_args(record), "--num-envs", str(record.case.num_envs)]

    def headline(self, record: ThroughputRecord) -> Headline:
        s = record.ok_summary.env_steps_per_s
        return Headline(s.median, s.ci_low, s.ci_high, "env steps/s", higher_is_better=True)

    def process_values(self, record: ThroughputRecord) -> dict[int, float]:
        from gpuenv.measure import stats

        out = {}
        for p in record.processes:
            if p.failure is None and (m := stats.upper_median(p.env_steps_per_s)) is not None:
                out[p.index] = m
        return out

    def ratio(self, new: ThroughputRecord, old: ThroughputRecord) -> tuple[float, float, float]:
        from gpuenv.measure import stats

        s = stats.ratio(new.rate_groups(), old.rate_groups())
        return s.median, s.ci_low, s.ci_high

    def progress_line(self, record: ThroughputRecord) -> str:
        from gpuenv.format import fmt_rate

        return f"{fmt_rate(record.ok_summary.env_steps_per_s.median)} env steps/s"

    def worker_memories(self, record: ThroughputRecord) -> list[dict]:
        return [p.resources.get("memory") or {} for p in record.processes]

    def asv_benchmark(self, record: ThroughputRecord) -> str:
        return f"gpuenv_records.throughput_{record.case.task}.track_seconds_per_million_env_steps"

    def asv_value(self, record: ThroughputRecord) -> float:
        return 1e6 / record.ok_summary.env_steps_per_s.median


MODE = Throughput()
