"""`make gpu-wheels` and `make gpu-check`: the wheelhouse for a GPU machine without internet, and the
one prepared command that measures the decision's GPU parts there (run here on the CPU, 16 envs)."""

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
from conftest import ROOT

from gpuenv.errors import UserError
from gpuenv.images import wheelhouse
from gpuenv.run import gpucheck


def no_gpu_env(tmp_path: Path) -> dict:
    """PATH without nvidia-smi (the CI machine has none anyway; this makes it certain)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "env", "dirname", "python3"):
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir), "GPUENV_CPU_OK": ""}


def test_requirements_pin_every_wheel_the_gpu_machine_lacks_with_its_hashes():
    text = wheelhouse.requirements(wheelhouse.SOURCE_LOCK.read_text())
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in text.splitlines() if "==" in line}
    assert pinned == set(wheelhouse.wanted()) and len(pinned) >= 10
    entries = text.split("==")[1:]
    assert all("--hash=sha256:" in e for e in entries)  # pip's --require-hashes checks every wheel
    assert "jax==" not in text and "torch==" not in text and "numpy==" not in text  # the machine's own stay


def test_requirements_name_a_package_the_lock_does_not_pin():
    with pytest.raises(UserError, match=r"brax.txt pins no not-a-package; regenerate it with `make locks` or drop the name from docker/gpu-wheels.txt"):
        wheelhouse.requirements(wheelhouse.SOURCE_LOCK.read_text(), ("brax", "not-a-package"))


@pytest.mark.backend
def test_gpu_wheels_downloads_a_wheelhouse_under_50_mb(tmp_path, cli):
    (tmp_path / "whl").mkdir()
    (tmp_path / "whl" / "brax-0.0.1-py3-none-any.whl").write_bytes(b"an older download")  # would make two braxes there
    r = cli("images", "wheels", str(tmp_path / "whl"), timeout=600)
    assert r.returncode == 0, r.stderr
    wheels = sorted(p.name for p in (tmp_path / "whl").glob("*.whl"))
    assert len(wheels) == len(wheelhouse.wanted()) and "brax-0.0.1-py3-none-any.whl" not in wheels
    size = sum(p.stat().st_size for p in (tmp_path / "whl").glob("*.whl"))
    assert 5e6 < size < wheelhouse.LIMIT_BYTES
    compiled = [w for w in wheels if "-none-any" not in w]  # mujoco-core, pydantic-core: built for the machine's Python
    assert compiled and all("-cp312-" in w and "x86_64" in w for w in compiled)
    assert f"{len(wheels)} wheels, {size / 1e6:.1f} MB (limit 50 MB)" in r.stdout


def test_gpu_check_without_a_gpu_is_one_line_unless_asked_for_the_cpu(tmp_path, cli):
    r = cli("gpu-check", "--out", str(tmp_path / "out"), env=no_gpu_env(tmp_path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no NVIDIA GPU here (nvidia-smi not found)" in r.stderr and "GPUENV_CPU_OK=1" in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    r = cli("gpu-check", "--budget", "30", env=no_gpu_env(tmp_path))
    assert r.returncode == 2 and "--budget 30 s is too short" in r.stderr


def test_gpu_check_script_without_environment_or_wheelhouse_says_what_to_bring(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "gpu-check.sh", tmp_path / "tools")
    r = subprocess.run(["bash", str(tmp_path / "tools" / "gpu-check.sh")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "neither the project's environment (.venv" in r.stderr and "make gpu-wheels" in r.stderr


def test_a_step_past_the_budget_is_interrupted_like_ctrl_c_and_its_time_kept(tmp_path):
    marker = tmp_path / "interrupted"
    code = (f"import time, pathlib\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            f"    pathlib.Path({str(marker)!r}).write_text('kept')\n    raise SystemExit(130)\n")
    step = gpucheck.Step("bench", [sys.executable, "-c", code])
    start = time.monotonic()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background shell (CI): children inherit it ignored
    try:
        gpucheck._run(step, deadline=start + 2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert step.stopped and step.returncode == 130 and marker.read_text() == "kept"  # the bench's Ctrl-C path ran
    assert 1.5 < step.seconds < 20


@pytest.mark.backend
def test_gpu_check_on_the_cpu_measures_the_suite_then_shows_and_decides(tmp_path):
    """`GPUENV_CPU_OK=1 make gpu-check` as the issue asks: the same script, 16 envs on the CPU."""
    out = tmp_path / "out"
    env = {**os.environ, "GPUENV_CPU_OK": "1", "PATH": no_gpu_env(tmp_path)["PATH"] + os.pathsep + str(ROOT / ".venv" / "bin")}
    r = subprocess.run(["bash", str(ROOT / "tools" / "gpu-check.sh"), "--out", str(out), "--budget", "1500"],
                       capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path)  # room on a slow VM: the budget only cuts
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "GPU none (nvidia-smi not found): GPUENV_CPU_OK=1, 16 envs and 1 process a case on the CPU" in r.stdout and "brax 0.14" in r.stdout
    (run_dir,) = out.iterdir()
    records = {p.stem: json.loads(p.read_text()) for p in run_dir.glob("*.json")}
    assert set(records) == {"brax-generalized-halfcheetah-n16", "mjx-jax-halfcheetah-n16", "mjx-jax-brax-halfcheetah-n16",
                            "brax-positional-halfcheetah-n16"}
    brax = records["brax-generalized-halfcheetah-n16"]
    assert brax["status"] == "ok" and brax["suite"] == "gpu-check" and brax["what"]["device"] == "cpu"
    phases = brax["summary"]["phases"]
    for name in ("vecenv", "inference", "collect", "learn"):
        assert phases[name]["env_steps_per_s"]["median"] > 0, name  # measured, not absent or failed
    # compile timed apart from the rate, per process (one on the CPU): cold, or warm where JAX's persistent cache had it
    assert len(brax["processes"]) == 1 and len(brax["summary"]["compile_s_cold"]) + len(brax["summary"]["compile_s_warm"]) == 1
    for step in ("bench", "peers", "show", "decide"):
        assert f"gpu-check: {step} exited 0 after" in r.stdout
    # the peer table beside the records, which record readers leave alone (show above read them all)
    (peer_file,) = run_dir.glob("peers-*.jsonl")
    where, *rows = [json.loads(line) for line in peer_file.read_text().splitlines()]
    assert where["where"]["machine"] and "skipped" not in r.stdout + r.stderr
    assert_peer_rows(rows, r.stdout, 16)
    flat = " ".join(r.stdout.split())  # rich wraps the answer at the terminal's width, anywhere in it
    assert f"run {run_dir.name}" in flat and "trains 1 x 50,000,000 steps" in flat  # decide from these records
    assert "answer: a GPU simulator (brax, mjx), not measured on a GPU here" in flat  # 50M is not below the course's 50M


def assert_peer_rows(rows: list[dict], stdout: str, n: int) -> None:
    """gpu-check's peer step (`gpuenv peers --plain`, each backend's Backend.peer.cpu_check): both rows and
    their peers ran, in physics steps/s, with the settings and the physics steps per env step the backend
    ran; what holds at any speed (the ratios themselves are measurements, docs/measuring.md, never
    asserted). tests/test_peers.py runs the other sides (zero actions, no resets) on one row."""
    brax, mjx = rows
    assert (brax["selector"], brax["num_envs"], brax["physics_steps_per_env_step"]) == ("brax:positional", n, 16)  # Brax's n_frames, not frame_skip 5
    assert (mjx["selector"], mjx["num_envs"], mjx["physics_steps_per_env_step"]) == ("mjx:jax-brax", n, 5)
    assert mjx["peer"].startswith("mujoco.mjx.benchmark") and brax["peer"].startswith("brax.test_utils.benchmark")
    assert (mjx["solver"]["solver"], mjx["solver"]["iterations"], mjx["solver"]["ls_iterations"]) == ("newton", 1, 4)
    for row in rows:
        assert sorted(row["physics_steps_per_s"]) == ["gpuenv", "peer"]  # --plain
        assert all(v > 0 for vs in row["physics_steps_per_s"].values() for v in vs) and len(row["physics_steps_per_s"]["peer"]) == 3
        med = {k: sorted(v)[len(v) // 2] for k, v in row["physics_steps_per_s"].items()}  # 3 values a side: odd
        assert row["ratio"]["gpuenv"] == pytest.approx(med["gpuenv"] / med["peer"])  # medians, not means
        assert f"{row['selector']} halfcheetah n={n} on cpu: physics steps/s gpuenv" in stdout


def test_gpu_check_refuses_a_python_whose_jax_does_not_see_the_gpu(tmp_path, cli):
    """A GPU workstation after `make install`: .venv's JAX is the CPU build, so its numbers would be no GPU numbers."""
    env = no_gpu_env(tmp_path)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'Fake GPU, 580.1'\n")
    smi.chmod(0o755)
    r = cli("gpu-check", "--out", str(tmp_path / "out"), env=env, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "a GPU is here (Fake GPU) but this Python's JAX runs on cpu" in r.stderr and "make gpu-wheels" in r.stderr


@pytest.mark.backend
def test_sigterm_to_gpu_check_stops_its_bench_and_leaves_no_process(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "GPUENV_CPU_OK": "1", "PATH": no_gpu_env(tmp_path)["PATH"], "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "gpuenv", "gpu-check", "--out", str(out), "--budget", "500"],
                                stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + 120
        while "gpu-check: bench:" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the bench is starting its first worker
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    assert proc.returncode != 0
    text = log.read_text()
    run_id = re.search(r"records go to \S+/(\d{8}T\d{6}Z-[0-9a-f]{6}); budget", text).group(1)  # in the bench's argv
    left = subprocess.run(["pgrep", "-f", run_id], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes left running: {left}\n{text[-2000:]}"
