"""Submitting a dispatch's tasks: a Slurm array through submitit, or submitit's local executor."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from gpuenv.dispatch.node import image_ref, run_task
from gpuenv.dispatch.state import Dispatch, Task, now_utc
from gpuenv.errors import UserError


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


def version_sets(spec: str, pins: list[str], backend: str, console: Any) -> list[tuple[str, str | None, dict | None]]:
    """(label, interpreter, tags) per version set of a sweep that resolved and built here (the
    environments are cached under gpuenv's cache: on a cluster, a filesystem the nodes share)."""
    from gpuenv.history import versionsets as sw
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
