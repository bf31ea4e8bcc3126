"""`gpuenv profile ENV`: a user's own Gymnasium env through the harness, for real at small sizes: a
Gymnasium id, an entry point of a test package with a deliberately slow env (tests/profile_pkg), and
the bad inputs (an id that does not exist, an env that breaks the API, one that hangs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT, named_best_is_the_fastest_printed, named_bottleneck_is_the_largest_share, printed_table

from gpuenv import profile as pm

PKG = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests" / "profile_pkg"), os.environ.get("PYTHONPATH", "")]))}
# --time: room for every case on a slow or busy VM (what a spent budget does is tested apart); the test's own timeout is above it
SMALL = ["--num-envs", "1", "--num-envs", "2", "--time", "1200"]
PARTS = pm.PARTS  # the parts of a PPO iteration `gpuenv profile` names, stepping first


def _records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))]


def _said(r) -> str:
    return " ".join(r.stdout.split())


def test_profile_of_a_gymnasium_id_names_the_best_setting_and_the_bottleneck(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("profile", "CartPole-v1", *SMALL, "--out", str(out), timeout=1500)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    assert "observations Box(4,) float32, actions Discrete(2); gymnasium 1.4" in said
    for v in pm.SWEEP_VARIANTS:  # every vectoriser, at each size, in the table
        row = next(line for line in r.stdout.splitlines() if line.startswith(v + " "))
        assert row.count("(") == 2, row
    assert "best setting: " in said and "the env alone (DummyVecEnv, 1 env): " in said
    # which part is the bottleneck depends on the machine and its load: the one named is the largest printed share,
    # and the best setting named is the fastest printed one
    named_bottleneck_is_the_largest_share(said)
    named_best_is_the_fastest_printed(r.stdout, said)
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


def test_profile_of_a_slow_env_entry_point_measures_it_and_names_the_bottleneck(cli, tmp_path):
    """A 2 ms env, end to end: what holds at any speed of this machine. Which setting wins and which part is the
    bottleneck depend on the machine and its load (a busy core once made DummyVecEnv win): the decisions
    themselves are tested on given timings below."""
    out = tmp_path / "out"
    r = cli("profile", "mypkg.envs:make_env", *SMALL, "--budget", "100k", "--out", str(out), env=PKG, timeout=1500)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    # 2 ms of CPU per step: one env alone runs at most 500 steps/s on any machine
    alone = float(said.split("the env alone (DummyVecEnv, 1 env): ")[1].split(" us")[0].replace(",", ""))
    assert alone >= 2000
    named_best_is_the_fastest_printed(r.stdout, said)
    # the phases ran at the fastest setting SB3's trainer runs (DummyVecEnv or SubprocVecEnv) of the printed table
    table = printed_table(r.stdout)
    at = said.split("where a PPO iteration's time goes per env step at ")[1].split(" (")[0]
    variant, n = at.split(", ")[0], int(at.split(", ")[1].split(" envs")[0])
    policy = {k: v for k, v in table.items() if k[0] in pm.POLICY_VARIANTS}
    assert table[(variant, n)] == max(policy.values()), (at, table)
    us = named_bottleneck_is_the_largest_share(said)
    assert set(us) == set(PARTS)
    # torch's threads beside env processes beyond the cores: said where, and only where, the phases' record says so
    (phases,) = [x for x in _records(out) if x["summary"].get("phases")]
    threads = phases["summary"]["phases"]["inference"]["details"]["torch_threads"]
    cores = phases["where"]["machine"]["cpu_logical"]
    assert (f"torch's {threads} threads beside {n} env processes on {cores} cores" in said) == (variant == "subproc" and threads + n > cores)
    env = _records(out)[0]["what"]["details"]["env"]
    assert env["spec"] == "mypkg.envs:make_env" and env["module"] == "mypkg.envs" and len(env["module_sha256"]) == 64


def test_a_slow_env_alone_names_the_largest_share_as_its_bottleneck(cli, tmp_path):
    """One env in-process (DummyVecEnv, 1 env); the bottleneck sentence follows the printed shares."""
    r = cli("profile", "mypkg.envs:make_env", "--num-envs", "1", "--time", "1200", "--out", str(tmp_path / "o"), env=PKG, timeout=1500)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    said = _said(r)
    us = named_bottleneck_is_the_largest_share(said)
    assert pm.bottleneck_line([pm.Share(k, v) for k, v in us.items()]).split(" (")[0] in said


def test_the_bottleneck_and_the_best_setting_from_given_timings():
    # a 2 ms env: stepping at 450 steps/s, the policy and the rollout a little more, learning at 20k samples/s
    shares = pm.shares_of(vecenv=450.0, inference=440.0, collect=430.0, learn=20_000.0)
    assert [round(s.us_per_step, 1) for s in shares] == [2222.2, 50.5, 52.9, 50.0]
    assert pm.bottleneck_of(shares) == PARTS[0]
    assert pm.bottleneck_line(shares).endswith("(a faster simulator or vectoriser pays off here: stepping is the largest share)")
    # CartPole: stepping in microseconds, learning the largest part; what a faster simulator saves is the stepping share
    fast = pm.shares_of(vecenv=100_000.0, inference=20_000.0, collect=15_000.0, learn=5_000.0)
    assert pm.bottleneck_of(fast) == PARTS[3]
    total = sum(s.us_per_step for s in fast)
    assert pm.bottleneck_line(fast) == (f"bottleneck: {PARTS[3]} (a simulator infinitely faster would save at most "
                                        f"{100 * 10 / total:.0f}% of training time: the stepping share)")
    # two phases' noise never makes a part negative
    assert pm.shares_of(vecenv=1000.0, inference=1100.0, collect=900.0, learn=1e6)[1].us_per_step == 0.0


def test_a_registered_id_is_found_through_import(cli, tmp_path):
    r = cli("profile", "MySlow-v0", "--import", "mypkg.envs", "--num-envs", "1", "--time", "30", "--out", str(tmp_path / "o"),
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
