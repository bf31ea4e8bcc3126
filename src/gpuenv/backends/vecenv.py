"""SB3 VecEnv plumbing shared by the backends' PPO env factories, and the VecEnv over a jitted JAX
step (Brax, MJX). SB3's VecEnv contract, which every adapter keeps exactly:
- on the step that ends an episode, `obs[i]` is already the *reset* observation of env i, and
  `infos[i]["terminal_observation"]` is a copy of the true final observation;
- `infos[i]["TimeLimit.truncated"]` is True when the episode ended by the time limit only (SB3 then
  bootstraps the value of the final observation);
- infos is a list of one dict per env; rewards are float32, dones bool.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends._common import sb3_infos


class NoSubEnvs:
    _get_indices: Any  # from VecEnv, which the adapters also derive from

    """Attribute plumbing SB3 asks of every VecEnv; these adapters have no per-env Python objects."""

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        if attr_name == "render_mode":
            return [None for _ in self._get_indices(indices)]
        raise AttributeError(f"{type(self).__name__} has no per-env attribute {attr_name!r}")

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise AttributeError(f"{type(self).__name__} cannot set per-env attribute {attr_name!r}")

    def env_method(self, method_name: str, *args, indices=None, **kwargs) -> list[Any]:
        raise AttributeError(f"{type(self).__name__} has no per-env method {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


class JaxVecEnv(NoSubEnvs, VecEnv):
    """An SB3 VecEnv over a batched, jitted JAX env step (Brax, MJX, MuJoCo Playground, gymnax).

    `step(state, actions) -> (state, obs, reward, terminated, truncated, final_obs)` does the
    auto-reset on the device; this class only moves arrays to and from numpy.
    """

    def __init__(self, reset_fn, step_fn, num_envs: int, observation_space, action_space) -> None:
        super().__init__(num_envs, observation_space, action_space)
        self._reset_fn, self._step_fn = reset_fn, step_fn
        self._state = None
        self._actions: Any = None

    def reset(self) -> np.ndarray:
        self._state, obs = self._reset_fn()
        self._reset_seeds()
        self._reset_options()
        return np.asarray(obs).copy()

    def step_async(self, actions: np.ndarray) -> None:
        # Box actions as float32, a Discrete space's as its integers (gymnax indexes with them)
        self._actions = np.asarray(actions, dtype=np.int32 if isinstance(self.action_space, spaces.Discrete) else np.float32)

    def step_wait(self):
        self._state, obs, reward, term, trunc, final_obs = self._step_fn(self._state, self._actions)
        obs, reward = np.array(obs), np.array(reward, dtype=np.float32)
        term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
        dones = term | trunc
        finished = np.flatnonzero(dones)
        final_obs = np.asarray(final_obs) if finished.size else None
        infos = sb3_infos(self.num_envs, dones, trunc & ~term, ((i, final_obs[i].copy()) for i in finished))
        return obs, reward, dones, infos

    def close(self) -> None:
        self._state = None


class GymVectorVecEnv(NoSubEnvs, VecEnv):
    """An SB3 VecEnv over a Gymnasium vector env (SyncVectorEnv, AsyncVectorEnv) in same-step autoreset:
    the step that ends an episode returns the reset observation, the final one in infos["final_obs"]
    where infos["_final_obs"] is set."""

    def __init__(self, env: Any) -> None:
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self.env = env
        self._actions: Any = None

    def reset(self) -> np.ndarray:
        seeds = [s for s in self._seeds if s is not None]
        obs, _ = self.env.reset(seed=seeds if len(seeds) == self.num_envs else None)
        self._reset_seeds()
        self._reset_options()
        return np.array(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        obs, reward, term, trunc, info = self.env.step(self._actions)
        term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
        dones = term | trunc
        mask = info.get("_final_obs")
        finals = ((i, np.array(info["final_obs"][i])) for i in np.flatnonzero(mask)) if mask is not None else ()
        return np.array(obs), np.asarray(reward, dtype=np.float32), dones, sb3_infos(self.num_envs, dones, trunc & ~term, finals)

    def close(self) -> None:
        self.env.close()


class ContractVecEnv(NoSubEnvs, VecEnv):
    """SB3's VecEnv over an env kept to its contract without SB3 (Ocean's, Genesis's: written for an
    environment that has no SB3, and served from it), where SB3 is importable in that environment after
    all: the same env, stepped in this process rather than over pipes."""

    def __init__(self, env: Any) -> None:
        super().__init__(env.num_envs, env.observation_space, env.action_space)
        self.env = env
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        obs = self.env.reset()
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        assert self._actions is not None
        return self.env.step(self._actions)

    def close(self) -> None:
        self.env.close()
