"""Genesis's PPO env for the shared SB3 trainer: Gymnasium's InvertedPendulum on Genesis
(gpuenv.backends.genesis.pendulum), kept to SB3's VecEnv contract without SB3: it runs in Genesis's
own environment and reaches the trainer served (gpuenv.backends.served). Its speed-benchmark scenes
have no reward: no PPO env."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from gpuenv.backends._common import sb3_infos
from gpuenv.backends.genesis import PENDULUM
from gpuenv.backends.genesis.adapter import open_pendulum
from gpuenv.backends.genesis.pendulum import CTRL, RESET_MODE
from gpuenv.backends.spec import NativeTask
from gpuenv.errors import Unsupported


class PendulumVecEnv:
    def __init__(self, variant: str, native: NativeTask, num_envs: int, seed: int) -> None:
        self.env: Any = open_pendulum(variant, native, num_envs, seed)
        self.num_envs = num_envs
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = spaces.Box(-CTRL, CTRL, (1,), np.float32)

    def reset(self) -> np.ndarray:
        return self.env.reset()

    def step(self, actions: np.ndarray):
        obs, reward, terminated, truncated, final = self.env.step(actions)
        dones = terminated | truncated
        return obs, reward, dones, sb3_infos(self.num_envs, dones, truncated, ((i, final[i]) for i in np.flatnonzero(dones)))

    def close(self) -> None:
        self.env = None


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int) -> tuple[PendulumVecEnv, dict]:
    if native.env_id != PENDULUM:
        raise Unsupported(f"{native.env_id} is a speed-benchmark scene without a reward: Genesis trains on inverted_pendulum only")
    venv = PendulumVecEnv(variant, native, num_envs, seed)
    return venv, {**venv.env.details(), "reset_mode": RESET_MODE}
