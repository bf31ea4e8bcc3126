"""A backend's PPO env served from another interpreter (gpuenv.backends.served / serve_env): what SB3
gets is what the env process's env returned, finished episodes' infos included; a failing or dying env
process ends in one clear error, never a hang; the runner runs such a trainer in the main install and
its record names both sides."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
from gymnasium import spaces

from gpuenv.backends.served import ServedVecEnv, is_served, vecenv_factory
from gpuenv.backends.spec import NativeTask
from gpuenv.registry import default_registry
from gpuenv.run.runner import Launcher, served

NATIVE = NativeTask("fake-env-v0", None, 1, None, 100, (3,), "discrete", 4)


def _open(num_envs: int = 4) -> ServedVecEnv:
    return ServedVecEnv(sys.executable, "servedfake:make", "v", NATIVE, num_envs, 7)


def test_steps_spaces_and_finished_episodes_reach_sb3_as_the_env_returned_them():
    venv = _open()
    try:
        assert venv.num_envs == 4 and venv.details == {"variant": "v", "task": "fake-env-v0", "seed": 7}
        assert venv.action_space == spaces.Discrete(4)
        assert venv.observation_space == spaces.Box(low=-1.0, high=100.0, shape=(3,), dtype=np.float32)
        obs = venv.reset()
        assert obs.dtype == np.float32 and obs[:, 1].tolist() == [0, 0, 0, 0]
        for step in (1, 2, 3):
            actions = np.array([1, 2, 3, 0]) if step < 3 else np.array([3, 2, 1, 1])
            obs, rewards, dones, infos = venv.step(actions)
            assert rewards.dtype == np.float32 and rewards.tolist() == actions.tolist()
            assert obs[:, 0].tolist() == [0, 1, 2, 3] and obs[:, 2].tolist() == actions.tolist()
        # the third step ends envs 0-2: their obs are reset ones; the infos carry what the env kept
        assert dones.tolist() == [True, True, True, False] and obs[:, 1].tolist() == [0, 0, 0, 3]
        assert infos[0]["terminal_observation"].tolist() == [0, 3, 3] and infos[0]["TimeLimit.truncated"] is False
        assert infos[1]["terminal_observation"].tolist() == [1, 3, 2] and infos[1]["TimeLimit.truncated"] is True
        assert infos[2] == {"TimeLimit.truncated": False} and infos[3] == {}
    finally:
        venv.close()
    assert venv._proc.returncode == 0  # the env process left when told to


def test_a_failing_env_process_ends_in_one_line_naming_its_error_and_leaves_nothing_running(monkeypatch):
    import subprocess

    started = []
    real = subprocess.Popen

    def popen(*a, **kw):
        started.append(real(*a, **kw))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(RuntimeError) as e:
        _open(num_envs=2)
    assert str(e.value) == "the served env process failed: ValueError: needs 3 envs or more, got 2"
    (proc,) = started
    assert proc.returncode == 1  # it has ended, and was waited for
    # an env that cannot run a case faithfully keeps that kind (the record's failure kind "unsupported")
    from gpuenv.errors import Unsupported

    with pytest.raises(Unsupported, match="the served env process failed: Unsupported: no such variant"):
        ServedVecEnv(sys.executable, "servedfake:make", "unsupported", NATIVE, 4, 7)


def test_an_env_process_that_dies_is_an_error_not_a_hang():
    venv = _open()
    venv.reset()
    os.kill(venv._proc.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"was killed by SIGKILL; its stderr is above"):
        venv.step(np.zeros(4, dtype=np.int64))
    venv.close()


def test_the_env_process_ends_by_itself_when_the_trainer_is_gone():
    venv = _open()
    venv._out.close()  # as when the worker dies: its end of the pipe closes
    assert venv._proc.wait(timeout=30) == 0


def test_only_a_backend_in_its_own_environment_is_served():
    reg = default_registry()
    assert is_served(reg.get("ocean")) and not is_served(reg.get("gymnasium"))
    gym = reg.get("gymnasium")
    venv, _ = vecenv_factory(gym)("dummy", gym.tasks["cartpole"], 2, 0)  # built here, in this process
    try:
        assert not isinstance(venv, ServedVecEnv) and venv.num_envs == 2
    finally:
        venv.close()


def test_a_served_trainers_worker_runs_here_and_its_record_names_both_sides():
    base = {"machine": {"python": "3.11.2", "cpu": "x"}, "packages": {"torch": "2.13.0", "numpy": "2.3.0", "pufferlib": "0.1"}}
    theirs = {"machine": {"python": "3.11.9", "cpu": "x"}, "packages": {"torch": None, "numpy": "1.26.4", "pufferlib": "3.0.0"},
              "environment": {"name": "ocean", "python": "3.11"}}
    how, where = served(Launcher(python="/envs/x/bin/python", env={"A": "1"}, environment={"name": "ocean"}), theirs, base)
    assert how.python == sys.executable and how.env == {"A": "1"}
    # the trainer's process's versions, the simulator's where only its environment has it; that environment's own beside
    assert where["packages"] == {"torch": "2.13.0", "numpy": "2.3.0", "pufferlib": "0.1"}
    assert where["environment"]["packages"] == {"torch": None, "numpy": "1.26.4", "pufferlib": "3.0.0"}
    base["packages"]["pufferlib"] = None  # (Metta's pufferlib-core absent here)
    assert served(Launcher(python="/x", environment={"name": "ocean"}), theirs, base)[1]["packages"]["pufferlib"] == "3.0.0"
    assert where["machine"]["python"] == "3.11.2"
    assert "served to the trainer in the main install (Python 3.11.2)" in where["environment"]["served"]
    # a backend of the main install is left as it is
    plain = Launcher()
    assert served(plain, base, base) == (plain, base)


def test_policy_phases_where_the_backends_environment_lacks_sb3_are_absent_and_say_where_it_trains(monkeypatch):
    """The throughput suite's policy phases run in the worker, which for Ocean is Ocean's environment."""
    import importlib.util

    from gpuenv.backends.base import Case
    from gpuenv.modes.throughput import phases

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "stable_baselines3" else real(name, *a))
    native = default_registry().native("ocean_breakout", "ocean")
    with pytest.raises(phases.Absent, match="ocean's own environment has no torch or Stable-Baselines3; its env trains served"):
        phases._Policy(Case("ocean", "native", "ocean_breakout", 4), native, {"hyperparams": {}, "source": "suites/ppo.toml"})


def test_a_contract_env_built_where_sb3_is_importable_steps_in_process_as_an_sb3_vecenv():
    """Ocean's PPO env keeps SB3's contract without SB3 (it is served from Ocean's environment); where its
    environment has SB3 after all (the throughput worker's policy phases), the unserved factory gives SB3 a
    VecEnv over the same env, in this process: what SB3 gets is what the env returned."""
    from stable_baselines3.common.vec_env import VecEnv, VecMonitor

    from gpuenv.backends.vecenv import ContractVecEnv

    class Fake:
        num_envs = 2
        observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = spaces.Discrete(2)
        closed = False

        def reset(self):
            return np.zeros((2, 3), np.float32)

        def step(self, actions):
            dones = np.array([True, False])
            return (np.ones((2, 3), np.float32), actions.astype(np.float32), dones,
                    [{"terminal_observation": np.full(3, 0.5, np.float32), "TimeLimit.truncated": False}, {}])

        def close(self):
            self.closed = True

    fake = Fake()
    venv = VecMonitor(ContractVecEnv(fake))
    assert isinstance(venv.venv, VecEnv) and venv.num_envs == 2 and venv.action_space == spaces.Discrete(2)
    venv.seed(3)  # SB3's seeding goes to the adapter, never to the env's own attributes
    assert venv.reset().shape == (2, 3)
    obs, rewards, dones, infos = venv.step(np.array([1, 0]))
    assert rewards.tolist() == [1.0, 0.0] and dones.tolist() == [True, False]
    assert infos[0]["terminal_observation"].tolist() == [0.5] * 3 and infos[0]["episode"]["r"] == 1.0
    venv.close()
    assert fake.closed
