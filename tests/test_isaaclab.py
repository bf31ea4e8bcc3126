"""Isaac Lab backend. It needs Isaac Sim and an RTX-class GPU: where they are absent the real test
skips with the reason, and the checks that need neither still run."""

from __future__ import annotations

import ast

import pytest
from conftest import ROOT

from gpuenv.backends.base import Case
from gpuenv.registry import DEFAULT_REGISTRY
from gpuenv.tasks import TASKS

INFO = DEFAULT_REGISTRY.get("isaaclab")


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
    nothing from Isaac Lab at top level, and open() launches AppLauncher before its other imports."""
    tree = ast.parse((ROOT / "src/gpuenv/backends/isaaclab.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [n for n in top if "isaac" in ast.unparse(n)]
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    order = [ast.unparse(n) for n in ast.walk(init) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert order[0] == "from isaaclab.app import AppLauncher"
    src = ast.unparse(init)
    assert src.index("AppLauncher(headless=True") < src.index("import isaaclab_tasks")


def test_isaaclab_tasks_use_the_shared_names():
    ids = {name: t.offers["isaaclab"].env_id for name, t in TASKS.items() if "isaaclab" in t.offers}
    assert ids == {"cartpole": "Isaac-Cartpole-Direct-v0", "ant": "Isaac-Ant-v0", "humanoid": "Isaac-Humanoid-v0"}


@pytest.mark.backend
def test_isaaclab_runs_for_real(tmp_path):
    reason = INFO.unavailable_reason()
    if reason:
        pytest.skip(reason)
    from gpuenv.run.orchestrator import run_process

    case = Case("isaaclab", "physx", "cartpole", 256, chunk_steps=10)
    spec = {"case": case.to_dict(), "settings": {"min_time_s": 0.2, "values": 2, "warmups": 1}}
    o = run_process(spec, 0, 900, tmp_path)
    assert o.failure is None, o.stderr_tail
    phases = o.result["facts"]["details"]["startup_phases_s"]
    assert set(phases) == {"app_launch", "imports", "scene_build"}
    assert o.result["facts"]["obs_shape"] == [4]
