"""Runs time-to-reward cases: one fresh worker process per seed, one record per case.

A seed that diverges, crashes or hangs becomes a failed run in the record; the other seeds go on.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from gpuenv.measure import stats
from gpuenv.measure.system import provenance
from gpuenv.ppo.suite import TRAINERS, PpoCase, RunSpec
from gpuenv.ppo.train import write_tb_path
from gpuenv.results import schema
from gpuenv.run.orchestrator import Event, finish_case, run_process
from gpuenv.tasks import get_task

MEASUREMENT_MODE = schema.TIME_TO_REWARD
VALUE_KEYS = ("time_to_threshold_s", "train_time_to_threshold_s", "env_steps_to_threshold")


def summarize_runs(runs: list[dict], run_spec: RunSpec) -> dict:
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
            vals = sorted(r[key] for r in done)
            out[f"{key}_median"] = vals[len(vals) // 2]
    if len(done) > len(reached):
        out["warnings"].append(
            f"{len(done) - len(reached)} run(s) censored at their budget: their values are lower bounds, so the IQM is too"
        )
    if failed:
        out["warnings"].append(f"{len(failed)} run(s) failed (not in the IQM; counted as misses in the success rate)")
    if len(runs) < 5:
        out["warnings"].append(f"only {len(runs)} seeds: the interval is wide by construction")
    return out


def build_record(
    case: PpoCase,
    runs: list[dict],
    run_spec: RunSpec,
    *,
    suite: str,
    run_id: str,
    where: dict,
    interrupted: bool,
    broken: str | None = None,
) -> dict:
    native = get_task(case.task).native(case.backend)
    done = [r for r in runs if r["status"] in ("reached", "censored")]
    status = "interrupted" if interrupted else ("ok" if done and not broken else "failed")
    failure = None
    if status != "ok":
        first = next((r for r in runs if r["status"] == "failed"), None)
        reason = first["failure"] if first else "no run finished"
        failure = {
            "reason": "interrupted by the user (Ctrl-C)" if interrupted else (broken or reason),
            "seed": first["seed"] if first else None,
            "stderr_tail": first.get("stderr_tail", "") if first else "",
        }
    return {
        **schema.header(run_id=run_id, case_key=case.key, suite=suite, status=status, mode=MEASUREMENT_MODE),
        "case": case.to_dict(),
        "what": {
            "native_env_id": native.env_id,
            "trainer": TRAINERS[case.trainer].description,
            "catalogue": native.to_dict(),
            "details": done[0]["details"] if done else {},
            "protocol": (
                "clock from before imports and env build; deterministic eval on separate envs every "
                f"{case.eval_every_steps} env steps, mean of {case.eval_episodes} episodes; stop at the first "
                "eval >= threshold, else censored at the step/time budget"
            ),
        },
        "where": where,
        "settings": asdict(run_spec),
        "runs": runs,
        "summary": summarize_runs(runs, run_spec) if status == "ok" else {},
        "failure": failure,
    }


def run_ppo_plan(
    cases: list[PpoCase],
    run_spec: RunSpec,
    *,
    suite: str,
    run_id: str,
    out_dir: Path,
    on_event: Event = lambda kind, data: None,
) -> list[tuple[dict, Path]]:
    where = provenance()
    written = []
    for i, case in enumerate(cases):
        on_event("case_start", {"index": i, "case": case})
        runs: list[dict] = []
        interrupted = False
        with tempfile.TemporaryDirectory(prefix="gpuenv-ppo-") as tmp:
            try:
                for k in range(run_spec.seeds):
                    on_event("process_start", {"index": i, "process": k, "of": run_spec.seeds})
                    spec = {"mode": "ppo", "case": case.to_dict(), "seed": k, "tb_dir": write_tb_path(out_dir, case.key, k)}
                    o = run_process(spec, k, run_spec.timeout_s, Path(tmp))
                    if o.result is not None:
                        r = dict(o.result)
                        r.pop("ok", None)
                        runs.append({"status": r.pop("outcome"), "failure": None, **r})
                    else:
                        runs.append({"seed": k, "status": "failed", "failure": o.failure, "stderr_tail": o.stderr_tail})
                    on_event("run_done", {"index": i, "run": runs[-1]})
            except KeyboardInterrupt:
                interrupted = True
        kw = {"suite": suite, "run_id": run_id, "where": where, "interrupted": interrupted}
        try:
            record = build_record(case, runs, run_spec, **kw)
        except Exception as e:  # noqa: BLE001 - a bug in summarising must not lose the runs
            record = build_record(case, runs, run_spec, **kw, broken=f"gpuenv could not summarise this case: {e!r}")
        finish_case(record, out_dir=out_dir, index=i, written=written, on_event=on_event, interrupted=interrupted)
    return written
