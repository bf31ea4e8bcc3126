"""The envpool backend's batched env for the shared SB3 PPO trainer. Imported only in training workers.

EnvPool breaks all of these in its raw form (verified on envpool 1.2.5): the step that ends an
episode returns the final observation, and the *next* step ignores its action and returns the reset
observation with reward 0. Wrapping that naively (EnvPool's own SB3 example, and the course's
quick-start wrapper) feeds SB3 one spurious transition per episode and never a terminal observation.
The adapter below resets the finished envs at once (EnvPool accepts `reset(env_ids)` for a subset in
sync mode) and copies every array EnvPool hands out, because its buffers can be reused by the next call.
"""

from __future__ import annotations

import os

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends._common import sb3_infos
from gpuenv.backends.spec import NativeTask
from gpuenv.backends.vecenv import NoSubEnvs


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    from gpuenv.backends.envpool.adapter import envpool, require_env

    require_env(native.env_id)

    threads = min(num_envs, (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1))
    pool = envpool.make(
        native.env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, num_threads=threads, seed=seed
    )
    details = {
        "vectoriser": "gpuenv EnvPoolVecEnv (sync; finished envs reset at once; terminal_observation copied)",
        "num_threads": threads,
    }
    return EnvPoolVecEnv(pool), details


class EnvPoolVecEnv(NoSubEnvs, VecEnv):
    """A correct SB3 VecEnv over an EnvPool env made with env_type="gymnasium" in sync mode."""

    def __init__(self, pool) -> None:
        cfg = pool.config
        if cfg["batch_size"] not in (0, cfg["num_envs"]):
            raise ValueError("EnvPoolVecEnv needs sync mode (batch_size == num_envs); SB3 steps every env at once")
        self.pool = pool
        space = pool.observation_space
        # dm_control tasks observe a dict of arrays: flattened in the space's key order (gymnasium's
        # Dict sorts the keys) into one float vector. For the catalogue's two dm_control tasks that is
        # dm_control's order too (position, velocity), the order Playground's ports concatenate them
        # in (tests/test_ppo_real.py); a task whose keys do not sort that way would need EnvPool's spec.
        self._keys: list[str] | None = None
        if hasattr(space, "spaces") and isinstance(space.spaces, dict):
            import gymnasium

            self._keys = list(space.spaces)
            size = gymnasium.spaces.flatdim(space)  # EnvPool's dm_control bounds are not usable (low 2.2e-308)
            space = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        super().__init__(cfg["num_envs"], space, pool.action_space)
        self._actions: np.ndarray | None = None

    def _ordered(self, obs, env_id: np.ndarray) -> np.ndarray:
        if self._keys is not None:
            obs = np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(len(env_id), -1) for k in self._keys], axis=1)
        out = np.empty((self.num_envs, *obs.shape[1:]), dtype=obs.dtype)
        out[env_id] = obs  # a copy, whatever order EnvPool returned the envs in
        return out

    def reset(self) -> np.ndarray:
        obs, info = self.pool.reset()
        self._reset_seeds()
        self._reset_options()
        return self._ordered(obs, info["env_id"])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        obs, reward, terminated, truncated, info = self.pool.step(self._actions)
        ids = info["env_id"]
        obs = self._ordered(obs, ids)
        rewards = np.empty(self.num_envs, dtype=np.float32)
        rewards[ids] = reward
        term = np.zeros(self.num_envs, dtype=bool)
        term[ids] = terminated
        trunc = np.zeros(self.num_envs, dtype=bool)
        trunc[ids] = truncated
        dones = term | trunc
        finished = np.flatnonzero(dones)
        infos = sb3_infos(self.num_envs, dones, trunc & ~term, [(i, obs[i].copy()) for i in finished])  # before the resets below
        if finished.size:
            reset_obs, reset_info = self.pool.reset(finished.astype(np.int32))
            reset_ids = reset_info["env_id"]
            obs[reset_ids] = self._ordered(reset_obs, reset_ids)[reset_ids]
        return obs, rewards, dones, infos

    def close(self) -> None:
        close = getattr(self.pool, "close", None)
        if close:
            close()


