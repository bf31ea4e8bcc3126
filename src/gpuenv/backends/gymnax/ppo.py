"""The gymnax backend's batched env for the shared SB3 PPO trainer (gymnax has no trainer of its own:
gymnax-blines, its authors' PPO, is a separate repository, not a release). Imported only in training
workers."""

from __future__ import annotations

import numpy as np

from gpuenv.backends.spec import NativeTask

VECTORISER = "gpuenv JaxVecEnv (jit step; gymnax's own auto-reset to a fresh random state on device; arrays copied to numpy)"


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record). gymnax's step resets an ended env itself and returns the
    observation before the reset as info["final_observation"], and `terminated` apart from `truncated`
    (its time limit): what SB3's VecEnv contract needs, as it is."""
    import gymnasium
    import jax

    from gpuenv.backends.gymnax.adapter import _params, _version, vmapped
    from gpuenv.backends.vecenv import JaxVecEnv

    env, params, reset_envs, step_envs = vmapped(native)
    resets = [0]  # a fresh draw of start states at each reset() (an eval env is reset every round)

    @jax.jit
    def start(n):
        key, sub = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), n))
        obs, states = reset_envs(jax.random.split(sub, num_envs))
        return (key, states), obs

    def reset():
        resets[0] += 1
        return start(resets[0] - 1)

    def step(carry, actions):
        key, states = carry
        key, sub = jax.random.split(key)
        obs, states, reward, term, trunc, info = step_envs(jax.random.split(sub, num_envs), states, actions)
        term = term.astype(bool)
        return (key, states), obs, reward, term, trunc.astype(bool) & ~term, info["final_observation"]

    shape = tuple(int(x) for x in env.observation_space(params).shape)
    obs_space = gymnasium.spaces.Box(-np.inf, np.inf, shape, np.float32)
    act_space = gymnasium.spaces.Discrete(int(env.num_actions))
    details = {"vectoriser": VECTORISER, "gymnax": _version(), "params": _params(params)}
    return JaxVecEnv(reset, jax.jit(step), num_envs, obs_space, act_space), details
