"""PPO time-to-reward: wall-clock and env steps until a deterministic evaluation reaches a return
threshold, one worker process per seed, IQM and 95% interval over seeds. Imports stay inside the
methods: loading a record module imports this package, and that must stay cheap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuenv.modes.base import Headline, Mode, Plan


class TimeToReward(Mode):
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

        return trainers(registry)[item.case.trainer][0].unavailable_reason()

    def process_spec(self, item: Any, index: int, out_dir: Path) -> dict:
        tb = out_dir / "tensorboard" / item.case.key / f"seed{index}"
        return {"mode": self.name, "case": item.case.to_dict(), "seed": index, "tb_dir": str(tb)}

    def worker(self, spec: dict, keep: Callable[[dict], None] = lambda result: None) -> dict:  # keep: each seed is its own worker
        from gpuenv.modes.ttr.train import run_training

        return run_training(spec)

    def build_record(self, item: Any, outcomes: list, ctx: Any) -> dict:
        from gpuenv.modes.ttr.build import build_record

        return build_record(item, outcomes, ctx)

    def training_rates(self, record: dict) -> list[float]:
        if record["status"] != "ok":
            return []
        return sorted(x["env_steps_to_threshold"] / x["train_time_to_threshold_s"] for x in record.get("runs") or []
                      if x.get("env_steps_to_threshold") and x.get("train_time_to_threshold_s"))

    def headline(self, record: dict) -> Headline:
        t = record["summary"]["time_to_threshold_s"]
        return Headline(t["iqm"], t["ci_low"], t["ci_high"], "s to reward", higher_is_better=False)

    def ratio(self, new: dict, old: dict) -> tuple[float, float, float]:
        from gpuenv.modes.ttr.report import iqm_ratio

        return iqm_ratio(new, old)

    def progress_line(self, record: dict) -> str:
        from gpuenv.format import fmt_s

        sm = record["summary"]
        t = sm["time_to_threshold_s"]
        return f"{sm['reached']}/{sm['seeds']} reached {record['case']['threshold']:g}; wall s IQM {fmt_s(t['iqm'])}"

    def missed(self, record: dict) -> bool:
        return record["status"] == "ok" and record["summary"]["passed"] is False

    def worker_memories(self, record: dict) -> list[dict]:
        return [r.get("memory") or {} for r in record.get("runs") or []]

    def asv_benchmark(self, record: dict) -> str:
        return f"gpuenv_records.ppo_{record['case']['task']}.track_seconds_to_reward"


MODE = TimeToReward()
