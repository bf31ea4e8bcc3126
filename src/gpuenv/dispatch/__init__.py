"""`gpuenv dispatch`: a suite's cases across a cluster (Slurm through submitit, or submitit's local
executor), one array task per batch of cases, records into one shared run directory.

    plan (the mode's own plan)  ->  batches of case keys, one backend per batch (one image per task)
    submit: submitit map_array   ->  one sbatch array (`--array 0-N%K`); each task runs
            `gpuenv bench --case KEY ... --run-id RUN --out DIR` on its node, in the backend's
            container where asked (docker / apptainer / pyxis), with the scheduler's facts in
            GPUENV_SCHEDULER, which every record carries as where.scheduler
    wait: records arriving per task, the scheduler's state per task (rich progress)
    finish: a case whose task ended (cancelled, preempted, time limit, node failure) without its
            record gets a failed record with the scheduler's state (kind `scheduler`); then the
            tables `gpuenv bench` prints, from the records

The state of a dispatch (job id, tasks, options) is RUN_DIR/dispatch.state (JSON, not a record):
`--attach JOB` picks a job up again after the submitting command died, `--rerun RUN_DIR` submits
only the cases with no ok record, into the same run directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from gpuenv.dispatch.node import bench_args, command_line, image_ref, run_task, scheduler_facts
from gpuenv.dispatch.state import (
    CONTAINERS,
    EXECUTORS,
    IMAGE_REF,
    JOB_ID,
    STATE,
    Dispatch,
    Options,
    Task,
    batches,
    find_job,
    now_utc,
    slot,
)
from gpuenv.dispatch.submit import submit, task_image, task_spec, version_sets
from gpuenv.dispatch.track import TERMINAL, _states, _task_log, array_ids, finish, latest_ok, live, sacct_rows, wait
from gpuenv.errors import UserError

__all__ = ["CONTAINERS", "EXECUTORS", "IMAGE_REF", "JOB_ID", "STATE", "TERMINAL", "Dispatch", "Options", "Task", "_states",
           "_task_log", "array_ids", "batches", "bench_args", "command_line", "existing", "finish", "find_job", "image_ref",
           "latest_ok", "live", "new", "now_utc", "rerun_tasks", "run_task", "sacct_rows", "scheduler_facts", "slot", "submit",
           "task_image", "task_spec", "version_sets", "wait"]


def existing(out: Path, attach: str | None, rerun: Path | None) -> tuple[Dispatch, Any, Any]:
    """(dispatch, mode, plan) of `--attach JOB` (found under `out`) or `--rerun RUN_DIR`."""
    from gpuenv.registry import default_registry
    from gpuenv.suites import load_any

    if attach and rerun:
        raise UserError("--attach and --rerun are two different things; pass one")
    run_dir = find_job(out, attach) if attach else Path(str(rerun))
    d = Dispatch.load(run_dir)
    registry = default_registry()
    mode, s = load_any(d.suite, registry)
    return d, mode, mode.plan(s, registry, **d.filters)


def new(suite: str, filters: dict, options: Options, out: Path, *, sweep: str | None, pins: list[str], dry_run: bool,
        console: Any) -> tuple[Dispatch, Any, Any]:
    """(dispatch, mode, plan) of a new dispatch: its tasks batched from the plan (once per version set
    with --sweep, each set's environment built here first), not yet submitted."""
    from gpuenv.registry import default_registry
    from gpuenv.results.store import new_run_id
    from gpuenv.suites import load_any

    options.check()
    if options.container != "none" and (suite.endswith(".toml") or "/" in suite):
        raise UserError(f"--container {options.container}: pass a suite by name (the image has the same suites/); "
                        f"a file like {suite} is not inside the container")
    registry = default_registry()
    mode, s = load_any(suite, registry)
    backends = filters.get("backends")
    if sweep:
        from gpuenv.history.versionsets import parse_spec, swept_backend

        package = parse_spec(sweep)[0]
        if options.container != "none":
            raise UserError("--sweep runs each version set in its own environment on a shared filesystem: use --container none")
        if backends and len(backends) > 1:
            raise UserError("--sweep builds one environment per version set for one backend: pass one --backend")
        filters = {**filters, "backends": backends or [swept_backend(package, None)]}
    plan = mode.plan(s, registry, **filters)
    if not plan.items:
        raise UserError(f"nothing to dispatch in suite '{plan.suite}' with these filters; see `gpuenv list`")
    if options.executor == "slurm" and not dry_run and not shutil.which("sbatch"):
        raise UserError("--executor slurm: sbatch is not on PATH (no Slurm client here); --executor local runs the same tasks on this machine")
    sets: list[tuple[str, str | None, dict | None]] = [("", None, None)]
    if sweep:
        sets = version_sets(sweep, pins, registry.parse(filters["backends"][0])[0].name, console)
    run_id = new_run_id()
    tasks = [Task(i, b, keys, version_set=label, python=py, tags=tags)
             for i, (label, py, tags, b, keys) in enumerate(
                 (label, py, tags, b, keys) for label, py, tags in sets for b, keys in batches(plan.items, options.cases_per_task))]
    return Dispatch(run_id, suite, str(out / run_id), options, tasks, now_utc(), filters=filters), mode, plan


def rerun_tasks(d: Dispatch, plan: Any) -> list[Task]:
    """The tasks that run again the cases of `d` with no ok record (none: nothing to rerun), added
    to `d`; UserError while earlier tasks may still write, or where a sweep's environment is gone."""
    still = live(d)
    if still:
        raise UserError(f"{d.run_dir}: task(s) {', '.join(str(t.index) for t in still)} may still write records; "
                        f"`gpuenv dispatch --attach {d.job_id} --out {d.run_dir.parent}` waits for them, then --rerun")
    gone = sorted({t.python for t in d.tasks if t.python and not Path(t.python).exists()})
    if gone:
        raise UserError(f"{d.run_dir}: the sweep's environment {gone[0]} is gone (gpuenv's cache was cleared); "
                        "dispatch the sweep again")
    items = {item.key: item for item in plan.items}
    have = latest_ok(d)
    new_tasks: list[Task] = []
    for first in {t.version_set: t for t in reversed(d.tasks)}.values():  # each version set's environment once
        missing = [it for k, it in items.items() if (first.version_set, k) not in have and any(k in t.cases for t in d.tasks)]
        new_tasks += [Task(len(d.tasks) + len(new_tasks) + i, b, keys, version_set=first.version_set, python=first.python, tags=first.tags)
                      for i, (b, keys) in enumerate(batches(missing, d.options.cases_per_task))]
    if new_tasks:
        d.tasks += new_tasks
        d.reruns.append(now_utc())
    return new_tasks
