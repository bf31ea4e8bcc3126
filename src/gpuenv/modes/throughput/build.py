"""A throughput case's worker outcomes -> its record (summary with a 95% interval)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from gpuenv.backends.base import ACTION_DISTRIBUTION
from gpuenv.measure import stats
from gpuenv.registry import default_registry

if TYPE_CHECKING:
    from gpuenv.modes.throughput.suite import PlannedCase
    from gpuenv.run.runner import Outcome, RecordContext

MODE_NAME = "env-step-throughput"


def summarize_case(results: list[dict], frame_skip: int, has_physics: bool, num_envs: int = 1) -> dict:
    groups = [r["env_steps_per_s"] for r in results]
    s = stats.summarize(groups)
    warnings = []
    if s.n_processes < 3:
        warnings.append(f"only {s.n_processes} process(es): interval is not trustworthy")
    if s.wide:
        warnings.append(f"wide interval: +-{100 * s.rel_half_width:.1f}% of the median (noisy machine?)")
    if any(r.get("recalibrated") for r in results):
        warnings.append("calibration ended on a one-off slow call and was redone (late recompile?)")
    compile_cold = [r["phases_s"]["compile"] for r in results if r["compile_cache"] == "miss"]
    compile_warm = [r["phases_s"]["compile"] for r in results if r["compile_cache"] == "hit"]
    startup = sorted(r["startup_s"] for r in results)
    bottlenecks = [r["resources"].get("bottleneck") for r in results]
    rss = sorted(m for m in (r["resources"].get("memory", {}).get("tree_pss_peak_mib") for r in results) if m)
    host = rss[len(rss) // 2] if rss else None
    return {
        **energy_per_m_steps(results),
        "env_steps_per_s": s.to_dict(),
        "frames_per_s_median": s.median * frame_skip,
        "physics_steps_per_s_median": s.median * frame_skip if has_physics else None,
        "startup_s_median": startup[len(startup) // 2],
        "compile_s_median": sorted(r["phases_s"]["compile"] for r in results)[len(results) // 2],
        "compile_s_cold": compile_cold,
        "compile_s_warm": compile_warm,
        "cpu_percent_mean": [r["resources"].get("cpu_percent_mean") for r in results],
        "bottleneck": max(set(bottlenecks), key=bottlenecks.count),
        "host_memory_mib": host,
        "host_memory_mib_per_env": round(host / num_envs, 2) if host else None,
        "device_peak_mib": None,  # not measured yet: absent, never zero
        "warnings": warnings,
    }


def energy_per_m_steps(results: list[dict]) -> dict:
    """Joules per million env steps of the timed values, median over processes; null where the
    machine has no counter (never zero)."""
    out: dict = {}
    for side in ("cpu", "gpu"):
        per = []
        for r in results:
            j = (r["resources"].get("energy") or {}).get(f"{side}_joules")
            steps = r["steps_per_value"] * len(r["value_s"])
            if j is not None and steps:
                per.append(j / steps * 1e6)
        per.sort()
        out[f"{side}_j_per_m_steps"] = round(per[len(per) // 2], 3) if per else None
    return out


def build_record(planned: PlannedCase, outcomes: list[Outcome], ctx: RecordContext) -> dict:
    case = planned.case
    native = default_registry().native(case.task, case.backend)
    done = [o.result for o in outcomes if o.result is not None]
    failed = any(o.failure for o in outcomes)
    status = ctx.status(bool(done) and not failed)
    if status != "ok":
        done = []  # no summary for a failed case; its finished processes stay in processes[]
    facts: dict = next((o.result["facts"] for o in outcomes if o.result is not None), {})
    physics = {
        "control_dt_s": native.control_dt_s,
        "frame_skip": native.frame_skip,
        "physics_dt_s": native.physics_dt_s,
        "episode_steps": native.episode_steps,
    }
    summary = summarize_case(done, native.frame_skip, native.physics_dt_s is not None, case.num_envs) if done else None
    processes = []
    for o in outcomes:
        result = {k: v for k, v in (o.result or {}).items() if k not in ("ok", "facts")}
        processes.append({"index": o.index, "failure": o.failure, **result})
    return {
        **ctx.header(case_key=case.key, status=status, mode=MODE_NAME),
        "case": case.to_dict(),
        "what": {
            "native_env_id": facts.get("native_env_id", native.env_id),
            "physics": physics,
            "obs_shape": facts.get("obs_shape"),
            "action_space": facts.get("action_space"),
            "action_distribution": ACTION_DISTRIBUTION,
            "reset_mode": facts.get("reset_mode", "unknown (no process finished)"),
            "device": facts.get("device"),
            "details": facts.get("details", {}),
            "catalogue": native.to_dict(),
        },
        "where": ctx.where,
        "settings": asdict(planned.measure),
        "processes": processes,
        "summary": summary,
        "failure": None if status == "ok" else ctx.failure(outcomes),
    }
