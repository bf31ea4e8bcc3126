"""Godot 4 for real: Debian sid's Godot 4.6 (the `godot4` launcher `make install` writes) with gpuenv's
BallChase port over godot-rl's protocol, on GodotPhysics3D, Jolt Physics and GodotPhysics2D.

.ci/run installs debootstrap and `make install` debootstraps the runtime; without it these tests skip
and say so."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import godot_processes, kill_gpuenv_mid_case

from gpuenv.errors import UserError
from gpuenv.registry import default_registry
from gpuenv.results.schema import load

pytestmark = pytest.mark.backend

if default_registry().get("godot4").unavailable_reason():
    pytest.skip(default_registry().get("godot4").unavailable_reason() or "", allow_module_level=True)

import gpuenv.backends.godot4 as godot4  # noqa: E402
from gpuenv.backends.godot4.adapter import Godot4Pool, make_vecenv, split  # noqa: E402
from gpuenv.backends.godot4.runtime import RUNTIME, install, launcher_text  # noqa: E402


def test_variants_name_an_engine_and_a_pacing():
    assert split("jolt-uncapped") == ("jolt", "uncapped")
    assert split("godotphysics2d-realtime-x5-ar1") == ("godotphysics2d", "realtime-x5-ar1")
    with pytest.raises(UserError, match="ENGINE one of godotphysics, jolt, godotphysics2d"):
        split("physx-uncapped")
    assert set(godot4.BACKEND.variants) == {f"{e}-{p}" for e in godot4.ENGINES for p in ("uncapped", "realtime")}


def test_protocol_on_jolt_episodes_end_on_time_and_no_godot_or_project_copy_is_left():
    before = godot_processes()
    pool = Godot4Pool("jolt-uncapped", 32, seed=3)  # two Godot 4 processes of 16 agents
    copy = pool.copy
    try:
        assert len(pool.procs) == 2 and len(godot_processes() - before) == 2
        assert 'physics_engine="Jolt Physics"' in (copy / "project" / "override.cfg").read_text()
        obs = pool.reset()
        assert obs.shape == (32, 6) and obs.dtype == np.float32 and np.all(np.abs(obs) <= 1)
        assert not np.allclose(obs[:16], obs[16:])  # each process its own seed
        for t in range(1, 201):
            obs, rew, done, info = pool.step(np.clip(obs[:, :2] * 50, -1, 1))  # straight at the target
            if t < 200:
                assert not done.any(), f"an episode ended early at step {t}"
                assert rew.mean() > 0
        assert done.all()  # EPISODE_STEPS = 200
        final = np.asarray([i["terminal_obs"] for i in info], dtype=np.float32)
        assert final.shape == (32, 6) and not np.allclose(final, obs)  # obs is the next episode's first
        assert all(ticks >= 200 * 8 for ticks, _ in pool.engine_stats())
        d = pool.details()
        assert d["engine"].startswith("Godot 4.") and "godot4" in d["engine"] and d["physics_engine"] == "Jolt Physics"
        assert d["solver"]["jolt_velocity_steps"] > 0 and d["solver"]["physics_ticks_per_second"] == 60
    finally:
        pool.close()
    assert not copy.exists()
    deadline = time.time() + 30
    while godot_processes() - before and time.time() < deadline:
        time.sleep(0.1)
    assert not godot_processes() - before


@pytest.mark.parametrize(("variant", "engine", "solver_key"), [
    ("godotphysics-uncapped", "GodotPhysics3D", "solver_iterations"),
    ("godotphysics2d-uncapped", "GodotPhysics2D", "solver_iterations"),
])
def test_each_engine_variant_runs_the_engine_it_names(variant, engine, solver_key):
    pool = Godot4Pool(variant, 2, seed=1)
    try:
        obs = pool.reset()
        obs, rew, done, _ = pool.step(np.clip(obs[:, :2] * 50, -1, 1))
        assert obs.shape == (2, 6) and rew.shape == (2,)
        assert pool.details()["physics_engine"] == engine and solver_key in pool.details()["solver"]
    finally:
        pool.close()


def test_an_engine_this_godot_lacks_is_refused_in_one_line_not_run_silently(monkeypatch):
    """Godot falls back to its own 3D engine when the setting names one it was built without; gpuenv
    reads which engine ran and refuses rather than record GodotPhysics3D as Jolt."""
    monkeypatch.setitem(godot4.ENGINES, "jolt", ("NoSuch Physics", 3))
    before = godot_processes()
    with pytest.raises(UserError, match=r"ran 'GodotPhysics3D \(NoSuch Physics asked for; not in this build\)', not 'NoSuch Physics'"):
        Godot4Pool("jolt-uncapped", 2, seed=1)
    deadline = time.time() + 30  # gone once refused; a busy VM reaps slower
    while godot_processes() - before and time.time() < deadline:
        time.sleep(0.1)
    assert not godot_processes() - before


def test_bench_records_the_engine_its_solver_and_the_godot_version(cli, tmp_path):
    r = cli("bench", "--backend", "godot4:godotphysics-uncapped", "--backend", "godot4:jolt-uncapped", "--backend",
            "godot4:godotphysics-realtime", "--task", "ballchase", "--num-envs", "16", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "godot4:godotphysics-uncapped" in out and "godot4:jolt-uncapped" in out
    records = {rec["case"]["variant"]: rec for rec in (load(p) for p in tmp_path.rglob("*.json"))}
    assert set(records) == {"godotphysics-uncapped", "jolt-uncapped", "godotphysics-realtime"}
    for variant, rec in records.items():
        d = rec["what"]["details"]
        assert d["engine"].startswith("Godot 4.6") and d["agents_per_process"] == 16 and d["processes"] == 1
        assert d["physics_engine"] == ("Jolt Physics" if variant.startswith("jolt") else "GodotPhysics3D")
        assert d["physics_ticks_per_s_per_process"] > 0
        assert rec["what"]["native_env_id"] == "BallChase (gpuenv, Godot 4)"
    # paced by the engine: at most 60 x speedup ticks a second (test_godot.py says why 25%); uncapped launched with
    # --fixed-fps (which of the two is faster depends on this machine: not asserted)
    rt = records["godotphysics-realtime"]["what"]["details"]
    assert rt["speedup"] == 20 and rt["physics_ticks_per_s_per_process"] < 60 * 20 * 1.25 and rt["fixed_fps"] is None
    assert records["godotphysics-uncapped"]["what"]["details"]["fixed_fps"] == 60


def test_killing_gpuenv_during_a_godot4_case_leaves_no_godot_behind(tmp_path):
    started, left = kill_gpuenv_mid_case(tmp_path, "godot4:jolt-realtime")
    assert started and not left, "a Godot process outlived gpuenv"


def test_the_ppo_vecenv_gives_sb3_the_final_observation_of_each_episode():
    native = godot4.BACKEND.tasks["ballchase"]
    venv, details = make_vecenv("jolt-uncapped", native, 4, 0)
    try:
        assert details["vectoriser"].startswith("gpuenv GodotVecEnv") and details["physics_engine"] == "Jolt Physics"
        obs = venv.reset()
        assert obs.shape == (4, 6) and venv.action_space.shape == (2,)
        for _ in range(200):
            obs, rew, done, infos = venv.step(np.zeros((4, 2), dtype=np.float32))
        assert done.all() and all(i["TimeLimit.truncated"] and i["terminal_observation"].shape == (6,) for i in infos)
    finally:
        venv.close()


def test_the_launcher_runs_sids_godot_and_install_leaves_a_present_one_alone(tmp_path):
    (tmp_path / "godot4").write_text(launcher_text(RUNTIME))
    (tmp_path / "godot4").chmod(0o755)
    r = subprocess.run([str(tmp_path / "godot4"), "--headless", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("4."), r.stdout + r.stderr
    assert "(already there)" in install()


def test_a_launcher_whose_runtime_was_removed_is_no_godot4_and_install_remakes_it(tmp_path, monkeypatch):
    """A half-cleaned machine (the tree removed, gpuenv's launcher left on PATH) ran Godot 4's cases into exit
    127: install sees the dangling launcher and makes the runtime again instead of leaving it "already there"."""
    from gpuenv.backends.godot4 import runtime

    gone = tmp_path / "gone"
    (tmp_path / "bin").mkdir()
    runtime.write_launcher(gone, tmp_path / "bin" / "godot4")
    assert runtime.dangling(str(tmp_path / "bin" / "godot4"), gone)
    assert not runtime.dangling(str(tmp_path / "bin" / "godot4"), RUNTIME)  # another root: not ours, left alone
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    made = []
    monkeypatch.setattr("gpuenv.debian.debootstrap", lambda suite, new, packages, why: made.append(suite) or (new / "usr/bin").mkdir(parents=True))
    monkeypatch.setattr(runtime, "write_launcher", lambda root: made.append(root))
    line = runtime.install(gone)
    assert made == ["sid", gone] and "(already there)" not in line and gone.is_dir()


def test_without_godot4_the_backend_is_listed_unavailable_with_the_way_to_get_it(cli, monkeypatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + ":/usr/bin:/bin")  # no /usr/local/bin
    reason = default_registry().get("godot4").unavailable_reason() or ""
    if Path("/usr/bin/godot4").exists():
        pytest.fail("godot4 is in /usr/bin: this test cannot hide it")
    assert "godot4 missing" in reason and "make install as root" in reason
