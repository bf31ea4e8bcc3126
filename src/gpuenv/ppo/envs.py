"""Batched envs for the SB3 trainer, one factory per backend. Imported only in training workers."""

from __future__ import annotations

import os

import numpy as np

from gpuenv.tasks import NativeTask


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def make_vecenv(backend: str, variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    if backend == "gymnasium":
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

        from gpuenv.backends.gymnasium import START_METHOD, _EnvFn

        fns = [_EnvFn(native.env_id, seed + i) for i in range(num_envs)]
        if variant == "subproc":
            venv = SubprocVecEnv(fns, start_method=START_METHOD)
            details = {"vectoriser": "stable_baselines3.SubprocVecEnv", "start_method": START_METHOD}
        else:
            venv = DummyVecEnv(fns)
            details = {"vectoriser": "stable_baselines3.DummyVecEnv"}
        venv.seed(seed)
        return venv, details
    if backend == "envpool":
        from gpuenv.backends.envpool import envpool, require_env
        from gpuenv.ppo.vecenv import EnvPoolVecEnv

        require_env(native.env_id)

        threads = min(num_envs, _cores())
        pool = envpool.make(
            native.env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, num_threads=threads, seed=seed
        )
        details = {
            "vectoriser": "gpuenv EnvPoolVecEnv (sync; finished envs reset at once; terminal_observation copied)",
            "num_threads": threads,
        }
        return EnvPoolVecEnv(pool), details
    if backend == "brax":
        return _brax_vecenv(variant, native, num_envs, seed)
    if backend == "mjx":
        return _mjx_vecenv(native, num_envs)
    raise ValueError(f"no SB3 VecEnv factory for backend {backend!r}")


def _brax_vecenv(pipeline: str, native: NativeTask, num_envs: int, seed: int):
    import gymnasium
    import jax
    import jax.numpy as jnp
    from brax import envs
    from brax.envs.wrappers import training

    from gpuenv.ppo.vecenv import JaxVecEnv

    base = envs.get_environment(native.env_id, backend=pipeline)
    inner = training.VmapWrapper(training.EpisodeWrapper(base, native.episode_steps, action_repeat=1))

    def reset():
        state = inner.reset(jax.random.split(jax.random.PRNGKey(seed), num_envs))
        return (state, state), state.obs

    # Brax's AutoResetWrapper semantics (reset to each env's first state, as Brax's own training
    # does), written out so that the final observation is kept for SB3.
    def step(carry, action):
        state, first = carry
        steps = jnp.where(state.done, jnp.zeros_like(state.info["steps"]), state.info["steps"])
        state.info.update(steps=steps)
        state = inner.step(state.replace(done=jnp.zeros_like(state.done)), action)
        done = state.done.astype(bool)
        trunc = state.info["truncation"].astype(bool) & done

        def where_done(x, y):
            d = jnp.reshape(done, (x.shape[0],) + (1,) * (x.ndim - 1)) if x.ndim else done
            return jnp.where(d, x, y)

        pipeline_state = jax.tree.map(where_done, first.pipeline_state, state.pipeline_state)
        obs = where_done(first.obs, state.obs)
        new = state.replace(pipeline_state=pipeline_state, obs=obs)
        return (new, first), obs, state.reward, done & ~trunc, trunc, state.obs

    reset_j, step_j = jax.jit(reset), jax.jit(step)
    obs_size = int(native.obs_shape[0])
    obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
    act_space = gymnasium.spaces.Box(-1.0, 1.0, (base.action_size,), np.float32)
    details = {
        "vectoriser": "gpuenv JaxVecEnv (jit step + auto-reset to first state on device; arrays copied to numpy)",
        "pipeline": pipeline,
        "physics_timestep_s": float(base.sys.opt.timestep),
        "n_frames": int(getattr(base, "_n_frames", 1)),
        "control_dt_s": float(base.dt),
    }
    return JaxVecEnv(reset_j, step_j, num_envs, obs_space, act_space), details


def _mjx_vecenv(native: NativeTask, num_envs: int):
    import gymnasium
    import jax
    import jax.numpy as jnp

    from gpuenv.backends.mjx import MjxEnv
    from gpuenv.ppo.vecenv import JaxVecEnv

    env = MjxEnv(native, num_envs)

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
