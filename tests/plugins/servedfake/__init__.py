"""A PPO env factory for tests/test_served.py: run by gpuenv.backends.serve_env in a process of its own.
Env i's observation is [i, its step count, the last action]; reward = the action. Every third step env 0
terminates (its final observation kept) and env 1 is truncated by a time limit (kept too); env 2 ends
without a final observation (as Ocean's do)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces


class Env:
    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.observation_space = spaces.Box(low=-1.0, high=100.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(4)
        self.count = np.zeros(num_envs)

    def _obs(self, actions) -> np.ndarray:
        return np.stack([np.arange(self.num_envs), self.count, actions], axis=1).astype(np.float32)

    def reset(self) -> np.ndarray:
        self.count[:] = 0
        return self._obs(np.zeros(self.num_envs))

    def step(self, actions):
        self.count += 1
        obs = self._obs(actions)
        dones = np.zeros(self.num_envs, dtype=bool)
        infos = [{} for _ in range(self.num_envs)]
        if self.count[0] % 3 == 0:
            dones[:3] = True
            infos[0] = {"terminal_observation": obs[0].copy(), "TimeLimit.truncated": False}
            infos[1] = {"terminal_observation": obs[1].copy(), "TimeLimit.truncated": True}
            infos[2] = {"TimeLimit.truncated": False}
            self.count[:3] = 0
            obs = self._obs(actions)
        return obs, np.asarray(actions, dtype=np.float32), dones, infos

    def close(self) -> None:
        pass


def make(variant, native, num_envs, seed):
    if variant == "unsupported":
        from gpuenv.errors import Unsupported

        raise Unsupported("no such variant")
    if num_envs < 3:
        raise ValueError(f"needs 3 envs or more, got {num_envs}\nsecond line")
    return Env(num_envs), {"variant": variant, "task": native.env_id, "seed": seed}
