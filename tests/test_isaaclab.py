"""Isaac Lab backend. It needs Isaac Sim and an RTX-class GPU: where they are absent the real test
skips with the reason, and the checks that need neither still run."""

from __future__ import annotations

import ast

import pytest
from conftest import ROOT

from gpuenv.backends.base import Case
from gpuenv.registry import default_registry

INFO = default_registry().get("isaaclab")


def test_absent_isaaclab_is_reported_with_the_way_to_get_it(cli):
    if INFO.unavailable_reason() is None:
        pytest.skip("Isaac Lab is installed here")
    assert "use the gpuenv/isaaclab image (make bench-isaac)" in INFO.unavailable_reason()
    r = cli("list", "backends")
    assert "isaaclab" in r.stdout and "gpuenv/isaaclab image" in r.stdout
    r = cli("bench", "--backend", "isaaclab")
    assert r.returncode == 2 and "isaaclab is not installed" in r.stderr


def test_adapter_launches_the_app_before_importing_isaaclab():
    """Isaac Sim must be running before isaaclab_tasks (or omni, pxr) is imported: the module imports
    nothing from Isaac Lab at top level, its first startup stage launches AppLauncher, and the
    adapter reads no clock (the harness times the stages)."""
    src = (ROOT / "src/gpuenv/backends/isaaclab/adapter.py").read_text()
    tree = ast.parse(src)
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [n for n in top if "isaac" in ast.unparse(n)]
    stages = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "open_stages")
    inner = [n for n in stages.body if isinstance(n, ast.FunctionDef)]
    assert [f.name for f in inner] == ["app_launch", "imports", "scene_build"]
    first = [ast.unparse(n) for n in ast.walk(inner[0]) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert first == ["from isaaclab.app import AppLauncher"] and "AppLauncher(headless=True" in ast.unparse(inner[0])
    assert "import isaaclab_tasks" in ast.unparse(inner[1])
    assert "perf_counter" not in src and "import time" not in src


def test_worker_times_named_startup_stages(tmp_path, monkeypatch):
    """The harness, not the adapter, times an adapter's startup stages (as Isaac Lab declares them)."""
    import types

    from gpuenv.modes.throughput import worker
    from gpuenv_fake import adapter as fake

    class Clock:
        t = 0.0

        def __call__(self):
            self.t += 1.0
            return self.t

    def open_stages(case, native):
        return [("app_launch", lambda: None), ("imports", lambda: None), ("scene_build", lambda: fake.open(case, native))]

    staged = types.SimpleNamespace(open_stages=open_stages)
    real = default_registry()
    registry = types.SimpleNamespace(get=lambda name: types.SimpleNamespace(load=lambda: staged), native=real.native)
    monkeypatch.setattr(worker, "default_registry", lambda: registry)
    spec = {"mode": "env-step-throughput", "case": Case("fake", "ok", "cartpole", 2, chunk_steps=5).to_dict(),
            "settings": {"min_time_s": 0.01, "values": 2, "warmups": 0}}
    out = worker.measure_case(spec, clock=Clock())
    assert out["phases_s"]["app_launch"] == out["phases_s"]["imports"] == out["phases_s"]["scene_build"] == 1.0
    assert out["phases_s"]["build_and_reset"] == 3.0


def test_isaaclab_tasks_use_the_shared_names():
    ids = {name: nt.env_id for name, nt in INFO.tasks.items()}
    assert ids == {"cartpole": "Isaac-Cartpole-Direct-v0", "ant": "Isaac-Ant-v0", "humanoid": "Isaac-Humanoid-v0"}


@pytest.mark.backend
def test_isaaclab_runs_for_real(tmp_path):
    reason = INFO.unavailable_reason()
    if reason:
        pytest.skip(reason)
    from gpuenv.run.runner import run_process

    case = Case("isaaclab", "physx", "cartpole", 256, chunk_steps=10)
    spec = {"mode": "env-step-throughput", "case": case.to_dict(), "settings": {"min_time_s": 0.2, "values": 2, "warmups": 1}}
    o = run_process(spec, 0, 900, tmp_path)
    assert o.failure is None, o.stderr_tail
    phases = o.result["phases_s"]
    assert {"app_launch", "imports", "scene_build"} <= set(phases)
    assert o.result["facts"]["obs_shape"] == [4]
