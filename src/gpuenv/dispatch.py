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
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, StringConstraints, ValidationError

from gpuenv.errors import UserError
from gpuenv.escape import markup
from gpuenv.inputs import read_regular
from gpuenv.results.types import Identifier

STATE = "dispatch.state"
# An image reference or a .sif path, never an option or a mount spec: it lands on docker's, apptainer's
# or srun's command line.
IMAGE_REF = r"[A-Za-z0-9][A-Za-z0-9._/@+-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?|/[A-Za-z0-9._/+-]+\.sif"
JOB_ID = r"[0-9]+(_[0-9]+)?"
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
        if self.image is not None and not re.fullmatch(IMAGE_REF, self.image):
            raise UserError(f"--image {self.image!r}: not an image reference (e.g. gpuenv/brax:latest, registry/name@sha256:..., "
                            "or a .sif path): it goes on the container runtime's command line")
        if self.partition is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.,-]*", self.partition):
            raise UserError(f"--partition {self.partition!r}: not a Slurm partition name")
        return self


@dataclass
class Task:
    index: int
    backend: str
    cases: list[str]
    job_id: str | None = None  # the scheduler's id of this array task ("1234_0"; local: a pid)
    version_set: str = ""  # with --sweep: "brax==0.13.0", run in that set's environment
    python: str | None = None  # that environment's interpreter (None: the submitting one)
    tags: dict | None = None  # the records' tags (gpuenv.history.sweep.tags_of)
    token: str = ""  # unique to this task: its records carry it (where.scheduler.task), whatever ids repeat
    since: str = ""  # when it was submitted (UTC); its records carry its job id (where.scheduler.job_id)


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
        """The dispatch whose state is in run_dir, validated whole (the file sits in a shared results
        folder: whatever it holds is one line naming the problem, never a traceback)."""
        data = read_regular(run_dir / STATE, f"{run_dir}: not a dispatch run directory ({STATE})", 16 * 2**20, "a dispatch's state")
        try:
            state = _StateModel.model_validate_json(data).model_dump()
        except (ValidationError, RecursionError) as e:
            first = e.errors(include_url=False)[0] if isinstance(e, ValidationError) else {"loc": (), "msg": "nested too deep"}
            where = ".".join(str(x) for x in first["loc"])
            raise UserError(f"{run_dir}: {STATE} is not a dispatch's state ({where}: {first['msg']})") from None
        state["options"] = Options(**state["options"])
        state["tasks"] = [Task(**t) for t in state["tasks"]]
        return cls(**state).checked(run_dir)

    def checked(self, run_dir: Path) -> Dispatch:
        """What in a state reaches a command line must be what gpuenv would have written: the run id
        is its folder's name (records go to the folder it was read from, whatever the file says),
        a task's interpreter is one of gpuenv's own environments, an image is one of the table's."""
        from gpuenv import envs
        from gpuenv.images import images

        bad = f"{run_dir}: {STATE} was edited or is not gpuenv's"
        if self.run_id != run_dir.resolve().name:
            raise UserError(f"{bad}: its run id {self.run_id[:40]!r} is not the folder's name")
        self.out = str(run_dir)
        self.options.check()
        tags = {f"{img.tag}:latest" for img in images().values()}
        if self.options.image is not None and self.options.image not in tags:
            raise UserError(f"{bad}: it names the image {self.options.image!r}, not one of gpuenv's ({', '.join(sorted(tags))}); "
                            "dispatch again with --image to run another")
        cache = os.path.normpath(os.path.abspath(envs.cache_root()))
        for t in self.tasks:
            if t.python is None:
                continue
            # as written, not resolved: an environment's bin/python is a link to the interpreter it was made from
            where = os.path.normpath(os.path.abspath(t.python))
            if not (where.startswith(cache + os.sep) and re.fullmatch(r"python[0-9.]*", os.path.basename(where))
                    and os.path.basename(os.path.dirname(where)) == "bin"):
                raise UserError(f"{bad}: task {t.index} would start {t.python!r}, which is not one of gpuenv's environments ({cache})")
        return self


# --- dispatch.state, as read back: one strict model (the dataclasses above are what the code uses) --

JobId = Annotated[str, StringConstraints(strict=True, pattern=f"^{JOB_ID}$")]
_Text = Annotated[str, StringConstraints(strict=True, max_length=4096)]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _OptionsModel(_Closed):
    executor: StrictStr
    partition: StrictStr | None = None
    gpus_per_task: StrictInt = 0
    cpus_per_task: StrictInt | None = None
    exclusive: StrictBool = False
    container: StrictStr = "none"
    image: _Text | None = None
    array_parallelism: StrictInt = 1
    cases_per_task: StrictInt = 1
    time_min: StrictInt = 60


class _TaskModel(_Closed):
    index: Annotated[int, Field(strict=True, ge=0)]
    backend: Identifier
    cases: list[Identifier]
    job_id: JobId | None = None
    version_set: _Text = ""
    python: _Text | None = None
    tags: dict[StrictStr, Any] | None = None
    token: _Text = ""
    since: _Text = ""


class _Filters(_Closed):
    backends: list[_Text] | None = None
    tasks: list[Identifier] | None = None
    num_envs: list[StrictInt] | None = None


class _StateModel(_Closed):
    run_id: Identifier
    suite: _Text
    out: _Text
    options: _OptionsModel
    tasks: list[_TaskModel]
    submitted_utc: _Text = ""
    job_id: JobId | None = None
    reruns: list[_Text] = []
    filters: _Filters = _Filters()


def slot(r: dict) -> tuple[str, str]:
    """(version set, case key) of a record: a sweep runs each case once per version set (a pinned
    image's records carry a version set too, but no sweep: one slot)."""
    tags = r.get("tags") or {}
    return (str(tags.get("version_set", "")) if "sweep" in tags else "", r["case_key"])


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


def scheduler_facts(options: dict, image: str | None, env: dict[str, str] | None = None, task_token: str = "") -> dict:
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
        "task": task_token,
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
        return [spec.get("python") or sys.executable, "-m", "gpuenv", *args]
    ref = spec["image"]
    if container == "docker":
        gpu = ["--gpus", f"device={os.environ['CUDA_VISIBLE_DEVICES']}" if os.environ.get("CUDA_VISIBLE_DEVICES") else "all"] if gpus else []
        ident = ["-e", f"GPUENV_IMAGE_ID={image_id}"] if image_id else []
        return ["docker", "run", "--rm", "--network", "none", *gpu, "--user", f"{os.getuid()}:{os.getgid()}",
                "-e", "HOME=/home/gpuenv", "-e", f"GPUENV_SCHEDULER={facts_json}", "-e", f"GPUENV_IMAGE_REF={ref}", *ident,
                *(["-e", "GPUENV_CPU_OK=1"] if os.environ.get("GPUENV_CPU_OK") == "1" else []),
                "-v", f"{out}:{out}", ref, *args]
    if container == "apptainer":
        source = ref if ref.endswith(".sif") else f"docker://{ref}"
        return ["apptainer", "exec", *(["--nv"] if gpus else []), "--bind", f"{out}:{out}",
                "--env", f"GPUENV_IMAGE_REF={ref}", source, "gpuenv", *args]
    # pyxis: a job step in the image (enroot), inside this task's allocation
    return ["srun", "--ntasks=1", f"--container-image={ref}", f"--container-mounts={out}:{out}",
            "--container-env=GPUENV_SCHEDULER", "gpuenv", *args]


def run_task(spec: dict) -> dict:
    """Runs in the array task (submitit pickles this call): the bench for its cases. Its output goes
    straight to the task's log (kept even when Slurm kills the task at its time limit)."""
    facts = scheduler_facts(spec["options"], spec.get("image"), task_token=spec.get("token", ""))
    facts_json = json.dumps(facts)
    image_id = None
    if spec["options"]["container"] == "docker":  # the image this node runs, for the records
        from gpuenv.images import local_image_id

        image_id = local_image_id(spec["image"])
    cmd = command_line(spec, facts_json, image_id)
    sys.stdout.flush()
    env = {**os.environ, "GPUENV_SCHEDULER": facts_json}
    if spec.get("tags"):  # a version set of a sweep: its records say which
        from gpuenv.results.schema import TAGS_ENV

        env[TAGS_ENV] = json.dumps(spec["tags"])
    rc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode
    if rc not in (0, 1):  # 1: a case failed, its record says why; anything else: no record
        raise RuntimeError(f"gpuenv bench exited with code {rc} (its output is above in this task's log)")
    return {"returncode": rc, "facts": facts}


# --- submitting, waiting, finishing (the submitting host) ----------------------------------------


def _submitit():
    try:
        import submitit
    except ImportError:
        raise UserError("gpuenv dispatch needs submitit: pip install 'gpuenv[cluster]'") from None
    return submitit


def _local_gpus() -> list[int]:
    """The GPUs a local task may use: CUDA_VISIBLE_DEVICES where the user set it, else nvidia-smi's."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(g) for g in visible.split(",") if g.strip().isdigit()]
    from gpuenv.gpu import nvidia_smi

    return list(range(len(nvidia_smi()[0])))


def _executor(d: Dispatch):
    submitit = _submitit()
    o = d.options
    if o.executor == "local":
        local = submitit.LocalExecutor(folder=str(d.folder))
        # submitit sets CUDA_VISIBLE_DEVICES to the GPUs it hands a job ("" for none): without
        # --gpus-per-task a local task sees every GPU of this machine, as `gpuenv bench` would.
        gpus = _local_gpus()
        if o.gpus_per_task > len(gpus):
            raise UserError(f"--gpus-per-task {o.gpus_per_task}: this machine shows {len(gpus)} GPU(s) to the local executor")
        n = o.gpus_per_task or len(gpus)
        local.update_parameters(timeout_min=o.time_min, gpus_per_node=n, visible_gpus=tuple(gpus) or ())
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


def task_image(d: Dispatch, t: Task) -> str | None:
    """The image a task runs in (None without a container)."""
    return image_ref(t.backend, d.options.image) if d.options.container != "none" else None


def task_spec(d: Dispatch, t: Task) -> dict:
    image = task_image(d, t)
    return {"suite": d.suite, "cases": t.cases, "run_id": d.run_id, "out": str(d.run_dir.resolve().parent),
            "options": asdict(d.options), "image": image, "python": t.python, "tags": t.tags, "token": t.token}


def _token(t: Task) -> None:
    if not t.token:
        import uuid

        t.token = uuid.uuid4().hex[:16]


def _submit_local(d: Dispatch, t: Task) -> None:
    _token(t)
    t.job_id, t.since = _executor(d).submit(run_task, task_spec(d, t)).job_id, now_utc()


def submit(d: Dispatch, tasks: list[Task]) -> None:
    """Slurm: one array for all tasks. Local: the first `array_parallelism` tasks now, the rest as
    earlier ones end (wait() submits them), so benchmarks do not share the machine's cores."""
    if d.options.executor == "slurm":
        ex = _executor(d)
        stamp = now_utc()
        for t in tasks:
            _token(t)
        try:
            jobs = ex.map_array(run_task, [task_spec(d, t) for t in tasks])
        except Exception as e:  # noqa: BLE001 - sbatch refused (partition, gres ...): one line
            raise UserError(f"sbatch refused the array: {str(e).strip().splitlines()[-1] if str(e).strip() else e}") from None
        for t, j in zip(tasks, jobs):
            t.job_id, t.since = j.job_id, stamp
        d.job_id = d.job_id or (jobs[0].job_id.split("_")[0] if jobs else None)
    else:
        for t in tasks[: d.options.array_parallelism]:
            _submit_local(d, t)
        d.job_id = d.job_id or (tasks[0].job_id if tasks else None)
    d.save()


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
    import re

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


def _epoch(iso: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp() - 1  # whole seconds: a second's grace
    except ValueError:
        return 0.0


def now_utc() -> str:
    from gpuenv.results.schema import utc_now

    return utc_now()


def _records(d: Dispatch) -> list[dict]:
    from gpuenv.results.store import load_dir

    records, _ = load_dir(d.run_dir)
    return sorted(records, key=lambda r: r["created_utc"])


def by_task(d: Dispatch, records: list[dict]) -> dict[str, dict[str, dict]]:
    """{task token: {case key: its record}}: records belong to the task whose token they carry (job
    ids repeat: local pids). The failed record the dispatcher wrote for a task stands over that
    task's own interrupted one, whichever was written first."""
    out: dict[str, dict[str, dict]] = {}
    for r in records:
        token = (r["where"].get("scheduler") or {}).get("task")
        if not token:
            continue
        mine = out.setdefault(token, {})
        old = mine.get(r["case_key"])
        if old is not None and (old.get("failure") or {}).get("kind") == "scheduler" and r["status"] == "interrupted":
            continue
        mine[r["case_key"]] = r
    return out


def current(d: Dispatch, records: list[dict]) -> dict[tuple[str, str], dict]:
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
    return {k for k, r in current(d, _records(d)).items() if r["status"] == "ok"}


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


def finish(d: Dispatch, mode: Any, plan: Any, warn: Any = print) -> list[dict]:
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
            if rec is not None and not (rec["status"] == "interrupted" and not completed):
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
            rec = mode.build_record(plan_items[k], [Outcome(0, None, failure(kind, why, 0, _task_log(d, t)))], ctx)
            if t.tags:
                rec["tags"] = t.tags
            write_record(d.run_dir, rec)
    cur = current(d, _records(d))
    return [cur[k] for k in newest if k in cur]


def version_sets(spec: str, pins: list[str], backend: str, console: Any) -> list[tuple[str, str | None, dict | None]]:
    """(label, interpreter, tags) per version set of a sweep that resolved and built here (the
    environments are cached under gpuenv's cache: on a cluster, a filesystem the nodes share)."""
    from gpuenv.history import sweep as sw
    from gpuenv.results.store import new_run_id

    package, versions = sw.parse_spec(spec)
    sweep_id = new_run_id()
    out: list[tuple[str, str | None, dict | None]] = []
    for v in versions:
        vs = sw.prepare(sw.version_set(package, v, pins, backend))
        if vs.status != "ready" or vs.env_dir is None:
            console.print(sw.not_ready_line(vs), highlight=False)
            continue
        out.append((vs.label, str(vs.env_dir / "bin" / "python"), sw.tags_of(vs, sweep_id)))
    if not out:
        raise UserError(f"no version set of {spec} could be built; nothing to dispatch")
    return out


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


def find_job(out: Path, job: str) -> Path:
    """The run directory of a dispatch by its job id (array job or one of its tasks)."""
    if not re.fullmatch(JOB_ID, job):
        raise UserError(f"--attach {job!r}: not a Slurm job id (digits, or JOB_TASK)")
    for state in sorted(out.glob(f"*/{STATE}")):
        try:
            d = Dispatch.load(state.parent)
        except UserError:
            continue  # another folder's broken or edited state: not this job's
        ids = {d.job_id} | {t.job_id for t in d.tasks} | {(t.job_id or "").split("_")[0] for t in d.tasks}
        if job in ids:
            return state.parent
    raise UserError(f"no dispatch with job {job} under {out} (--out names the results directory it used)")


# --- what `gpuenv dispatch` does before it waits: a new dispatch, an existing one, a rerun ---------


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
        from gpuenv.history.sweep import parse_spec

        package = parse_spec(sweep)[0]
        owner = registry.by_library(package)
        if options.container != "none":
            raise UserError("--sweep runs each version set in its own environment on a shared filesystem: use --container none")
        if owner is None and not backends:
            raise UserError(f"which backend does {package} belong to? pass --backend (one of: {', '.join(b.name for b in registry.visible())})")
        if backends and len(backends) > 1:
            raise UserError("--sweep builds one environment per version set for one backend: pass one --backend")
        filters = {**filters, "backends": backends or ([owner.name] if owner else backends)}
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
