"""Following a dispatch: the scheduler's state per task (sacct, or the local processes), the records
as they arrive, and, when tasks end without their record, a failed record with the scheduler's
state."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from gpuenv.dispatch.state import Dispatch, Task, _epoch, slot
from gpuenv.dispatch.submit import _submit_local, task_image
from gpuenv.errors import UserError
from gpuenv.escape import markup
from gpuenv.results.schema import Record

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "REVOKED", "FINISHED", "INTERRUPTED"}


def sacct_rows(ids: list[str]) -> dict[str, tuple[str, str]]:
    """{array task id: (state, "STATE, reason R, on NODE")} from Slurm's accounting."""
    cmd = ["sacct", "-n", "-P", "-X", "-o", "JobID,State,Reason,NodeList", "-j", ",".join(ids)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise UserError("sacct is not on PATH: gpuenv dispatch --executor slurm reads task states from Slurm's accounting") from None
    except subprocess.TimeoutExpired:
        raise UserError("sacct did not answer within 60 s (slurmdbd down?); `gpuenv dispatch --attach JOB` waits again later") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"sacct failed ({last}): task states come from Slurm's accounting (slurmdbd); "
                        "`gpuenv dispatch --attach JOB` waits again once it answers")
    rows = {}
    for line in r.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 4:
            job, state, reason, nodes = parts[:4]
            text = state + (f", reason {reason}" if reason not in ("", "None") else "") + (f", on {nodes}" if nodes and nodes != "None assigned" else "")
            for one in array_ids(job):  # tasks not started yet share a row: 1234_[1-4%1]
                rows[one] = (state.split()[0] if state else "UNKNOWN", text)
    return rows


def array_ids(job: str) -> list[str]:
    """'1234_[1-3,7%2]' -> ['1234_1', '1234_2', '1234_3', '1234_7']; anything else as it is."""

    m = re.fullmatch(r"(\d+)_\[([0-9,\-]+)(?:%\d+)?\]", job)
    if not m:
        return [job]
    out = []
    for part in m.group(2).split(","):
        a, _, b = part.partition("-")
        out += [f"{m.group(1)}_{i}" for i in range(int(a), int(b or a) + 1)]
    return out


def _states(d: Dispatch) -> dict[int, tuple[str, str]]:
    """(state, reason) per submitted task, from sacct (Slurm) or the local job's files and process."""
    out: dict[int, tuple[str, str]] = {}
    submitted = [t for t in d.tasks if t.job_id]
    if not submitted:
        return out
    if d.options.executor == "slurm":
        rows = sacct_rows(sorted({(t.job_id or "").split("_")[0] for t in submitted}))
        for t in submitted:
            out[t.index] = rows.get(t.job_id or "", ("PENDING", "not in sacct yet"))
        return out
    import psutil

    for t in submitted:
        since = _epoch(t.since)
        if any(p.stat().st_mtime >= since for p in d.folder.glob(f"{t.job_id}_*_result.pkl")):  # this task's outcome: done
            out[t.index] = ("FINISHED", "finished")
            continue
        try:  # a pid can be reused: only the submitit controller of this dispatch counts
            p = psutil.Process(int(t.job_id or 0))
            alive = p.status() != psutil.STATUS_ZOMBIE and str(d.folder) in " ".join(p.cmdline())
        except (psutil.Error, ValueError):
            alive = False
        out[t.index] = ("RUNNING", "running") if alive else ("FINISHED", "process ended without a result")
    return out


def _records(d: Dispatch) -> list[Record]:
    from gpuenv.results.store import load_dir

    records, _ = load_dir(d.run_dir)
    return sorted(records, key=lambda r: r.created_utc)


def by_task(d: Dispatch, records: list[Record]) -> dict[str, dict[str, Record]]:
    """{task token: {case key: its record}}: records belong to the task whose token they carry (job
    ids repeat: local pids). The failed record the dispatcher wrote for a task stands over that
    task's own interrupted one, whichever was written first."""
    out: dict[str, dict[str, Record]] = {}
    for r in records:
        token = r.where.scheduler.task if r.where.scheduler else None
        if not token:
            continue
        mine = out.setdefault(token, {})
        old = mine.get(r.case_key)
        if old is not None and old.failure is not None and old.failure.kind == "scheduler" and r.status == "interrupted":
            continue
        mine[r.case_key] = r
    return out


def current(d: Dispatch, records: list[Record]) -> dict[tuple[str, str], Record]:
    """The record of each (version set, case) from its newest task (a rerun's over the first run's),
    else the latest."""
    latest = {slot(r): r for r in records}
    mine = by_task(d, records)
    for t in d.tasks:  # in submission order: a later task's record replaces an earlier one's
        for k, r in mine.get(t.token, {}).items():
            if k in t.cases:
                latest[(t.version_set, k)] = r
    return latest


def latest_ok(d: Dispatch) -> set[tuple[str, str]]:
    return {k for k, r in current(d, _records(d)).items() if r.status == "ok"}


def live(d: Dispatch) -> list[Task]:
    """Submitted tasks that may still write records (not in a final state). A local task never
    submitted will not run: its dispatching command is gone (a rerun takes its cases)."""
    states = _states(d)
    return [t for t in d.tasks if t.job_id and states.get(t.index, ("PENDING", ""))[0] not in TERMINAL]


def wait(d: Dispatch, console: Any, poll_s: float = 2.0) -> None:
    """Show progress per task until every task has ended (submitting local tasks in waves)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console,
                  transient=False) as progress:
        bars = {t.index: progress.add_task(f"task {t.index} ({markup(t.backend)})", total=len(t.cases)) for t in d.tasks}
        while True:
            mine = by_task(d, _records(d))
            states = _states(d)
            ended = 0
            for t in d.tasks:
                state, _ = states.get(t.index, ("WAITING", ""))
                ended += state in TERMINAL
                done = len([k for k in mine.get(t.token, {}) if k in t.cases])
                progress.update(bars[t.index], completed=done, description=f"task {t.index} {t.job_id or '-'} ({markup(t.backend)}) {markup(state.lower())}")
            running = sum(states.get(t.index, ("", ""))[0] == "RUNNING" for t in d.tasks)
            waiting = [t for t in d.tasks if not t.job_id]
            if d.options.executor == "local" and waiting and running < d.options.array_parallelism:
                _submit_local(d, waiting[0])
                d.save()
                continue
            if ended == len(d.tasks):
                return
            time.sleep(poll_s)


def finish(d: Dispatch, mode: Any, plan: Any, warn: Any = print) -> list[Record]:
    """A failed record for each case of a task that ended without its record (kind `scheduler` with
    the scheduler's state; `crashed` when the task completed but wrote nothing for it), and for a case
    the scheduler stopped mid-run (its own `interrupted` record is kept). Only a case's newest task
    counts. Returns the current record of every case of this dispatch."""
    from gpuenv.modes.base import Outcome, RecordContext, failure
    from gpuenv.results.store import write_record
    from gpuenv.run.provenance import provenance

    plan_items = {item.key: item for item in plan.items}
    newest = {(t.version_set, k): t for t in d.tasks for k in t.cases}  # the last task that ran each case
    records = _records(d)
    mine = by_task(d, records)
    states = _states(d)
    base = provenance()
    for t in d.tasks:
        state, reason = states.get(t.index, ("UNKNOWN", "no state"))
        have = mine.get(t.token, {})
        for k in t.cases:
            if newest[(t.version_set, k)] is not t:
                continue
            rec = have.get(k)
            completed = state in ("COMPLETED", "FINISHED") and "without a result" not in reason
            if rec is not None and not (rec.status == "interrupted" and not completed):
                continue
            if k not in plan_items:
                warn(f"{k}: no longer a case of suite '{plan.suite}' (the suite changed since the dispatch): no record written for it")
                continue
            if rec is not None:  # stopped mid-run: SIGTERM from the scheduler
                kind, why = "scheduler", f"the scheduler ended task {t.index} ({t.job_id}) as {reason} while the case ran (its interrupted record is kept beside this one)"
            elif completed:
                kind, why = "crashed", f"task {t.index} ({t.job_id}) completed without writing this case's record (see its log below)"
            else:
                kind, why = "scheduler", f"the scheduler ended task {t.index} ({t.job_id}) as {reason} before the case wrote its record"
            where = {**base, "scheduler": {**task_facts(d, t), "state": state}}
            ctx = RecordContext(plan.suite, d.run_id, where)
            new = mode.build_record(plan_items[k], [Outcome(0, None, failure(kind, why, 0, _task_log(d, t)))], ctx)
            write_record(d.run_dir, {**new, "tags": t.tags} if t.tags else new)  # the task's tags, as its own records carry
    cur = current(d, _records(d))
    return [cur[k] for k in newest if k in cur]


def task_facts(d: Dispatch, t: Task) -> dict:
    """where.scheduler of a record the submitting host writes for a task (scheduler_facts' keys)."""
    return {"scheduler": d.options.executor, "job_id": t.job_id, "array_job_id": (t.job_id or "").split("_")[0] or None,
            "array_task_id": int(t.job_id.split("_")[1]) if t.job_id and "_" in t.job_id else None,
            "node": None, "partition": d.options.partition, "exclusive": d.options.exclusive,
            "container": d.options.container, "image": task_image(d, t),
            "task": t.token}


def _task_log(d: Dispatch, t: Task) -> str:
    """The end of the task's log (submitit's stderr, then stdout)."""
    if not t.job_id:
        return ""
    text = ""
    for suffix in ("err", "out"):
        for p in sorted(d.folder.glob(f"{t.job_id}_*_log.{suffix}")):  # "1234_1_0_log.err", never 1234_10's
            try:
                text += p.read_text(errors="replace")[-1000:]
            except OSError:
                pass
    return text[-2000:]
