"""Per-backend environments, for real: a backend that declares Python 3.12 and a lock gets its
environment built with uv on first use and its workers started with that interpreter."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import ROOT

from gpuenv import envs
from gpuenv.results.schema import load


def row_of(table: str, name: str) -> str:
    """The text of one row of a rich table, its wrapped lines joined."""
    lines = table.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip("│ ").startswith(name))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("│ " + " " * len(name))), len(lines))
    return " ".join(w for ln in lines[start:end] for w in ln.split() if w != "│")


def test_backend_in_its_own_environment_runs_there_and_says_so(cli, tmp_path):
    env = {"GPUENV_PLUGINS": os.environ["GPUENV_PLUGINS"] + ",gpuenv_ownenv", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    before = cli("list", "backends", env=env)
    assert before.returncode == 0, before.stderr
    assert "not built yet" in row_of(before.stdout, "ownenv")
    suite = tmp_path / "own.toml"
    suite.write_text(
        "[measure]\nprocesses = 1\nvalues = 1\nwarmups = 0\nmin_time_s = 0.01\n"
        '[[matrix]]\nbackends = ["ownenv"]\ntasks = ["cartpole"]\nnum_envs = [2]\n'
    )
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"), env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "building the own Python environments of ownenv side by side, before the first case" in " ".join(r.stdout.split())
    (path,) = (tmp_path / "out").rglob("ownenv-*.json")
    rec = load(path)
    assert rec["status"] == "ok"
    assert rec["where"]["environment"]["python"] == "3.12"
    assert rec["where"]["machine"]["python"].startswith("3.12."), "the worker ran in the main interpreter"
    assert rec["where"]["environment"]["path"].startswith(str(tmp_path / "cache"))
    # its gpuenv is this checkout's: the harness that runs the worker is the one the command is
    gpuenv_file = subprocess.run([rec["where"]["environment"]["path"] + "/bin/python", "-c", "import gpuenv; print(gpuenv.__file__)"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert Path(gpuenv_file).resolve().is_relative_to(ROOT / "src"), gpuenv_file
    after = cli("list", "backends", env=env)
    row = row_of(after.stdout, "ownenv")
    assert "built" in row and "not built yet" not in row
    assert (ROOT / "tests/plugins/envlock/py312.txt").is_file()


def test_a_runs_missing_environments_are_built_side_by_side_before_its_first_case(monkeypatch):
    """Two backends whose environments are not built: both builds are under way at once (a barrier of
    two, which one build after the other never passes), before the first case starts, each once."""
    from gpuenv.run import runner

    barrier = threading.Barrier(2, timeout=120)
    built: list[str] = []
    events: list[object] = []

    def build(backend):
        barrier.wait()
        built.append(backend.name)
        return runner.Launcher()

    monkeypatch.setattr(runner, "needs_building", lambda b: b.name in ("genesis", "ocean"))
    monkeypatch.setattr(runner, "launcher", build)
    cache: dict = {}
    runner.prepare(["envpool", "genesis", "ocean", "genesis", "gymnasium"], cache, events.append)
    assert sorted(built) == ["genesis", "ocean"] and set(cache) == {"genesis", "ocean"}
    assert events == [runner.Preparing(("genesis", "ocean"))]
    runner.prepare(["genesis", "ocean"], cache, events.append)  # built already: nothing to do, nothing said
    assert len(events) == 1 and sorted(built) == ["genesis", "ocean"]


def test_build_envs_builds_the_missing_environments_says_each_and_fails_where_one_could_not_be(monkeypatch, capsys):
    """`gpuenv bench --build-envs` (make install runs it for the quick suite): the plan's missing own
    environments built side by side, a line for each, exit 1 where one failed; then nothing left to build."""
    import typer

    from gpuenv.cli.run import build_own_environments
    from gpuenv.errors import UserError
    from gpuenv.run import runner

    built: set[str] = set()

    def build(backend):
        if backend.name == "ocean":
            raise UserError("ocean's environment: could not run its build step (no C compiler)")
        built.add(backend.name)
        return runner.Launcher()

    monkeypatch.setattr(runner, "needs_building", lambda b: b.name in ("genesis", "ocean") and b.name not in built)
    monkeypatch.setattr(runner, "launcher", build)
    with pytest.raises(typer.Exit) as e:
        build_own_environments(["envpool", "genesis", "ocean"])
    assert e.value.exit_code == 1
    out, err = capsys.readouterr()
    assert "building the own Python environments of genesis, ocean side by side" in out
    assert "genesis: its own environment is built" in out and "ocean: its own environment could not be built" in " ".join(err.split())
    build_own_environments(["genesis"])
    assert "no own environment to build" in capsys.readouterr().out


def test_each_checkout_gets_its_own_environment():
    """An environment installs gpuenv from one checkout (editable): reused by another clone it would
    run the first clone's harness, or nothing once that clone is deleted."""
    lock = "numpy==2.0.0\n"
    assert envs.env_key(lock, "3.12") == envs.env_key(lock, "3.12", ROOT)
    assert envs.env_key(lock, "3.12", Path("/a/gpuenv")) != envs.env_key(lock, "3.12", Path("/b/gpuenv"))
    assert envs.env_key(lock, "3.12") != envs.env_key(lock + "x\n", "3.12") != envs.env_key(lock, "3.11")


def test_a_build_step_runs_after_the_lock_with_the_environments_interpreter_and_is_part_of_its_identity(monkeypatch, tmp_path):
    """What no index has as a wheel (PufferLib Ocean's C envs) is built by the backend's build step into its
    environment, before the environment is marked ready; a failed step leaves no half-built environment."""
    import pytest

    from gpuenv.errors import UserError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lock = (ROOT / "tests/plugins/envlock/py312.txt").read_text()
    with pytest.raises(UserError) as e:
        envs.build(lock, "3.12", "for the test", "envbuild:fail")
    assert str(e.value) == "environment for the test (Python 3.12): could not run its build step envbuild:fail: RuntimeError: gcc: command not found"
    assert not envs.location(lock, "3.12", "envbuild:fail").exists() and not envs.is_built(lock, "3.12", "envbuild:fail")
    built = envs.build(lock, "3.12", "for the test", "envbuild:mark")
    assert not built.reused and envs.is_built(lock, "3.12", "envbuild:mark") and not envs.is_built(lock, "3.12")
    mark = subprocess.run([str(built.interpreter), "-c", "import envbuild_mark; print(envbuild_mark.PREFIX)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert mark == str(built.path)
    assert envs.build(lock, "3.12", "for the test", "envbuild:mark").reused
    assert built.describe("x")["build_step"].startswith("envbuild:mark ") and built.lock_sha256 == hashlib.sha256(lock.encode()).hexdigest()
    # the step (its name, its module's source) is in the environment's name: another step, or the same step
    # changed, builds another environment
    assert envs.identity(lock, "envbuild:mark") != envs.identity(lock, "envbuild:fail") != lock
    assert envs.identity(lock, None) == lock
    (tmp_path / "stepmod.py").write_text("def step(python, work):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = envs.identity(lock, "stepmod:step")
    (tmp_path / "stepmod.py").write_text("def step(python, work):\n    print('changed')\n")
    assert envs.identity(lock, "stepmod:step") != before
