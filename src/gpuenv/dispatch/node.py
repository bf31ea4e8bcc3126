"""What an array task runs on its node: `gpuenv bench` for its cases, in the container runtime asked
for, with the scheduler's facts that every record carries (submitit pickles `run_task` by name)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


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
