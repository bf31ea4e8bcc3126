"""A throughput case's worker outcomes -> its record (summary with a 95% interval)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from gpuenv.backends.base import ACTION_DISTRIBUTION
from gpuenv.measure import stats
from gpuenv.registry import default_registry

if TYPE_CHECKING:
    from gpuenv.modes.base import Outcome, RecordContext
    from gpuenv.modes.throughput.suite import PlannedCase

MODE_NAME = "env-step-throughput"


def summarize_case(results: list[dict], frame_skip: int, physics_steps: int | None, num_envs: int = 1,
                   episode_steps: int | None = None, timeout_s: float = 0.0) -> dict:
    """physics_steps: physics (sub)steps per env step as the backend ran them (None: no physics figure)."""
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
    bottlenecks = [r["resources"].get("bottleneck") for r in results]
    host = stats.upper_median(r["resources"].get("memory", {}).get("tree_pss_peak_mib") for r in results)
    device = stats.upper_median(r["resources"].get("memory", {}).get("device_peak_mib") for r in results)
    return {
        **energy_per_m_steps(results),
        "env_steps_per_s": s.to_dict(),
        "frames_per_s_median": s.median * frame_skip,
        "physics_steps_per_s_median": s.median * physics_steps if physics_steps else None,
        "startup_s_median": stats.upper_median(r["startup_s"] for r in results),
        "compile_s_median": stats.upper_median(r["phases_s"]["compile"] for r in results),
        "compile_s_cold": compile_cold,
        "compile_s_warm": compile_warm,
        "cpu_percent_mean": [r["resources"].get("cpu_percent_mean") for r in results],
        "bottleneck": max(set(bottlenecks), key=bottlenecks.count),
        "host_memory_mib": host,
        "host_memory_mib_per_env": round(host / num_envs, 2) if host else None,
        "device_peak_mib": device,  # null where nothing reports it (JAX on a CPU): absent, never zero
        "device_peak_mib_per_env": round(device / num_envs, 3) if device else None,
        "phases": summarize_phases(results, groups, s, episode_steps, timeout_s),
        "warnings": warnings,
    }


def summarize_phases(results: list[dict], main_groups: list[list[float]], main: stats.Summary,
                     episode_steps: int | None, timeout_s: float = 0.0) -> dict:
    """Per extra phase: its rate over the processes with its ratio to the case's own figure (both
    bootstrapped over all the case's processes), or the first process's reason for having none."""
    from gpuenv.modes.throughput.phases import EXTRA, unfinished

    out: dict = {}
    for name in EXTRA:
        per = []
        for r in results:
            p = r.get("phases", {}).get(name)
            if p is not None:  # a worker that died in the phases: its unfinished phase says how
                per.append(unfinished(p, r.get("incomplete"), timeout_s))
        if not per:
            continue
        measured = [p for p in per if p.get("env_steps_per_s")]
        if not measured:
            first = per[0]
            out[name] = {k: first[k] for k in ("absent", "failed", "not_finished_within_s") if first.get(k)}
            continue
        groups = [p["env_steps_per_s"] for p in measured]
        s = stats.summarize(groups)
        vs = stats.ratio(groups, main_groups)
        first = measured[0]
        entry = {
            "env_steps_per_s": s.to_dict(),
            "vs_step_reset": {"median": vs.median, "ci_low": vs.ci_low, "ci_high": vs.ci_high},
            "how": first["how"],
            "chunk_steps": first["chunk_steps"],
            "warmups": first["warmups"],
            "details": first.get("details", {}),
        }
        if len(measured) < len(per):  # some processes measured it, some could not: say so
            missing = next(p for p in per if not p.get("env_steps_per_s"))
            if missing.get("not_finished_within_s"):
                entry["not_finished_within_s"] = missing["not_finished_within_s"]
            else:
                entry["failed"] = missing.get("failed") or missing.get("absent")
        if name == "step" and episode_steps:
            entry["reset_cost_us"] = episode_steps * (1 / main.median - 1 / s.median) * 1e6
            entry["reset_cost_within_noise"] = not (main.ci_high < s.ci_low or s.ci_high < main.ci_low)
        out[name] = entry
    return out


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
        mid = stats.upper_median(per)
        out[f"{side}_j_per_m_steps"] = None if mid is None else round(mid, 3)
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
    reported = facts.get("physics_steps")
    physics: dict[str, Any] = {
        "control_dt_s": native.control_dt_s,
        "frame_skip": native.frame_skip,
        "physics_dt_s": native.physics_dt_s,
        "episode_steps": native.episode_steps,
        # what the backend ran, not the catalogue's frame_skip; none where frames are not physics (Atari)
        "physics_steps_per_env_step": reported if native.physics_dt_s is not None else None,
    }
    summary = (summarize_case(done, native.frame_skip, physics["physics_steps_per_env_step"], case.num_envs, native.episode_steps,
                              planned.measure.timeout_s) if done else None)
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
        "settings": {**asdict(planned.measure), "phase_ppo": dict(planned.measure.phase_ppo)},
        "processes": processes,
        "summary": summary,
        "failure": None if status == "ok" else ctx.failure(outcomes),
    }
