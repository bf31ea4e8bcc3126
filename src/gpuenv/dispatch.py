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

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError

STATE = "dispatch.state"
EXECUTORS = ("slurm", "local")
CONTAINERS = ("none", "docker", "apptainer", "pyxis")
# Slurm job states after which a task will not write anything more
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "REVOKED", "FINISHED", "INTERRUPTED"}


@dataclass
class Options:
    executor: str = "slurm"
    partition: str | None = None
    gpus_per_task: int = 0
    cpus_per_task: int | None = None
    exclusive: bool = False
    container: str = "none"
    image: str | None = None  # image reference (default: the backend's gpuenv/<backend>:latest)
    array_parallelism: int = 1
    cases_per_task: int = 1
    time_min: int = 60

    def check(self) -> Options:
        if self.executor not in EXECUTORS:
            raise UserError(f"--executor must be one of {', '.join(EXECUTORS)} (got {self.executor!r})")
        if self.container not in CONTAINERS:
            raise UserError(f"--container must be one of {', '.join(CONTAINERS)} (got {self.container!r})")
        if self.container == "pyxis" and self.executor != "slurm":
            raise UserError("--container pyxis needs --executor slurm (pyxis is a Slurm plug-in: srun --container-image)")
        for name in ("gpus_per_task", "array_parallelism", "cases_per_task", "time_min"):
            v = getattr(self, name)
            if v < (0 if name == "gpus_per_task" else 1):
                raise UserError(f"--{name.replace('_', '-')} must be >= {0 if name == 'gpus_per_task' else 1} (got {v})")
        if self.cpus_per_task is not None and self.cpus_per_task < 1:
            raise UserError(f"--cpus-per-task must be >= 1 (got {self.cpus_per_task})")
        return self


@dataclass
class Task:
    index: int
    backend: str
    cases: list[str]
    job_id: str | None = None  # the scheduler's id of this array task ("1234_0"; local: a pid)
    since: str = ""  # when it was submitted (UTC, as records' created_utc): its records are newer


@dataclass
class Dispatch:
    run_id: str
    suite: str
    out: str  # the run directory
    options: Options
    tasks: list[Task]
    submitted_utc: str = ""
    job_id: str | None = None  # the array job (Slurm) / first task's id (local)
    reruns: list[str] = field(default_factory=list)
    filters: dict = field(default_factory=dict)  # the plan's --backend/--task/--num-envs

    @property
    def run_dir(self) -> Path:
        return Path(self.out)

    @property
    def folder(self) -> Path:
        return self.run_dir / ".submitit"

    def save(self) -> None:
        tmp = self.run_dir / f".{STATE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.run_dir / STATE)

    @classmethod
    def load(cls, run_dir: Path) -> Dispatch:
        try:
            d = json.loads((run_dir / STATE).read_text())
        except (OSError, ValueError) as e:
            raise UserError(f"{run_dir}: not a dispatch run directory (no readable {STATE}: {e})") from None
        d["options"] = Options(**d["options"])
        d["tasks"] = [Task(**t) for t in d["tasks"]]
        return cls(**d)


def batches(items: list[Any], per_task: int) -> list[tuple[str, list[str]]]:
    """(backend, case keys) per task, in plan order: one backend per task (one image, one environment)."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        if out and out[-1][0] == item.backend and len(out[-1][1]) < per_task:
            out[-1][1].append(item.key)
        else:
            out.append((item.backend, [item.key]))
    return out


# --- what one array task runs, on its node -------------------------------------------------------


def scheduler_facts(options: dict, image: str | None, env: dict[str, str] | None = None) -> dict:
    """The facts of the allocation this task runs in, from Slurm's environment (or the local host)."""
    e = os.environ if env is None else env
    job = e.get("SLURM_ARRAY_JOB_ID") or e.get("SLURM_JOB_ID")
    task = e.get("SLURM_ARRAY_TASK_ID")
    gpus = e.get("SLURM_GPUS_ON_NODE") or e.get("SLURM_GPUS_PER_TASK")
    return {
        "scheduler": "slurm" if job else "local",
        "job_id": f"{job}_{task}" if job and task is not None else (job or e.get("SUBMITIT_LOCAL_JOB_ID") or str(os.getpid())),
        "array_job_id": job,
        "array_task_id": int(task) if task is not None and task.isdigit() else None,
        "node": e.get("SLURMD_NODENAME") or socket.gethostname(),
        "partition": e.get("SLURM_JOB_PARTITION"),
        "cpus": int(e["SLURM_CPUS_ON_NODE"]) if e.get("SLURM_CPUS_ON_NODE", "").isdigit() else os.cpu_count(),
        "gpus": int(gpus) if gpus and gpus.isdigit() else 0,
        "cuda_visible_devices": e.get("CUDA_VISIBLE_DEVICES"),
        "exclusive": bool(options.get("exclusive")),
        "container": options.get("container", "none"),
        "image": image,
    }


def bench_args(suite: str, cases: list[str], run_id: str, out: str) -> list[str]:
    return ["bench", "--suite", suite, *[a for k in cases for a in ("--case", k)], "--run-id", run_id, "--out", out]


def image_ref(backend: str, image: str | None) -> str:
    if image:
        return image
    from gpuenv.images import get_image

    return f"{get_image(backend).tag}:latest"


def command_line(spec: dict, facts_json: str, image_id: str | None = None) -> list[str]:
    """The command an array task runs: gpuenv bench for its cases, in the container runtime asked for.
    The results directory (the run directory's parent) is mounted at the same path inside the
    container, so records land in OUT/<run id>/ as from `gpuenv bench --run-id`."""
    container, out = spec["options"]["container"], spec["out"]
    args = bench_args(spec["suite"], spec["cases"], spec["run_id"], out)
    gpus = spec["options"]["gpus_per_task"] > 0
    if container == "none":
        return [sys.executable, "-m", "gpuenv", *args]
    ref = spec["image"]
    if container == "docker":
        gpu = ["--gpus", f"device={os.environ['CUDA_VISIBLE_DEVICES']}" if os.environ.get("CUDA_VISIBLE_DEVICES") else "all"] if gpus else []
        ident = ["-e", f"GPUENV_IMAGE_ID={image_id}"] if image_id else []
        return ["docker", "run", "--rm", "--network", "none", *gpu, "--user", f"{os.getuid()}:{os.getgid()}",
                "-e", "HOME=/home/gpuenv", "-e", f"GPUENV_SCHEDULER={facts_json}", "-e", f"GPUENV_IMAGE_REF={ref}", *ident,
                "-v", f"{out}:{out}", ref, *args]
    if container == "apptainer":
        source = ref if ref.endswith(".sif") else f"docker://{ref}"
        return ["apptainer", "exec", *(["--nv"] if gpus else []), "--bind", f"{out}:{out}",
                "--env", f"GPUENV_IMAGE_REF={ref}", source, "gpuenv", *args]
    # pyxis: a job step in the image (enroot), inside this task's allocation
    return ["srun", "--ntasks=1", f"--container-image={ref}", f"--container-mounts={out}:{out}",
            "--container-env=GPUENV_SCHEDULER", "gpuenv", *args]


def run_task(spec: dict) -> dict:
    """Runs in the array task (submitit pickles this call): the bench for its cases."""
    facts = scheduler_facts(spec["options"], spec.get("image"))
    facts_json = json.dumps(facts)
    image_id = None
    if spec["options"]["container"] == "docker":  # the image this node runs, for the records
        r = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", spec["image"]], capture_output=True, text=True)
        image_id = r.stdout.strip() or None
    cmd = command_line(spec, facts_json, image_id)
    env = {**os.environ, "GPUENV_SCHEDULER": facts_json}
    r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode not in (0, 1):  # 1: a case failed, its record says why; anything else: no record
        last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        raise RuntimeError(f"gpuenv bench exited with code {r.returncode}: {last}")
    return {"returncode": r.returncode, "facts": facts}


# --- submitting, waiting, finishing (the submitting host) ----------------------------------------


def _executor(d: Dispatch):
    import submitit

    o = d.options
    if o.executor == "local":
        local = submitit.LocalExecutor(folder=str(d.folder))
        local.update_parameters(timeout_min=o.time_min, gpus_per_node=o.gpus_per_task)
        return local
    ex = submitit.SlurmExecutor(folder=str(d.folder))
    params: dict[str, Any] = {"time": o.time_min, "array_parallelism": o.array_parallelism, "job_name": f"gpuenv-{d.run_id}"}
    if o.partition:
        params["partition"] = o.partition
    if o.gpus_per_task:
        params["gpus_per_task"] = o.gpus_per_task
    if o.cpus_per_task:
        params["cpus_per_task"] = o.cpus_per_task
    if o.exclusive:
        params["exclusive"] = True
    ex.update_parameters(**params)
    return ex


def task_spec(d: Dispatch, t: Task) -> dict:
    image = image_ref(t.backend, d.options.image) if d.options.container != "none" else None
    return {"suite": d.suite, "cases": t.cases, "run_id": d.run_id, "out": str(d.run_dir.resolve().parent),
            "options": asdict(d.options), "image": image}


def submit(d: Dispatch, tasks: list[Task]) -> None:
    """Slurm: one array for all tasks. Local: the first `array_parallelism` tasks now, the rest as
    earlier ones end (wait() submits them), so benchmarks do not share the machine's cores."""
    ex = _executor(d)
    stamp = now_utc()
    if d.options.executor == "slurm":
        try:
            jobs = ex.map_array(run_task, [task_spec(d, t) for t in tasks])
        except Exception as e:  # noqa: BLE001 - sbatch refused (partition, gres ...): one line
            raise UserError(f"sbatch refused the array: {str(e).strip().splitlines()[-1] if str(e).strip() else e}") from None
        for t, j in zip(tasks, jobs):
            t.job_id, t.since = j.job_id, stamp
        d.job_id = d.job_id or (jobs[0].job_id.split("_")[0] if jobs else None)
    else:
        for t in tasks[: d.options.array_parallelism]:
            t.job_id, t.since = ex.submit(run_task, task_spec(d, t)).job_id, stamp
        d.job_id = d.job_id or (tasks[0].job_id if tasks else None)
    d.save()


def _states(d: Dispatch) -> dict[int, tuple[str, str]]:
    """(state, reason) per submitted task, from sacct (Slurm) or the local process."""
    out: dict[int, tuple[str, str]] = {}
    submitted = [t for t in d.tasks if t.job_id]
    if not submitted:
        return out
    if d.options.executor == "slurm":
        ids = sorted({t.job_id.split("_")[0] for t in submitted if t.job_id})
        r = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,Reason,NodeList", "-j", ",".join(ids)],
                           capture_output=True, text=True, timeout=60)
        rows = {}
        for line in r.stdout.splitlines():
            parts = line.split("|")
            if len(parts) >= 4:
                job, state, reason, nodes = parts[:4]
                text = state + (f", reason {reason}" if reason not in ("", "None") else "") + (f", on {nodes}" if nodes and nodes != "None assigned" else "")
                rows[job] = (state.split()[0] if state else "UNKNOWN", text)
        for t in submitted:
            out[t.index] = rows.get(t.job_id or "", ("PENDING", "not in sacct yet"))
        return out
    import psutil

    for t in submitted:
        pid = int(t.job_id or 0)
        try:
            p = psutil.Process(pid)
            alive = p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        out[t.index] = ("RUNNING", "running") if alive else ("FINISHED", "process ended")
    return out


def now_utc() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def arrived(t: Task, records: dict[str, dict]) -> list[str]:
    """The task's cases with a record written since it was submitted."""
    return [k for k in t.cases if k in records and records[k]["created_utc"] >= t.since]


def _records(d: Dispatch) -> dict[str, dict]:
    """The latest record per case key in the run directory."""
    from gpuenv.results.store import load_dir

    records, _ = load_dir(d.run_dir)
    latest: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: r["created_utc"]):
        latest[r["case_key"]] = r
    return latest


def latest_ok(d: Dispatch) -> set[str]:
    return {k for k, r in _records(d).items() if r["status"] == "ok"}


def wait(d: Dispatch, console: Any, poll_s: float = 2.0) -> dict[str, dict]:
    """Show progress per task until every task has ended; returns the latest record per case."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    pending_local = [t for t in d.tasks if not t.job_id]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console,
                  transient=False) as progress:
        bars = {t.index: progress.add_task(f"task {t.index} ({t.backend})", total=len(t.cases)) for t in d.tasks}
        while True:
            records = _records(d)
            states = _states(d)
            ended = 0
            for t in d.tasks:
                state, _ = states.get(t.index, ("WAITING", ""))
                ended += state in TERMINAL
                progress.update(bars[t.index], completed=len(arrived(t, records)), description=f"task {t.index} {t.job_id or '-'} ({t.backend}) {state.lower()}")
            if pending_local and sum(states.get(t.index, ("", ""))[0] == "RUNNING" for t in d.tasks) < d.options.array_parallelism:
                nxt = pending_local.pop(0)
                nxt.job_id, nxt.since = _executor(d).submit(run_task, task_spec(d, nxt)).job_id, now_utc()
                d.save()
                continue
            if ended == len(d.tasks):
                return _records(d)
            time.sleep(poll_s)


def finish(d: Dispatch, mode: Any, plan: Any) -> list[dict]:
    """A failed record (kind `scheduler`, with the scheduler's state) for each case whose task ended
    without writing it; returns the latest record per case of this dispatch."""
    from gpuenv.measure.system import provenance
    from gpuenv.results.store import write_record
    from gpuenv.run.runner import Outcome, RecordContext, failure

    plan_items = {item.key: item for item in plan.items}
    records = _records(d)
    states = _states(d)
    base = provenance()
    for t in d.tasks:
        state, reason = states.get(t.index, ("UNKNOWN", "no state"))
        here = arrived(t, records)
        # a case the scheduler stopped mid-run wrote itself as interrupted (SIGTERM): say who stopped it
        cut = [k for k in here if records[k]["status"] == "interrupted" and state not in ("COMPLETED", "FINISHED")]
        missing = [k for k in t.cases if k not in here] + cut
        if not missing:
            continue
        when = "while the case ran (its interrupted record is kept beside this one)" if cut else "before the case wrote its record"
        err = _task_stderr(d, t)
        where = {**base, "scheduler": {"scheduler": d.options.executor, "job_id": t.job_id, "state": state,
                                       "container": d.options.container, "exclusive": d.options.exclusive}}
        ctx = RecordContext(plan.suite, d.run_id, where)
        for k in missing:
            why = f"the scheduler ended task {t.index} ({t.job_id}) as {reason or state} " + (when if k in cut else "before the case wrote its record")
            item = plan_items[k]
            write_record(d.run_dir, mode.build_record(item, [Outcome(0, None, failure("scheduler", why, 0, err))], ctx))
    return list(_records(d).values())


def _task_stderr(d: Dispatch, t: Task) -> str:
    if not t.job_id:
        return ""
    for p in sorted(d.folder.glob(f"{t.job_id}*_log.err")):
        try:
            return p.read_text(errors="replace")[-2000:]
        except OSError:
            return ""
    return ""


def find_job(out: Path, job: str) -> Path:
    """The run directory of a dispatch by its job id (array job or one of its tasks)."""
    for state in sorted(out.glob(f"*/{STATE}")):
        try:
            d = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        ids = {d.get("job_id")} | {t.get("job_id") for t in d.get("tasks", [])} | {
            (t.get("job_id") or "").split("_")[0] for t in d.get("tasks", [])}
        if job in ids:
            return state.parent
    raise UserError(f"no dispatch with job {job} under {out} (--out names the results directory it used)")


def quote(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)
