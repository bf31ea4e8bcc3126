"""Genesis on its CPU backend, in its own Python environment (docker/locks/genesis.txt, ~3.7 GB, built
on first use under ~/.cache/gpuenv/envs): the declaration and lock in the main install, then each
protocol choice (fresh or reused target, self-collision on or off) both ways through `gpuenv bench` for real, its records carrying the solver and the protocol.
Where the environment cannot be built (no uv, no PyPI, no libGL/EGL) the real test skips and says why."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import ROOT, own_python, served_training, write_suite

from gpuenv.registry import default_registry

INFO = default_registry().get("genesis")


def test_declared_in_its_own_environment_with_a_cpu_torch_lock():
    env = INFO.environment
    assert env is not None and env.python == "3.11"
    lock = (ROOT / env.lock).read_text()
    assert "\ngenesis-world==1.4.5 \\\n" in lock and "\ntorch==2.13.0+cpu \\\n" in lock and "\nquadrants==" in lock
    assert "\nplotly==5." in lock  # why it cannot share the main install (plotly >= 6 there)
    assert INFO.variants == ("random", "random-noself", "reused", "reused-noself")
    assert set(INFO.tasks) == {"franka_scene", "go2_scene", "inverted_pendulum"} and set(default_registry().offers("franka_scene")) == {"genesis"}
    assert "\ngymnasium==" in lock  # the InvertedPendulum model file comes from Gymnasium's package
    assert INFO.ppo_env is not None and INFO.ppo_env.variants == ("random", "random-noself")


# Two variants that between them set each protocol choice both ways (the fresh target with self-collision,
# the reused one without), two processes each: a process that compiles Genesis's kernels takes about a
# minute on this VM kind, one that finds them in Quadrants's offline cache about 20 s.
PAIR = ("random", "reused-noself")
# ... and Gymnasium's InvertedPendulum on Genesis, one process (its episodes end and reset inside the step)
PROTOCOLS = """
[measure]
processes = 2
values = 2
warmups = 1
min_time_s = 0.02
chunk_steps = 10
timeout_s = 300

[[matrix]]
backends = ["genesis:random", "genesis:reused-noself"]
tasks = ["franka_scene"]
num_envs = [2]

[[matrix]]
backends = ["genesis:random"]
tasks = ["inverted_pendulum"]
num_envs = [4]
processes = 1
"""


@pytest.mark.backend
def test_each_protocol_choice_runs_both_ways_and_records_what_it_did(cli, tmp_path):
    suite = write_suite(tmp_path / "protocols.toml", PROTOCOLS)
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"), timeout=1800)
    if "could not create the venv" in r.stderr or "could not install the lock" in r.stderr:
        pytest.skip(f"Genesis's environment could not be built here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")]
    (pendulum,) = (x for x in records if x["case"]["task"] == "inverted_pendulum")
    assert pendulum["status"] == "ok" and pendulum["summary"]["env_steps_per_s"]["median"] > 0
    assert pendulum["what"]["reset_mode"].startswith("auto-reset in the adapter") and pendulum["what"]["obs_shape"] == [4]
    assert pendulum["what"]["details"]["armature"].startswith("0 on both joints")
    assert pendulum["what"]["details"]["physics_timestep_s"] == pytest.approx(0.02)
    recs = {x["case"]["variant"]: x for x in records if x["case"]["task"] == "franka_scene"}
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


# Gymnasium's InvertedPendulum-v5 on Genesis, one env per start, each from a given state under given
# controls: the observation each step ends in (before an auto-reset). One process for all starts (a
# Genesis process takes about 20 s to start here).
GENESIS_SIDE = """
import json, sys
import numpy as np, torch
from gpuenv.backends.genesis.adapter import open_pendulum
from gpuenv.registry import default_registry
starts = json.loads(sys.argv[1])
p = open_pendulum("random", default_registry().get("genesis").tasks["inverted_pendulum"], len(starts), 0)
p.robot.set_dofs_position(torch.tensor([s[0] for s in starts], dtype=torch.float32), p.dofs)
p.robot.set_dofs_velocity(torch.tensor([s[1] for s in starts], dtype=torch.float32), p.dofs)
actions = np.array([s[2] for s in starts]).T
print("TRAJECTORIES", json.dumps(np.stack([p.step(a[:, None])[4] for a in actions], axis=1).tolist()))
print("DETAILS", json.dumps(p.details()))
# Gymnasium's rules, with a 3-step time limit: env 0 upright and still (truncated at step 3), env 1 at
# 0.19 rad turning 2 rad/s (past 0.2 in its first step: terminated)
import genesis as gs
from gpuenv.backends.genesis.pendulum import Pendulum
q = Pendulum(gs, 2, 1, 0.02, 2, 3)
first = q.reset()
q.robot.set_dofs_position(torch.tensor([[0.0, 0.0], [0.0, 0.19]]), q.dofs)
q.robot.set_dofs_velocity(torch.tensor([[0.0, 0.0], [0.0, 2.0]]), q.dofs)
rows = []
for _ in range(3):
    obs, reward, terminated, truncated, final = q.step(np.zeros((2, 1)))
    rows.append([obs.tolist(), reward.tolist(), terminated.tolist(), truncated.tolist(), final.tolist(), q.t.tolist()])
print("RULES", json.dumps({"first": first.tolist(), "rows": rows}))
"""


@pytest.mark.backend
def test_its_inverted_pendulum_steps_like_gymnasiums_under_the_same_state_and_controls():
    """The same logical task as Gymnasium's, checked: with the joints' armature at the file's 0 (Genesis's
    importer sets 0.1, which turns the pole 18% slower) the two agree until the pole falls, within what
    two integrators differ by (MuJoCo's RK4, Genesis's own), from three random starts."""
    import gymnasium as gym

    starts, theirs = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        qpos, qvel, actions = rng.uniform(-0.05, 0.05, 2), rng.uniform(-0.05, 0.05, 2), rng.uniform(-1, 1, 12)
        starts.append([qpos.tolist(), qvel.tolist(), actions.tolist()])
        env = gym.make("InvertedPendulum-v5")
        env.reset(seed=seed)
        env.unwrapped.set_state(qpos, qvel)
        steps = []
        for a in actions:
            obs, _, terminated, _, _ = env.step(np.array([a]))
            steps.append(obs)
            if terminated:
                break
        theirs.append(np.array(steps))
    r = subprocess.run([own_python("genesis"), "-c", GENESIS_SIDE, json.dumps(starts)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines()
             if line.startswith(("TRAJECTORIES", "DETAILS", "RULES"))}
    for env_i, gym_steps in enumerate(theirs):
        ours = np.array(lines["TRAJECTORIES"][env_i][: len(gym_steps)])
        assert len(gym_steps) >= 3
        assert np.abs(ours[:, :2] - gym_steps[:, :2]).max() < 0.05  # cart and pole positions
        assert np.allclose(ours[:, 2:], gym_steps[:, 2:], rtol=0.06, atol=0.03), (env_i, ours, gym_steps)  # velocities
    assert lines["DETAILS"]["armature"].startswith("0 on both joints") and "[0.1, 0.1]" in lines["DETAILS"]["armature"]
    # reward, termination past 0.2 rad, truncation at the time limit, reset noise, the final observation kept
    rules = lines["RULES"]
    assert np.abs(rules["first"]).max() <= 0.01  # U(-0.01, 0.01) on each position and velocity
    (obs1, rew1, term1, trunc1, final1, t1), _, (obs3, rew3, term3, trunc3, final3, t3) = rules["rows"]
    assert rew1 == [1.0, 0.0] and term1 == [False, True] and trunc1 == [False, False] and t1 == [1, 0]
    assert final1[1][1] > 0.2 and np.abs(obs1[1]).max() <= 0.02  # env 1's fall kept; it goes on from a reset
    assert rew3 == [1.0, 1.0] and term3 == [False, False] and trunc3 == [True, False] and t3 == [0, 2]
    assert final3[0] != obs3[0] and np.abs(obs3[0]).max() <= 0.02


@pytest.mark.backend
def test_the_shared_ppo_trainer_learns_its_inverted_pendulum_served_from_its_environment(cli, tmp_path):
    """The ppo-smoke suite's Genesis case, one seed: SB3 here, the pendulum in Genesis's environment."""
    rec, run = served_training(cli, tmp_path, "genesis", "--suite", "ppo-smoke", "--backend", "genesis:random", "--seeds", "1",
                               status="reached")
    assert run["env_steps_to_threshold"] <= 100_000 and run["curve"][-1]["eval_return"] >= 950
    assert run["details"]["armature"].startswith("0 on both joints") and run["details"]["normalize"] is True
    assert rec["where"]["packages"]["genesis-world"] == "1.4.5"
