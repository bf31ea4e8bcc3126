"""The mjx backend's batched env for the shared SB3 PPO trainer. Imported only in training workers."""

from __future__ import annotations

import numpy as np

from gpuenv.backends.spec import NativeTask


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    import gymnasium
    import jax
    import jax.numpy as jnp

    from gpuenv.backends.mjx.adapter import MjxEnv
    from gpuenv.backends.vecenv import JaxVecEnv

    env = MjxEnv(native, num_envs, variant)

    def reset():
        state = env.init()
        return state, state[2]

    def step(state, action):
        state = env.step(state, action)
        _, _, final_obs, reward, done, truncated = state
        obs = jnp.where(done[:, None], env.reset_obs, final_obs)
        return state, obs, reward, done & ~truncated, truncated, final_obs

    space = env.action_space()
    details = {
        "vectoriser": "gpuenv JaxVecEnv (jit step + auto-reset to the initial state on device; arrays copied to numpy)",
        **env.details(),
    }
    obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (env.obs_size,), np.float32)
    act_space = gymnasium.spaces.Box(np.array(space.low, np.float32), np.array(space.high, np.float32))
    return JaxVecEnv(jax.jit(reset), jax.jit(step), num_envs, obs_space, act_space), details
