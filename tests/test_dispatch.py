"""`gpuenv dispatch` (issue 15): a suite's cases as array tasks, on a real single-host Slurm
(tools/slurm-local.sh, started by .ci/run) and on submitit's local executor; the command lines the
container runtimes receive."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, fake_suite

from gpuenv import dispatch as dsp
from gpuenv.results.schema import load


def slurm_up() -> str | None:
    if not shutil.which("sbatch"):
        return "no Slurm client here (tools/slurm-local.sh installs and starts a single-host Slurm; needs root and apt-get)"
    for cmd in (["sinfo", "-h"], ["sacct", "-n", "-X", "-S", "now"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return f"Slurm is installed but `{' '.join(cmd)}` fails ({(r.stderr.strip() or 'no output')[:120]}): run tools/slurm-local.sh"
    return None


needs_slurm = pytest.mark.skipif(slurm_up() is not None, reason=str(slurm_up()))

def fake(tmp_path: Path, backends: str = '"fake:ok"', sizes: str = "1, 2") -> Path:
    return fake_suite(tmp_path / "fk.toml", backends, f"[{sizes}]", timeout=300)


def records(run_dir: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in sorted(run_dir.glob("*.json")):
        r = load(p)
        out.setdefault(r["case_key"], []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r["created_utc"])
    return out


def state_of(out: Path) -> dict | None:
    states = list(out.glob(f"*/{dsp.STATE}"))
    if not states:
        return None
    try:
        return json.loads(states[0].read_text())
    except ValueError:
        return None


def dispatch_bg(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpuenv", "dispatch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True, env={**os.environ, **(env or {})})


def wait_for(pred, timeout: float = 120, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def sacct_state(job: str) -> str:
    r = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job], capture_output=True, text=True)
    return r.stdout.strip()


# --- planning and command lines (no scheduler needed) --------------------------------------------


def test_batches_keep_one_backend_per_task():
    class It:
        def __init__(self, key, backend):
            self.key, self.backend = key, backend

    items = [It("a1", "a"), It("a2", "a"), It("a3", "a"), It("b1", "b"), It("a4", "a")]
    assert dsp.batches(items, 2) == [("a", ["a1", "a2"]), ("a", ["a3"]), ("b", ["b1"]), ("a", ["a4"])]
    assert dsp.batches(items, 1)[0] == ("a", ["a1"])


def spec(container: str, gpus: int = 0, image: str | None = "gpuenv/brax:latest") -> dict:
    o = dsp.Options(executor="slurm", container=container, gpus_per_task=gpus).check()
    from dataclasses import asdict

    return {"suite": "smoke", "cases": ["brax-generalized-halfcheetah-n2"], "run_id": "R1", "out": "/shared/results",
            "options": asdict(o), "image": image}


def test_the_command_lines_each_container_runtime_receives(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    bench = ["bench", "--suite", "smoke", "--case", "brax-generalized-halfcheetah-n2", "--run-id", "R1", "--out", "/shared/results"]
    assert dsp.command_line(spec("none", image=None), "{}") == [sys.executable, "-m", "gpuenv", *bench]
    app = dsp.command_line(spec("apptainer", gpus=1), "{}")
    assert app == ["apptainer", "exec", "--nv", "--bind", "/shared/results:/shared/results", "--env",
                   "GPUENV_IMAGE_REF=gpuenv/brax:latest", "docker://gpuenv/brax:latest", "gpuenv", *bench]
    sif = dsp.command_line(spec("apptainer", image="/images/brax.sif"), "{}")
    assert "/images/brax.sif" in sif and "--nv" not in sif and "docker:///images/brax.sif" not in sif
    pyxis = dsp.command_line(spec("pyxis", gpus=1), "{}")
    assert pyxis[:5] == ["srun", "--ntasks=1", "--container-image=gpuenv/brax:latest",
                         "--container-mounts=/shared/results:/shared/results", "--container-env=GPUENV_SCHEDULER"]
    docker = dsp.command_line(spec("docker", gpus=1), '{"job_id": "7_0"}')
    assert docker[:4] == ["docker", "run", "--rm", "--network"] and "device=3" in docker  # only this task's GPU
    assert "GPUENV_SCHEDULER={\"job_id\": \"7_0\"}" in docker and docker[-len(bench):] == bench


def test_scheduler_facts_come_from_slurms_environment():
    env = {"SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "44", "SLURMD_NODENAME": "gpu07",
           "SLURM_JOB_PARTITION": "a100", "SLURM_CPUS_ON_NODE": "16", "SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    f = dsp.scheduler_facts({"exclusive": True, "container": "apptainer"}, "gpuenv/brax:latest", env)
    assert f == {"scheduler": "slurm", "job_id": "41_3", "array_job_id": "41", "array_task_id": 3, "node": "gpu07",
                 "partition": "a100", "cpus": 16, "gpus": 2, "cuda_visible_devices": "0,1", "exclusive": True,
                 "container": "apptainer", "image": "gpuenv/brax:latest", "task": ""}


@pytest.mark.parametrize("args, msg", [
    (["--executor", "pbs"], "--executor must be one of slurm, local"),
    (["--container", "podman"], "--container must be one of none, docker, apptainer, pyxis"),
    (["--executor", "local", "--container", "pyxis"], "--container pyxis needs --executor slurm"),
    (["--array-parallelism", "0"], "--array-parallelism must be >= 1"),
    (["--attach", "999999"], "no dispatch with job 999999"),
])
def test_bad_dispatch_input_is_one_line_and_exit_2(cli, tmp_path, args, msg):
    r = cli("dispatch", "--suite", "smoke", "--out", str(tmp_path), *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_dry_run_prints_each_tasks_command_and_submits_nothing(cli, tmp_path):
    r = cli("dispatch", "--suite", str(fake(tmp_path)), "--executor", "local", "--out", str(tmp_path / "o"), "--dry-run")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "task 0 (fake):" in out and "--case fake-ok-cartpole-n1" in out and "2 task(s), 2 case(s); nothing submitted" in out
    assert not (tmp_path / "o").exists()


def test_bench_case_and_run_id_select_and_append(cli, tmp_path):
    suite = fake(tmp_path)
    r = cli("bench", "--suite", str(suite), "--case", "fake-ok-cartpole-n2", "--run-id", "myrun", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp_path / "o" / "myrun").glob("*.json")] == ["fake-ok-cartpole-n2.json"]
    bad = cli("bench", "--suite", str(suite), "--case", "nope", "--out", str(tmp_path / "o"))
    assert bad.returncode == 2 and "--case nope: not a case of suite 'fk'" in bad.stderr
    bad = cli("bench", "--suite", str(suite), "--run-id", "../x", "--out", str(tmp_path / "o"))
    assert bad.returncode == 2 and "--run-id '../x'" in bad.stderr


def test_a_failing_sacct_is_one_clear_error_not_a_hang(tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "sacct").write_text("#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n")
    (fake_bin / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    d = dsp.Dispatch("R", "smoke", str(tmp_path / "R"), dsp.Options(), [dsp.Task(0, "envpool", ["k"], "41_0")])
    with pytest.raises(dsp.UserError, match="sacct failed .*Connection refused.*--attach"):
        dsp._states(d)


def test_an_edited_state_file_cannot_start_a_program_or_write_elsewhere(tmp_path, cli, monkeypatch):
    """dispatch.state lives in a shared results folder: `--rerun` must not run what it names, and a
    malformed one is one line, never a traceback."""
    from gpuenv import envs

    # a local dispatch whose job id is no process (above the kernel's pid_max): --attach sees it ended at once,
    # where a Slurm job id sacct has not seen yet would be waited for (a real Slurm here numbers its own jobs)
    job = "90000041"

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env_python = envs.cache_root() / "abc" / "bin" / "python"  # a real environment's: a link to its base interpreter
    env_python.parent.mkdir(parents=True)
    env_python.symlink_to(sys.executable)
    run = tmp_path / "R1"
    run.mkdir()
    good = dsp.Dispatch("R1", "smoke", "/etc", dsp.Options(executor="local"), [dsp.Task(0, "envpool", ["k"], job + "_0", python=str(env_python))])
    good.out = str(run)
    good.save()
    loaded = dsp.Dispatch.load(run)
    assert loaded.out == str(run) and loaded.tasks[0].python == str(env_python)
    state = json.loads((run / dsp.STATE).read_text())
    task = state["tasks"][0]
    for edit, needle in [
        ({"tasks": [{**task, "python": "/bin/sh"}]}, "would start '/bin/sh', which is not one of gpuenv's environments"),
        ({"tasks": [{**task, "python": str(env_python.parent / ".." / ".." / ".." / ".." / "sh")}]}, "not one of gpuenv's environments"),
        ({"tasks": [{**task, "job_id": job + "_0; rm -rf /"}]}, "tasks.0.job_id: String should match pattern"),
        ({"tasks": [{**task, "job_id": [job]}]}, "tasks.0.job_id"),
        ({"tasks": [{**task, "python": 5}]}, "tasks.0.python"),
        ({"run_id": "../other"}, "run_id: String should match pattern"),
        ({"run_id": "R2"}, "is not the folder's name"),
        ({"options": {**state["options"], "image": "--privileged"}}, "--image '--privileged': not an image reference"),
        ({"options": {**state["options"], "image": "evil/image:latest"}}, "names the image 'evil/image:latest', not one of gpuenv's"),
        ({"filters": {"backends": ["envpool"], "bogus": 1}}, "filters.bogus"),
        ({"tasks": "x"}, "is not a dispatch's state (tasks"),
    ]:
        (run / dsp.STATE).write_text(json.dumps({**state, **edit}))
        with pytest.raises(dsp.UserError, match=re.escape(needle)):
            dsp.Dispatch.load(run)
    (run / dsp.STATE).write_text("[" * 100_000)
    with pytest.raises(dsp.UserError, match="is not a dispatch's state"):
        dsp.Dispatch.load(run)
    (run / dsp.STATE).write_text(json.dumps({**state, "out": "/etc"}))
    assert dsp.Dispatch.load(run).out == str(run)  # records go where the state was found
    (tmp_path / "R3").mkdir()
    (tmp_path / "R3" / dsp.STATE).write_text("[1, 2]")  # another folder's broken state: passed over by --attach
    assert dsp.find_job(tmp_path, job) == run
    r = cli("dispatch", "--attach", job, "--out", str(tmp_path), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert "Traceback" not in r.stderr
    r = cli("dispatch", "--executor", "local", "--image", "-v/:/host", "--container", "docker", "--suite", "smoke", "--dry-run")
    assert r.returncode == 2 and "not an image reference" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_tasks_log_is_its_own_not_task_10s(tmp_path):
    d = dsp.Dispatch("R", "smoke", str(tmp_path), dsp.Options(), [dsp.Task(1, "envpool", ["k"], "41_1")])
    d.folder.mkdir()
    (d.folder / "41_10_0_log.err").write_text("task ten")
    (d.folder / "41_1_0_log.err").write_text("task one")
    assert dsp._task_log(d, d.tasks[0]) == "task one"


# --- the local executor, for real ---------------------------------------------------------------


def test_local_executor_runs_every_task_and_records_carry_their_job(cli, tmp_path):
    r = cli("dispatch", "--executor", "local", "--suite", str(fake(tmp_path)), "--out", str(tmp_path / "o"), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = (tmp_path / "o").iterdir()
    recs = records(run_dir)
    assert set(recs) == {"fake-ok-cartpole-n1", "fake-ok-cartpole-n2"}
    jobs = set()
    for (rec,) in recs.values():
        s = rec["where"]["scheduler"]
        assert rec["status"] == "ok" and rec["run_id"] == run_dir.name and s["scheduler"] == "local" and s["container"] == "none"
        jobs.add(s["job_id"])
    assert len(jobs) == 2  # one task each (--cases-per-task 1)
    assert "cartpole: env steps/s" in r.stdout and f"2 records in {run_dir}" in " ".join(r.stdout.split())


# --- a real Slurm on this host --------------------------------------------------------------------


@needs_slurm
def test_slurm_smoke_array_every_record_with_its_job_facts(cli, tmp_path):
    r = cli("dispatch", "--executor", "slurm", "--suite", "smoke", "--backend", "gymnasium", "--backend", "envpool",
            "--array-parallelism", "2", "--out", str(tmp_path / "o"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = (tmp_path / "o").iterdir()
    st = json.loads((run_dir / dsp.STATE).read_text())
    job = st["job_id"]
    recs = records(run_dir)
    assert len(recs) == 5 and all(len(v) == 1 and v[0]["status"] == "ok" for v in recs.values())
    tasks = set()
    for (rec,) in recs.values():
        s = rec["where"]["scheduler"]
        assert s["scheduler"] == "slurm" and s["array_job_id"] == job and s["partition"] == "debug"
        assert s["node"] and s["cpus"] >= 1 and s["exclusive"] is False
        tasks.add(s["array_task_id"])
    assert tasks == set(range(5))
    assert sacct_state(job).split() == ["COMPLETED"] * 5
    out = " ".join(r.stdout.split())
    assert f"slurm job {job}" in out and "cartpole: env steps/s" in out and "envpool:async" in out


@needs_slurm
def test_a_cancelled_task_is_a_failed_case_and_a_rerun_runs_only_it(cli, tmp_path):
    out = tmp_path / "o"
    # parallelism 1: the ok task waits behind the hanging one, then runs once that is cancelled
    started = tmp_path / "hang.pid"  # written by the hanging case itself: the task is in the case, not still starting
    p = dispatch_bg("--executor", "slurm", "--suite", str(fake(tmp_path, '"fake:hang", "fake:ok"', "1")), "--out", str(out),
                    env={"GPUENV_FAKE_CHILD_PIDFILE": str(started)})
    try:
        st = wait_for(lambda: (s := state_of(out)) and all(t["job_id"] for t in s["tasks"]) and s, what="the array's job ids")
        hang, ok = (t["job_id"] for t in st["tasks"])
        wait_for(lambda: sacct_state(hang).startswith("RUNNING"), what="the hanging task to start")
        # a task cancelled while gpuenv still imports has no case running: it writes no interrupted record
        wait_for(started.exists, timeout=300, what="the hanging case to start")
        subprocess.run(["scancel", hang], check=True)
        stdout, stderr = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 1, stdout + stderr  # a case failed
    run_dir = out / st["run_id"]
    recs = records(run_dir)
    latest = {k: v[-1] for k, v in recs.items()}
    assert latest["fake-ok-cartpole-n1"]["status"] == "ok"
    failed = latest["fake-hang-cartpole-n1"]
    assert failed["status"] == "failed" and failed["failure"]["kind"] == "scheduler"
    assert f"({hang}) as CANCELLED" in failed["failure"]["reason"]
    assert [r["status"] for r in recs["fake-hang-cartpole-n1"]] == ["interrupted", "failed"]  # SIGTERM's record is kept
    assert f"gpuenv dispatch --rerun {run_dir}" in stderr
    # The rerun submits only the case with no ok record (and, here, it hangs again: cancel it at once).
    p = dispatch_bg("--rerun", str(run_dir))
    try:
        st2 = wait_for(lambda: (s := state_of(out)) and len(s["tasks"]) == 3 and s["tasks"][2]["job_id"] and s, what="the rerun")
        assert st2["tasks"][2]["cases"] == ["fake-hang-cartpole-n1"] and len(st2["reruns"]) == 1
        subprocess.run(["scancel", st2["tasks"][2]["job_id"]], check=True)
        p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    after = records(run_dir)
    assert len(after["fake-ok-cartpole-n1"]) == 1  # not run again
    again = [r for r in after["fake-hang-cartpole-n1"] if r["where"]["scheduler"]["job_id"] == st2["tasks"][2]["job_id"]]
    assert again and again[-1]["status"] == "failed" and again[-1]["failure"]["kind"] == "scheduler"
    # the first task's case is not failed a second time on its behalf
    assert sum(1 for r in after["fake-hang-cartpole-n1"] if r["where"]["scheduler"]["job_id"] == hang and r["status"] == "failed") == 1


@needs_slurm
def test_attach_picks_the_job_up_after_the_submitting_command_was_killed(cli, tmp_path):
    out = tmp_path / "o"
    p = dispatch_bg("--executor", "slurm", "--suite", str(fake(tmp_path)), "--out", str(out))
    st = wait_for(lambda: (s := state_of(out)) and s.get("job_id") and s, what="the submitted job")
    os.killpg(p.pid, signal.SIGKILL)  # the submitting command dies; the array goes on in Slurm
    p.wait()
    r = cli("dispatch", "--attach", st["job_id"], "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert f"attached to job {st['job_id']}" in text and "cartpole: env steps/s" in text
    recs = records(out / st["run_id"])
    assert set(recs) == {"fake-ok-cartpole-n1", "fake-ok-cartpole-n2"} and all(v[-1]["status"] == "ok" for v in recs.values())
    assert {v[-1]["where"]["scheduler"]["array_job_id"] for v in recs.values()} == {st["job_id"]}


def test_a_sweep_dispatches_every_case_once_per_version_set(cli, tmp_path):
    """`--sweep`: the version sets' environments (gpuenv sweep's, cached) built on the submitting host;
    one task per (version set, batch); each record tagged with its set; tables per set."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = cli("dispatch", "--executor", "local", "--sweep", "typer==0.13.1,0.29.2", "--backend", "fake",
            "--suite", str(fake(tmp_path, sizes="2")), "--out", str(tmp_path / "o"), env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = (tmp_path / "o").iterdir()
    recs = [load(p) for p in run_dir.glob("*.json")]
    assert sorted(rec["tags"]["version_set"] for rec in recs) == ["typer==0.13.1", "typer==0.29.2"]
    assert {rec["tags"]["swept"]["typer"] for rec in recs} == {"0.13.1", "0.29.2"}  # what each environment had
    assert all(rec["what"]["details"]["typer"] == rec["tags"]["swept"]["typer"] for rec in recs)  # and ran in
    assert all(rec["status"] == "ok" and rec["case_key"] == "fake-ok-cartpole-n2" for rec in recs)
    assert len({rec["where"]["scheduler"]["job_id"] for rec in recs}) == 2
    out = " ".join(r.stdout.split())
    assert "typer==0.13.1" in out and "typer==0.29.2" in out and out.count("cartpole: env steps/s") == 2


def test_sacct_rows_of_tasks_not_started_cover_each_index():
    assert dsp.array_ids("1234_[1-3,7%2]") == ["1234_1", "1234_2", "1234_3", "1234_7"]
    assert dsp.array_ids("1234_[5]") == ["1234_5"] and dsp.array_ids("1234_0") == ["1234_0"]
