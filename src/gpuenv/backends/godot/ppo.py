"""The godot backend's batched env for the shared SB3 PPO trainer. Imported only in training workers.

One GodotPool (gpuenv-launched Godot processes, godot-rl's client) as an SB3 VecEnv. Episodes end by
their time limit only, so every done is a truncation: `TimeLimit.truncated` is True and
`terminal_observation` is the final observation, which gpuenv's sync node sends in info (godot-rl's
own SB3 wrapper has none to give, and SB3 then cannot bootstrap the cut-off episode's value). A
user's game (`gpuenv profile PATH`) that sends no final observation has each done taken as terminal.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends.spec import NativeTask
from gpuenv.backends.vecenv import NoSubEnvs


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    from gpuenv.backends.godot.adapter import GodotPool

    return vecenv_of(GodotPool(variant, num_envs, seed), native)


def vecenv_of(pool, native: NativeTask):
    """(GodotVecEnv over a started pool, details for the record): Godot 3.2's pool or Godot 4's."""
    details = {"vectoriser": "gpuenv GodotVecEnv (godot-rl client; final observation from gpuenv's sync node)", **pool.details()}
    return GodotVecEnv(pool, native), details


class GodotVecEnv(NoSubEnvs, VecEnv):
    def __init__(self, pool, native: NativeTask) -> None:
        self.pool = pool
        obs = spaces.Box(-1.0, 1.0, native.obs_shape, np.float32)
        act: spaces.Space = (spaces.Discrete(native.action_size) if native.action_kind == "discrete"
                             else spaces.Box(-1.0, 1.0, (native.action_size,), np.float32))
        super().__init__(pool.num_envs, obs, act)
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        self._reset_seeds()
        self._reset_options()
        return self.pool.reset()

    def step_async(self, actions: np.ndarray) -> None:
        a = np.asarray(actions)
        self._actions = a.astype(np.int64) if isinstance(self.action_space, spaces.Discrete) else np.clip(a.astype(np.float32), -1.0, 1.0)

    def step_wait(self):
        obs, rewards, dones, raw = self.pool.step(self._actions)
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            if "terminal_obs" in raw[i]:  # gpuenv's sync nodes send it; a godot-rl plugin game does not (no bootstrap then)
                infos[i]["terminal_observation"] = np.asarray(raw[i]["terminal_obs"], dtype=np.float32)
                infos[i]["TimeLimit.truncated"] = True
        return obs, rewards, dones, infos

    def close(self) -> None:
        self.pool.close()
