"""Genesis on its CPU backend, in its own Python environment (docker/locks/genesis.txt, ~3.7 GB, built
on first use under ~/.cache/gpuenv/envs): the declaration and lock in the main install, then each
protocol choice (fresh or reused target, self-collision on or off) both ways through `gpuenv bench` for real, its records carrying the solver and the protocol.
Where the environment cannot be built (no uv, no PyPI, no libGL/EGL) the real test skips and says why."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from gpuenv.registry import default_registry

INFO = default_registry().get("genesis")


def test_declared_in_its_own_environment_with_a_cpu_torch_lock():
    env = INFO.environment
    assert env is not None and env.python == "3.11"
    lock = (ROOT / env.lock).read_text()
    assert "\ngenesis-world==1.4.5 \\\n" in lock and "\ntorch==2.13.0+cpu \\\n" in lock and "\nquadrants==" in lock
    assert "\nplotly==5." in lock  # why it cannot share the main install (plotly >= 6 there)
    assert INFO.variants == ("random", "random-noself", "reused", "reused-noself")
    assert set(INFO.tasks) == {"franka_scene", "go2_scene"} and set(default_registry().offers("franka_scene")) == {"genesis"}


# Two variants that between them set each protocol choice both ways (the fresh target with self-collision,
# the reused one without), two processes each: a process that compiles Genesis's kernels takes about a
# minute on this VM kind, one that finds them in Quadrants's offline cache about 20 s.
PAIR = ("random", "reused-noself")


@pytest.mark.backend
def test_each_protocol_choice_runs_both_ways_and_records_what_it_did(cli, tmp_path):
    backends = [a for v in PAIR for a in ("--backend", f"genesis:{v}")]
    r = cli("bench", "--suite", "smoke", *backends, "--task", "franka_scene", "--num-envs", "2", "--processes", "2",
            "--out", str(tmp_path), timeout=1800)
    if "could not create the venv" in r.stderr or "could not install the lock" in r.stderr:
        pytest.skip(f"Genesis's environment could not be built here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    recs = {x["case"]["variant"]: x for x in (json.loads(p.read_text()) for p in tmp_path.rglob("*.json"))}
    assert set(recs) == set(PAIR)
    for variant, rec in recs.items():
        assert rec["status"] == "ok" and rec["summary"]["env_steps_per_s"]["median"] > 0, variant
        d = rec["what"]["details"]
        assert d["genesis"] == "1.4.5" and d["backend"] == "gs.cpu" and d["physics_timestep_s"] == pytest.approx(0.01)
        assert d["self_collision"] is (not variant.endswith("-noself"))
        assert d["action_protocol"] == ("one target set once, then scene.step() only" if variant.startswith("reused") else "a fresh target every step")
        assert d["constraint_solver"] and d["iterations"] > 0 and d["joints"] == 9
        assert rec["where"]["machine"]["python"].startswith("3.11.")
        # the kernels the first process compiled (or an earlier run did) are in the cache for the second
        assert [p["compile_cache"] for p in rec["processes"]][1:] == ["hit"], variant
