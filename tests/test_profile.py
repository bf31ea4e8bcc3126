"""`gpuenv profile ENV`: a user's own Gymnasium env through the harness, for real at small sizes: a
Gymnasium id, an entry point of a test package with a deliberately slow env (tests/profile_pkg), and
the bad inputs (an id that does not exist, an env that breaks the API, one that hangs)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT

from gpuenv import profile as pm

PKG = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests" / "profile_pkg"), os.environ.get("PYTHONPATH", "")]))}
SMALL = ["--num-envs", "1", "--num-envs", "2", "--time", "240"]
# the parts of a PPO iteration `gpuenv profile` names, stepping first
PARTS = ("stepping the env (simulator + vectoriser)", "policy inference", "SB3's rollout bookkeeping", "learning (PPO's update)")


def _records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))]


def _said(r) -> str:
    return " ".join(r.stdout.split())


def test_profile_of_a_gymnasium_id_names_the_best_setting_and_the_bottleneck(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("profile", "CartPole-v1", *SMALL, "--out", str(out), timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    assert "observations Box(4,) float32, actions Discrete(2); gymnasium 1.4" in said
    for v in pm.SWEEP_VARIANTS:  # every vectoriser, at each size, in the table
        row = next(line for line in r.stdout.splitlines() if line.startswith(v + " "))
        assert row.count("(") == 2, row
    assert "best setting: " in said and "the env alone (DummyVecEnv, 1 env): " in said
    # CartPole steps in microseconds: stepping is never the bottleneck. Which of the trainer's parts is depends on the
    # machine and its load (learning or inference with both cores free; SB3's bookkeeping with the other core busy):
    # the one named is the one with the largest share
    shares = said.split("where a PPO iteration's time goes")[1].split("bottleneck:")[0]
    us = {part: float(re.search(re.escape(part) + r" \d+% \(([\d,.]+) us\)", shares).group(1).replace(",", "")) for part in PARTS}
    named = said.split("bottleneck: ")[1]
    assert named.startswith(max(us, key=us.__getitem__)) and not named.startswith(PARTS[0]), said
    assert "training 1.00M env steps with SB3 PPO at " in said
    recs = _records(out)
    sweep = [x for x in recs if not x["summary"].get("phases")]
    assert len(sweep) == 8 and {x["case"]["backend"] for x in sweep} == {"own"}
    assert {x["case"]["task"] for x in recs} == {"CartPole-v1"} and sweep[0]["case_key"].startswith("own-")
    env = sweep[0]["what"]["details"]["env"]
    assert env["spec"] == "CartPole-v1" and env["package"] == "gymnasium" and env["module"] == "gymnasium.envs.classic_control.cartpole"
    (phases,) = [x for x in recs if x["summary"].get("phases")]
    assert set(phases["summary"]["phases"]) == set(pm.PHASES) and phases["run_id"] != sweep[0]["run_id"]
    # the records read like any others: `show` without the profile's environment
    s = cli("show", str(out))
    assert s.returncode == 0 and "CartPole-v1" in s.stdout and "Traceback" not in s.stderr, s.stdout + s.stderr


@pytest.mark.serial  # which vectoriser wins depends on both cores being free
def test_profile_of_a_slow_env_entry_point_finds_the_simulator_is_the_bottleneck(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("profile", "mypkg.envs:make_env", *SMALL, "--budget", "100k", "--out", str(out), env=PKG, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    # 2 ms of CPU per step: one env alone runs at most 500 steps/s, and on 2 cores two env processes beat one
    alone = float(said.split("the env alone (DummyVecEnv, 1 env): ")[1].split(" us")[0].replace(",", ""))
    assert alone >= 2000
    best = said.split("best setting: ")[1].split(" at ")[0]
    assert best in ("subproc", "async"), said
    # the phases ran at 2 env processes on 2 cores: each part's share is named, and the contention with torch's threads said
    shares = said.split("where a PPO iteration's time goes per env step at subproc, 2 envs")[1].split("bottleneck:")[0]
    for part in PARTS:
        assert part in shares
    assert "torch's 2 threads beside 2 env processes on 2 cores" in shares
    assert "bottleneck: stepping the env" in said or "bottleneck: policy inference" in said, said
    env = _records(out)[0]["what"]["details"]["env"]
    assert env["spec"] == "mypkg.envs:make_env" and env["module"] == "mypkg.envs" and len(env["module_sha256"]) == 64


@pytest.mark.serial  # PPO's learning on torch's 2 threads slows 10x beside another test's load (CI once read 15 ms a sample)
def test_a_slow_env_alone_is_its_own_bottleneck(cli, tmp_path):
    """One env in-process (DummyVecEnv, 1 env): its 2 ms step outweighs inference and PPO's learning."""
    r = cli("profile", "mypkg.envs:make_env", "--num-envs", "1", "--out", str(tmp_path / "o"), env=PKG, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    assert "bottleneck: stepping the env (simulator + vectoriser) (a faster simulator or vectoriser pays off here" in said, said


def test_a_registered_id_is_found_through_import(cli, tmp_path):
    r = cli("profile", "MySlow-v0", "--import", "mypkg.envs", "--num-envs", "1", "--time", "12", "--out", str(tmp_path / "o"),
            env=PKG, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    assert "MySlow-v0: observations Box(3,) float32" in _said(r)
    assert "not run within the time given" in _said(r) or "no phases" in _said(r) or "best setting" in _said(r)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["NoSuchEnv-v0"], "NoSuchEnv-v0 could not be made (NameNotFound"),
        (["mypkg.envs:make_broken"], "mypkg.envs:make_broken breaks the Gymnasium API (ValueError: not enough values to unpack"),
        (["mypkg.envs:no_such_factory"], "could not be made (AttributeError"),
        (["CartPole-v1", "--import", "no_such_module_xyz"], "No module named 'no_such_module_xyz'"),
        (["os:getcwd"], "made a str, not a gymnasium.Env"),
        ([":x"], "an entry point is module:factory"),
        (["CartPole-v1", "--time", "5"], "--time 5: give the seconds"),
        (["CartPole-v1", "--budget", "lots"], "is not a number of steps"),
    ],
)
def test_bad_profile_input_is_one_line_exit_2(cli, args, message, tmp_path):
    r = cli("profile", *args, "--out", str(tmp_path / "o"), env=PKG, timeout=300)
    assert r.returncode == 2 and message in " ".join(r.stderr.split()) and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").rglob("*.json"))


def test_an_env_that_hangs_is_cut_by_the_time_given_and_leaves_no_process(cli, tmp_path):
    import psutil

    r = cli("profile", "mypkg.envs:make_hanging", "--time", "12", "--out", str(tmp_path / "o"), env=PKG, timeout=120)
    assert r.returncode == 2 and "did not finish within 6 s" in r.stderr and "Traceback" not in r.stderr, r.stderr
    left = [p for p in psutil.process_iter(["cmdline"]) if "mypkg.envs:make_hanging" in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_task_names_are_file_names():
    assert pm.task_name("CartPole-v1") == "CartPole-v1"
    assert pm.task_name("mypkg.envs:make_env") == "mypkg.envs-make_env"
    assert pm.task_name("cartpole") == "own-cartpole"  # never a catalogue task's name
    assert pm.sizes_for(2) == [1, 2, 8, 32] and pm.sizes_for(1) == [1, 4, 16]
