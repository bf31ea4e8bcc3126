"""`gpuenv sweep`: one cached uv environment per version set, the same suite in each, records tagged
with the versions, unresolvable versions reported while the others run. Real environments are built
(with a small library, typer, swept on the test-only fake backend, so this stays quick)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import write_suite

SUITE = """
[measure]
processes = 1
values = 2
warmups = 0
min_time_s = 0.01
chunk_steps = 5
timeout_s = 120
[[matrix]]
backends = ["fake:ok"]
tasks = ["cartpole"]
num_envs = [2]
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["brax"], "write it as PACKAGE==V1,V2"),
        (["brax==0.14.2"], "at least two different versions"),
        (["nosuchlib==1,2"], "pass --backend"),
        (["brax==0.13.0,0.14.2", "--with", "jax"], "--with 'jax': write a package with a version"),
        (["brax==0.13.0,0.14.2", "--suite", "nosuch"], "unknown suite 'nosuch'"),
    ],
)
def test_bad_sweep_input_is_one_line_exit_2(cli, args, message):
    r = cli("sweep", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_sweep_builds_caches_and_reports_unresolvable_versions(cli, tmp_path):
    if not shutil.which("uv") and cli("--help").returncode != 0:
        pytest.skip("uv not available")
    suite = write_suite(tmp_path / "fake.toml", SUITE)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["sweep", "typer==0.13.1,0.29.2,99.0.0", "--backend", "fake", "--suite", str(suite), "--out", str(tmp_path / "out")]
    first = cli(*args, "--blocks", "3", env=env, timeout=900)
    assert first.returncode == 1, first.stdout + first.stderr  # one version set could not run
    assert "typer==99.0.0: unresolvable" in first.stdout and "the other versions still run" in first.stdout
    assert first.stdout.count("resolved and built the environment") == 2
    assert "1 version set(s) did not run: typer==99.0.0 (unresolvable)" in first.stderr
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")]
    assert {r["tags"]["version_set"] for r in records} == {"typer==0.13.1", "typer==0.29.2"}
    assert {r["tags"]["swept"]["typer"] for r in records} == {"0.13.1", "0.29.2"}  # what was really installed
    assert "fake-ok-cartpole-n2" in first.stdout  # the table across versions
    # interleaved: in each block one process of each version set, the order rotating; the worker ran
    # in its set's environment (the fake stepper reports the typer it imported)
    said = " ".join(first.stdout.split())
    assert "interleaved, 3 blocks per case" in said and "adjacent verdicts from interleaved blocks" in said
    for r in records:
        assert r["tags"]["blocks"] == 3 and r["tags"]["order"] == "AB BA AB" and len(r["processes"]) == 3
        assert r["what"]["details"]["typer"] == r["tags"]["swept"]["typer"]
    assert any(label in first.stdout for label in ("no detectable change", "suspicious", "regression", "improvement"))
    second = cli(*args, "--one-after-another", env=env, timeout=900)
    assert second.stdout.count("reused the cached environment") == 2, second.stdout
    said = " ".join(second.stdout.split())
    assert "one after another" in said and "the machine's drift is in them" in said


def test_a_sweep_where_every_case_failed_draws_no_plot_instead_of_a_traceback(tmp_path):
    """A log axis of nothing raised matplotlib's ValueError out of `gpuenv sweep` (seen in CI when
    every version set's workers failed)."""
    from types import SimpleNamespace

    from gpuenv.history import sweep as sw

    failed = SimpleNamespace(status="failed")
    assert sw.plot({"fake-ok-cartpole-n1": [("typer==0.13.1", failed)]}, ["typer==0.13.1"], tmp_path / "s.png") is False
    assert not (tmp_path / "s.png").exists()
