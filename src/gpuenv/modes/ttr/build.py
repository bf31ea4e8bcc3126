"""A time-to-reward case's seeds (one worker process each) -> its record.

A seed that diverges, crashes or hangs becomes a failed run in the record; the other seeds go on.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from gpuenv.measure import stats
from gpuenv.modes.ttr.suite import RunSpec, TtrItem, trainers
from gpuenv.registry import default_registry

if TYPE_CHECKING:
    from gpuenv.modes.base import Outcome, RecordContext

MODE_NAME = "time-to-reward"
VALUE_KEYS = ("time_to_threshold_s", "train_time_to_threshold_s", "env_steps_to_threshold")


def memory_summary(memories: list[dict], num_envs: int) -> dict:
    """Median over seeds of each run's host (PSS of the process tree) and device peaks; null where
    nothing measured them (older records, JAX on a CPU), never zero."""
    host = stats.upper_median(m.get("tree_pss_peak_mib") for m in memories)
    device = stats.upper_median(m.get("device_peak_mib") for m in memories)
    return {
        "host_memory_mib": host,
        "host_memory_mib_per_env": round(host / num_envs, 2) if host else None,
        "device_peak_mib": device,
        "device_peak_mib_per_env": round(device / num_envs, 3) if device else None,
    }


def summarize_runs(runs: list[dict], run_spec: RunSpec, num_envs: int = 1) -> dict:
    done = [r for r in runs if r["status"] in ("reached", "censored")]
    reached = [r for r in done if r["status"] == "reached"]
    failed = [r for r in runs if r["status"] == "failed"]
    out: dict = {
        "seeds": len(runs),
        "reached": len(reached),
        "censored": len(done) - len(reached),
        "failed": len(failed),
        "success_rate": len(reached) / len(runs) if runs else 0.0,
        "pass_min_seeds": run_spec.pass_min_seeds,
        "passed": len(reached) >= run_spec.pass_min_seeds,
        "warnings": [],
    }
    if done:
        for key in VALUE_KEYS:
            out[key] = stats.aggregate([r[key] for r in done]).to_dict()
        for key in ("startup_s", "compile_s", "eval_s"):
            out[f"{key}_median"] = stats.upper_median(r[key] for r in done)
        out.update(memory_summary([r.get("memory") or {} for r in done], num_envs))
    if len(done) > len(reached):
        out["warnings"].append(
            f"{len(done) - len(reached)} run(s) censored at their budget: their values are lower bounds, so the IQM is too"
        )
    if failed:
        out["warnings"].append(f"{len(failed)} run(s) failed (not in the IQM; counted as misses in the success rate)")
    if len(runs) < 5:
        out["warnings"].append(f"only {len(runs)} seeds: the interval is wide by construction")
    return out


def runs_of(outcomes: list[Outcome]) -> list[dict]:
    """One run per seed: the trainer's result, or the failure that stopped it."""
    runs = []
    for o in outcomes:
        if o.result is not None:
            r = {k: v for k, v in o.result.items() if k != "ok"}
            runs.append({"status": r.pop("outcome"), "failure": None, **r})
        else:
            runs.append({"seed": o.index, "status": "failed", "failure": o.failure})
    return runs


def build_record(item: TtrItem, outcomes: list[Outcome], ctx: RecordContext) -> dict:
    case, run_spec = item.case, item.run
    registry = default_registry()
    native = registry.native(case.task, case.backend)
    runs = runs_of(outcomes)
    done = [r for r in runs if r["status"] in ("reached", "censored")]
    status = ctx.status(bool(done))
    first = next((o for o in outcomes if o.failure), None)
    return {
        **ctx.header(case_key=case.key, status=status, mode=MODE_NAME),
        "case": case.to_dict(),
        "what": {
            "native_env_id": native.env_id,
            "trainer": trainers(registry)[case.trainer][0].description,
            "catalogue": native.to_dict(),
            "details": done[0]["details"] if done else {},
            "protocol": (
                "clock from before imports and env build; deterministic eval on separate envs every "
                f"{case.eval_every_steps} env steps, mean of {case.eval_episodes} episodes; stop at the first "
                "eval >= threshold, else censored at the step/time budget"
            ),
        },
        "where": ctx.where,
        "settings": asdict(run_spec),
        "runs": runs,
        "summary": summarize_runs(runs, run_spec, case.num_envs) if status == "ok" else None,
        "failure": None if status == "ok" else ctx.failure([first] if first else []),
    }
