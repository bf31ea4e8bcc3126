"""Crash, hang and kill isolation with backends that fail on purpose, in real worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, fake_suite, write_suite

from gpuenv.backends.base import Case
from gpuenv.modes import get_mode
from gpuenv.modes.base import Plan
from gpuenv.modes.throughput.suite import MeasureSpec, PlannedCase
from gpuenv.results.schema import as_dict, load
from gpuenv.run import runner

FAST = MeasureSpec(processes=3, values=2, warmups=1, min_time_s=0.01, chunk_steps=5, timeout_s=20)


def planned(variant: str, timeout_s: float = 20) -> PlannedCase:
    from dataclasses import replace

    return PlannedCase(Case("fake", variant, "cartpole", 2, chunk_steps=5), replace(FAST, timeout_s=timeout_s))


def run_plan(cases: list[PlannedCase], *, suite: str, run_id: str, out_dir):
    """(record as written, path) per case: these tests check the JSON the runner wrote."""
    mode = get_mode("env-step-throughput")
    written = runner.run_plan(mode, Plan(suite, cases, [], "3 processes each"), run_id=run_id, out_dir=out_dir)
    return [(as_dict(r), p) for r, p in written]


def test_each_failure_is_recorded_and_the_run_goes_on(tmp_path):
    cases = [
        planned("raise"),
        planned("segfault"),
        planned("exit"),
        planned("hang", timeout_s=3),
        planned("sigkill"),
        planned("ok"),
    ]
    written = run_plan(cases, suite="t", run_id="r", out_dir=tmp_path)
    by_variant = {rec["case"]["variant"]: (rec, path) for rec, path in written}
    assert set(by_variant) == {"raise", "segfault", "exit", "hang", "sigkill", "ok"}
    reasons = {v: r["failure"]["reason"] if r["failure"] else None for v, (r, _) in by_variant.items()}
    kinds = {v: r["failure"]["kind"] if r["failure"] else None for v, (r, _) in by_variant.items()}
    assert kinds == {"raise": "crashed", "segfault": "killed", "exit": "crashed", "hang": "timeout", "sigkill": "killed", "ok": None}
    assert reasons["raise"] == "RuntimeError: fake backend failed on purpose"
    assert reasons["segfault"] == "worker killed by SIGSEGV"
    # SIGKILL, what the OOM killer sends: killed, and the watchdog passes it on without an error of its own
    assert reasons["sigkill"].startswith("worker killed by SIGKILL (not the OOM killer")
    assert "Traceback" not in by_variant["sigkill"][0]["failure"]["stderr_tail"]
    assert reasons["exit"] == "worker exited with code 7 without a result"
    assert reasons["hang"].startswith("timed out after 3 s")
    assert reasons["ok"] is None
    for v, (rec, path) in by_variant.items():
        assert load(path) == json.loads(json.dumps(rec))  # every record valid on disk
        assert rec["status"] == ("ok" if v == "ok" else "failed")
        assert (rec["summary"] is None) == (v != "ok")
        if v != "ok":
            assert rec["failure"]["process"] == 0
            assert rec["processes"][-1]["failure"]["kind"] == kinds[v]
    ok = by_variant["ok"][0]
    assert len(ok["processes"]) == 3 and ok["summary"]["env_steps_per_s"]["n_processes"] == 3
    # a failing case stops after its first failed process instead of burning the timeout 3 times
    assert len(by_variant["hang"][0]["processes"]) == 1


def _gone(pid: int, within_s: float = 30.0) -> bool:  # a busy VM tears down slower
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_hang_kills_the_whole_process_group(tmp_path, monkeypatch):
    """The hanging worker has started a child (as SubprocVecEnv does): the timeout kills both."""
    pidfile = tmp_path / "child.pid"
    monkeypatch.setenv("GPUENV_FAKE_CHILD_PIDFILE", str(pidfile))
    written = run_plan([planned("hang", timeout_s=3)], suite="t", run_id="r", out_dir=tmp_path)
    rec = written[0][0]
    assert rec["status"] == "failed" and rec["failure"]["kind"] == "timeout"
    worker_pid, child_pid = (int(x) for x in pidfile.read_text().split())
    assert _gone(worker_pid) and _gone(child_pid)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_keeps_finished_records(tmp_path, sig):
    s = write_suite(
        tmp_path / "ctrlc.toml",
        """
[measure]
processes = 3
values = 2
min_time_s = 0.01
chunk_steps = 5
timeout_s = 900
[[matrix]]
backends = ["fake:ok"]
tasks = ["cartpole"]
num_envs = [1, 2]
[[matrix]]
backends = ["fake:hang"]
tasks = ["cartpole"]
num_envs = [1]
""",
    )
    out = tmp_path / "out"
    pidfile = tmp_path / "child.pid"
    # Output to files, not pipes: the test waits for gpuenv itself, never for whoever else holds a pipe.
    log_out, log_err = open(tmp_path / "stdout", "w"), open(tmp_path / "stderr", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuenv", "bench", "--suite", str(s), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "GPUENV_FAKE_CHILD_PIDFILE": str(pidfile)},
        stdout=log_out,
        stderr=log_err,
        text=True,
    )
    # Generous deadlines: on a loaded 2-core machine six worker starts can take minutes. The hang
    # case's own timeout (900 s) is longer still, so the signal always lands while it hangs.
    deadline = time.time() + 600
    while time.time() < deadline and len(list(out.rglob("*.json"))) < 2:
        time.sleep(0.2)
    while time.time() < deadline and not pidfile.exists():  # the hang case is now running
        time.sleep(0.1)
    assert pidfile.exists(), "the hang case never started"
    proc.send_signal(sig)
    proc.wait(timeout=120)
    log_out.close()
    log_err.close()
    stdout, stderr = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr + stdout
    records = [load(p) for p in sorted(out.rglob("*.json"))]
    statuses = sorted((r["case_key"], r["status"]) for r in records)
    assert statuses == [
        ("fake-hang-cartpole-n1", "interrupted"),
        ("fake-ok-cartpole-n1", "ok"),
        ("fake-ok-cartpole-n2", "ok"),
    ]
    interrupted = next(r for r in records if r["status"] == "interrupted")
    assert interrupted["failure"]["kind"] == "interrupted" and interrupted["summary"] is None
    assert interrupted["failure"]["reason"] == ("interrupted by SIGTERM" if sig == signal.SIGTERM else "interrupted by Ctrl-C (SIGINT)")
    assert "the 2 finished record(s) and the interrupted case's record are kept" in stderr
    worker_pid, child_pid = (int(x) for x in pidfile.read_text().split())
    assert _gone(worker_pid) and _gone(child_pid)


def test_unsupported_and_oom_have_their_own_failure_kinds(tmp_path):
    written = run_plan([planned("unsupported"), planned("oom"), planned("ok")], suite="t", run_id="r", out_dir=tmp_path)
    by_variant = {rec["case"]["variant"]: rec for rec, _ in written}
    assert by_variant["unsupported"]["status"] == "failed"
    assert by_variant["unsupported"]["failure"]["kind"] == "unsupported"
    assert "does not substitute" in by_variant["unsupported"]["failure"]["reason"]
    assert by_variant["oom"]["status"] == "failed"
    assert by_variant["oom"]["failure"]["kind"] == "oom"
    assert by_variant["ok"]["status"] == "ok" and by_variant["ok"]["failure"] is None
    for v in ("unsupported", "oom"):  # one failed process ends the case
        assert len(by_variant[v]["processes"]) == 1 and by_variant[v]["summary"] is None


def test_a_case_over_the_memory_limit_is_oom_and_the_table_says_what_fit(cli, tmp_path):
    suite = fake_suite(tmp_path / "mem.toml", '"fake:alloc"', "[1, 4, 32]", timeout=120, extra="memory_limit_mib = 1024\n")
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"))
    assert r.returncode == 1, r.stdout + r.stderr  # a case failed (its record says why)
    recs = {rec["case"]["num_envs"]: rec for rec in (load(p) for p in (tmp_path / "out").rglob("*.json"))}
    assert recs[1]["status"] == "ok" and recs[4]["status"] == "ok"
    assert recs[1]["settings"]["memory_limit_mib"] == 1024
    assert recs[4]["summary"]["host_memory_mib"] > recs[1]["summary"]["host_memory_mib"] + 150  # 3 x 64 MiB more state
    big = recs[32]  # 2 GiB of state under a 1 GiB address space: MemoryError, not a crash or the OOM killer
    assert big["status"] == "failed" and big["failure"]["kind"] == "oom", big["failure"]
    assert "memory limit of 1024 MiB" in big["failure"]["reason"]
    out = " ".join(r.stdout.split())
    assert "fake:alloc / cartpole: the largest num_envs that fit under the memory limit of 1024 MiB: 4 (out of memory at 32)" in out


@pytest.mark.parametrize("then", ["writes", "raises"])
def test_a_stepper_that_keeps_its_caches_keeps_its_figure_whatever_the_cache_does(monkeypatch, then):
    """keep_caches() (Genesis's compile cache, written at its own shutdown) runs after the timed values:
    the figure is handed to the runner first, and an error there is recorded beside it, never instead."""
    import types

    from gpuenv.modes.throughput import worker
    from gpuenv.registry import default_registry
    from gpuenv_fake import adapter as fake

    def open_(case, native):
        stepper = fake.open(case, native)

        def keep_caches():
            if then == "raises":
                raise OSError("cache folder not writable\nsecond line")
            stepper.facts.details["compile_cache"] = "hit"

        stepper.keep_caches = keep_caches
        return stepper

    real = default_registry()
    adapter = types.SimpleNamespace(open=open_)
    monkeypatch.setattr(worker, "default_registry",
                        lambda: types.SimpleNamespace(get=lambda name: types.SimpleNamespace(load=lambda: adapter), native=real.native))
    kept: list[dict] = []
    spec = {"mode": "env-step-throughput", "case": Case("fake", "ok", "cartpole", 2, chunk_steps=5).to_dict(),
            "settings": {"min_time_s": 0.01, "values": 2, "warmups": 0}}
    out = worker.measure_case(spec, keep=lambda result: kept.append(json.loads(json.dumps(result))))
    assert out["ok"] and len(out["env_steps_per_s"]) == 2 and all(v > 0 for v in out["env_steps_per_s"])
    assert kept and kept[0]["env_steps_per_s"] == out["env_steps_per_s"]  # the figure went to the runner before
    details = out["facts"]["details"]
    if then == "raises":
        assert details["keep_caches_error"] == "OSError: cache folder not writable" and out["compile_cache"] == "n/a"
    else:
        assert out["compile_cache"] == "hit" and "compile_cache" not in details and "keep_caches_error" not in details
