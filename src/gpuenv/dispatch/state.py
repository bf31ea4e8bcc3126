"""A dispatch's state: its options, its tasks and RUN_DIR/dispatch.state (JSON, not a record), read
back through one strict model: the file sits in a shared results folder."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, StringConstraints, ValidationError

from gpuenv.errors import UserError
from gpuenv.inputs import read_regular
from gpuenv.results.schema import Record
from gpuenv.results.types import Identifier

STATE = "dispatch.state"
# An image reference or a .sif path, never an option or a mount spec: it lands on docker's, apptainer's
# or srun's command line.


IMAGE_REF = r"[A-Za-z0-9][A-Za-z0-9._/@+-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?|/[A-Za-z0-9._/+-]+\.sif"


JOB_ID = r"[0-9]+(_[0-9]+)?"


EXECUTORS = ("slurm", "local")


CONTAINERS = ("none", "docker", "apptainer", "pyxis")
# Slurm job states after which a task will not write anything more


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


def slot(r: Record) -> tuple[str, str]:
    """(version set, case key) of a record: a sweep runs each case once per version set (a pinned
    image's records carry a version set too, but no sweep: one slot)."""
    return (str(r.tags.get("version_set", "")) if "sweep" in r.tags else "", r.case_key)


def batches(items: list[Any], per_task: int) -> list[tuple[str, list[str]]]:
    """(backend, case keys) per task, in plan order: one backend per task (one image, one environment)."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        if out and out[-1][0] == item.backend and len(out[-1][1]) < per_task:
            out[-1][1].append(item.key)
        else:
            out.append((item.backend, [item.key]))
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
